// Per-record validation of XDM profile records and experience events. Pure: no
// I/O, no clock. Every problem becomes a RecordError with a stable code, a
// message a person can act on, the record's index and the field path, so that a
// batch or stream can report each bad record and still keep the good ones.
import type {
  IdentityFieldDescriptor,
  Identity,
  JsonObject,
  RecordError,
  SchemaClass,
  ValidRecord,
} from "./types.js";
import { getPath, isPlainObject } from "./xdm-object.js";
import { findViolation, LIMIT_CODES, RECORD_LIMITS, type LimitCode, type LimitViolation } from "../platform/limits.js";

export interface ValidationLimits {
  /** Largest accepted experience event, bytes of UTF-8 JSON. AEP guardrail: 10 KB. */
  maxEventBytes: number;
  /** Largest accepted profile record, bytes of UTF-8 JSON. AEP guardrail: 100 KB. */
  maxProfileBytes: number;
  /** Identities per graph (AEP: 50); a single record may not carry more than this. */
  maxIdentitiesPerGraph: number;
}

export const DEFAULT_LIMITS: Readonly<ValidationLimits> = {
  maxEventBytes: 10 * 1024,
  maxProfileBytes: 100 * 1024,
  maxIdentitiesPerGraph: 50,
};

export interface ValidationTarget {
  id: string;
  schemaClass: SchemaClass;
  identityFields: IdentityFieldDescriptor[];
}

export type ValidationResult = { ok: true; record: ValidRecord } | { ok: false; errors: RecordError[] };

export const ERROR_CODES = {
  notObject: "RECORD_NOT_OBJECT",
  tooLarge: "RECORD_TOO_LARGE",
  wrongClass: "WRONG_DATASET_CLASS",
  identityMissing: "IDENTITY_MISSING",
  identityMapInvalid: "IDENTITY_MAP_INVALID",
  identityIdEmpty: "IDENTITY_ID_EMPTY",
  identityFieldInvalid: "IDENTITY_FIELD_INVALID",
  multiplePrimary: "IDENTITY_MULTIPLE_PRIMARY",
  identityLimit: "IDENTITY_LIMIT_EXCEEDED",
  eventIdMissing: "EVENT_ID_MISSING",
  timestampMissing: "EVENT_TIMESTAMP_MISSING",
  timestampInvalid: "TIMESTAMP_INVALID",
  membershipReadOnly: "SEGMENT_MEMBERSHIP_READ_ONLY",
  membershipInvalid: "SEGMENT_MEMBERSHIP_INVALID",
  tooDeep: "RECORD_TOO_DEEP",
  valueTooLarge: "RECORD_VALUE_TOO_LARGE",
  unstorableString: "UNSTORABLE_STRING",
  numberOutOfRange: "NUMBER_OUT_OF_RANGE",
} as const;

// The record-level code for each of the boundary limits (platform/limits.ts).
const RECORD_CODE_OF: Record<LimitCode, string> = {
  [LIMIT_CODES.depth]: ERROR_CODES.tooDeep,
  [LIMIT_CODES.string]: ERROR_CODES.valueTooLarge,
  [LIMIT_CODES.key]: ERROR_CODES.valueTooLarge,
  [LIMIT_CODES.array]: ERROR_CODES.valueTooLarge,
  [LIMIT_CODES.keys]: ERROR_CODES.valueTooLarge,
  [LIMIT_CODES.number]: ERROR_CODES.numberOutOfRange,
  [LIMIT_CODES.unstorable]: ERROR_CODES.unstorableString,
  [LIMIT_CODES.query]: ERROR_CODES.valueTooLarge,
};

const AUTH_STATES = new Set(["ambiguous", "authenticated", "loggedOut"]);
// ISO-8601 date-time with a mandatory zone: a zone-less time would be read in the
// server's local zone and silently shift every event of a batch.
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

/** Epoch ms from an ISO-8601 date-time string or an epoch-millisecond number; null if neither. */
export function parseTimestamp(value: unknown): number | null {
  if (typeof value === "number") {
    return Number.isSafeInteger(value) && value >= 0 ? value : null;
  }
  if (typeof value === "string" && ISO_DATE_TIME.test(value)) {
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms;
  }
  return null;
}

export function identityKey(i: Identity): string {
  return `${i.namespace}\u0000${i.id}`;
}

/** Namespace codes are case-insensitive in AEP ("ECID" = "ecid"); ids are kept exactly. */
export function normalizeNamespace(ns: string): string {
  return ns.trim().toLowerCase();
}


interface Extracted {
  identities: Identity[];
  primaries: Identity[];
}

function extractIdentityMap(raw: unknown, index: number, errors: RecordError[], out: Extracted): void {
  if (!isPlainObject(raw)) {
    errors.push({ index, code: ERROR_CODES.identityMapInvalid, path: "identityMap",
      message: "identityMap must be an object of namespace code → array of {id, primary?, authenticatedState?}" });
    return;
  }
  // Runs for every event (edge interact, streaming): the field paths of the messages are only
  // built when there is an error to report, and the namespace is normalized once.
  for (const ns in raw) {
    if (!Object.hasOwn(raw, ns)) continue;
    const entries = raw[ns];
    const namespace = normalizeNamespace(ns);
    if (namespace === "") {
      errors.push({ index, code: ERROR_CODES.identityMapInvalid, path: `identityMap.${ns}`, message: "identityMap has an empty namespace code" });
      continue;
    }
    if (!Array.isArray(entries) || entries.length === 0) {
      errors.push({ index, code: ERROR_CODES.identityMapInvalid, path: `identityMap.${ns}`,
        message: `identityMap.${ns} must be a non-empty array of {id, primary?, authenticatedState?}` });
      continue;
    }
    for (let i = 0; i < entries.length; i++) {
      if (!(i in entries)) continue; // a hole: skipped, as forEach does
      const entry: unknown = entries[i];
      if (!isPlainObject(entry)) {
        const path = `identityMap.${ns}[${i}]`;
        errors.push({ index, code: ERROR_CODES.identityMapInvalid, path, message: `${path} must be an object with an id` });
        continue;
      }
      const id = entry["id"];
      if (typeof id !== "string" || id.trim() === "") {
        const path = `identityMap.${ns}[${i}]`;
        errors.push({ index, code: ERROR_CODES.identityIdEmpty, path: `${path}.id`,
          message: `${path}.id must be a non-empty string` });
        continue;
      }
      const primary = entry["primary"];
      if (primary !== undefined && typeof primary !== "boolean") {
        const path = `identityMap.${ns}[${i}]`;
        errors.push({ index, code: ERROR_CODES.identityMapInvalid, path: `${path}.primary`,
          message: `${path}.primary must be a boolean` });
        continue;
      }
      const auth = entry["authenticatedState"];
      if (auth !== undefined && (typeof auth !== "string" || !AUTH_STATES.has(auth))) {
        const path = `identityMap.${ns}[${i}]`;
        errors.push({ index, code: ERROR_CODES.identityMapInvalid, path: `${path}.authenticatedState`,
          message: `${path}.authenticatedState must be one of ambiguous, authenticated, loggedOut` });
        continue;
      }
      const identity = { namespace, id };
      out.identities.push(identity);
      if (primary === true) out.primaries.push(identity);
    }
  }
}

function extractIdentityFields(body: JsonObject, fields: IdentityFieldDescriptor[], index: number,
  errors: RecordError[], out: Extracted): void {
  for (const f of fields) {
    const v = getPath(body, f.path);
    if (v === undefined || v === null) continue;
    if (typeof v !== "string" || v.trim() === "") {
      errors.push({ index, code: ERROR_CODES.identityFieldInvalid, path: f.path,
        message: `identity field ${f.path} (${f.namespace}) must be a non-empty string` });
      continue;
    }
    const identity = { namespace: normalizeNamespace(f.namespace), id: v };
    out.identities.push(identity);
    if (f.primary === true) out.primaries.push(identity);
  }
}

const INGESTED_STATUSES = new Set(["realized", "exited"]);

/**
 * External audiences' members arrive by ingestion, as AEP's do:
 * `segmentMembership.<namespace>.<audienceId> = {status, lastQualificationTime?}`.
 * The `ups` namespace is the segmentation service's own and cannot be ingested.
 */
function checkIngestedMembership(sm: unknown, index: number, errors: RecordError[]): void {
  const invalid = (path: string, message: string) => errors.push({ index, code: ERROR_CODES.membershipInvalid, path, message });
  if (!isPlainObject(sm)) return void invalid("segmentMembership", "segmentMembership must be an object of namespaces");
  if (Object.hasOwn(sm, "ups")) {
    errors.push({ index, code: ERROR_CODES.membershipReadOnly, path: "segmentMembership.ups",
      message: "segmentMembership.ups is maintained by the segmentation service and cannot be ingested; external audiences' memberships go under their own namespace" });
    return;
  }
  for (const [ns, audiences] of Object.entries(sm)) {
    if (!isPlainObject(audiences)) return void invalid(`segmentMembership.${ns}`, "a namespace must map audience ids to {status, lastQualificationTime}");
    for (const [id, m] of Object.entries(audiences)) {
      const path = `segmentMembership.${ns}.${id}`;
      if (!isPlainObject(m) || typeof m["status"] !== "string" || !INGESTED_STATUSES.has(m["status"])) {
        return void invalid(path, 'a membership needs status "realized" or "exited"');
      }
      if (m["lastQualificationTime"] !== undefined && parseTimestamp(m["lastQualificationTime"]) === null) {
        return void invalid(`${path}.lastQualificationTime`, "lastQualificationTime must be an ISO-8601 time");
      }
    }
  }
}

function dedupe(list: Identity[]): Identity[] {
  // The common case (one identity, or none) needs no set: the list is returned as is.
  if (list.length < 2) return list;
  const seen = new Set<string>();
  const out: Identity[] = [];
  for (const i of list) {
    const k = identityKey(i);
    if (!seen.has(k)) {
      seen.add(k);
      out.push(i);
    }
  }
  return out;
}

/**
 * Validates one record for a dataset. `declaredClass` is the XDM class the sender
 * declared (for example from a streaming envelope's schemaRef), if any.
 *
 * Primary identity: the identity marked `primary: true` (identityMap or an identity
 * field descriptor); without one, the first identity of the identityMap, then of the
 * identity fields — AEP's behaviour when no primary is marked.
 */
export function validateRecord(raw: unknown, index: number, target: ValidationTarget,
  limits: ValidationLimits = DEFAULT_LIMITS, declaredClass?: SchemaClass): ValidationResult {
  if (!isPlainObject(raw)) {
    return { ok: false, errors: [{ index, code: ERROR_CODES.notObject,
      message: `record ${index} must be a JSON object, got ${raw === null ? "null" : Array.isArray(raw) ? "an array" : typeof raw}` }] };
  }
  const body: JsonObject = raw;
  const errors: RecordError[] = [];
  const kind = target.schemaClass;
  // Before anything walks the record recursively (JSON.stringify, merges, PQL): a record
  // over a limit, or holding a string no store can keep, is refused here, per record.
  const violation = findViolation(body, RECORD_LIMITS);
  const refusal = (v: LimitViolation): ValidationResult => {
    const path = v.path === "$" ? undefined : v.path.slice(v.path.startsWith("$.") ? 2 : 1);
    return { ok: false, errors: [{ index, code: RECORD_CODE_OF[v.code], ...(path === undefined ? {} : { path }),
      message: `record ${index}: ${v.message.replace(" at $.", " at ").replace(" at $[", " at [")}` }] };
  };
  // Too deep to serialize safely: refused before the size is measured.
  if (violation !== null && violation.code === LIMIT_CODES.depth) return refusal(violation);

  const json = JSON.stringify(body);
  const size = Buffer.byteLength(json, "utf8");
  const max = kind === "experienceevent" ? limits.maxEventBytes : limits.maxProfileBytes;
  if (size > max) {
    errors.push({ index, code: ERROR_CODES.tooLarge,
      message: `record is ${size} bytes; the limit for ${kind === "experienceevent" ? "an experience event" : "a profile record"} is ${max} bytes` });
  } else if (violation !== null) {
    return refusal(violation);
  }

  if (declaredClass !== undefined && declaredClass !== kind) {
    errors.push({ index, code: ERROR_CODES.wrongClass,
      message: `record declares class ${declaredClass} but dataset ${target.id} holds ${kind} records` });
  } else if (kind === "profile" && "eventType" in body) {
    // eventType exists only on XDM ExperienceEvent: an event sent to a profile dataset.
    errors.push({ index, code: ERROR_CODES.wrongClass, path: "eventType",
      message: `record has eventType, an experience event field, but dataset ${target.id} holds profile records` });
  }

  if ("segmentMembership" in body) checkIngestedMembership(body["segmentMembership"], index, errors);

  const extracted: Extracted = { identities: [], primaries: [] };
  if (body["identityMap"] !== undefined) extractIdentityMap(body["identityMap"], index, errors, extracted);
  extractIdentityFields(body, target.identityFields, index, errors, extracted);
  const identities = dedupe(extracted.identities);
  const primaries = dedupe(extracted.primaries);
  if (identities.length === 0 && !errors.some((e) => e.code.startsWith("IDENTITY_"))) {
    errors.push({ index, code: ERROR_CODES.identityMissing,
      message: "record has no identity: send an identityMap with at least one id" +
        (target.identityFields.length > 0 ? ` or fill an identity field (${target.identityFields.map((f) => f.path).join(", ")})` : "") });
  }
  if (primaries.length > 1) {
    errors.push({ index, code: ERROR_CODES.multiplePrimary, path: "identityMap",
      message: `record marks ${primaries.length} identities as primary; at most one is allowed` });
  }
  if (identities.length > limits.maxIdentitiesPerGraph) {
    errors.push({ index, code: ERROR_CODES.identityLimit, path: "identityMap",
      message: `record carries ${identities.length} identities; the limit per identity graph is ${limits.maxIdentitiesPerGraph}` });
  }

  let timestamp: number | null = null;
  let eventId: string | null = null;
  if (kind === "experienceevent") {
    const id = body["_id"];
    if (typeof id !== "string" || id.trim() === "") {
      errors.push({ index, code: ERROR_CODES.eventIdMissing, path: "_id", message: "an experience event needs a non-empty string _id" });
    } else {
      eventId = id;
    }
    const ts = body["timestamp"];
    if (ts === undefined || ts === null) {
      errors.push({ index, code: ERROR_CODES.timestampMissing, path: "timestamp",
        message: "an experience event needs a timestamp (ISO-8601 date-time with zone, or epoch milliseconds)" });
    } else {
      timestamp = parseTimestamp(ts);
      if (timestamp === null) {
        errors.push({ index, code: ERROR_CODES.timestampInvalid, path: "timestamp",
          message: `timestamp ${JSON.stringify(ts)} is neither an ISO-8601 date-time with zone nor epoch milliseconds` });
      }
    }
  } else {
    const modify = getPath(body, "_repo.modifyDate");
    if (modify !== undefined && modify !== null) {
      timestamp = parseTimestamp(modify);
      if (timestamp === null) {
        errors.push({ index, code: ERROR_CODES.timestampInvalid, path: "_repo.modifyDate",
          message: `_repo.modifyDate ${JSON.stringify(modify)} is neither an ISO-8601 date-time with zone nor epoch milliseconds` });
      }
    }
  }

  if (errors.length > 0) return { ok: false, errors };
  const primary = primaries[0] ?? identities[0]!;
  const ordered = identities.length === 1 && identities[0] === primary ? identities
    : [primary, ...identities.filter((i) => identityKey(i) !== identityKey(primary))];
  // Events carry a canonical ISO timestamp so every reader (PQL, exports) sees one format.
  const iso = kind === "experienceevent" && timestamp !== null ? new Date(timestamp).toISOString() : null;
  const stored = iso !== null && body["timestamp"] !== iso ? { ...body, timestamp: iso } : body;
  return { ok: true, record: { index, kind, body: stored, primary, identities: ordered, timestamp, eventId, size, json: stored === body ? json : JSON.stringify(stored) } };
}

/** Validates many records; returns the valid ones and every error, in input order. */
export function validateRecords(raws: readonly unknown[], target: ValidationTarget,
  limits: ValidationLimits = DEFAULT_LIMITS, declaredClass?: SchemaClass, firstIndex = 0):
  { valid: ValidRecord[]; errors: RecordError[] } {
  const valid: ValidRecord[] = [];
  const errors: RecordError[] = [];
  raws.forEach((raw, i) => {
    const r = validateRecord(raw, firstIndex + i, target, limits, declaredClass);
    if (r.ok) valid.push(r.record);
    else errors.push(...r.errors);
  });
  return { valid, errors };
}
