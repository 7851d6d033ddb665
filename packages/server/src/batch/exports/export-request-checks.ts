/**
 * The export job request's field checks (each refusal a 400 SEGMENTD-EXPORT-400 naming the
 * field) and the projections of `fields` that a run applies to each exported entity.
 */
import type { JsonObject, JsonValue } from "../../profiles/types.js";
import { badRequest } from "../../services/errors.js";
import { BatchErrorCodes } from "../errors.js";

export function project(entity: JsonObject, paths: readonly string[] | null): JsonObject {
  if (paths === null) return entity;
  const out: JsonObject = {};
  for (const p of paths) {
    const parts = p.split(".");
    let src: JsonValue | undefined = entity;
    for (const k of parts) src = src !== null && typeof src === "object" && !Array.isArray(src) ? src[k] : undefined;
    if (src === undefined) continue;
    let dst = out;
    parts.slice(0, -1).forEach((k) => {
      const next = dst[k];
      dst = (dst[k] = next !== null && typeof next === "object" && !Array.isArray(next) ? next : {}) as JsonObject;
    });
    dst[parts[parts.length - 1]!] = src;
  }
  return out;
}

export function fieldList(text: string | undefined): string[] | null {
  return text === undefined ? null : text.split(",").map((x) => x.trim()).filter((x) => x !== "");
}

// ---- request validation ------------------------------------------------------

export const bad = (message: string) => badRequest(message, BatchErrorCodes.badExport);

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function show(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 60)}...` : text;
}

export function objectAt(v: unknown, path: string, allowed: readonly string[]): Record<string, unknown> {
  if (!isObject(v)) throw bad(`${path} must be an object`);
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k)) throw bad(`${path}.${k} is not supported: use ${allowed.join(", ")}`);
  }
  return v;
}

export function booleanAt(v: unknown, path: string): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "boolean") throw bad(`${path} must be a boolean (true or false), got ${show(v)}`);
  return v;
}

export function fieldsAt(v: unknown, path: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw bad(`${path} must be a comma-separated string of field paths`);
  return v;
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** Epoch ms of an RFC 3339 date-time (seconds and zone required); null when it is not one. */
export function parseRfc3339(v: string): number | null {
  const m = RFC3339.exec(v);
  if (m === null) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth || h > 23 || mi > 59 || s > 59) return null;
  if (m[8] !== undefined && (Number(m[8]) > 23 || Number(m[9]) > 59)) return null;
  const ms = Date.parse(v.toUpperCase());
  return Number.isNaN(ms) ? null : ms;
}

export function timeAt(v: unknown, path: string): { text: string; ms: number } | undefined {
  if (v === undefined) return undefined;
  const ms = typeof v === "string" ? parseRfc3339(v) : null;
  if (ms === null) throw bad(`${path} must be an RFC 3339 date-time such as 2026-01-31T00:00:00Z, got ${show(v)}`);
  return { text: v as string, ms };
}

export function rangeAt(v: unknown, path: string, keys: readonly [string, string]): { from?: { text: string; ms: number }; to?: { text: string; ms: number } } {
  const o = objectAt(v, path, keys);
  const from = timeAt(o[keys[0]], `${path}.${keys[0]}`);
  const to = timeAt(o[keys[1]], `${path}.${keys[1]}`);
  if (from !== undefined && to !== undefined && from.ms > to.ms) throw bad(`${path}.${keys[0]} must not be after ${path}.${keys[1]}`);
  return { ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) };
}
