/**
 * What travels between an edge node and the hub, as JSON. Decoders check the shape: a message
 * that is not what this version writes is refused (the hub dead-letters it), never half-applied.
 */
import type { MembershipChange } from "../profiles/store.js";
import { tenantKey } from "../platform/tenant.js";
import type { Identity, JsonObject, MembershipStatus, ValidRecord } from "../profiles/types.js";
import type { ForwardItem } from "../edge/hub-forwarder.js";
import type { Projection } from "../edge/location-store.js";

/** An event collected at an edge site, with the edge memberships its request decided. */
export interface EdgeEventMessage {
  v: 1;
  kind: "event";
  orgId: string;
  sandboxName: string;
  datasetId: string;
  location: string;
  newAtLocation: boolean;
  identity: Identity;
  /** The validated record, body as JSON text. */
  record: { kind: ValidRecord["kind"]; json: string; primary: Identity; identities: Identity[]; timestamp: number | null; eventId: string | null };
  edgeChanges: Array<{ definitionId: string; status: MembershipStatus; at: number }>;
}

/** Membership changes an edge node decided outside a request (the 24-hourly segment-of-segments pass). */
export interface EdgeMembershipsMessage {
  v: 1;
  kind: "memberships";
  orgId: string;
  sandboxName: string;
  location: string;
  changes: MembershipChange[];
}

export type EdgeMessage = EdgeEventMessage | EdgeMembershipsMessage;

export function eventMessageOf(item: ForwardItem): EdgeEventMessage {
  const r = item.record;
  return {
    v: 1,
    kind: "event",
    orgId: item.tenant.orgId,
    sandboxName: item.tenant.sandbox.sandboxName,
    datasetId: item.datasetId,
    location: item.location,
    newAtLocation: item.newAtLocation,
    identity: item.identity,
    record: { kind: r.kind, json: r.json, primary: r.primary, identities: r.identities, timestamp: r.timestamp, eventId: r.eventId },
    edgeChanges: item.edgeChanges.map((c) => ({ definitionId: c.definitionId, status: c.status, at: c.at })),
  };
}

/** The message id of an event (tenant and event id): the same event is stored once. */
export function eventMessageId(item: ForwardItem): string {
  return `${tenantKey(item.tenant)}/${item.record.eventId ?? ""}`;
}

export function membershipsMessage(orgId: string, sandboxName: string, location: string, changes: readonly MembershipChange[]): EdgeMembershipsMessage {
  return { v: 1, kind: "memberships", orgId, sandboxName, location, changes: [...changes] };
}

/** The record of an event message, as validation made it at the edge. */
export function recordOf(m: EdgeEventMessage): ValidRecord {
  const body = JSON.parse(m.record.json) as JsonObject;
  return {
    index: 0,
    kind: m.record.kind,
    body,
    primary: m.record.primary,
    identities: m.record.identities,
    timestamp: m.record.timestamp,
    eventId: m.record.eventId,
    size: Buffer.byteLength(m.record.json),
    json: m.record.json,
  };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === "string";
const isIdentity = (v: unknown): v is Identity => isObj(v) && isStr(v["namespace"]) && isStr(v["id"]);
const STATUSES = new Set(["realized", "exited"]);

/** The message, or a reason it is not one. */
export function decodeEdgeMessage(data: Uint8Array): EdgeMessage | { error: string } {
  let m: unknown;
  try {
    m = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8"));
  } catch {
    return { error: "not JSON" };
  }
  if (!isObj(m) || m["v"] !== 1 || !isStr(m["orgId"]) || !isStr(m["sandboxName"]) || !isStr(m["location"])) return { error: "not an edge message of version 1" };
  if (m["kind"] === "memberships") {
    const changes = m["changes"];
    if (!Array.isArray(changes) || !changes.every((c) => isObj(c) && isStr(c["profileId"]) && isStr(c["definitionId"]) && STATUSES.has(c["status"] as string) && typeof c["at"] === "number")) return { error: "bad membership changes" };
    return m as unknown as EdgeMembershipsMessage;
  }
  if (m["kind"] !== "event") return { error: `unknown kind ${String(m["kind"]).slice(0, 40)}` };
  const r = m["record"];
  if (!isStr(m["datasetId"]) || !isIdentity(m["identity"]) || typeof m["newAtLocation"] !== "boolean") return { error: "bad event envelope" };
  if (!isObj(r) || !isStr(r["json"]) || !isIdentity(r["primary"]) || !Array.isArray(r["identities"]) || !r["identities"].every(isIdentity)) return { error: "bad record" };
  const changes = m["edgeChanges"];
  if (!Array.isArray(changes) || !changes.every((c) => isObj(c) && isStr(c["definitionId"]) && STATUSES.has(c["status"] as string) && typeof c["at"] === "number")) return { error: "bad edge changes" };
  try {
    if (!isObj(JSON.parse(r["json"]))) return { error: "record body is not an object" };
  } catch {
    return { error: "record body is not JSON" };
  }
  return m as unknown as EdgeEventMessage;
}

/** Hub → one edge site: a profile's projection, or that the site must forget it. */
export type ProjectionMessage = { v: 1; tenantKey: string; projection: Projection; adopt: boolean } | { v: 1; tenantKey: string; forget: string };

export function encode(v: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(v), "utf8");
}

export function decodeJson(data: Uint8Array): unknown {
  return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8"));
}
