// Quarantine at read: a stored record body that cannot be handled safely (nested
// deeper than RECORD_LIMITS.maxDepth, or unreadable) is skipped wherever a store
// turns bodies into values that downstream code walks, and reported once per
// process: a row in the store's quarantine table, the stores' observers (metric
// segmentd_quarantined_records_total, a warn log line). The boundary refuses such
// records now; this keeps a store that already holds one opening and serving —
// one record costs only itself, never its profile's other data or other tenants.
import { RECORD_LIMITS } from "../platform/limits.js";
import type { Identity, JsonObject, TenantScope } from "./types.js";

export type QuarantineKind = "profile" | "event" | "lake";

/** A record skipped at read (as the operator route lists it). */
export interface QuarantinedRecord {
  orgId: string;
  sandboxName: string;
  datasetId: string;
  kind: QuarantineKind;
  /** Event or lake record: its _id (lake records without one: "seq:<n>"); profile fragment: "<namespace>:<id>" of its primary identity. */
  recordId: string;
  /** The record's primary identity. */
  identity: Identity;
  /** The profile (graph) it belongs to; null for lake records. */
  profileId: string | null;
  reason: string;
  /** First time a read skipped it (ISO 8601). */
  quarantinedAt: string;
  /** Last time this process or an earlier one first skipped it after starting (ISO 8601). */
  lastSeenAt: string;
}

export interface QuarantineQuery {
  /** Only this tenant's records; all tenants when absent (operators). */
  scope?: TenantScope;
  /** Page size; default 100, at most 1000. */
  limit?: number;
  /** Records after this position (the `seq` of the last record of the previous page). */
  afterSeq?: number;
}

export interface QuarantineEntry extends QuarantinedRecord {
  /** Position in the quarantine table (paging). */
  seq: number;
}

/** A quarantine report as a store makes it (tenant by scope, time as epoch ms). */
export interface QuarantineReport {
  scope: TenantScope;
  datasetId: string;
  kind: QuarantineKind;
  recordId: string;
  identity: Identity;
  profileId: number | null;
  reason: string;
  at: number;
}

/** Whether a store can serve now, and what it has had to survive (readiness, Prometheus). */
export interface ProfileStoreStatus {
  up: boolean;
  /** Why it cannot serve (null when up). */
  error: string | null;
  /** Times the store's worker thread was restarted (embedded worker store; 0 elsewhere). */
  restarts: number;
  /** Records this process quarantined (each counted once per process). */
  quarantined: number;
  /** PostgreSQL: this process's commits that drew a change-log version, and their wait for its lock (ms). */
  changeLog?: { commits: number; lockWaitMs: number };
}

export interface ProfileStoreObserver {
  quarantined?(report: QuarantineReport): void;
  /** The store became unable to serve (error) or able again (error null). */
  availability?(up: boolean, error: string | null): void;
}

export function clampQuarantineLimit(limit: number | undefined): number {
  return Math.min(Math.max(Math.trunc(limit ?? 100) || 100, 1), 1000);
}

/**
 * Whether a parsed JSON value nests deeper than `max` (the root object is level 1). Recursive but
 * bounded: it never descends past level max + 1, so a hostile value cannot overflow the stack
 * here. Measured on the scan path (120,000 stored bodies of 240 bytes): 6-12 % of the JSON.parse
 * before it; an explicit-stack walk cost 9-16 %, findViolation (every limit) 30-35 %.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  return typeof value === "object" && value !== null && deeper(value, max);
}

function deeper(v: object, left: number): boolean {
  if (left === 0) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x === "object" && x !== null && deeper(x, left - 1)) return true;
    }
    return false;
  }
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k];
    if (typeof x === "object" && x !== null && deeper(x, left - 1)) return true;
  }
  return false;
}

/** Why a stored body (as parsed) cannot be served, or null. */
export function storedBodyProblem(body: unknown): string | null {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "the stored body is not a JSON object";
  if (nestsDeeperThan(body, RECORD_LIMITS.maxDepth)) return `the stored body nests deeper than the limit of ${RECORD_LIMITS.maxDepth} levels`;
  return null;
}

/** A stored body as JSON text, parsed and checked: the body, or why it cannot be served. */
export function parseStoredBody(text: string): { body: JsonObject; problem: null } | { body: null; problem: string } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { body: null, problem: `the stored body cannot be read: ${err instanceof Error ? err.message : String(err)}` };
  }
  const problem = storedBodyProblem(body);
  return problem === null ? { body: body as JsonObject, problem: null } : { body: null, problem };
}

/**
 * A store's quarantine book-keeping: each record is reported once per process (reads of a
 * quarantined record are frequent: every scan meets it), persisted through `persist`, counted,
 * and told to the observers. Persisting must not throw into the read that found it.
 */
export class QuarantineLog {
  private readonly seen = new Set<string>();
  private readonly observers = new Set<ProfileStoreObserver>();
  count = 0;

  constructor(private readonly persist: (r: QuarantineReport) => void) {}

  report(r: QuarantineReport): void {
    const key = `${r.scope.orgId}\u0000${r.scope.sandboxName}\u0000${r.kind}\u0000${r.datasetId}\u0000${r.recordId}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.count++;
    try {
      this.persist(r);
    } catch (err) {
      console.error("segmentd: could not record a quarantined record:", err);
    }
    this.notify((o) => o.quarantined?.(r));
  }

  /** Forgets that records were reported (their rows were deleted with their data): seen again, reported again. */
  forget(): void {
    this.seen.clear();
  }

  observe(o: ProfileStoreObserver): () => void {
    this.observers.add(o);
    return () => this.observers.delete(o);
  }

  notify(f: (o: ProfileStoreObserver) => void): void {
    for (const o of this.observers) {
      try {
        f(o);
      } catch (err) {
        console.error("segmentd: a profile store observer failed:", err);
      }
    }
  }
}

/** "<namespace>:<id>": the record id of a profile fragment (one per dataset and primary identity). */
export function fragmentRecordId(identity: Identity): string {
  return `${identity.namespace}:${identity.id}`;
}
