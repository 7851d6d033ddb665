// PostgreSQL profile store (pg 8). Same tables and semantics as the embedded
// store; set-based statements (unnest arrays) keep a batch to a handful of round
// trips. Writes of one tenant are serialized with a transaction-scoped advisory
// lock, because identity stitching reads the graph and then rewrites it: two
// concurrent batches linking the same identities must not both create a graph.
import { settleGroup, type WriteOutcome } from "../group-commit.js";
import pg from "pg";
import { createPool, lockForTransaction, runSchema, withAdvisoryLock, withTransaction } from "../../storage-kit/postgres.js";
import { ChangeFeed, mergeTouched, recordTouched, touchProfiles } from "../change-feed.js";
import { appendChangeLog, changedAfterInLog, changeLogLock, createChangeLog, PG_TRIM_INTERVAL_MS, readChangeLog, ChangeLogTail, trimChangeLog } from "./pg-change-log.js";
import { newCatalogId } from "../ids.js";
import { clampQuarantineLimit, QuarantineLog, storedBodyProblem, type ProfileStoreObserver, type ProfileStoreStatus, type QuarantineEntry, type QuarantineKind, type QuarantineQuery, type QuarantineReport } from "../quarantine.js";
import {
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
  type LakeQuery,
  type LakeRecord,
  type MembershipChange,
  type MembershipSet,
  type MembershipSetCounts,
  type MembershipSetOptions,
  type MembershipTargets,
  type ProfileDataTimes,
  type ProfileStore,
  type ProfileWithFragments,
  type PartitionBatchResult,
  type PartitionBatchWrite,
  type PartitionFence,
  type PartitionWrites,
  type JobPartitionReport,
  type JobPartitionWrite,
  type JobPartitionWrites,
  type ScanOptions,
  type ScannedProfile,
  type StageOptions,
  type TransitionQuery,
  type DecidedChanges,
  type DecidedAppendResult,
  type LoggedTransition,
  type ProfileSelection,
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
  TenantScope,
  ValidRecord,
} from "../types.js";
import { PG_SCHEMA } from "./schema.js";
import { NO_TENANT, queryRows, TENANT_LOCK_CLASS, type PgStoreContext, type Q } from "./pg-context.js";
import * as appends from "./pg-append.js";
import * as batches from "./pg-batches.js";
import * as reads from "./pg-reads.js";
import * as memberships from "./pg-memberships.js";
import * as partitions from "./pg-partitions.js";
import * as jobPartitions from "./pg-job-partitions.js";
import * as lifecycle from "./pg-lifecycle.js";
import * as transitionLog from "./pg-transition-log.js";
import { sandboxNameKey } from "../../platform/tenant.js";

export interface PostgresStoreOptions {
  connectionString: string;
  /** Schema holding the tables (created if missing); default "segmentd_profiles". */
  schema?: string;
  poolSize?: number;
  /** Profile ids the change feed and its log keep per tenant (default DEFAULT_FEED_CAPACITY). */
  changeFeedCapacity?: number;
  /** How often other processes' commits are read from the change log (ms; default 500; a snapshot's refresh reads them first anyway). */
  changeLogReadMs?: number;
}

// int8 columns (ids, epoch ms) fit in a double; parse them as numbers for this
// pool only, without touching pg's global type parsers other modules may rely on.
const INT8_OID = 20;
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === INT8_OID && format !== "binary") return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

interface DatasetRow { id: string; name: string; description: string | null; schema_class: string; profile_enabled: boolean; identity_fields: Dataset["identityFields"]; created: number; updated: number }


/** Writes per group commit: bounds how long one transaction holds the tenant locks. */
const MAX_GROUP = 256;

interface PendingWrite {
  tid: number;
  run: (c: pg.PoolClient, tid: number) => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid schema name ${JSON.stringify(name)}`);
  return `"${name}"`;
}

export class PostgresProfileStore implements ProfileStore, PartitionWrites, JobPartitionWrites {
  readonly kind = "postgres" as const;
  private readonly pool: pg.Pool;
  private readonly tids = new Map<string, number>();
  private readonly ready: Promise<void>;
  /** Reads every process's commits from the change log into the feed (set once ready). */
  private logTail: ChangeLogTail | null = null;
  /**
   * Change feed (changesSince): read back from the change log when the store opens
   * (pg-change-log.ts), then fed after each group's commit with the profiles its writes touched
   * (this process's writes only; other processes' are in the log, read at the next open).
   */
  private feed: ChangeFeed;
  private readonly changeLock: string;
  private readonly changeLogStats = { commits: 0, lockWaitMs: 0 };
  private lastLogTrim = 0;
  private trimming: Promise<void> = Promise.resolve();
  private readonly tidKeys = new Map<number, string>();
  /** Profiles touched by the write job running now (tid → pids); null outside write jobs. */
  private touching: Map<number, Set<number>> | null = null;
  /** Records skipped at read (quarantine.ts); their rows are written in the background (persisting, awaited by close). */
  private readonly quarantine = new QuarantineLog((r) => this.persistQuarantine(r));
  private readonly persisting = new Set<Promise<void>>();
  private closing = false;
  /** What the split-out parts (pg-reads.ts, pg-memberships.ts, pg-lifecycle.ts) use of this store. */
  private readonly ctx: PgStoreContext;

  constructor(opts: PostgresStoreOptions) {
    const schema = quoteIdent(opts.schema ?? "segmentd_profiles");
    const pool = createPool(opts.connectionString, { max: opts.poolSize ?? 8, types, searchPath: schema });
    this.pool = pool;
    this.ctx = {
      pool,
      tid: (c, scope, create) => this.tid(c, scope, create),
      write: (scope, fn) => this.write(scope, fn),
      requireDataset: (c, tid, scope, id) => this.requireDataset(c, tid, scope, id),
      servable: (scope, kind, datasetId, recordId, identity, pid, body) => this.servable(scope, kind, datasetId, recordId, identity, pid, body),
      touch: (tid, pids) => this.touch(tid, pids),
    };
    this.feed = new ChangeFeed(opts.changeFeedCapacity);
    this.changeLock = changeLogLock(schema);
    // CREATE ... IF NOT EXISTS is not safe against a concurrent creator (two
    // processes starting at once): serialise schema set-up on an advisory lock.
    this.ready = withAdvisoryLock(pool, "segmentd_profiles_schema", async (c) => {
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await runSchema(c, PG_SCHEMA);
      await createChangeLog(c);
    }).then(async () => {
      // Before any write (they wait for ready): recorded versions continue from the log's.
      const history = await readChangeLog(pool, this.changeLock);
      this.feed = new ChangeFeed(opts.changeFeedCapacity, Date.now(), history);
      // Other processes (hubs) may write this database: their changes are learnt from the log.
      this.logTail = new ChangeLogTail(pool, this.feed, history.current, this.tidKeys, opts.changeLogReadMs);
    });
  }

  /** Closing twice is fine (as for the embedded stores): the second call waits for the first. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.closing = true;
      await this.ready.catch(() => undefined);
      await this.logTail?.stop();
      await Promise.all([...this.persisting]);
      while (this.draining || this.pending.length > 0) await new Promise((r) => setTimeout(r, 5));
      this.trimLog(true);
      await this.trimming;
      await this.pool.end();
    })();
    return this.closed;
  }
  private closed: Promise<void> | null = null;

  // ---- health and quarantine (quarantine.ts) ------------------------------------

  async status(): Promise<ProfileStoreStatus> {
    const base = { restarts: 0, quarantined: this.quarantine.count, changeLog: { ...this.changeLogStats } };
    if (this.closing) return { ...base, up: false, error: "the profile store is closed" };
    try {
      await this.ready;
      await this.pool.query("SELECT 1");
      return { ...base, up: true, error: null };
    } catch (err) {
      return { ...base, up: false, error: `PostgreSQL unreachable: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  observe(observer: ProfileStoreObserver): () => void {
    return this.quarantine.observe(observer);
  }

  async listQuarantined(q: QuarantineQuery = {}): Promise<QuarantineEntry[]> {
    await this.ready;
    const rows = await queryRows<{ seq: number; org: string; sandbox: string; ds: string; kind: string; rid: string; ns: string; idv: string; pid: number | null; reason: string; first_seen: number; last_seen: number }>(this.pool,
      `SELECT q.seq, t.org, t.sandbox, q.ds, q.kind, q.rid, q.ns, q.idv, q.pid, q.reason, q.first_seen, q.last_seen FROM quarantine q JOIN tenants t ON t.tid = q.tid
      WHERE q.seq > $1 AND ($2::text IS NULL OR (t.org = $2 AND t.sandbox = $3)) ORDER BY q.seq LIMIT $4`,
      [q.afterSeq ?? 0, q.scope?.orgId ?? null, q.scope?.sandboxName ?? null, clampQuarantineLimit(q.limit)]);
    return rows.map((r) => ({ seq: Number(r.seq), orgId: r.org, sandboxName: r.sandbox, datasetId: r.ds, kind: r.kind as QuarantineKind, recordId: r.rid,
      identity: { namespace: r.ns, id: r.idv }, profileId: r.pid === null ? null : String(r.pid), reason: r.reason,
      quarantinedAt: new Date(Number(r.first_seen)).toISOString(), lastSeenAt: new Date(Number(r.last_seen)).toISOString() }));
  }

  /**
   * A stored body (as node-postgres parsed it) when it can be served safely; otherwise null, and
   * the record is reported (once per process) for the caller to skip.
   */
  private servable(scope: TenantScope, kind: QuarantineKind, datasetId: string, recordId: string, identity: Identity, pid: number | null, body: unknown): JsonObject | null {
    const problem = storedBodyProblem(body);
    if (problem === null) return body as JsonObject;
    this.quarantine.report({ scope, datasetId, kind, recordId, identity, profileId: pid, reason: problem, at: Date.now() });
    return null;
  }


  private persistQuarantine(r: QuarantineReport): void {
    if (this.closing) return;
    const p = (async () => {
      const tid = await this.tid(this.pool, r.scope, false);
      await this.pool.query(`INSERT INTO quarantine (tid, ds, kind, rid, ns, idv, pid, reason, first_seen, last_seen) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
        ON CONFLICT (tid, kind, ds, rid) DO UPDATE SET pid = EXCLUDED.pid, reason = EXCLUDED.reason, last_seen = EXCLUDED.last_seen`,
      [tid, r.datasetId, r.kind, r.recordId, r.identity.namespace, r.identity.id, r.profileId, r.reason, r.at]);
    })().catch((err: unknown) => console.error("segmentd: could not record a quarantined record:", err));
    this.persisting.add(p);
    void p.finally(() => this.persisting.delete(p));
  }

  // ---- plumbing -------------------------------------------------------------

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    await this.ready;
    return withTransaction(this.pool, fn);
  }

  private async tid(c: Q, scope: TenantScope, create: boolean): Promise<number> {
    await this.ready;
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    const cached = this.tids.get(key);
    if (cached !== undefined) return cached;
    let rows = await queryRows<{ tid: number }>(c, "SELECT tid FROM tenants WHERE org = $1 AND sandbox = $2", [scope.orgId, scope.sandboxName]);
    if (rows.length === 0) {
      if (!create) return NO_TENANT;
      rows = await queryRows<{ tid: number }>(c, `INSERT INTO tenants (org, sandbox) VALUES ($1, $2) ON CONFLICT (org, sandbox) DO UPDATE SET org = EXCLUDED.org RETURNING tid`,
        [scope.orgId, scope.sandboxName]);
    }
    const tid = rows[0]!.tid;
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
    recordTouched(this.feed, touched, (tid) => this.tidKeys.get(tid), version);
    this.trimLog(false);
  }

  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.feed.changesSince(sandboxNameKey(scope), since);
  }

  /** Resolves once the feed holds what the change log kept (older versions answered) and what any process had committed at the call. */
  async changesReady(): Promise<void> {
    await this.ready.catch(() => undefined);
    await this.logTail?.catchUp();
  }

  /** changesSince read from the change log table: every process's writes (a streaming worker's backfill fence); null: the log does not reach back to `since`. */
  async changedAfterInLog(scope: TenantScope, since: number): Promise<ReadonlySet<string> | null> {
    const tid = await this.tid(this.pool, scope, false);
    if (tid === NO_TENANT) return new Set();
    return changedAfterInLog(this.pool, tid, since);
  }

  /**
   * Deletes the log rows the feed no longer keeps: in the background, at most every
   * PG_TRIM_INTERVAL_MS, and at close. Rows not yet deleted (a kill) are evicted again at the next open.
   */
  private trimLog(now: boolean): void {
    if (!now && Date.now() - this.lastLogTrim < PG_TRIM_INTERVAL_MS) return;
    this.lastLogTrim = Date.now();
    const evicted = this.feed.takeEvicted();
    if (evicted.size === 0) return;
    this.trimming = this.trimming
      .then(() => trimChangeLog(this.pool, evicted))
      .catch((err: unknown) => console.error("segmentd: change log trim failed:", err));
  }

  /** Opens a write transaction for a tenant, serialized against other writers of that tenant. */
  /**
   * Queues a write. Writes are group-committed: while one group's transaction
   * runs, new writes queue up and go together into the next one, each in its own
   * savepoint (a failing write rolls back alone), under one commit. A write's
   * promise resolves only after its group committed.
   */
  private async write<T>(scope: TenantScope, fn: (c: pg.PoolClient, tid: number) => Promise<T>): Promise<T> {
    // The tenant row is committed on its own (autocommit) before the write: a write
    // that rolls back must not leave a cached tenant id that was never committed.
    const tid = await this.tid(this.pool, scope, true);
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ tid, run: fn, resolve: resolve as (v: unknown) => void, reject });
      void this.drain();
    });
  }

  private readonly pending: PendingWrite[] = [];
  private draining = false;

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.pending.length > 0) await this.commitGroup(this.pending.splice(0, MAX_GROUP));
    } finally {
      this.draining = false;
    }
  }

  private async commitGroup(jobs: PendingWrite[]): Promise<void> {
    const outcomes: WriteOutcome[] = [];
    const touched = new Map<number, Set<number>>();
    let version: number | undefined;
    try {
      await this.tx(async (c) => {
        // Locks in id order, so two processes committing groups cannot deadlock.
        for (const tid of [...new Set(jobs.map((j) => j.tid))].sort((a, b) => a - b)) {
          await lockForTransaction(c, [TENANT_LOCK_CLASS, tid]);
        }
        for (const job of jobs) {
          await c.query("SAVEPOINT write");
          this.touching = new Map();
          try {
            const value = await job.run(c, job.tid);
            await c.query("RELEASE SAVEPOINT write");
            outcomes.push({ ok: true, value });
            mergeTouched(touched, this.touching);
          } catch (error) {
            await c.query("ROLLBACK TO SAVEPOINT write");
            outcomes.push({ ok: false, error });
          } finally {
            this.touching = null;
          }
        }
        // Last in the transaction (its lock is held until COMMIT): the log commits or rolls back with the data.
        version = await appendChangeLog(c, this.changeLock, touched, this.changeLogStats);
      });
    } catch (error) {
      settleGroup(jobs, outcomes, { error });
      return;
    }
    // Only now (after COMMIT): the change feed, then the writers' promises. Every version below this group's has
    // committed (the log's lock): reading the log now makes the next version answered exact (a failed read: it lags).
    if (version !== undefined) await this.logTail?.catchUp().catch(() => undefined);
    this.recordFeed(touched, version);
    settleGroup(jobs, outcomes);
  }

  private datasetFromRow(scope: TenantScope, r: DatasetRow): Dataset {
    const d: Dataset = {
      id: r.id, name: r.name, schemaClass: r.schema_class as SchemaClass, profileEnabled: r.profile_enabled, identityFields: r.identity_fields,
      imsOrg: scope.orgId, sandboxName: scope.sandboxName, created: r.created, updated: r.updated,
    };
    if (r.description !== null) d.description = r.description;
    return d;
  }

  private async requireDataset(c: Q, tid: number, scope: TenantScope, id: string): Promise<Dataset> {
    const rows = await queryRows<DatasetRow>(c, "SELECT * FROM datasets WHERE tid = $1 AND id = $2", [tid, id]);
    if (rows.length === 0) throw new StoreError("DATASET_NOT_FOUND", `dataset ${id} does not exist in sandbox ${scope.sandboxName}`);
    return this.datasetFromRow(scope, rows[0]!);
  }

  // ---- datasets -------------------------------------------------------------

  createDataset(scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset> {
    return this.write(scope, async (c, tid) => {
      const id = input.id ?? newCatalogId();
      const ins = await c.query(`INSERT INTO datasets (tid, id, name, description, schema_class, profile_enabled, identity_fields, created, updated)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT DO NOTHING`,
      [tid, id, input.name, input.description ?? null, input.schemaClass, input.profileEnabled === true, JSON.stringify(input.identityFields ?? []), now]);
      if (ins.rowCount === 0) throw new StoreError("DATASET_EXISTS", `dataset ${id} already exists`);
      return this.requireDataset(c, tid, scope, id);
    });
  }

  async getDataset(scope: TenantScope, id: string): Promise<Dataset | null> {
    const rows = await queryRows<DatasetRow>(this.pool, "SELECT * FROM datasets WHERE tid = $1 AND id = $2", [await this.tid(this.pool, scope, false), id]);
    return rows.length === 0 ? null : this.datasetFromRow(scope, rows[0]!);
  }

  async listDatasets(scope: TenantScope, opts: { limit?: number; start?: number } = {}): Promise<Dataset[]> {
    const rows = await queryRows<DatasetRow>(this.pool, "SELECT * FROM datasets WHERE tid = $1 ORDER BY created DESC, id LIMIT $2 OFFSET $3",
      [await this.tid(this.pool, scope, false), opts.limit ?? 50, opts.start ?? 0]);
    return rows.map((r) => this.datasetFromRow(scope, r));
  }

  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null> {
    return this.write(scope, async (c, tid) => {
      if ((await queryRows(c, "SELECT 1 FROM datasets WHERE tid = $1 AND id = $2", [tid, id])).length === 0) return null;
      const counts = await lifecycle.deleteDatasetRecordsTx(this.ctx, c, tid, id);
      await c.query("DELETE FROM datasets WHERE tid = $1 AND id = $2", [tid, id]);
      return counts;
    });
  }

  // ---- ingestion ------------------------------------------------------------

  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    return this.write(scope, (c, tid) => appends.appendIn(this.ctx, c, tid, scope, datasetId, records, opts));
  }

  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
    // One transaction: the append and the changes commit together.
    return this.write(scope, async (c, tid) => {
      const append = await appends.appendIn(this.ctx, c, tid, scope, datasetId, records, opts);
      const transitions = landedAsDecided(decided.expect, append.recordPids) ? await memberships.membershipChanges(this.ctx, c, tid, decided.changes) : null;
      return { append, transitions };
    });
  }


  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
    return batches.createBatch(this.ctx, scope, datasetId, now);
  }

  getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null> {
    return batches.getBatch(this.ctx, scope, id);
  }

  listBatches(scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
    return batches.listBatches(this.ctx, scope, opts);
  }

  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
    return batches.setBatchStatus(this.ctx, scope, id, status, now);
  }

  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
    return batches.stageBatchRecords(this.ctx, scope, batchId, records, opts);
  }

  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
    return batches.completeBatch(this.ctx, scope, batchId, opts);
  }

  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
    return batches.abortBatch(this.ctx, scope, batchId, now);
  }

  // ---- identities and profiles (pg-reads.ts) --------------------------------

  findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    return reads.findProfileId(this.ctx, scope, identity);
  }

  findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
    return reads.findProfileIds(this.ctx, scope, identities);
  }

  graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    return reads.graphIdentities(this.ctx, scope, profileId);
  }

  getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    return reads.getProfile(this.ctx, scope, identity, policy);
  }

  getProfileWithFragments(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null> {
    return reads.getProfileWithFragments(this.ctx, scope, identity, policy);
  }

  getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
    return reads.getEvents(this.ctx, scope, identity, policy, query);
  }

  scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
    return reads.scanProfiles(this.ctx, scope, policy, opts);
  }

  async eventsStoredThrough(): Promise<number> {
    await this.ready;
    return reads.eventsStoredThrough(this.ctx);
  }

  countProfiles(scope: TenantScope): Promise<number> {
    return reads.countProfiles(this.ctx, scope);
  }

  listProfileIds(scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
    return reads.listProfileIds(this.ctx, scope, opts);
  }

  profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
    return reads.profileDataTimes(this.ctx, scope, profileIds);
  }

  listLakeRecords(scope: TenantScope, datasetId: string, opts: LakeQuery = {}): Promise<LakeRecord[]> {
    return reads.listLakeRecords(this.ctx, scope, datasetId, opts);
  }

  // ---- memberships (pg-memberships.ts) ----------------------------------------

  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    return memberships.applyMembershipChanges(this.ctx, scope, changes);
  }

  writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
    return memberships.writeMembershipChanges(this.ctx, scope, changes);
  }

  applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
    return memberships.applyMembershipSets(this.ctx, scope, sets, opts);
  }

  applyMembershipTargets(scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet> {
    return memberships.applyMembershipTargets(this.ctx, scope, targets, opts);
  }

  async applyPartitionBatch(fence: PartitionFence, writes: readonly PartitionBatchWrite[]): Promise<PartitionBatchResult> {
    await this.ready;
    return partitions.applyPartitionBatch(this.ctx, fence, writes);
  }

  async partitionPosition(partition: string): Promise<number> {
    await this.ready;
    return partitions.partitionPosition(this.ctx, partition);
  }

  async applyJobPartition(w: JobPartitionWrite): Promise<boolean> {
    await this.ready;
    return jobPartitions.applyJobPartition(this.ctx, w);
  }

  async jobPartitionReports(scope: TenantScope, jobId: string): Promise<JobPartitionReport[]> {
    await this.ready;
    return jobPartitions.jobPartitionReports(this.ctx, scope, jobId);
  }

  async closeJobPartitions(scope: TenantScope, jobId: string, partitions: number, at: number): Promise<number> {
    await this.ready;
    return jobPartitions.closeJobPartitions(this.ctx, scope, jobId, partitions, at);
  }

  async pruneJobPartitions(scope: TenantScope, before: number): Promise<number> {
    await this.ready;
    return jobPartitions.pruneJobPartitions(this.ctx, scope, before);
  }

  async partitionPositions(): Promise<Map<string, number>> {
    await this.ready;
    return partitions.partitionPositions(this.ctx);
  }

  getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    return memberships.getMemberships(this.ctx, scope, profileId);
  }

  listMembers(scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
    return memberships.listMembers(this.ctx, scope, definitionId, opts);
  }

  listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
    return memberships.listMemberIds(this.ctx, scope, definitionId, status);
  }

  listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
    return memberships.listMemberPids(this.ctx, scope, definitionId, status);
  }

  countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    return memberships.countMembers(this.ctx, scope, definitionId);
  }

  listTransitions(scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
    return memberships.listTransitions(this.ctx, scope, q);
  }

  // ---- the transition log as the delivery outbox (pg-transition-log.ts) -------

  transitionLogSeqs(afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: { xmax: string; xip: string[] } }> {
    return transitionLog.transitionLogSeqs(this.ctx, afterSeq, limit);
  }

  transactionsInProgress(xids: readonly string[]): Promise<string[]> {
    return transitionLog.transactionsInProgress(this.ctx, xids);
  }

  readTransitionLog(scope: TenantScope, q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
    return transitionLog.readTransitionLog(this.ctx, scope, q);
  }

  graphIdentitiesOf(scope: TenantScope, profileIds: readonly string[]): Promise<Identity[][]> {
    return transitionLog.graphIdentitiesOf(this.ctx, scope, profileIds);
  }

  profileSelections(scope: TenantScope, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]> {
    return transitionLog.profileSelections(this.ctx, scope, profileIds, policy, paths);
  }

  // ---- data lifecycle (pg-lifecycle.ts) ---------------------------------------

  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
    return lifecycle.deleteByIdentities(this.ctx, scope, identities, datasets);
  }

  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
    return lifecycle.deleteDatasetRecords(this.ctx, scope, datasetId);
  }

  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
    return lifecycle.updateFields(this.ctx, scope, update);
  }
}
