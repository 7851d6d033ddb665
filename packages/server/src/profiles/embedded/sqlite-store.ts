// Embedded profile store on better-sqlite3 (WAL).
//
// Why SQLite and not DuckDB (stack-notes §4, §8): ingestion acknowledges small
// durable writes all day (streaming, edge forwards, hygiene edits) and the
// profile access API needs millisecond point lookups. SQLite does autocommit
// upserts in ~38 µs and point reads in ~12 µs, with WAL durability across kill -9;
// DuckDB needs 1.6 ms per single-row insert and locks its file against every other
// process. For full scans, rows are clustered by profile id through the
// (tid, pid[, ts]) indexes, so a batch job walks profiles and their events in
// order, chunk by chunk. If batch evaluation later needs more, it can build a
// columnar snapshot from that scan (stack-notes §8) without changing this store.
//
// Durability: synchronous=FULL by default, so a commit is fsynced before its
// promise resolves. Concurrent writers are group-committed: writes queued in
// the same event-loop turn share one transaction (each in its own savepoint, so
// one failing write does not undo the others) and one fsync.
import { settleGroup, type WriteOutcome } from "../group-commit.js";
import type Database from "better-sqlite3";
import { openSqlite, openSqliteReader } from "../../storage-kit/sqlite.js";
import { statSync } from "node:fs";
import { graphsToSize, identitiesOf, planAppend, type EventWrite, type LoadedState } from "../append-plan.js";
import { DEFAULT_IDENTITY_CACHE_ENTRIES, IdentityPidCache } from "./identity-cache.js";
import { ChangeFeed, mergeTouched, recordTouched, touchProfiles } from "../change-feed.js";
import { decodeStaged, encodeStaged, STAGED_CHUNK } from "../batch-staging.js";
import { newCatalogId } from "../ids.js";
import { assembleGraph, decodeCursor, encodeCursor, addStoredStatus, lookupProfile, planMembershipChanges, toMembership, type GraphRows, type StoredStatuses } from "../scan-assembly.js";
import { clampQuarantineLimit, fragmentRecordId, parseStoredBody, QuarantineLog, type ProfileStoreObserver, type ProfileStoreStatus, type QuarantineEntry, type QuarantineKind, type QuarantineQuery, type QuarantineReport } from "../quarantine.js";
import {
  MAX_BATCH_ERRORS,
  StoreError,
  type AppendOptions,
  type AppendResult,
  type CompletedBatch,
  type CompleteOptions,
  type DeleteCounts,
  type EventPage,
  type EventQuery,
  type FieldUpdate,
  type IngestBatch,
  type IngestBatchStatus,
  type LakeRecord,
  type MembershipChange,
  type MembershipSet,
  type MembershipSetCounts,
  type MembershipSetOptions,
  type ProfileDataTimes,
  type ProfileStore,
  type ScanOptions,
  type ScannedProfile,
  type StageOptions,
  type TransitionQuery,
  type DecidedChanges,
  type DecidedAppendResult,
  landedAsDecided,
} from "../store.js";
import type {
  Dataset,
  DatasetInput,
  Identity,
  JsonObject,
  Membership,
  MembershipStatus,
  MembershipTransition,
  MergedProfile,
  MergePolicySpec,
  SchemaClass,
  StoredEvent,
  TenantScope,
  ValidRecord,
} from "../types.js";
import { identityKey } from "../validate.js";
import { removePath, setPath } from "../xdm-object.js";
import { jsonIntegers, KIND_EXITED, KIND_REENTERED, pidMajorCodes, planMembershipSets, setGroups, transitionCounts, type PlannedSet } from "../membership-sets.js";
import { SQLITE_SCHEMA } from "./schema.js";
import { APPEND_ENTRIES, EventIndexMerger, MERGE_AT, MERGE_STEP, MERGE_STEP_MIN, migrateEventIndex } from "./event-index.js";
import { BackgroundCheckpointer } from "./checkpointer.js";
import { pastPendingBytePage, writerCacheMiB } from "./cache-sizing.js";
import { decodeTime, DefinitionCodes, MEMBERSHIP_SCHEMA, migrateTextMemberships, sourceCode, sourceName, STATUS_CODE, statusCode, statusName } from "./membership-codes.js";
import { sandboxNameKey } from "../../platform/tenant.js";

export interface EmbeddedStoreOptions {
  /** Database file; ":memory:" for throw-away stores. */
  path: string;
  /** "full" (default) fsyncs every commit; "normal" survives process crashes but not power loss. */
  synchronous?: "full" | "normal";
  /**
   * Page cache in MiB (default: SEGMENTD_PROFILE_CACHE_MIB, else 1024). An upper bound, allocated
   * as pages are read: the identity and event indexes of a 1M-profile / 10M-event store need
   * ~0.5 GiB, and once they outgrow the cache every random index insert becomes a read. While
   * the file is under 1 GiB the connection's cache is capped at SMALL_STORE_CACHE_MIB instead
   * (cache-sizing.ts: SQLite walks the whole cache at the end of most write transactions then).
   */
  cacheMiB?: number;
  /**
   * Page size in bytes of a NEW store file (default: SEGMENTD_PROFILE_PAGE_SIZE, else
   * DEFAULT_PAGE_SIZE); a file that exists keeps the size it was created with (SQLite cannot change
   * it in WAL mode).
   */
  pageSize?: number;
  /** Identities whose profile id the writer keeps in memory (identity-cache.ts; default 2,000,000, 0 = none). */
  identityCacheEntries?: number;
  /**
   * "background" (default for a file): WAL checkpoints on a thread and connection of their own
   * (checkpointer.ts), never inside a commit; "inline": SQLite's automatic checkpoint at commit.
   */
  checkpoints?: "background" | "inline";
  /** Background checkpoints: milliseconds between the thread's rounds (default 100). */
  checkpointIntervalMs?: number;
  /** Background checkpoints: WAL size past which the writer catches up itself (default 64 MiB; catchUpCheckpoint). */
  walLimitBytes?: number;
  /** Events' index entries in the small generation before they move to the large one (event-index.ts; default MERGE_AT). */
  eventIndexMergeAt?: number;
  /** Most entries moved per merge step (default MERGE_STEP). */
  eventIndexMergeStep?: number;
  /** Fewest entries moved per merge step (default MERGE_STEP_MIN; event-index.ts says how a step is sized). */
  eventIndexMergeStepMin?: number;
}

interface DatasetRow { id: string; name: string; description: string | null; schema_class: string; profile_enabled: number; identity_fields: string; created: number; updated: number }
interface BatchRow { id: string; ds: string; status: string; created: number; updated: number; completed: number | null; records_read: number; records_written: number; records_failed: number; files: string; errors: string }
interface FragmentRow { pid: number; ds: string; ns: string; idv: string; ts: number; body: string }
interface EventRow { seq: number; pid: number; ds: string; eid: string; ns: string; idv: string; ts: number; body: string }

/**
 * solo: commits in a transaction of its own, without a savepoint (bulk writes: see flush).
 * deferCheckpoint (solo writes only): the WAL checkpoint its commit would trigger runs in a later
 * turn instead (see commitGroup).
 */
interface QueuedWrite { run: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void; solo: boolean; deferCheckpoint?: boolean }

const NO_TENANT = -1;

/** Default walLimitBytes: WAL size past which the writer catches up the background checkpoint itself. */
const WAL_CATCH_UP_BYTES = 64 * 1024 * 1024;

/**
 * Events per INSERT statement (7 parameters each, far below SQLite's 32766). 500 measured no
 * better in the bench's worker CPU (1M events, four alternating runs), so the tested 100 stays.
 */
const EVENT_ROWS = 100;
/**
 * Appends of at least this many records (bulk loads) commit alone, without a savepoint: a
 * savepoint journals every page the append modifies, and a pipelined loader's next chunk may
 * arrive in the same turn as the previous one.
 */
const SOLO_APPEND_RECORDS = 1000;
/** Identities looked up per statement while loading a batch's graphs (3 parameters each). */
const IDENTITY_READ_CHUNK = 500;

export const DEFAULT_PAGE_SIZE = 4096;

function defaultPageSize(): number {
  const env = Number(process.env["SEGMENTD_PROFILE_PAGE_SIZE"]);
  return Number.isInteger(env) && env >= 512 && env <= 65536 && (env & (env - 1)) === 0 ? env : DEFAULT_PAGE_SIZE;
}

function defaultCacheMiB(): number {
  const env = Number(process.env["SEGMENTD_PROFILE_CACHE_MIB"]);
  return Number.isFinite(env) && env > 0 ? env : 1024;
}
/**
 * Page cache of the scan connection, in KiB. A full scan (batch snapshot, SQL staging) reads every
 * page once, scattered over the events table: through the main connection it would fill the 1 GiB
 * lookup cache with pages read once (counted in the process's RSS, evicting the hot index pages)
 * for no hit; the OS page cache serves the re-reads either way.
 */
const SCAN_CACHE_KIB = 16 * 1024;
const MEMBERSHIP_READ_CHUNK = 500;
/** Rows per multi-row membership statement (5–7 parameters each, far below SQLite's 32766). */
const MEMBERSHIP_WRITE_CHUNK = 256;
/** Dense windows of at least this many profile ids are read with range scans (smaller ones with point lookups). */
const MIN_RANGE_READ = 32;
/** Membership writes of at least this many changes (batch jobs) commit alone, without a savepoint. */
const SOLO_MEMBERSHIP_CHANGES = 1000;
/** Rows per applyMembershipSets statement: bounds the JSON text SQLite parses at once (~0.6 MB). */
const MEMBERSHIP_SET_ROWS = 65_536;

/** "(?, ?), (?, ?)…": n rows of `width` placeholders, each after `lead` (literal values). */
function rowsSql(n: number, width: number, lead = ""): string {
  const row = `(${lead}${Array.from({ length: width }, () => "?").join(", ")})`;
  return Array.from({ length: n }, () => row).join(", ");
}

export class EmbeddedProfileStore implements ProfileStore {
  readonly kind = "embedded" as const;
  private readonly db: Database.Database;
  private readonly tids = new Map<string, number>();
  private queue: QueuedWrite[] = [];
  private flushScheduled = false;
  private upkeepScheduled = false;
  private closed = false;
  /** Change feed (changesSince): fed after each group's commit with the profiles its writes touched. */
  private readonly feed = new ChangeFeed();
  private readonly tidKeys = new Map<number, string>();
  /** Profiles touched by the write job running now (tid → pids); null outside write jobs. */
  private touching: Map<number, Set<number>> | null = null;
  private readonly path: string;
  /** Second, read-only connection for full scans (SCAN_CACHE_KIB); opened on the first scan, never for ":memory:". */
  private scanConn: { db: Database.Database; stmts: Map<string, Database.Statement> } | null = null;
  /** Profile id of recently read or written identities (identity-cache.ts), kept in step with the identities table. */
  private readonly identityPids: IdentityPidCache;
  /** PRAGMA data_version when the cache was last known to mirror the file (another connection's commit changes it). */
  private dataVersion = 0;
  /** Definition id <-> the integer stored in memberships and transitions (membership-codes.ts). */
  private readonly defCodes: DefinitionCodes;
  /** Runs the WAL checkpoints while the writer's automatic ones are off; null = automatic (inline). */
  private checkpointer: BackgroundCheckpointer | null = null;
  private readonly walLimitBytes: number;
  /** The page cache configured (MiB): what the connection gets once the store is past 1 GiB (cache-sizing.ts). */
  private readonly cacheMiB: number;
  private readonly pageSize: number;
  /** Which page cache the connection has: capped (a store under 1 GiB) or the configured one; null before the first sizing. */
  private cacheSized: "capped" | "configured" | null = null;
  /** Moves the events' new index entries into the large index (event-index.ts), between commits. */
  private readonly eventIndex: EventIndexMerger;
  /** Records skipped at read (quarantine.ts): rows written through the write queue. */
  private readonly quarantine = new QuarantineLog((r) => this.persistQuarantine(r));

  constructor(opts: EmbeddedStoreOptions) {
    this.path = opts.path;
    this.walLimitBytes = opts.walLimitBytes ?? WAL_CATCH_UP_BYTES;
    // The shared settings (storage-kit/sqlite.ts); `synchronous: "normal"` only where a caller opts in (EmbeddedStoreOptions).
    this.db = openSqlite(opts.path, { pageSize: opts.pageSize ?? defaultPageSize(), synchronous: opts.synchronous ?? "full", tempStoreMemory: true });
    this.cacheMiB = opts.cacheMiB ?? defaultCacheMiB();
    this.pageSize = this.db.pragma("page_size", { simple: true }) as number;
    // Before the schema and its migrations, which may rewrite a large existing file.
    this.sizeCache();
    this.db.exec(SQLITE_SCHEMA);
    migrateEventIndex(this.db);
    this.eventIndex = new EventIndexMerger(this.db, opts.eventIndexMergeAt ?? MERGE_AT, opts.eventIndexMergeStep ?? MERGE_STEP, opts.eventIndexMergeStepMin ?? MERGE_STEP_MIN);
    migrateTextMemberships(this.db);
    this.db.exec(MEMBERSHIP_SCHEMA);
    this.defCodes = new DefinitionCodes(this.db);
    this.identityPids = new IdentityPidCache(opts.identityCacheEntries ?? DEFAULT_IDENTITY_CACHE_ENTRIES);
    this.dataVersion = this.readDataVersion();
    if ((opts.checkpoints ?? "background") === "background" && opts.path !== ":memory:" && opts.path !== "") {
      const pages = this.db.pragma("wal_autocheckpoint", { simple: true }) as number;
      this.db.pragma("wal_autocheckpoint = 0");
      this.db.pragma(`journal_size_limit = ${this.walLimitBytes}`);
      this.checkpointer = new BackgroundCheckpointer({
        ...(opts.checkpointIntervalMs === undefined ? {} : { intervalMs: opts.checkpointIntervalMs }),
        path: opts.path,
        synchronous: opts.synchronous ?? "full",
        // Without its thread the WAL would grow for ever: back to SQLite's own checkpoints.
        onStopped: () => {
          this.checkpointer = null;
          if (!this.closed) this.db.pragma(`wal_autocheckpoint = ${pages}`);
        },
      });
    }
  }

  /**
   * Gives the connection its page cache for the store's size (cache-sizing.ts): capped while the
   * file is under the pending-byte page, the configured size from then on (checked after each
   * commit until then; a store does not shrink).
   */
  private sizeCache(): void {
    if (this.cacheSized === "configured") return;
    const pages = this.stmt("PRAGMA page_count").pluck().get() as number;
    const want = pastPendingBytePage(pages, this.pageSize) ? "configured" : "capped";
    if (want === this.cacheSized) return;
    this.db.pragma(`cache_size = -${Math.round(writerCacheMiB(this.cacheMiB, pages, this.pageSize) * 1024)}`);
    this.cacheSized = want;
  }

  /** The page cache this connection has now (KiB; for tests). */
  cacheKiB(): number {
    return -(this.db.pragma("cache_size", { simple: true }) as number);
  }

  /** Resolves once background checkpoints run (at once when they are inline). */
  checkpointsReady(): Promise<void> {
    return this.checkpointer?.ready ?? Promise.resolve();
  }

  /** PRAGMA data_version through a cached statement: db.pragma() prepares one on every call, and reads call this too (identitiesCurrent). */
  private readDataVersion(): number {
    return this.stmt("PRAGMA data_version").pluck().get() as number;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.queue.length > 0) this.flush();
    this.closed = true;
    // The checkpoint thread's connection first: the last connection to close checkpoints the WAL.
    await this.checkpointer?.stop();
    this.scanConn?.db.close();
    this.db.close();
  }

  // ---- health and quarantine (quarantine.ts) ------------------------------------

  async status(): Promise<ProfileStoreStatus> {
    return { up: !this.closed, error: this.closed ? "the profile store is closed" : null, restarts: 0, quarantined: this.quarantine.count };
  }

  observe(observer: ProfileStoreObserver): () => void {
    return this.quarantine.observe(observer);
  }

  async listQuarantined(q: QuarantineQuery = {}): Promise<QuarantineEntry[]> {
    const where = ["q.seq > ?"];
    const params: Array<string | number> = [q.afterSeq ?? 0];
    if (q.scope !== undefined) {
      where.push("t.org = ?", "t.sandbox = ?");
      params.push(q.scope.orgId, q.scope.sandboxName);
    }
    const rows = this.db.prepare(`SELECT q.seq, t.org, t.sandbox, q.ds, q.kind, q.rid, q.ns, q.idv, q.pid, q.reason, q.first_seen, q.last_seen
      FROM quarantine q JOIN tenants t ON t.tid = q.tid WHERE ${where.join(" AND ")} ORDER BY q.seq LIMIT ?`).all(...params, clampQuarantineLimit(q.limit)) as QuarantineRow[];
    return rows.map(quarantineEntry);
  }

  /**
   * The body of a stored record as a value, or null when it cannot be served safely (too deep,
   * unreadable): then it is reported (once per process) and the caller skips it.
   */
  private servable(scope: TenantScope, kind: QuarantineKind, datasetId: string, recordId: string, identity: Identity, pid: number | null, text: string): JsonObject | null {
    const r = parseStoredBody(text);
    if (r.problem === null) return r.body;
    this.quarantine.report({ scope, datasetId, kind, recordId, identity, profileId: pid, reason: r.problem, at: Date.now() });
    return null;
  }

  /** Events of rows, those that cannot be served skipped (servable). */
  private eventsFrom(scope: TenantScope, rows: readonly EventRow[]): Array<{ pid: number; event: StoredEvent }> {
    const out: Array<{ pid: number; event: StoredEvent }> = [];
    for (const r of rows) {
      const primary = { namespace: r.ns, id: r.idv };
      const body = this.servable(scope, "event", r.ds, r.eid, primary, r.pid, r.body);
      if (body !== null) out.push({ pid: r.pid, event: { datasetId: r.ds, eventId: r.eid, primary, timestamp: r.ts, body } });
    }
    return out;
  }

  /** A quarantine row, through the write queue (a read may find the record; it never writes itself). */
  private persistQuarantine(r: QuarantineReport): void {
    if (this.closed) return;
    this.write(() => {
      const tid = this.tid(r.scope, false);
      if (tid === NO_TENANT) return;
      this.stmt(`INSERT INTO quarantine (tid, ds, kind, rid, ns, idv, pid, reason, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (tid, kind, ds, rid) DO UPDATE SET pid = excluded.pid, reason = excluded.reason, last_seen = excluded.last_seen`)
        .run(tid, r.datasetId, r.kind, r.recordId, r.identity.namespace, r.identity.id, r.profileId, r.reason, r.at, r.at);
    }).catch((err: unknown) => console.error("segmentd: could not record a quarantined record:", err));
  }

  // ---- plumbing -------------------------------------------------------------

  /**
   * Creates the tenant row outside any write transaction, so that a write that
   * rolls back cannot leave a cached tenant id that was never committed.
   */
  private tenantForWrite(scope: TenantScope): number {
    return this.tid(scope, true);
  }

  private write<T>(run: () => T, solo = false, deferCheckpoint = false): Promise<T> {
    if (this.closed) return Promise.reject(new Error("profile store is closed"));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (v: unknown) => void, reject, solo, deferCheckpoint: solo && deferCheckpoint });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.closed || this.queue.length === 0) return;
    const jobs = this.queue;
    this.queue = [];
    // Solo writes commit alone, in queue order with the groups around them.
    let group: QueuedWrite[] = [];
    for (const job of jobs) {
      if (!job.solo) {
        group.push(job);
        continue;
      }
      if (group.length > 0) this.commitGroup(group);
      group = [];
      this.commitGroup([job]);
    }
    if (group.length > 0) this.commitGroup(group);
    this.scheduleUpkeep();
  }

  /**
   * The writer's upkeep after a flush: catching up the background checkpoint (catchUpCheckpoint)
   * and a step of the event index merge. Both run in a later turn, never in the flush itself:
   * the writers' promises settle in the flush, but their continuations (in the store's worker,
   * the answers posted to the callers) run only once the flush returns, so upkeep inside it made
   * every request of the last group wait for it (a catch-up is a 7-24 ms copy and fsync, seen ~3
   * times a second under streaming load; a merge step takes ~0.4 s at 10M events). In a later
   * turn it still runs before a flush scheduled after it, between commits, never inside one.
   */
  private scheduleUpkeep(): void {
    if (this.upkeepScheduled) return;
    this.upkeepScheduled = true;
    setImmediate(() => {
      this.upkeepScheduled = false;
      if (this.closed) return;
      this.catchUpCheckpoint();
      // Between commits, never inside one: a step is a transaction of its own (event-index.ts).
      if (this.eventIndex.due()) this.mergeEventIndexStep();
    });
  }

  private mergeEventIndexStep(): void {
    try {
      this.eventIndex.runStep();
    } catch (error) {
      // Nothing is lost (the step rolled back, the entries stay in the small table, which reads
      // see too); the next try waits for another MERGE_AT appended events.
      this.eventIndex.backOff();
      console.error("segmentd: event index merge step failed:", error);
    }
  }

  /** Moves every new event index entry into the large index (tests; event-index.ts). */
  mergeEventIndex(): Promise<number> {
    return this.write(() => 0, true).then(() => this.eventIndex.mergeAll());
  }

  /**
   * Commits writes in one transaction, each in its own savepoint. A lone write needs no
   * savepoint (it rolls back with the transaction), and a bulk write must not have one: under an
   * open savepoint SQLite journals the pages its statements modify to the sub-journal, which
   * made a million-change membership write (bench/memberships.ts) three times slower.
   */
  private commitGroup(jobs: QueuedWrite[]): void {
    if (jobs.length !== 1 || jobs[0]!.deferCheckpoint !== true || this.checkpointer !== null) {
      this.commitNow(jobs);
      return;
    }
    // A bulk write (a batch job's memberships: millions of rows, hundreds of MB of WAL) would
    // copy its whole WAL back into the database inside its COMMIT (the automatic checkpoint):
    // ~9 % of the write's time at 1M memberships (bench/memberships.ts). The commit is durable
    // without it, so the checkpoint runs in a later turn, after the writer has its answer.
    const pages = this.db.pragma("wal_autocheckpoint", { simple: true }) as number;
    this.db.pragma("wal_autocheckpoint = 0");
    try {
      this.commitNow(jobs);
    } finally {
      this.db.pragma(`wal_autocheckpoint = ${pages}`);
    }
    setImmediate(() => {
      if (!this.closed) this.db.pragma("wal_checkpoint(PASSIVE)");
    });
  }

  private commitNow(jobs: QueuedWrite[]): void {
    const outcomes: WriteOutcome[] = [];
    const touched = new Map<number, Set<number>>();
    // Another connection (a second process on the same file) may have changed identities.
    this.identitiesCurrent();
    try {
      this.db.transaction(() => {
        if (jobs.length === 1) {
          this.touching = touched;
          try {
            outcomes.push({ ok: true, value: jobs[0]!.run() });
          } finally {
            this.touching = null;
          }
          return;
        }
        for (const job of jobs) {
          this.touching = new Map();
          try {
            // A nested transaction is a savepoint: a failing job rolls back alone.
            outcomes.push({ ok: true, value: this.db.transaction(job.run)() });
            mergeTouched(touched, this.touching);
          } catch (error) {
            // The job's savepoint rolled back: identities it noted in the cache may not exist.
            this.identityPids.clear();
            outcomes.push({ ok: false, error });
          } finally {
            this.touching = null;
          }
        }
      })();
    } catch (error) {
      this.identityPids.clear();
      settleGroup(jobs, outcomes, { error });
      return;
    }
    this.sizeCache();
    // Only now (after COMMIT and its fsync): the change feed, then the writers' promises.
    this.recordFeed(touched);
    settleGroup(jobs, outcomes);
  }

  /**
   * With background checkpoints the WAL only starts over when a write begins while every frame
   * has been copied back, which a thread racing a steady writer seldom achieves: a 3M-event load
   * left a 2.5 GB WAL beside a 1.8 GB database. Past walLimitBytes the writer copies what the
   * thread has not yet copied (little: the thread copies every round) right after its commit, so
   * its next write starts the WAL over, and journal_size_limit truncates the file back.
   */
  private catchUpCheckpoint(): void {
    if (this.checkpointer === null) return;
    let size: number;
    try {
      size = statSync(`${this.path}-wal`).size;
    } catch {
      return;
    }
    if (size > this.walLimitBytes) this.db.pragma("wal_checkpoint(PASSIVE)");
  }

  private tid(scope: TenantScope, create: boolean): number {
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    const cached = this.tids.get(key);
    if (cached !== undefined) return cached;
    const row = this.db.prepare("SELECT tid FROM tenants WHERE org = ? AND sandbox = ?").get(scope.orgId, scope.sandboxName) as { tid: number } | undefined;
    if (row !== undefined) {
      this.tids.set(key, row.tid);
      this.tidKeys.set(row.tid, sandboxNameKey(scope));
      return row.tid;
    }
    if (!create) return NO_TENANT;
    const info = this.db.prepare("INSERT INTO tenants (org, sandbox) VALUES (?, ?)").run(scope.orgId, scope.sandboxName);
    const tid = Number(info.lastInsertRowid);
    this.tids.set(key, tid);
    this.tidKeys.set(tid, sandboxNameKey(scope));
    return tid;
  }

  // ---- change feed ------------------------------------------------------------

  /** Notes profiles whose data the running write job changes (kept only if its savepoint and the group commit). */
  private touch(tid: number, pids: Iterable<number>): void {
    touchProfiles(this.touching, tid, pids);
  }

  private recordFeed(touched: ReadonlyMap<number, ReadonlySet<number>>): void {
    recordTouched(this.feed, touched, (tid) => this.tidKeys.get(tid));
  }

  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.feed.changesSince(sandboxNameKey(scope), since);
  }

  private stmtCache = new Map<string, Database.Statement>();
  private stmt(sql: string): Database.Statement {
    let s = this.stmtCache.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.stmtCache.set(sql, s);
    }
    return s;
  }

  /**
   * A statement on the scan connection. Reads there see every committed write: writes commit
   * synchronously on this thread (flush), so no write transaction is ever open while a scan
   * statement runs. In-memory stores (one connection only) use the main connection.
   */
  private scanStmt(sql: string): Database.Statement {
    if (this.path === ":memory:" || this.path === "") return this.stmt(sql);
    if (this.scanConn === null) {
      const db = openSqliteReader(this.path, { cacheKiB: SCAN_CACHE_KIB });
      this.scanConn = { db, stmts: new Map() };
    }
    let s = this.scanConn.stmts.get(sql);
    if (s === undefined) {
      s = this.scanConn.db.prepare(sql);
      this.scanConn.stmts.set(sql, s);
    }
    return s;
  }

  private datasetFromRow(scope: TenantScope, r: DatasetRow): Dataset {
    const d: Dataset = {
      id: r.id, name: r.name, schemaClass: r.schema_class as SchemaClass, profileEnabled: r.profile_enabled === 1,
      identityFields: JSON.parse(r.identity_fields) as Dataset["identityFields"], imsOrg: scope.orgId, sandboxName: scope.sandboxName,
      created: r.created, updated: r.updated,
    };
    if (r.description !== null) d.description = r.description;
    return d;
  }

  private requireDataset(tid: number, scope: TenantScope, id: string): Dataset {
    const r = this.stmt("SELECT * FROM datasets WHERE tid = ? AND id = ?").get(tid, id) as DatasetRow | undefined;
    if (r === undefined) throw new StoreError("DATASET_NOT_FOUND", `dataset ${id} does not exist in sandbox ${scope.sandboxName}`);
    return this.datasetFromRow(scope, r);
  }

  // ---- datasets -------------------------------------------------------------

  createDataset(scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset> {
    const tid = this.tenantForWrite(scope);
    return this.write(() => {
      const id = input.id ?? newCatalogId();
      const exists = this.stmt("SELECT 1 FROM datasets WHERE tid = ? AND id = ?").get(tid, id);
      if (exists !== undefined) throw new StoreError("DATASET_EXISTS", `dataset ${id} already exists`);
      this.stmt(`INSERT INTO datasets (tid, id, name, description, schema_class, profile_enabled, identity_fields, created, updated)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(tid, id, input.name, input.description ?? null, input.schemaClass,
        input.profileEnabled === true ? 1 : 0, JSON.stringify(input.identityFields ?? []), now, now);
      return this.requireDataset(tid, scope, id);
    });
  }

  async getDataset(scope: TenantScope, id: string): Promise<Dataset | null> {
    const r = this.stmt("SELECT * FROM datasets WHERE tid = ? AND id = ?").get(this.tid(scope, false), id) as DatasetRow | undefined;
    return r === undefined ? null : this.datasetFromRow(scope, r);
  }

  async listDatasets(scope: TenantScope, opts: { limit?: number; start?: number } = {}): Promise<Dataset[]> {
    const rows = this.stmt("SELECT * FROM datasets WHERE tid = ? ORDER BY created DESC, id LIMIT ? OFFSET ?")
      .all(this.tid(scope, false), opts.limit ?? 50, opts.start ?? 0) as DatasetRow[];
    return rows.map((r) => this.datasetFromRow(scope, r));
  }

  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null> {
    return this.write(() => {
      const tid = this.tid(scope, false);
      if (this.stmt("SELECT 1 FROM datasets WHERE tid = ? AND id = ?").get(tid, id) === undefined) return null;
      const counts = this.deleteDatasetRecordsSync(tid, id);
      this.stmt("DELETE FROM datasets WHERE tid = ? AND id = ?").run(tid, id);
      return counts;
    });
  }

  // ---- ingestion ------------------------------------------------------------

  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    const tid = this.tenantForWrite(scope);
    return this.write(() => this.appendNow(tid, scope, datasetId, records, opts), records.length >= SOLO_APPEND_RECORDS);
  }

  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
    const tid = this.tenantForWrite(scope);
    const codes = this.defCodes.ensure(definitionIdsOf(decided.changes));
    // One write job: the append and the changes commit together (or, in a group, roll back together).
    return this.write(() => {
      const append = this.appendNow(tid, scope, datasetId, records, opts);
      const transitions = landedAsDecided(decided.expect, append.recordPids) ? this.membershipChanges(tid, decided.changes, codes) : null;
      return { append, transitions };
    }, records.length >= SOLO_APPEND_RECORDS);
  }

  /** The writes of append (in the caller's write job). */
  private appendNow(tid: number, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): AppendResult {
    const dataset = this.requireDataset(tid, scope, datasetId);
    const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
    for (const r of records) {
      if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${datasetId} holds ${dataset.schemaClass}`);
    }
    if (!dataset.profileEnabled) this.appendLake(tid, datasetId, records, opts, result);
    else this.appendProfile(scope, tid, datasetId, records, opts, result);
    if (opts.batch !== undefined) {
      const written = result.fragments + result.events + result.lakeOnly + result.duplicates;
      this.accountBatch(tid, scope, opts.batch, written, opts.ingestedAt);
    }
    return result;
  }

  private appendLake(tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
    const ins = this.stmt("INSERT INTO lake_records (tid, ds, eid, ns, idv, ts, body) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    for (const r of records) {
      const info = ins.run(tid, ds, r.eventId, r.primary.namespace, r.primary.id, r.timestamp ?? opts.ingestedAt, r.json);
      if (info.changes === 0) result.duplicates++;
      else result.lakeOnly++;
    }
  }

  private appendProfile(scope: TenantScope, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
    const split = this.splitKnownEvents(tid, records, opts.ingestedAt);
    if (split.rest.length === 0) {
      this.insertEvents(tid, ds, split.known as EventWrite[], result);
      result.recordPids = split.pids;
      const touched = sortedGraphs(split.touched);
      for (const g of touched) result.profileIds.push(String(g));
      this.touch(tid, touched);
      return;
    }
    const rest = split.rest;
    const loaded: LoadedState = { graphs: new Map(), sizes: new Map(), fragments: new Map() };
    this.loadGraphs(tid, rest, loaded);
    const getFrag = this.stmt("SELECT ts, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?");
    for (const r of rest) {
      if (r.kind !== "profile") continue;
      const k = identityKey(r.primary);
      // A fragment is keyed by a primary identity that is always stored in a graph: an unknown identity has none.
      if (loaded.fragments.has(k) || !loaded.graphs.has(k)) continue;
      const row = getFrag.get(tid, ds, r.primary.namespace, r.primary.id) as { ts: number; body: string } | undefined;
      if (row === undefined) continue;
      // A stored fragment that cannot be served is not merged into: the new record replaces it.
      const body = this.servable(scope, "profile", ds, fragmentRecordId(r.primary), r.primary, loaded.graphs.get(k) ?? null, row.body);
      if (body !== null) loaded.fragments.set(k, { timestamp: row.ts, body });
    }
    const plan = planAppend(rest, loaded, opts.maxIdentitiesPerGraph, opts.ingestedAt);
    const newProfile = this.stmt("INSERT INTO profiles (tid, size, created) VALUES (?, 0, ?)");
    const allocated = plan.outcome.created.map(() => Number(newProfile.run(tid, opts.ingestedAt).lastInsertRowid));
    const w = plan.finalize(allocated);
    for (const m of w.merges) this.moveGraph(tid, m.from, m.into);
    const setSize = this.stmt("UPDATE profiles SET size = ? WHERE pid = ?");
    for (const [g, s] of w.sizes) setSize.run(s, g);
    const insId = this.stmt("INSERT INTO identities (tid, ns, idv, pid) VALUES (?, ?, ?, ?)");
    for (const a of w.assigned) {
      insId.run(tid, a.identity.namespace, a.identity.id, a.graph);
      this.identityPids.set(tid, a.identity.namespace, a.identity.id, a.graph);
    }
    const upFrag = this.stmt(`INSERT INTO fragments (tid, ds, ns, idv, pid, ts, ingested, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (tid, ds, ns, idv) DO UPDATE SET pid = excluded.pid, ts = excluded.ts, ingested = excluded.ingested, body = excluded.body`);
    for (const f of w.fragments) upFrag.run(tid, ds, f.primary.namespace, f.primary.id, f.graph, f.timestamp, opts.ingestedAt, JSON.stringify(f.body));
    result.fragments += rest.filter((r) => r.kind === "profile").length;
    result.refusedLinks.push(...w.refused);
    if (rest.length === records.length) {
      this.insertEvents(tid, ds, w.events, result);
      result.recordPids = w.recordGraphs;
      for (const g of w.touchedGraphs) result.profileIds.push(String(g));
      this.touch(tid, w.touchedGraphs);
      return;
    }
    // Known events and planned records back in the records' order; a known event whose graph a
    // planned record merged into another (moveGraph above) goes to the surviving graph.
    const into = new Map<number, number>();
    for (const m of w.merges) into.set(m.from, m.into);
    const events: EventWrite[] = [];
    const pids = split.pids;
    const touched = new Set<number>(w.touchedGraphs);
    let planned = 0;
    let plannedEvents = 0;
    for (let k = 0; k < records.length; k++) {
      const e = split.known[k];
      if (e !== undefined) {
        e.graph = into.get(e.graph) ?? e.graph;
        pids[k] = e.graph;
        touched.add(e.graph);
        events.push(e);
        continue;
      }
      pids[k] = w.recordGraphs[planned]!;
      if (rest[planned++]!.kind === "experienceevent") events.push(w.events[plannedEvents++]!);
    }
    this.insertEvents(tid, ds, events, result);
    result.recordPids = pids;
    const all = sortedGraphs(touched);
    for (const g of all) result.profileIds.push(String(g));
    this.touch(tid, all);
  }

  /**
   * Events that need no stitching: an event whose identities the writer's cache all knows, in
   * one graph, links nothing and creates nothing, so planAppend would only look its graph up
   * again (its workspace, finalize and the touched set cost the writer ~15 % of an event's
   * time). Those are written as they are; the rest (profile records, identities the cache does
   * not hold, identities of two graphs) go through the plan. `known[k]` and `pids[k]` are set for
   * the known events, by position in `records`.
   */
  private splitKnownEvents(tid: number, records: readonly ValidRecord[], ingestedAt: number):
    { known: Array<EventWrite | undefined>; pids: Float64Array; touched: Set<number>; rest: ValidRecord[] } {
    const known = new Array<EventWrite | undefined>(records.length);
    const pids = new Float64Array(records.length);
    const touched = new Set<number>();
    const rest: ValidRecord[] = [];
    for (let k = 0; k < records.length; k++) {
      const r = records[k]!;
      const graph = r.kind === "experienceevent" ? this.knownGraph(tid, r) : undefined;
      if (graph === undefined) {
        rest.push(r);
        continue;
      }
      touched.add(graph);
      pids[k] = graph;
      known[k] = { eventId: r.eventId!, primary: r.primary, graph, timestamp: r.timestamp ?? ingestedAt, json: r.json, index: r.index };
    }
    return { known, pids, touched, rest };
  }

  /** The one graph the cache holds every identity of the record in, else undefined. */
  private knownGraph(tid: number, r: ValidRecord): number | undefined {
    const ids = r.identities;
    const graph = this.identityPids.get(tid, ids[0]!.namespace, ids[0]!.id);
    if (graph === undefined) return undefined;
    for (let j = 1; j < ids.length; j++) if (this.identityPids.get(tid, ids[j]!.namespace, ids[j]!.id) !== graph) return undefined;
    return graph;
  }

  /**
   * Multi-row inserts: one native call per EVENT_ROWS events. A duplicate _id (stored
   * before, or earlier in this statement) is skipped by ON CONFLICT and counted.
   * The tenant id is part of the statement text (an integer): one parameter less per row.
   */
  private insertEvents(tid: number, ds: string, evs: readonly EventWrite[], result: AppendResult): void {
    if (evs.length === 0) return;
    const before = (this.stmt("SELECT max(seq) FROM events").pluck().get() as number | null) ?? 0;
    let added = 0;
    this.bulk(evs.length, EVENT_ROWS, 7,
      (n) => `INSERT INTO events (tid, ds, eid, ns, idv, pid, ts, body) VALUES ${rowsSql(n, 7, `${tid}, `)} ON CONFLICT DO NOTHING`,
      (i, args) => { const e = evs[i]!; args.push(ds, e.eventId, e.primary.namespace, e.primary.id, e.graph, e.timestamp, e.json); },
      (st, args) => {
        const inserted = st.run(args).changes;
        result.events += inserted;
        added += inserted;
        result.duplicates += args.length / 7 - inserted;
      });
    // Once per append (the merge sizes its steps by the largest append: event-index.ts).
    this.eventIndex.noteAdded(added);
    // The new rows' index entries in one statement (event-index.ts). seq is the rowid without
    // AUTOINCREMENT: above `before` are exactly the rows just appended.
    this.stmt(APPEND_ENTRIES).run(before);
  }

  /**
   * Graph id of every stored identity of the batch into `loaded`, then the sizes stitching needs
   * (graphsToSize): IDENTITY_READ_CHUNK identities per statement, one native call instead of one
   * per identity (CROSS JOIN keeps the identities' primary key as the lookup, one search each).
   */
  private loadGraphs(tid: number, records: readonly ValidRecord[], loaded: LoadedState): void {
    // The cache answers most identities; the rest (and unknown ones) are read.
    const misses: Identity[] = [];
    const missKeys: string[] = [];
    for (const i of identitiesOf(records)) {
      const key = identityKey(i);
      const pid = this.identityPids.get(tid, i.namespace, i.id);
      if (pid !== undefined) loaded.graphs.set(key, pid);
      else {
        misses.push(i);
        missKeys.push(key);
      }
    }
    this.bulk(misses.length, IDENTITY_READ_CHUNK, 3,
      (n) => `SELECT v.column1, i.pid FROM (VALUES ${rowsSql(n, 3)}) AS v CROSS JOIN identities i ON i.tid = ${tid} AND i.ns = v.column2 AND i.idv = v.column3`,
      (k, args) => { const i = misses[k]!; args.push(k, i.namespace, i.id); },
      (st, args) => {
        for (const [k, pid] of st.raw(true).all(args) as Array<[number, number]>) {
          loaded.graphs.set(missKeys[k]!, pid);
          this.identityPids.set(tid, misses[k]!.namespace, misses[k]!.id, pid);
        }
      });
    const pids = graphsToSize(records, loaded.graphs);
    this.bulk(pids.length, IDENTITY_READ_CHUNK, 1,
      (n) => `SELECT pid, size FROM profiles WHERE pid IN (${Array.from({ length: n }, () => "?").join(", ")})`,
      (k, args) => { args.push(pids[k]!); },
      (st, args) => {
        for (const [pid, size] of st.raw(true).all(args) as Array<[number, number]>) loaded.sizes.set(pid, size);
      });
    // Every identity row belongs to a profile row (both change in the same transactions).
    for (const pid of pids) if (!loaded.sizes.has(pid)) throw new Error(`profile ${pid} of a stored identity does not exist`);
  }

  /** Re-points every row of graph `from` to graph `into` (graphs merged). */
  private moveGraph(tid: number, from: number, into: number): void {
    this.touch(tid, [from, into]);
    const moved = this.stmt("UPDATE identities SET pid = ? WHERE tid = ? AND pid = ? RETURNING ns, idv").raw(true).all(into, tid, from) as Array<[string, string]>;
    for (const [namespace, id] of moved) this.identityPids.set(tid, namespace, id, into);
    this.stmt("UPDATE fragments SET pid = ? WHERE tid = ? AND pid = ?").run(into, tid, from);
    this.stmt("UPDATE events SET pid = ? WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = ?)").run(into, tid, from);
    // The surviving graph's own membership wins where both have one.
    this.stmt("INSERT OR IGNORE INTO memberships (tid, pid, def, status, lqt) SELECT tid, ?, def, status, lqt FROM memberships WHERE tid = ? AND pid = ?").run(into, tid, from);
    this.stmt("DELETE FROM memberships WHERE tid = ? AND pid = ?").run(tid, from);
    this.stmt("DELETE FROM profiles WHERE pid = ?").run(from);
  }

  private accountBatch(tid: number, scope: TenantScope, b: NonNullable<AppendOptions["batch"]>, written: number, now: number): void {
    const row = this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, b.id) as BatchRow | undefined;
    if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox ${scope.sandboxName}`);
    if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${b.id} is ${row.status}; files can only be added while it is loading`);
    const errors = JSON.parse(row.errors) as IngestBatch["errors"];
    for (const e of b.failed) {
      if (errors.length >= MAX_BATCH_ERRORS) break;
      errors.push(b.file === undefined ? e : { ...e, file: b.file });
    }
    const files = JSON.parse(row.files) as string[];
    if (b.file !== undefined && !files.includes(b.file)) files.push(b.file);
    this.stmt(`UPDATE batches SET records_read = records_read + ?, records_written = records_written + ?, records_failed = records_failed + ?,
      errors = ?, files = ?, updated = ? WHERE tid = ? AND id = ?`)
      .run(b.read, written, b.failed.length === 0 ? 0 : new Set(b.failed.map((e) => e.index)).size, JSON.stringify(errors), JSON.stringify(files), now, tid, b.id);
  }

  private batchFromRow(r: BatchRow): IngestBatch {
    return {
      id: r.id, datasetId: r.ds, status: r.status as IngestBatchStatus, created: r.created, updated: r.updated, completed: r.completed,
      recordsRead: r.records_read, recordsWritten: r.records_written, recordsFailed: r.records_failed,
      files: JSON.parse(r.files) as string[], errors: JSON.parse(r.errors) as IngestBatch["errors"],
    };
  }

  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
    const tid = this.tenantForWrite(scope);
    return this.write(() => {
      this.requireDataset(tid, scope, datasetId);
      const id = newCatalogId();
      this.stmt("INSERT INTO batches (tid, id, ds, status, created, updated) VALUES (?, ?, ?, 'loading', ?, ?)").run(tid, id, datasetId, now, now);
      return this.batchFromRow(this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow);
    });
  }

  async getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null> {
    const r = this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(this.tid(scope, false), id) as BatchRow | undefined;
    return r === undefined ? null : this.batchFromRow(r);
  }

  async listBatches(scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
    const tid = this.tid(scope, false);
    const rows = (opts.datasetId === undefined
      ? this.stmt("SELECT * FROM batches WHERE tid = ? ORDER BY created DESC, id LIMIT ?").all(tid, opts.limit ?? 100)
      : this.stmt("SELECT * FROM batches WHERE tid = ? AND ds = ? ORDER BY created DESC, id LIMIT ?").all(tid, opts.datasetId, opts.limit ?? 100)) as BatchRow[];
    return rows.map((r) => this.batchFromRow(r));
  }

  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
    return this.write(() => {
      const tid = this.tid(scope, false);
      const done = status === "success" || status === "failed" || status === "aborted";
      const info = this.stmt("UPDATE batches SET status = ?, updated = ?, completed = CASE WHEN ? THEN ? ELSE completed END WHERE tid = ? AND id = ?")
        .run(status, now, done ? 1 : 0, now, tid, id);
      if (info.changes === 0) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
      return this.batchFromRow(this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow);
    });
  }

  /** The batch row, which must exist and be loading (inside a write). */
  private openBatch(tid: number, scope: TenantScope, id: string, action: string): BatchRow {
    const row = this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, id) as BatchRow | undefined;
    if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
    if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${id} is ${row.status}; only a loading batch can be ${action}`);
    return row;
  }

  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
    const tid = this.tid(scope, false);
    return this.write(() => {
      const row = this.openBatch(tid, scope, batchId, "added to");
      const dataset = this.requireDataset(tid, scope, row.ds);
      for (const r of records) {
        if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${row.ds} holds ${dataset.schemaClass}`);
      }
      const ins = this.stmt("INSERT INTO batch_records (tid, batch, meta, body) VALUES (?, ?, ?, ?)");
      for (const r of records) {
        const e = encodeStaged(r);
        ins.run(tid, batchId, e.meta, e.body);
      }
      this.accountBatch(tid, scope, { id: batchId, read: opts.read, failed: opts.failed, ...(opts.file === undefined ? {} : { file: opts.file }) }, 0, opts.now);
      return { staged: records.length };
    });
  }

  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
    const tid = this.tid(scope, false);
    return this.write(() => {
      const row = this.openBatch(tid, scope, batchId, "completed");
      const dataset = this.requireDataset(tid, scope, row.ds);
      const appendOpts: AppendOptions = { ingestedAt: opts.ingestedAt, maxIdentitiesPerGraph: opts.maxIdentitiesPerGraph };
      const refusedLinks: CompletedBatch["refusedLinks"] = [];
      let written = 0;
      let after = 0;
      // One transaction for the whole batch (all or nothing), applied chunk by chunk.
      const next = this.stmt("SELECT seq, meta, body FROM batch_records WHERE tid = ? AND batch = ? AND seq > ? ORDER BY seq LIMIT ?");
      for (;;) {
        const rows = next.all(tid, batchId, after, STAGED_CHUNK) as Array<{ seq: number; meta: string; body: string }>;
        if (rows.length === 0) break;
        after = rows[rows.length - 1]!.seq;
        const records = rows.map((r) => decodeStaged(r.meta, r.body, dataset.schemaClass));
        const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
        if (!dataset.profileEnabled) this.appendLake(tid, row.ds, records, appendOpts, result);
        else this.appendProfile(scope, tid, row.ds, records, appendOpts, result);
        written += result.fragments + result.events + result.lakeOnly + result.duplicates;
        for (const l of result.refusedLinks) if (refusedLinks.length < MAX_BATCH_ERRORS) refusedLinks.push(l);
      }
      this.stmt("DELETE FROM batch_records WHERE tid = ? AND batch = ?").run(tid, batchId);
      // Partial ingestion: the batch succeeds when any record was written or none failed.
      const status: IngestBatchStatus = row.records_written + written > 0 || row.records_failed === 0 ? "success" : "failed";
      this.stmt("UPDATE batches SET status = ?, records_written = records_written + ?, updated = ?, completed = ? WHERE tid = ? AND id = ?")
        .run(status, written, opts.ingestedAt, opts.ingestedAt, tid, batchId);
      return { batch: this.batchFromRow(this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, batchId) as BatchRow), refusedLinks };
    });
  }

  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
    const tid = this.tid(scope, false);
    return this.write(() => {
      this.openBatch(tid, scope, batchId, "aborted");
      this.stmt("DELETE FROM batch_records WHERE tid = ? AND batch = ?").run(tid, batchId);
      this.stmt("UPDATE batches SET status = 'aborted', updated = ?, completed = ? WHERE tid = ? AND id = ?").run(now, now, tid, batchId);
      return this.batchFromRow(this.stmt("SELECT * FROM batches WHERE tid = ? AND id = ?").get(tid, batchId) as BatchRow);
    });
  }

  // ---- identities and profiles ----------------------------------------------

  /**
   * The profile id of a stored identity: from the identity cache when it holds it (the edge's
   * hub forwarding asks for the identity of every event it forwards, nearly always a known one:
   * ~10 µs of the writer thread per event as a B-tree search), else one primary-key search,
   * remembered. A read outside a write job calls identitiesCurrent() first.
   */
  private pidOf(tid: number, identity: Identity): number | null {
    const cached = this.identityPids.get(tid, identity.namespace, identity.id);
    if (cached !== undefined) return cached;
    const row = this.stmt("SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?").get(tid, identity.namespace, identity.id) as { pid: number } | undefined;
    if (row === undefined) return null;
    this.identityPids.set(tid, identity.namespace, identity.id, row.pid);
    return row.pid;
  }

  /**
   * Before a read that uses the identity cache outside a write job: forgets the cache when
   * another connection (a second process on the same file) committed since it was last checked.
   * Write jobs check this at the start of their group commit (commitNow).
   */
  private identitiesCurrent(): void {
    const version = this.readDataVersion();
    if (version !== this.dataVersion) {
      this.identityPids.clear();
      this.dataVersion = version;
    }
  }

  async findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    this.identitiesCurrent();
    const pid = this.pidOf(this.tid(scope, false), identity);
    return pid === null ? null : String(pid);
  }

  /**
   * One look-up per identity (as findProfileId): a VALUES list of 500 identities joined to the
   * identities table measured the same CPU per identity as one statement each, and a call's
   * last, partial list needs a statement prepared for it.
   */
  async findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
    this.identitiesCurrent();
    const tid = this.tid(scope, false);
    const out = new Array<string | null>(identities.length);
    for (let i = 0; i < identities.length; i++) {
      const pid = this.pidOf(tid, identities[i]!);
      out[i] = pid === null ? null : String(pid);
    }
    return out;
  }

  async graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    const rows = this.stmt("SELECT ns, idv FROM identities WHERE tid = ? AND pid = ? ORDER BY ns, idv").all(this.tid(scope, false), Number(profileId)) as Array<{ ns: string; idv: string }>;
    return rows.map((r) => ({ namespace: r.ns, id: r.idv }));
  }

  private readGraphs(scope: TenantScope, tid: number, lo: number, hi: number, withEvents: boolean, eventsSince: number | undefined,
    stmt: (sql: string) => Database.Statement = (sql) => this.stmt(sql)): Map<number, GraphRows> {
    const graphs = new Map<number, GraphRows>();
    const g = (pid: number): GraphRows => {
      let rows = graphs.get(pid);
      if (rows === undefined) {
        rows = { identities: [], fragments: [], events: [], memberships: [] };
        graphs.set(pid, rows);
      }
      return rows;
    };
    for (const r of stmt("SELECT pid, ns, idv FROM identities WHERE tid = ? AND pid BETWEEN ? AND ? ORDER BY pid, ns, idv").all(tid, lo, hi) as Array<{ pid: number; ns: string; idv: string }>) {
      g(r.pid).identities.push({ namespace: r.ns, id: r.idv });
    }
    for (const r of stmt("SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = ? AND pid BETWEEN ? AND ?").all(tid, lo, hi) as FragmentRow[]) {
      const primary = { namespace: r.ns, id: r.idv };
      const body = this.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, r.pid, r.body);
      if (body !== null) g(r.pid).fragments.push({ datasetId: r.ds, primary, timestamp: r.ts, body });
    }
    if (withEvents) {
      const rows = stmt(`${SELECT_EVENTS_BY_PID} WHERE i.tid = ? AND i.pid BETWEEN ? AND ? AND i.ts >= ? ORDER BY i.pid, i.ts, i.seq`)
        .all(tid, lo, hi, eventsSince ?? Number.MIN_SAFE_INTEGER) as EventRow[];
      for (const e of this.eventsFrom(scope, rows)) g(Number(e.pid)).events.push(e.event);
    }
    for (const r of stmt(`${SELECT_MEMBERSHIPS} WHERE m.tid = ? AND m.pid BETWEEN ? AND ? ORDER BY m.pid, c.id`).all(tid, lo, hi) as StoredMembershipRow[]) {
      g(r.pid).memberships.push(membershipOf(r));
    }
    return graphs;
  }

  async getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    this.identitiesCurrent();
    const tid = this.tid(scope, false);
    const pid = this.pidOf(tid, identity);
    if (pid === null) return null;
    // Events are only needed to tell whether an identity has data of its own (policy none).
    const rows = this.readGraphs(scope, tid, pid, pid, false, undefined).get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] };
    if (policy.identityGraph.type === "none" && !rows.fragments.some((f) => identityKey(f.primary) === identityKey(identity))) {
      const ev = this.stmt(`${SELECT_EVENTS_BY_PID} WHERE i.tid = ? AND i.pid = ? AND e.ns = ? AND e.idv = ? LIMIT 1`)
        .all(tid, pid, identity.namespace, identity.id) as EventRow[];
      rows.events = this.eventsFrom(scope, ev).map((e) => e.event);
    }
    return lookupProfile(pid, rows, policy, identity);
  }

  async getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
    this.identitiesCurrent();
    const tid = this.tid(scope, false);
    const pid = this.pidOf(tid, identity);
    if (pid === null) return { events: [], next: null };
    const limit = query.limit ?? 1000;
    const desc = query.order === "desc";
    const where = ["i.tid = ?", "i.pid = ?", "i.ts >= ?", "i.ts < ?"];
    const params: Array<number | string> = [tid, pid, query.startTime ?? Number.MIN_SAFE_INTEGER, query.endTime ?? Number.MAX_SAFE_INTEGER];
    if (policy.identityGraph.type === "none") {
      where.push("e.ns = ?", "e.idv = ?");
      params.push(identity.namespace, identity.id);
    }
    if (query.cursor !== undefined) {
      const c = decodeCursor(query.cursor);
      where.push(desc ? "(i.ts < ? OR (i.ts = ? AND i.seq < ?))" : "(i.ts > ? OR (i.ts = ? AND i.seq > ?))");
      params.push(c.ts, c.ts, c.seq);
    }
    const dir = desc ? "DESC" : "ASC";
    const rows = this.stmt(`${SELECT_EVENTS_BY_PID} WHERE ${where.join(" AND ")} ORDER BY i.ts ${dir}, i.seq ${dir} LIMIT ?`)
      .all(...params, limit + 1) as EventRow[];
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { events: this.eventsFrom(scope, page).map((e) => e.event), next: rows.length > limit && last !== undefined ? encodeCursor(last.ts, last.seq) : null };
  }

  async *scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
    const tid = this.tid(scope, false);
    const chunk = opts.chunkSize ?? 1000;
    let after = 0;
    for (;;) {
      const pids = (this.scanStmt("SELECT pid FROM profiles WHERE tid = ? AND pid > ? ORDER BY pid LIMIT ?").all(tid, after, chunk) as Array<{ pid: number }>).map((r) => r.pid);
      if (pids.length === 0) return;
      const lo = pids[0]!, hi = pids[pids.length - 1]!;
      const graphs = this.readGraphs(scope, tid, lo, hi, opts.events !== false, opts.eventsSince, (sql) => this.scanStmt(sql));
      const out: ScannedProfile[] = [];
      for (const pid of pids) out.push(...assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
      after = hi;
      yield out;
    }
  }

  async countProfiles(scope: TenantScope): Promise<number> {
    return (this.stmt("SELECT count(*) AS n FROM profiles WHERE tid = ?").get(this.tid(scope, false)) as { n: number }).n;
  }

  async listProfileIds(scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
    const rows = this.stmt("SELECT pid FROM profiles WHERE tid = ? AND pid > ? ORDER BY pid LIMIT ?").pluck().all(this.tid(scope, false), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000) as number[];
    return rows.map(String);
  }

  /** Two index lookups per id ((tid, pid) of fragments; (tid, pid, ts) of events): max of each. */
  async profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
    const tid = this.tid(scope, false);
    const frag = this.stmt("SELECT max(ingested) AS t FROM fragments WHERE tid = ? AND pid = ?");
    const ev = this.stmt("SELECT max(ts) AS t FROM event_index_all WHERE tid = ? AND pid = ?");
    return profileIds.map((id) => {
      const pid = Number(id);
      return {
        lastFragmentIngestedAt: (frag.get(tid, pid) as { t: number | null }).t,
        lastEventAt: (ev.get(tid, pid) as { t: number | null }).t,
      };
    });
  }

  async listLakeRecords(scope: TenantScope, datasetId: string, opts: { afterSeq?: number; limit?: number } = {}): Promise<LakeRecord[]> {
    const rows = this.stmt("SELECT seq, eid, ns, idv, body FROM lake_records WHERE tid = ? AND ds = ? AND seq > ? ORDER BY seq LIMIT ?")
      .all(this.tid(scope, false), datasetId, opts.afterSeq ?? 0, opts.limit ?? 1000) as Array<{ seq: number; eid: string | null; ns: string; idv: string; body: string }>;
    const out: LakeRecord[] = [];
    for (const r of rows) {
      const body = this.servable(scope, "lake", datasetId, r.eid ?? `seq:${r.seq}`, { namespace: r.ns, id: r.idv }, null, r.body);
      if (body !== null) out.push({ seq: r.seq, body });
    }
    return out;
  }

  // ---- memberships ----------------------------------------------------------

  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    const tid = this.tenantForWrite(scope);
    const codes = this.defCodes.ensure(definitionIdsOf(changes));
    return this.write(() => this.membershipChanges(tid, changes, codes), changes.length >= SOLO_MEMBERSHIP_CHANGES);
  }

  writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
    const tid = this.tenantForWrite(scope);
    const codes = this.defCodes.ensure(definitionIdsOf(changes));
    return this.write(() => this.membershipChanges(tid, changes, codes).length, changes.length >= SOLO_MEMBERSHIP_CHANGES);
  }

  /**
   * The writes of applyMembershipChanges (in the caller's write job); the transitions recorded.
   * In chunks of MEMBERSHIP_WRITE_CHUNK rows: a chunk of profile ids close together (a batch
   * job's, in ascending order) is written with one multi-row statement, a chunk of ids spread
   * over the table (the edge's, the streaming engine's) with one single-row statement per row.
   * Measured with SQLite, CPU per row, 7,500 changes of 100k profiles spread out: the upserts
   * 6.0 → 3.8 µs and the transitions 3.2 → 1.9 µs single-row (in a savepoint, as in a group
   * commit, 6.9 → 4.3 and 9.9 → 1.9); bench/memberships.ts's dense million-change calls 3.1 →
   * 4.2 µs per change single-row, so those stay multi-row. (Likely why: a multi-row INSERT in a
   * transaction keeps a statement journal, as it could fail after some rows, and copies each
   * page there before modifying it: a few pages for a dense chunk, one or two per row for a
   * sparse one.)
   */
  private membershipChanges(tid: number, changes: readonly MembershipChange[], codes: ReadonlyMap<string, number>): MembershipTransition[] {
    if (changes.length === 0) return [];
    const plan = planMembershipChanges(changes, this.readStoredStatuses(tid, changes, codes));
    const t = plan.transitions;
    // The tenant id is part of the statement text (an integer): one parameter less per row.
    this.writeRows(plan.upserts.length, 4, (i) => plan.pids[plan.upserts[i]!]!,
      (n) => `INSERT INTO memberships (tid, pid, def, status, lqt) VALUES ${rowsSql(n, 4, `${tid}, `)} ON CONFLICT (tid, pid, def) DO UPDATE SET status = excluded.status, lqt = excluded.lqt`,
      (i, args) => { const k = plan.upserts[i]!; const x = t[k]!; args.push(plan.pids[k]!, codes.get(x.definitionId)!, statusCode(x.to), plan.ats[k]!); });
    this.writeRows(t.length, 6, (i) => plan.pids[i]!,
      (n) => `INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at) VALUES ${rowsSql(n, 6, `${tid}, `)}`,
      (i, args) => { const x = t[i]!; args.push(plan.pids[i]!, codes.get(x.definitionId)!, x.from === null ? null : statusCode(x.from), statusCode(x.to), sourceCode(x.source), plan.ats[i]!); });
    return t;
  }

  /**
   * `count` rows of `width` parameters in chunks of MEMBERSHIP_WRITE_CHUNK: a full chunk whose
   * profile ids (`pidOf`) span at most twice its size goes as one multi-row statement, any other
   * row alone (membershipChanges says why).
   */
  private writeRows(count: number, width: number, pidOf: (i: number) => number, sql: (rows: number) => string, bind: (i: number, args: unknown[]) => void): void {
    const args: unknown[] = [];
    let single: Database.Statement | undefined;
    for (let start = 0; start < count; start += MEMBERSHIP_WRITE_CHUNK) {
      const end = Math.min(count, start + MEMBERSHIP_WRITE_CHUNK);
      let lo = Infinity, hi = -Infinity;
      for (let i = start; i < end; i++) {
        const pid = pidOf(i);
        if (pid < lo) lo = pid;
        if (pid > hi) hi = pid;
      }
      args.length = 0;
      if (end - start === MEMBERSHIP_WRITE_CHUNK && hi - lo + 1 <= 2 * MEMBERSHIP_WRITE_CHUNK) {
        for (let i = start; i < end; i++) bind(i, args);
        this.stmt(sql(MEMBERSHIP_WRITE_CHUNK)).run(args);
        continue;
      }
      single ??= this.stmt(sql(1));
      for (let i = start; i < end; i++) {
        args.length = 0;
        bind(i, args);
        single.run(args);
      }
    }
  }

  /**
   * Set-based: SQLite does the row work in C over JSON arrays of integer codes (json_each), so a
   * row costs no JS objects nor bound parameters. Memberships are written profile-id-major (see
   * pidMajorCodes) with one upsert per MEMBERSHIP_SET_ROWS rows, each row's definition and status
   * looked up in a small temp table; transitions set by set, by ascending profile id. (A JS number binds
   * as a REAL: the modulus is cast so that the division stays an integer one. `WHERE true`: SQLite's
   * parser needs it before an upsert's ON CONFLICT after INSERT … SELECT … JOIN.)
   */
  async applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
    // async: an invalid set rejects (planMembershipSets throws) before anything is queued.
    const planned: PlannedSet[] = planMembershipSets(sets, opts);
    const counts = transitionCounts(planned);
    const total = counts.realized + counts.exited;
    if (total === 0) return counts;
    const tid = this.tenantForWrite(scope);
    const defs = this.defCodes.ensure(planned.map((p) => p.definitionId));
    const source = sourceCode(opts.source);
    return this.write(() => {
      const lqt = opts.at;
      this.db.exec("CREATE TEMP TABLE IF NOT EXISTS membership_set_codes (idx INTEGER PRIMARY KEY, def INTEGER NOT NULL, status INTEGER NOT NULL)");
      const upsert = this.stmt(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT ${tid}, v.value / CAST(@modulus AS INTEGER), r.def, r.status, @lqt
        FROM json_each(CAST(@ids AS TEXT)) AS v CROSS JOIN temp.membership_set_codes AS r ON r.idx = v.value % CAST(@modulus AS INTEGER)
        WHERE true ON CONFLICT (tid, pid, def) DO UPDATE SET status = excluded.status, lqt = excluded.lqt`);
      const addRow = this.stmt("INSERT INTO temp.membership_set_codes (idx, def, status) VALUES (?, ?, ?)");
      for (const g of setGroups(planned)) {
        this.stmt("DELETE FROM temp.membership_set_codes").run();
        for (let s = 0; s < g.count; s++) {
          addRow.run(2 * s, defs.get(planned[g.first + s]!.definitionId)!, STATUS_CODE.realized);
          addRow.run(2 * s + 1, defs.get(planned[g.first + s]!.definitionId)!, STATUS_CODE.exited);
        }
        const { codes, modulus } = pidMajorCodes(planned, g.first, g.count);
        for (let i = 0; i < codes.length; i += MEMBERSHIP_SET_ROWS) upsert.run({ modulus, lqt, ids: jsonIntegers(codes, i, Math.min(codes.length, i + MEMBERSHIP_SET_ROWS)) });
      }
      const record = this.stmt(`INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
        SELECT ${tid}, value >> 2, @def, CASE value & 3 WHEN ${KIND_REENTERED} THEN ${STATUS_CODE.exited} WHEN ${KIND_EXITED} THEN ${STATUS_CODE.realized} END,
          CASE value & 3 WHEN ${KIND_EXITED} THEN ${STATUS_CODE.exited} ELSE ${STATUS_CODE.realized} END, @source, @at FROM json_each(CAST(@ids AS TEXT))`);
      for (const p of planned) {
        const def = defs.get(p.definitionId)!;
        for (let i = 0; i < p.codes.length; i += MEMBERSHIP_SET_ROWS) record.run({ def, source, at: opts.at, ids: jsonIntegers(p.codes, i, Math.min(p.codes.length, i + MEMBERSHIP_SET_ROWS)) });
      }
      return counts;
    }, total >= SOLO_MEMBERSHIP_CHANGES, true);
  }

  /**
   * The stored status of each (profile, definition) of the changes without `from` (read only for
   * those). Per definition, in windows of up to MEMBERSHIP_READ_CHUNK profile ids in ascending
   * order: a dense window of at least MIN_RANGE_READ ids (they span at most twice their number, as
   * a batch job's changes do) is read with one covering range scan of memberships_def per status
   * (several times cheaper per change than point lookups); other ids with one primary-key search
   * each. May return more statuses than asked for (members of the range that did not change); the
   * planner only reads the ones it needs.
   */
  private readStoredStatuses(tid: number, changes: readonly MembershipChange[], codes: ReadonlyMap<string, number>): StoredStatuses {
    const stored: StoredStatuses = new Map();
    const byDef = new Map<string, number[]>();
    const sparse: Array<[number, string]> = [];
    for (const c of changes) {
      if (c.from !== undefined) continue;
      const pid = Number(c.profileId);
      // Not an id the store could hold (NaN would end a range): looked up alone, found nowhere.
      if (!Number.isSafeInteger(pid)) {
        sparse.push([pid, c.definitionId]);
        continue;
      }
      let pids = byDef.get(c.definitionId);
      if (pids === undefined) {
        pids = [];
        byDef.set(c.definitionId, pids);
      }
      pids.push(pid);
    }
    const range = this.stmt(`SELECT pid, status FROM memberships WHERE tid = ? AND def = ? AND status IN (${STATUS_CODE.realized}, ${STATUS_CODE.exited}) AND pid BETWEEN ? AND ?`);
    for (const [def, list] of byDef) {
      const pids = Float64Array.from(list).sort();
      for (let i = 0; i < pids.length;) {
        // The window grows while it stays dense, up to MEMBERSHIP_READ_CHUNK distinct ids.
        let j = i, distinct = 0, prev = Number.NaN;
        while (j < pids.length && distinct < MEMBERSHIP_READ_CHUNK) {
          if (pids[j] !== prev) {
            if (distinct > 0 && pids[j]! - pids[i]! + 1 > 2 * (distinct + 1)) break;
            distinct++;
            prev = pids[j]!;
          }
          j++;
        }
        const lo = pids[i]!, hi = pids[j - 1]!;
        if (distinct >= MIN_RANGE_READ) {
          for (const r of range.all(tid, codes.get(def)!, lo, hi) as Array<{ pid: number; status: number }>) addStoredStatus(stored, r.pid, def, statusName(r.status));
        } else {
          for (let k = i; k < j; k++) sparse.push([pids[k]!, def]);
        }
        i = j;
      }
    }
    // One primary-key search per id, each its own statement: a VALUES list of 500 joined to
    // memberships measured ~3 times the CPU per id of these point reads (2.1 vs 0.7 µs).
    const point = this.stmt(`SELECT status FROM memberships WHERE tid = ${tid} AND pid = ? AND def = ?`).pluck();
    for (const [pid, def] of sparse) {
      const status = point.get(pid, codes.get(def)!) as number | undefined;
      if (status !== undefined) addStoredStatus(stored, pid, def, statusName(status));
    }
    return stored;
  }

  /**
   * Runs a statement over `count` rows in chunks of `chunk` rows of `width` parameters. The
   * rows after the last full chunk go in chunks of decreasing powers of two (99 → 64 + 32 + 2 + 1),
   * so every statement comes from the cache: preparing a fresh one for each call's odd remainder
   * (hundreds of parameters) cost the hub's writer ~1.5 µs per forwarded edge event, and the cache
   * holds at most log2(chunk) + 2 statements per shape.
   */
  private bulk(count: number, chunk: number, width: number, sql: (rows: number) => string, bind: (i: number, args: unknown[]) => void,
    exec: (st: Database.Statement, args: unknown[]) => void): void {
    const args: unknown[] = [];
    let full: Database.Statement | undefined;
    for (let start = 0; start < count;) {
      const rest = count - start;
      const n = rest >= chunk ? chunk : 2 ** Math.floor(Math.log2(rest));
      const st = n === chunk ? (full ??= this.stmt(sql(n))) : this.stmt(sql(n));
      args.length = 0;
      for (let i = start; i < start + n; i++) bind(i, args);
      if (args.length !== n * width) throw new Error(`bulk statement expects ${n * width} parameters, got ${args.length}`);
      exec(st, args);
      start += n;
    }
  }

  async getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    const rows = this.stmt(`${SELECT_MEMBERSHIPS} WHERE m.tid = ? AND m.pid = ? ORDER BY c.id`).all(this.tid(scope, false), Number(profileId)) as StoredMembershipRow[];
    return rows.map(membershipOf);
  }

  async listMembers(scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
    const def = this.defCodes.find(definitionId);
    if (def === undefined) return [];
    const rows = this.stmt(`SELECT pid, status, lqt FROM memberships WHERE tid = ? AND def = ? AND status = ? AND pid > ? ORDER BY pid LIMIT ?`)
      .all(this.tid(scope, false), def, statusCode(opts.status ?? "realized"), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000) as Array<Omit<StoredMembershipRow, "def">>;
    return rows.map((r) => membershipOf({ ...r, def: definitionId }));
  }

  async listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
    const def = this.defCodes.find(definitionId);
    if (def === undefined) return [];
    const rows = this.stmt("SELECT pid FROM memberships WHERE tid = ? AND def = ? AND status = ? ORDER BY pid").raw(true).all(this.tid(scope, false), def, statusCode(status)) as Array<[number]>;
    return rows.map((r) => String(r[0]));
  }

  async listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
    const def = this.defCodes.find(definitionId);
    if (def === undefined) return new Float64Array(0);
    return Float64Array.from(this.stmt("SELECT pid FROM memberships WHERE tid = ? AND def = ? AND status = ? ORDER BY pid").pluck().all(this.tid(scope, false), def, statusCode(status)) as number[]);
  }

  async countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    const def = this.defCodes.find(definitionId);
    if (def === undefined) return { realized: 0, exited: 0 };
    const rows = this.stmt("SELECT status, count(*) AS n FROM memberships WHERE tid = ? AND def = ? GROUP BY status").all(this.tid(scope, false), def) as Array<{ status: number; n: number }>;
    return { realized: rows.find((r) => r.status === STATUS_CODE.realized)?.n ?? 0, exited: rows.find((r) => r.status === STATUS_CODE.exited)?.n ?? 0 };
  }

  async listTransitions(scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
    const where = ["tid = ?", "at >= ?", "at < ?"];
    const params: Array<string | number> = [this.tid(scope, false), q.since ?? Number.MIN_SAFE_INTEGER, q.until ?? Number.MAX_SAFE_INTEGER];
    if (q.definitionId !== undefined) {
      const def = this.defCodes.find(q.definitionId);
      if (def === undefined) return [];
      where.push("def = ?");
      params.push(def);
    }
    if (q.sources !== undefined && q.sources.length > 0) { where.push(`source IN (${q.sources.map(() => "?").join(", ")})`); params.push(...q.sources.map(sourceCode)); }
    const rows = this.db.prepare(`SELECT pid, def, from_status, to_status, source, at FROM transitions WHERE ${where.join(" AND ")} ORDER BY at, seq LIMIT ?`)
      .all(...params, q.limit ?? 10_000) as Array<{ pid: number; def: number; from_status: number | null; to_status: number; source: number; at: number }>;
    return rows.map((r) => ({ profileId: String(r.pid), definitionId: this.defCodes.idOf(r.def), from: r.from_status === null ? null : statusName(r.from_status),
      to: statusName(r.to_status), source: sourceName(r.source), at: new Date(r.at).toISOString() }));
  }

  // ---- data lifecycle -------------------------------------------------------

  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
    return this.write(() => {
      const tid = this.tid(scope, false);
      const counts: DeleteCounts = { fragments: 0, events: 0, lakeRecords: 0, identities: 0, profileIds: [] };
      const touched = new Set<number>();
      const all = datasets === "ALL";
      const dsList = all ? [] : [...datasets];
      const dsFilter = all ? "" : ` AND ds IN (${dsList.map(() => "?").join(", ")})`;
      const delFragments = this.db.prepare(`DELETE FROM fragments WHERE tid = ? AND pid = ? AND ns = ? AND idv = ?${dsFilter}`);
      const delEvents = this.db.prepare(`DELETE FROM events WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = ?) AND ns = ? AND idv = ?${dsFilter}`);
      const delLake = this.db.prepare(`DELETE FROM lake_records WHERE tid = ? AND ns = ? AND idv = ?${dsFilter}`);
      const delQuarantined = this.db.prepare(`DELETE FROM quarantine WHERE tid = ? AND ns = ? AND idv = ?${dsFilter}`);
      for (const i of identities) {
        const pid = this.pidOf(tid, i);
        if (pid !== null) {
          const f = delFragments.run(tid, pid, i.namespace, i.id, ...dsList).changes;
          const e = delEvents.run(tid, pid, i.namespace, i.id, ...dsList).changes;
          counts.fragments += f;
          counts.events += e;
          if (f + e > 0) touched.add(pid);
          if (all) {
            this.stmt("DELETE FROM identities WHERE tid = ? AND ns = ? AND idv = ?").run(tid, i.namespace, i.id);
            this.identityPids.delete(tid, i.namespace, i.id);
            counts.identities++;
            touched.add(pid);
            const size = (this.stmt("SELECT size FROM profiles WHERE pid = ?").get(pid) as { size: number }).size - 1;
            // An emptied graph disappears; its memberships stay so the engines can record the exits.
            if (size <= 0) this.stmt("DELETE FROM profiles WHERE pid = ?").run(pid);
            else this.stmt("UPDATE profiles SET size = ? WHERE pid = ?").run(size, pid);
          }
        }
        counts.lakeRecords += delLake.run(tid, i.namespace, i.id, ...dsList).changes;
        // Quarantined records of the identity went with its data.
        delQuarantined.run(tid, i.namespace, i.id, ...dsList);
      }
      counts.profileIds = [...touched].sort((a, b) => a - b).map(String);
      this.touch(tid, touched);
      return counts;
    });
  }

  private deleteDatasetRecordsSync(tid: number, ds: string): DeleteCounts {
    const pids = new Set<number>();
    for (const r of this.stmt("SELECT DISTINCT pid FROM fragments WHERE tid = ? AND ds = ?").all(tid, ds) as Array<{ pid: number }>) pids.add(r.pid);
    for (const r of this.stmt("SELECT DISTINCT pid FROM events WHERE tid = ? AND ds = ?").all(tid, ds) as Array<{ pid: number }>) pids.add(r.pid);
    const fragments = this.stmt("DELETE FROM fragments WHERE tid = ? AND ds = ?").run(tid, ds).changes;
    const events = this.stmt("DELETE FROM events WHERE tid = ? AND ds = ?").run(tid, ds).changes;
    const lakeRecords = this.stmt("DELETE FROM lake_records WHERE tid = ? AND ds = ?").run(tid, ds).changes;
    // Quarantined records of the dataset went with it.
    this.stmt("DELETE FROM quarantine WHERE tid = ? AND ds = ?").run(tid, ds);
    this.touch(tid, pids);
    return { fragments, events, lakeRecords, identities: 0, profileIds: [...pids].sort((a, b) => a - b).map(String) };
  }

  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
    return this.write(() => {
      const tid = this.tid(scope, false);
      this.requireDataset(tid, scope, datasetId);
      return this.deleteDatasetRecordsSync(tid, datasetId);
    });
  }

  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
    return this.write(() => {
      const tid = this.tid(scope, false);
      this.requireDataset(tid, scope, update.datasetId);
      const apply = (body: JsonObject): JsonObject => {
        let out = body;
        for (const [path, value] of Object.entries(update.set ?? {})) out = setPath(out, path, value);
        for (const path of update.remove ?? []) out = removePath(out, path);
        return out;
      };
      let updated = 0;
      const touched = new Set<number>();
      // Each query uses the index that leads with the identity (events: through the graph id).
      const queries = {
        fragments: { sql: "SELECT rowid AS k, pid, NULL AS rid, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
        events: {
          sql: "SELECT seq AS k, pid, eid AS rid, body FROM events WHERE seq IN (SELECT seq FROM event_index_all WHERE tid = ? AND pid = (SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?)) AND ds = ? AND ns = ? AND idv = ?",
          args: (i: Identity) => [tid, tid, i.namespace, i.id, update.datasetId, i.namespace, i.id],
        },
        lake_records: { sql: "SELECT seq AS k, NULL AS pid, eid AS rid, body FROM lake_records WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
      } as const;
      const kinds = { fragments: "profile", events: "event", lake_records: "lake" } as const;
      for (const table of ["fragments", "events", "lake_records"] as const) {
        const key = table === "fragments" ? "rowid" : "seq";
        const sel = this.stmt(queries[table].sql);
        const upd = this.stmt(`UPDATE ${table} SET body = ? WHERE ${key} = ?`);
        for (const i of update.identities) {
          for (const r of sel.all(...queries[table].args(i)) as Array<{ k: number; pid: number | null; rid: string | null; body: string }>) {
            // A body that cannot be served is left as it is (and reported), never rewritten.
            const rid = table === "fragments" ? fragmentRecordId(i) : r.rid ?? `seq:${r.k}`;
            const before = this.servable(scope, kinds[table], update.datasetId, rid, i, r.pid, r.body);
            if (before === null) continue;
            const after = apply(before);
            if (after === before) continue;
            upd.run(JSON.stringify(after), r.k);
            updated++;
            if (r.pid !== null) touched.add(r.pid);
          }
        }
      }
      this.touch(tid, touched);
      return { updated, profileIds: [...touched].sort((a, b) => a - b).map(String) };
    });
  }
}


interface QuarantineRow { seq: number; org: string; sandbox: string; ds: string; kind: string; rid: string; ns: string; idv: string; pid: number | null; reason: string; first_seen: number; last_seen: number }

function quarantineEntry(r: QuarantineRow): QuarantineEntry {
  return { seq: r.seq, orgId: r.org, sandboxName: r.sandbox, datasetId: r.ds, kind: r.kind as QuarantineKind, recordId: r.rid, identity: { namespace: r.ns, id: r.idv },
    profileId: r.pid === null ? null : String(r.pid), reason: r.reason, quarantinedAt: new Date(r.first_seen).toISOString(), lastSeenAt: new Date(r.last_seen).toISOString() };
}

/** A membership row with its definition id (SELECT_MEMBERSHIPS) and coded status and time. */
interface StoredMembershipRow { pid: number; def: string; status: number; lqt: number | string }

/** Events through the two-generation (tid, pid, ts) index (event-index.ts): alias i for the index, e for the row. */
const SELECT_EVENTS_BY_PID = "SELECT e.seq, e.pid, e.ds, e.eid, e.ns, e.idv, e.ts, e.body FROM event_index_all i JOIN events e ON e.seq = i.seq";
const SELECT_MEMBERSHIPS = "SELECT m.pid, c.id AS def, m.status, m.lqt FROM memberships m JOIN definition_codes c ON c.code = m.def";

function membershipOf(r: StoredMembershipRow): Membership {
  return toMembership({ pid: r.pid, def: r.def, status: statusName(r.status), lqt: decodeTime(r.lqt) });
}

/** The distinct definition ids of a list of changes. */
function definitionIdsOf(changes: readonly MembershipChange[]): Set<string> {
  const ids = new Set<string>();
  for (const c of changes) ids.add(c.definitionId);
  return ids;
}

/** Graph ids ascending (a typed array sorts numbers without a comparator call per comparison). */
function sortedGraphs(graphs: ReadonlySet<number>): number[] {
  return Array.from(Float64Array.from(graphs).sort());
}
