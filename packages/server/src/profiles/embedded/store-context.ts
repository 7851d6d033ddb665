// Shared declarations of the embedded store and the modules split out of it (sqlite-store.ts).

import type Database from "better-sqlite3";
import { IdentityPidCache } from "./identity-cache.js";
import { toMembership } from "../scan-assembly.js";
import { type QuarantineEntry, type QuarantineKind } from "../quarantine.js";
import { type MembershipChange } from "../store.js";
import type { Identity, JsonObject, Membership, StoredEvent, TenantScope } from "../types.js";
import { EventIndexMerger } from "./event-index.js";
import { decodeTime, DefinitionCodes, statusName } from "./membership-codes.js";
/**
 * What the modules split out of EmbeddedProfileStore (sqlite-store.ts) use of it: the one
 * connection, its statement caches and write queue, and the tenant and identity lookups.
 */
export interface StoreCtx {
  readonly db: Database.Database;
  readonly identityPids: IdentityPidCache;
  readonly defCodes: DefinitionCodes;
  readonly eventIndex: EventIndexMerger;
  stmt(sql: string): Database.Statement;
  scanStmt(sql: string): Database.Statement;
  write<T>(run: () => T, solo?: boolean, deferCheckpoint?: boolean): Promise<T>;
  tid(scope: TenantScope, create: boolean): number;
  tenantForWrite(scope: TenantScope): number;
  touch(tid: number, pids: Iterable<number>): void;
  pidOf(tid: number, identity: Identity): number | null;
  identitiesCurrent(): void;
  servable(scope: TenantScope, kind: QuarantineKind, datasetId: string, recordId: string, identity: Identity, pid: number | null, text: string): JsonObject | null;
  /** `texts`: each event keeps its stored text under EVENT_TEXT (wire-scan.ts). */
  eventsFrom(scope: TenantScope, rows: readonly EventRow[], texts?: boolean): Array<{ pid: number; event: StoredEvent }>;
}

export interface DatasetRow { id: string; name: string; description: string | null; schema_class: string; profile_enabled: number; identity_fields: string; created: number; updated: number }
export interface BatchRow { id: string; ds: string; status: string; created: number; updated: number; completed: number | null; records_read: number; records_written: number; records_failed: number; files: string; errors: string }
export interface FragmentRow { pid: number; ds: string; ns: string; idv: string; ts: number; body: string }
export interface EventRow { seq: number; pid: number; ds: string; eid: string; ns: string; idv: string; ts: number; body: string }

/**
 * solo: commits in a transaction of its own, without a savepoint (bulk writes: see flush).
 * deferCheckpoint (solo writes only): the WAL checkpoint its commit would trigger runs in a later
 * turn instead (see commitGroup).
 */
export interface QueuedWrite { run: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void; solo: boolean; deferCheckpoint?: boolean }

export const NO_TENANT = -1;

/** Default walLimitBytes: WAL size past which the writer catches up the background checkpoint itself. */
export const WAL_CATCH_UP_BYTES = 64 * 1024 * 1024;

/**
 * Events per INSERT statement (7 parameters each, far below SQLite's 32766). 500 measured no
 * better in the bench's worker CPU (1M events, four alternating runs), so the tested 100 stays.
 */
export const EVENT_ROWS = 100;
/**
 * Appends of at least this many records (bulk loads) commit alone, without a savepoint: a
 * savepoint journals every page the append modifies, and a pipelined loader's next chunk may
 * arrive in the same turn as the previous one.
 */
export const SOLO_APPEND_RECORDS = 1000;
/** Identities looked up per statement while loading a batch's graphs (3 parameters each). */
export const IDENTITY_READ_CHUNK = 500;

/**
 * Page cache of the scan connection, in KiB. A full scan (batch snapshot, SQL staging) reads every
 * page once, scattered over the events table: through the main connection it would fill the 1 GiB
 * lookup cache with pages read once (counted in the process's RSS, evicting the hot index pages)
 * for no hit; the OS page cache serves the re-reads either way.
 */
export const SCAN_CACHE_KIB = 16 * 1024;
export const MEMBERSHIP_READ_CHUNK = 500;
/** Rows per multi-row membership statement (5–7 parameters each, far below SQLite's 32766). */
export const MEMBERSHIP_WRITE_CHUNK = 256;
/** Dense windows of at least this many profile ids are read with range scans (smaller ones with point lookups). */
export const MIN_RANGE_READ = 32;
/** Membership writes of at least this many changes (batch jobs) commit alone, without a savepoint. */
export const SOLO_MEMBERSHIP_CHANGES = 1000;
/** Rows per applyMembershipSets statement: bounds the JSON text SQLite parses at once (~0.6 MB). */
export const MEMBERSHIP_SET_ROWS = 65_536;

/** "(?, ?), (?, ?)…": n rows of `width` placeholders, each after `lead` (literal values). */
export function rowsSql(n: number, width: number, lead = ""): string {
  const row = `(${lead}${Array.from({ length: width }, () => "?").join(", ")})`;
  return Array.from({ length: n }, () => row).join(", ");
}

export interface QuarantineRow { seq: number; org: string; sandbox: string; ds: string; kind: string; rid: string; ns: string; idv: string; pid: number | null; reason: string; first_seen: number; last_seen: number }

export function quarantineEntry(r: QuarantineRow): QuarantineEntry {
  return { seq: r.seq, orgId: r.org, sandboxName: r.sandbox, datasetId: r.ds, kind: r.kind as QuarantineKind, recordId: r.rid, identity: { namespace: r.ns, id: r.idv },
    profileId: r.pid === null ? null : String(r.pid), reason: r.reason, quarantinedAt: new Date(r.first_seen).toISOString(), lastSeenAt: new Date(r.last_seen).toISOString() };
}

/** A membership row with its definition id (SELECT_MEMBERSHIPS) and coded status and time. */
export interface StoredMembershipRow { pid: number; def: string; status: number; lqt: number | string }

/** Events through the two-generation (tid, pid, ts) index (event-index.ts): alias i for the index, e for the row. */
export const SELECT_EVENTS_BY_PID = "SELECT e.seq, e.pid, e.ds, e.eid, e.ns, e.idv, e.ts, e.body FROM event_index_all i JOIN events e ON e.seq = i.seq";
export const SELECT_MEMBERSHIPS = "SELECT m.pid, c.id AS def, m.status, m.lqt FROM memberships m JOIN definition_codes c ON c.code = m.def";

export function membershipOf(r: StoredMembershipRow): Membership {
  return toMembership({ pid: r.pid, def: r.def, status: statusName(r.status), lqt: decodeTime(r.lqt) });
}

/** The distinct definition ids of a list of changes. */
export function definitionIdsOf(changes: readonly MembershipChange[]): Set<string> {
  const ids = new Set<string>();
  for (const c of changes) ids.add(c.definitionId);
  return ids;
}

/** Graph ids ascending (a typed array sorts numbers without a comparator call per comparison). */
export function sortedGraphs(graphs: ReadonlySet<number>): number[] {
  return Array.from(Float64Array.from(graphs).sort());
}
