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
import { DEFAULT_IDENTITY_CACHE_ENTRIES, IdentityPidCache } from "./identity-cache.js";
import { mergeTouched, touchProfiles, type FeedHistory } from "../change-feed.js";
import { SqliteChangeLog } from "./change-log.js";
import { clampQuarantineLimit, parseStoredBody, QuarantineLog, type ProfileStoreObserver, type ProfileStoreStatus, type QuarantineEntry, type QuarantineKind, type QuarantineQuery, type QuarantineReport } from "../quarantine.js";
import { type AppendOptions, type AppendResult, type CompletedBatch, type CompleteOptions, type DeleteCounts, type EventPage, type EventQuery, type FieldUpdate, type IngestBatch, type IngestBatchStatus, type LakeQuery, type LakeRecord, type MembershipChange, type MembershipSet, type MembershipSetCounts, type MembershipSetOptions, type MembershipTargets, type ProfileDataTimes, type ProfileStore, type ProfileWithFragments, type ScanOptions, type ScannedProfile, type StageOptions, type TransitionQuery, type DecidedChanges, type DecidedAppendResult, type LoggedTransition, type ProfileSelection } from "../store.js";
import type { Dataset, DatasetInput, Identity, JsonObject, Membership, MembershipStatus, MembershipTransition, MergedProfile, MergePolicySpec, StoredEvent, TenantScope, ValidRecord } from "../types.js";
import { EVENT_TEXT, servableText, textedEvent, type TextedEvent, type UnreadableEvent } from "./wire-scan.js";
import { SQLITE_SCHEMA } from "./schema.js";
import { EventIndexMerger, MERGE_AT, MERGE_STEP, MERGE_STEP_MIN, migrateEventIndex } from "./event-index.js";
import { BackgroundCheckpointer } from "./checkpointer.js";
import { pastPendingBytePage, writerCacheMiB } from "./cache-sizing.js";
import { DefinitionCodes, MEMBERSHIP_SCHEMA, migrateTextMemberships } from "./membership-codes.js";
import { sandboxNameKey } from "../../platform/tenant.js";
import { type EventRow, type QueuedWrite, NO_TENANT, WAL_CATCH_UP_BYTES, SCAN_CACHE_KIB, type QuarantineRow, quarantineEntry, type StoreCtx } from "./store-context.js";
import { createDataset, getDataset, listDatasets, deleteDataset, deleteByIdentities, deleteDatasetRecords, updateFields } from "./lifecycle-writes.js";
import { append, appendDecided, createBatch, getBatch, listBatches, setBatchStatus, stageBatchRecords, completeBatch, abortBatch } from "./append-batches.js";
import { findProfileId, findProfileIds, graphIdentities, getProfile, getProfileWithFragments, getEvents, eventsStoredThrough, scanProfiles, countProfiles, listProfileIds, profileDataTimes, listLakeRecords } from "./profile-reads.js";
import { applyMembershipChanges, writeMembershipChanges, applyMembershipSets, applyMembershipTargets, getMemberships, listMembers, listMemberIds, listMemberPids, countMembers, listTransitions } from "./membership-store.js";
import * as transitionLog from "./transition-log.js";

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
  /** Profile ids the change feed and its log keep per tenant (default DEFAULT_FEED_CAPACITY). */
  changeFeedCapacity?: number;
  /** A new change log starts at this version, and none below it is handed out (the worker store's mirror: change-log.ts). */
  feedVersionFrom?: number;
}
export const DEFAULT_PAGE_SIZE = 4096;

function defaultPageSize(): number {
  const env = Number(process.env["SEGMENTD_PROFILE_PAGE_SIZE"]);
  return Number.isInteger(env) && env >= 512 && env <= 65536 && (env & (env - 1)) === 0 ? env : DEFAULT_PAGE_SIZE;
}

function defaultCacheMiB(): number {
  const env = Number(process.env["SEGMENTD_PROFILE_CACHE_MIB"]);
  return Number.isFinite(env) && env > 0 ? env : 1024;
}
export class EmbeddedProfileStore implements ProfileStore {
  readonly kind = "embedded" as const;
  private readonly db: Database.Database;
  private readonly tids = new Map<string, number>();
  private queue: QueuedWrite[] = [];
  private flushScheduled = false;
  private upkeepScheduled = false;
  private closed = false;
  /** Change feed (changesSince) and its log (change-log.ts): rows written in each group, the feed fed after its commit. */
  private readonly changeLog: SqliteChangeLog;
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
  /** What the modules split out of this class use of it (store-context.ts). */
  private readonly ctx: StoreCtx;

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
    this.changeLog = new SqliteChangeLog(this.db, (sql) => this.stmt(sql), opts.changeFeedCapacity, opts.feedVersionFrom);
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
    this.ctx = {
      db: this.db, identityPids: this.identityPids, defCodes: this.defCodes, eventIndex: this.eventIndex,
      stmt: (sql) => this.stmt(sql),
      scanStmt: (sql) => this.scanStmt(sql),
      write: <T>(run: () => T, solo?: boolean, deferCheckpoint?: boolean) => this.write(run, solo, deferCheckpoint),
      tid: (scope, create) => this.tid(scope, create),
      tenantForWrite: (scope) => this.tenantForWrite(scope),
      touch: (tid, pids) => this.touch(tid, pids),
      pidOf: (tid, identity) => this.pidOf(tid, identity),
      identitiesCurrent: () => this.identitiesCurrent(),
      servable: (scope, kind, datasetId, recordId, identity, pid, text) => this.servable(scope, kind, datasetId, recordId, identity, pid, text),
      eventsFrom: (scope, rows, texts) => this.eventsFrom(scope, rows, texts),
    };
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
    this.changeLog.trim(true);
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
  private eventsFrom(scope: TenantScope, rows: readonly EventRow[], texts = false): Array<{ pid: number; event: StoredEvent }> {
    const out: Array<{ pid: number; event: StoredEvent }> = [];
    for (const r of rows) {
      const primary = { namespace: r.ns, id: r.idv };
      if (texts && servableText(r.body)) {
        out.push({ pid: r.pid, event: textedEvent(r.ds, r.eid, primary, r.ts, r.body) });
        continue;
      }
      const body = this.servable(scope, "event", r.ds, r.eid, primary, r.pid, r.body);
      if (body === null) continue;
      const event: TextedEvent = { datasetId: r.ds, eventId: r.eid, primary, timestamp: r.ts, body };
      if (texts) event[EVENT_TEXT] = r.body;
      out.push({ pid: r.pid, event });
    }
    return out;
  }

  /**
   * Events of a worker scan whose text did not parse on the caller's thread (wire-scan.ts): checked
   * as every read checks a body, so that each is reported to the quarantine as any read would.
   */
  checkUnreadableEvents(scope: TenantScope, events: readonly UnreadableEvent[]): void {
    for (const e of events) this.servable(scope, "event", e.datasetId, e.eventId, e.primary, e.pid, e.text);
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
      this.changeLog.trim(false);
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
    let version: number | undefined;
    try {
      this.db.transaction(() => {
        this.runJobs(jobs, outcomes, touched);
        // In the same transaction as the data: the log row commits or rolls back with it.
        version = this.changeLog.append(touched);
      })();
    } catch (error) {
      this.identityPids.clear();
      settleGroup(jobs, outcomes, { error });
      return;
    }
    this.sizeCache();
    // Only now (after COMMIT and its fsync): the change feed, then the writers' promises.
    this.recordFeed(touched, version);
    settleGroup(jobs, outcomes);
  }

  /** Runs a group's jobs in the open transaction, each (of several) in its own savepoint; collects what they touched. */
  private runJobs(jobs: QueuedWrite[], outcomes: WriteOutcome[], touched: Map<number, Set<number>>): void {
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

  private recordFeed(touched: ReadonlyMap<number, ReadonlySet<number>>, version: number | undefined): void {
    this.changeLog.record(touched, (tid) => this.tidKeys.get(tid), version);
  }

  /** Calls `listener` with each version the feed records from now on (the worker's mirror, store-worker.ts). */
  onFeedRecord(listener: (version: number, changes: ReadonlyMap<string, ReadonlySet<string>>) => void): void {
    this.changeLog.onRecord(listener);
  }

  /** The feed as it is now: what the worker store's mirror starts from. */
  feedHistory(): FeedHistory {
    return this.changeLog.feed.history();
  }

  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.changeLog.feed.changesSince(sandboxNameKey(scope), since);
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

  createDataset(scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset> {
    return createDataset(this.ctx, scope, input, now);
  }
  getDataset(scope: TenantScope, id: string): Promise<Dataset | null> {
    return getDataset(this.ctx, scope, id);
  }
  listDatasets(scope: TenantScope, opts: { limit?: number; start?: number } = {}): Promise<Dataset[]> {
    return listDatasets(this.ctx, scope, opts);
  }
  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null> {
    return deleteDataset(this.ctx, scope, id);
  }
  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    return append(this.ctx, scope, datasetId, records, opts);
  }
  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
    return appendDecided(this.ctx, scope, datasetId, records, opts, decided);
  }
  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
    return createBatch(this.ctx, scope, datasetId, now);
  }
  getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null> {
    return getBatch(this.ctx, scope, id);
  }
  listBatches(scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
    return listBatches(this.ctx, scope, opts);
  }
  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
    return setBatchStatus(this.ctx, scope, id, status, now);
  }
  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
    return stageBatchRecords(this.ctx, scope, batchId, records, opts);
  }
  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
    return completeBatch(this.ctx, scope, batchId, opts);
  }
  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
    return abortBatch(this.ctx, scope, batchId, now);
  }
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

  findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    return findProfileId(this.ctx, scope, identity);
  }
  findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
    return findProfileIds(this.ctx, scope, identities);
  }
  graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    return graphIdentities(this.ctx, scope, profileId);
  }
  getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    return getProfile(this.ctx, scope, identity, policy);
  }
  getProfileWithFragments(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null> {
    return getProfileWithFragments(this.ctx, scope, identity, policy);
  }
  getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
    return getEvents(this.ctx, scope, identity, policy, query);
  }
  scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
    return scanProfiles(this.ctx, scope, policy, opts);
  }
  eventsStoredThrough(): Promise<number> {
    return eventsStoredThrough(this.ctx);
  }

  countProfiles(scope: TenantScope): Promise<number> {
    return countProfiles(this.ctx, scope);
  }
  listProfileIds(scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
    return listProfileIds(this.ctx, scope, opts);
  }
  profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
    return profileDataTimes(this.ctx, scope, profileIds);
  }
  listLakeRecords(scope: TenantScope, datasetId: string, opts: LakeQuery = {}): Promise<LakeRecord[]> {
    return listLakeRecords(this.ctx, scope, datasetId, opts);
  }
  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    return applyMembershipChanges(this.ctx, scope, changes);
  }
  writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
    return writeMembershipChanges(this.ctx, scope, changes);
  }
  applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
    return applyMembershipSets(this.ctx, scope, sets, opts);
  }
  applyMembershipTargets(scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet> {
    return applyMembershipTargets(this.ctx, scope, targets, opts);
  }
  getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    return getMemberships(this.ctx, scope, profileId);
  }
  listMembers(scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
    return listMembers(this.ctx, scope, definitionId, opts);
  }
  listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
    return listMemberIds(this.ctx, scope, definitionId, status);
  }
  listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
    return listMemberPids(this.ctx, scope, definitionId, status);
  }
  countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    return countMembers(this.ctx, scope, definitionId);
  }
  listTransitions(scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
    return listTransitions(this.ctx, scope, q);
  }

  // ---- the transition log as the delivery outbox (transition-log.ts) ----------

  transitionLogSeqs(afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: null }> {
    return transitionLog.transitionLogSeqs(this.ctx, afterSeq, limit);
  }

  async transactionsInProgress(): Promise<string[]> {
    return [];
  }

  readTransitionLog(scope: TenantScope, q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
    return transitionLog.readTransitionLog(this.ctx, this.tid(scope, false), scope, q);
  }

  graphIdentitiesOf(scope: TenantScope, profileIds: readonly string[]): Promise<Identity[][]> {
    return transitionLog.graphIdentitiesOf(this.ctx, this.tid(scope, false), profileIds);
  }
  profileSelections(scope: TenantScope, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]> {
    return transitionLog.profileSelections(this.ctx, scope, this.tid(scope, false), profileIds, policy, paths);
  }
  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
    return deleteByIdentities(this.ctx, scope, identities, datasets);
  }
  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
    return deleteDatasetRecords(this.ctx, scope, datasetId);
  }
  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
    return updateFields(this.ctx, scope, update);
  }
}
