/**
 * What travels between an edge node and the hub, as JSON. Decoders check the shape: a message
 * that is not what this version writes is refused (the hub dead-letters it), never half-applied.
 *
 * An event message of version 2 carries the record's body as JSON inside the envelope; version 1
 * carried it as a JSON string (the body's JSON encoded a second time, its quotes escaped, and
 * parsed twice by the hub). Nodes write version 2; the hub and a restarting node read both, so
 * what a site's stream kept from before an upgrade is still taken.
 */
import type { MembershipChange } from "../profiles/store.js";
import { tenantKey } from "../platform/tenant.js";
import type { Identity, JsonObject, MembershipStatus, ValidRecord } from "../profiles/types.js";
import type { ForwardItem } from "../edge/hub-forwarder.js";
import type { Projection } from "../edge/location-store.js";

interface RecordFields {
  kind: ValidRecord["kind"];
  primary: Identity;
  identities: Identity[];
  timestamp: number | null;
  eventId: string | null;
}

/** An event collected at an edge site, with the edge memberships its request decided. */
export interface EdgeEventMessage {
  v: 1 | 2;
  kind: "event";
  orgId: string;
  sandboxName: string;
  datasetId: string;
  location: string;
  newAtLocation: boolean;
  identity: Identity;
  /** The validated record: its body as JSON text (version 1) or as JSON (version 2). */
  record: RecordFields & ({ json: string } | { body: JsonObject });
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

/**
 * The event message (version 2) of a collected event, encoded: the envelope is JSON.stringify'd
 * and the record's JSON text, made once by validation, is spliced in as the body, not encoded again.
 */
export function encodeEventMessage(item: ForwardItem): Buffer {
  const r = item.record;
  const envelope = JSON.stringify({
    v: 2,
    kind: "event",
    orgId: item.tenant.orgId,
    sandboxName: item.tenant.sandbox.sandboxName,
    datasetId: item.datasetId,
    location: item.location,
    newAtLocation: item.newAtLocation,
    identity: item.identity,
    edgeChanges: item.edgeChanges,
    // Last, so that the body goes before its two closing braces.
    record: { kind: r.kind, primary: r.primary, identities: r.identities, timestamp: r.timestamp, eventId: r.eventId },
  });
  // Written piece by piece into one buffer: a concatenated string would be flattened on the heap first.
  const head = Buffer.byteLength(envelope) - 2;
  const out = Buffer.allocUnsafe(head + BODY_KEY.length + Buffer.byteLength(r.json) + 2);
  out.write(envelope, 0, head, "utf8");
  let at = head + BODY_KEY.copy(out, head);
  at += out.write(r.json, at, "utf8");
  out.write("}}", at, "latin1");
  return out;
}

const BODY_KEY = Buffer.from(`,"body":`, "latin1");

/** The message id of an event (tenant and event id): the same event is stored once. */
export function eventMessageId(item: ForwardItem): string {
  return `${tenantKey(item.tenant)}/${item.record.eventId ?? ""}`;
}

export function membershipsMessage(orgId: string, sandboxName: string, location: string, changes: readonly MembershipChange[]): EdgeMembershipsMessage {
  return { v: 1, kind: "memberships", orgId, sandboxName, location, changes: [...changes] };
}

/** The record of an event message, as validation made it at the edge (the same JSON text: `JSON.stringify` of a parsed JSON text gives it back). */
export function recordOf(m: EdgeEventMessage): ValidRecord {
  const r = m.record;
  const json = "json" in r ? r.json : JSON.stringify(r.body);
  const body = "json" in r ? (JSON.parse(r.json) as JsonObject) : r.body;
  return {
    index: 0,
    kind: r.kind,
    body,
    primary: r.primary,
    identities: r.identities,
    timestamp: r.timestamp,
    eventId: r.eventId,
    size: Buffer.byteLength(json),
    json,
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
  if (!isObj(m) || (m["v"] !== 1 && m["v"] !== 2) || !isStr(m["orgId"]) || !isStr(m["sandboxName"]) || !isStr(m["location"])) return { error: "not an edge message of version 1 or 2" };
  if (m["kind"] === "memberships") {
    const changes = m["changes"];
    if (!Array.isArray(changes) || !changes.every((c) => isObj(c) && isStr(c["profileId"]) && isStr(c["definitionId"]) && STATUSES.has(c["status"] as string) && typeof c["at"] === "number")) return { error: "bad membership changes" };
    return m as unknown as EdgeMembershipsMessage;
  }
  if (m["kind"] !== "event") return { error: `unknown kind ${String(m["kind"]).slice(0, 40)}` };
  const r = m["record"];
  if (!isStr(m["datasetId"]) || !isIdentity(m["identity"]) || typeof m["newAtLocation"] !== "boolean") return { error: "bad event envelope" };
  if (!isObj(r) || !isIdentity(r["primary"]) || !Array.isArray(r["identities"]) || !r["identities"].every(isIdentity)) return { error: "bad record" };
  if (m["v"] === 1 ? !isStr(r["json"]) : "json" in r) return { error: "bad record" };
  const changes = m["edgeChanges"];
  if (!Array.isArray(changes) || !changes.every((c) => isObj(c) && isStr(c["definitionId"]) && STATUSES.has(c["status"] as string) && typeof c["at"] === "number")) return { error: "bad edge changes" };
  if (m["v"] === 2) {
    if (!isObj(r["body"])) return { error: "record body is not an object" };
    return m as unknown as EdgeEventMessage;
  }
  try {
    if (!isObj(JSON.parse(r["json"] as string))) return { error: "record body is not an object" };
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
