// PostgreSQL profile store (pg 8). Same tables and semantics as the embedded
// store; set-based statements (unnest arrays) keep a batch to a handful of round
// trips. Writes of one tenant are serialized with a transaction-scoped advisory
// lock, because identity stitching reads the graph and then rewrites it: two
// concurrent batches linking the same identities must not both create a graph.
import { settleGroup, type WriteOutcome } from "../group-commit.js";
import pg from "pg";
import { createPool, lockForTransaction, withAdvisoryLock, withTransaction } from "../../storage-kit/postgres.js";
import { identitiesOf, planAppend, type LoadedState } from "../append-plan.js";
import { ChangeFeed, mergeTouched, recordTouched, touchProfiles } from "../change-feed.js";
import { applyIsolated, decodeStaged, encodeStaged, STAGED_CHUNK } from "../batch-staging.js";
import { newCatalogId } from "../ids.js";
import { jsonIntegers, KIND_EXITED, KIND_REENTERED, planMembershipSets, transitionCounts, type PlannedSet } from "../membership-sets.js";
import { clampQuarantineLimit, fragmentRecordId, QuarantineLog, storedBodyProblem, type ProfileStoreObserver, type ProfileStoreStatus, type QuarantineEntry, type QuarantineKind, type QuarantineQuery, type QuarantineReport } from "../quarantine.js";
import { assembleGraph, decodeCursor, encodeCursor, addStoredStatus, lookupProfile, planMembershipChanges, toMembership, type GraphRows, type MembershipRow, type StoredStatuses } from "../scan-assembly.js";
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
  RecordError,
  SchemaClass,
  StoredEvent,
  TenantScope,
  ValidRecord,
} from "../types.js";
import { identityKey } from "../validate.js";
import { removePath, setPath } from "../xdm-object.js";
import { PG_SCHEMA } from "./schema.js";
import { sandboxNameKey } from "../../platform/tenant.js";

export interface PostgresStoreOptions {
  connectionString: string;
  /** Schema holding the tables (created if missing); default "segmentd_profiles". */
  schema?: string;
  poolSize?: number;
}

type Q = pg.PoolClient | pg.Pool;

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
interface BatchRow { id: string; ds: string; status: string; created: number; updated: number; completed: number | null; records_read: number; records_written: number; records_failed: number; files: string[]; errors: IngestBatch["errors"] }
interface EventRow { seq: number; pid: number; ds: string; eid: string; ns: string; idv: string; ts: number; body: unknown }

const NO_TENANT = -1;
/** First key of the per-tenant write locks (pg_advisory_xact_lock(7466, tid)): shared with every server version. */
const TENANT_LOCK_CLASS = 7466;
/** Rows per membership statement (unnest arrays): bounds one statement's size for million-change calls. */
const MEMBERSHIP_CHUNK = 20_000;
/** Identities per findProfileIds statement (unnest arrays): bounds one statement's size. */
const IDENTITY_CHUNK = 20_000;
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

export class PostgresProfileStore implements ProfileStore {
  readonly kind = "postgres" as const;
  private readonly pool: pg.Pool;
  private readonly tids = new Map<string, number>();
  private readonly ready: Promise<void>;
  /**
   * Change feed (changesSince), fed after each group's commit with the profiles its writes
   * touched. In memory: it sees this process's writes only.
   */
  private readonly feed = new ChangeFeed();
  private readonly tidKeys = new Map<number, string>();
  /** Profiles touched by the write job running now (tid → pids); null outside write jobs. */
  private touching: Map<number, Set<number>> | null = null;
  /** Records skipped at read (quarantine.ts); their rows are written in the background (persisting, awaited by close). */
  private readonly quarantine = new QuarantineLog((r) => this.persistQuarantine(r));
  private readonly persisting = new Set<Promise<void>>();
  private closing = false;

  constructor(opts: PostgresStoreOptions) {
    const schema = quoteIdent(opts.schema ?? "segmentd_profiles");
    const pool = createPool(opts.connectionString, { max: opts.poolSize ?? 8, types, searchPath: schema });
    this.pool = pool;
    // CREATE ... IF NOT EXISTS is not safe against a concurrent creator (two
    // processes starting at once): serialise schema set-up on an advisory lock.
    this.ready = withAdvisoryLock(pool, "segmentd_profiles_schema", async (c) => {
      await c.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await c.query(PG_SCHEMA);
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.ready.catch(() => undefined);
    await Promise.all([...this.persisting]);
    while (this.draining || this.pending.length > 0) await new Promise((r) => setTimeout(r, 5));
    await this.pool.end();
  }

  // ---- health and quarantine (quarantine.ts) ------------------------------------

  async status(): Promise<ProfileStoreStatus> {
    const base = { restarts: 0, quarantined: this.quarantine.count };
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
    const rows = await this.q<{ seq: number; org: string; sandbox: string; ds: string; kind: string; rid: string; ns: string; idv: string; pid: number | null; reason: string; first_seen: number; last_seen: number }>(this.pool,
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

  private async q<R extends pg.QueryResultRow>(c: Q, sql: string, params: unknown[] = []): Promise<R[]> {
    return (await c.query<R>(sql, params)).rows;
  }

  private async tid(c: Q, scope: TenantScope, create: boolean): Promise<number> {
    await this.ready;
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    const cached = this.tids.get(key);
    if (cached !== undefined) return cached;
    let rows = await this.q<{ tid: number }>(c, "SELECT tid FROM tenants WHERE org = $1 AND sandbox = $2", [scope.orgId, scope.sandboxName]);
    if (rows.length === 0) {
      if (!create) return NO_TENANT;
      rows = await this.q<{ tid: number }>(c, `INSERT INTO tenants (org, sandbox) VALUES ($1, $2) ON CONFLICT (org, sandbox) DO UPDATE SET org = EXCLUDED.org RETURNING tid`,
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

  private recordFeed(touched: ReadonlyMap<number, ReadonlySet<number>>): void {
    recordTouched(this.feed, touched, (tid) => this.tidKeys.get(tid));
  }

  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.feed.changesSince(sandboxNameKey(scope), since);
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
      });
    } catch (error) {
      settleGroup(jobs, outcomes, { error });
      return;
    }
    // Only now (after COMMIT): the change feed, then the writers' promises.
    this.recordFeed(touched);
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
    const rows = await this.q<DatasetRow>(c, "SELECT * FROM datasets WHERE tid = $1 AND id = $2", [tid, id]);
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
    const rows = await this.q<DatasetRow>(this.pool, "SELECT * FROM datasets WHERE tid = $1 AND id = $2", [await this.tid(this.pool, scope, false), id]);
    return rows.length === 0 ? null : this.datasetFromRow(scope, rows[0]!);
  }

  async listDatasets(scope: TenantScope, opts: { limit?: number; start?: number } = {}): Promise<Dataset[]> {
    const rows = await this.q<DatasetRow>(this.pool, "SELECT * FROM datasets WHERE tid = $1 ORDER BY created DESC, id LIMIT $2 OFFSET $3",
      [await this.tid(this.pool, scope, false), opts.limit ?? 50, opts.start ?? 0]);
    return rows.map((r) => this.datasetFromRow(scope, r));
  }

  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null> {
    return this.write(scope, async (c, tid) => {
      if ((await this.q(c, "SELECT 1 FROM datasets WHERE tid = $1 AND id = $2", [tid, id])).length === 0) return null;
      const counts = await this.deleteDatasetRecordsTx(c, tid, id);
      await c.query("DELETE FROM datasets WHERE tid = $1 AND id = $2", [tid, id]);
      return counts;
    });
  }

  // ---- ingestion ------------------------------------------------------------

  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    return this.write(scope, (c, tid) => this.appendIn(c, tid, scope, datasetId, records, opts));
  }

  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
    // One transaction: the append and the changes commit together.
    return this.write(scope, async (c, tid) => {
      const append = await this.appendIn(c, tid, scope, datasetId, records, opts);
      const transitions = landedAsDecided(decided.expect, append.recordPids) ? await this.membershipChanges(c, tid, decided.changes) : null;
      return { append, transitions };
    });
  }

  /** The writes of append (in the caller's transaction). */
  private async appendIn(c: pg.PoolClient, tid: number, scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    const dataset = await this.requireDataset(c, tid, scope, datasetId);
    const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
    for (const r of records) {
      if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${datasetId} holds ${dataset.schemaClass}`);
    }
    if (records.length > 0) {
      if (!dataset.profileEnabled) await this.appendLake(c, tid, datasetId, records, opts, result);
      else await this.appendProfile(c, scope, tid, datasetId, records, opts, result);
    }
    if (opts.batch !== undefined) {
      await this.accountBatch(c, tid, scope, opts.batch, result.fragments + result.events + result.lakeOnly + result.duplicates, opts.ingestedAt);
    }
    return result;
  }

  private async appendLake(c: pg.PoolClient, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): Promise<void> {
    const res = await c.query(`INSERT INTO lake_records (tid, ds, eid, ns, idv, ts, body)
      SELECT $1, $2, u.eid, u.ns, u.idv, u.ts, u.body::jsonb FROM unnest($3::text[], $4::text[], $5::text[], $6::int8[], $7::text[]) AS u(eid, ns, idv, ts, body)
      ON CONFLICT DO NOTHING`, [tid, ds, records.map((r) => r.eventId), records.map((r) => r.primary.namespace), records.map((r) => r.primary.id),
      records.map((r) => r.timestamp ?? opts.ingestedAt), records.map((r) => r.json)]);
    result.lakeOnly += res.rowCount ?? 0;
    result.duplicates += records.length - (res.rowCount ?? 0);
  }

  private async appendProfile(c: pg.PoolClient, scope: TenantScope, tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): Promise<void> {
    const ids = identitiesOf(records);
    const loaded: LoadedState = { graphs: new Map(), sizes: new Map(), fragments: new Map() };
    const graphRows = await this.q<{ ns: string; idv: string; pid: number; size: number }>(c, `SELECT i.ns, i.idv, i.pid, p.size FROM identities i JOIN profiles p ON p.pid = i.pid
      WHERE i.tid = $1 AND (i.ns, i.idv) IN (SELECT * FROM unnest($2::text[], $3::text[]))`, [tid, ids.map((i) => i.namespace), ids.map((i) => i.id)]);
    for (const r of graphRows) {
      loaded.graphs.set(identityKey({ namespace: r.ns, id: r.idv }), r.pid);
      loaded.sizes.set(r.pid, r.size);
    }
    // A fragment is keyed by a primary identity that is always stored in a graph: unknown identities have none.
    const prim = records.filter((r) => r.kind === "profile" && loaded.graphs.has(identityKey(r.primary))).map((r) => r.primary);
    if (prim.length > 0) {
      const frags = await this.q<{ ns: string; idv: string; ts: number; body: JsonObject }>(c, `SELECT ns, idv, ts, body FROM fragments
        WHERE tid = $1 AND ds = $2 AND (ns, idv) IN (SELECT * FROM unnest($3::text[], $4::text[]))`, [tid, ds, prim.map((i) => i.namespace), prim.map((i) => i.id)]);
      for (const f of frags) {
        const primary = { namespace: f.ns, id: f.idv };
        const k = identityKey(primary);
        // A stored fragment that cannot be served is not merged into: the new record replaces it.
        const body = this.servable(scope, "profile", ds, fragmentRecordId(primary), primary, loaded.graphs.get(k) ?? null, f.body);
        if (body !== null) loaded.fragments.set(k, { timestamp: f.ts, body });
      }
    }
    const plan = planAppend(records, loaded, opts.maxIdentitiesPerGraph, opts.ingestedAt);
    const n = plan.outcome.created.length;
    const allocated = n === 0 ? [] : (await this.q<{ pid: number }>(c, "SELECT nextval('profiles_pid_seq') AS pid FROM generate_series(1, $1)", [n])).map((r) => r.pid).sort((a, b) => a - b);
    const w = plan.finalize(allocated);
    if (w.createdIds.length > 0) {
      await c.query("INSERT INTO profiles (pid, tid, size, created) SELECT u.pid, $1, u.size, $2 FROM unnest($3::int8[], $4::int[]) AS u(pid, size)",
        [tid, opts.ingestedAt, w.createdIds, w.createdIds.map((g) => w.sizes.get(g) ?? 0)]);
    }
    for (const m of w.merges) await this.moveGraph(c, tid, m.from, m.into);
    const existing = [...w.sizes.keys()].filter((g) => !w.createdIds.includes(g));
    if (existing.length > 0) {
      await c.query("UPDATE profiles p SET size = u.size FROM unnest($1::int8[], $2::int[]) AS u(pid, size) WHERE p.pid = u.pid",
        [existing, existing.map((g) => w.sizes.get(g)!)]);
    }
    if (w.assigned.length > 0) {
      await c.query("INSERT INTO identities (tid, ns, idv, pid) SELECT $1, u.ns, u.idv, u.pid FROM unnest($2::text[], $3::text[], $4::int8[]) AS u(ns, idv, pid)",
        [tid, w.assigned.map((a) => a.identity.namespace), w.assigned.map((a) => a.identity.id), w.assigned.map((a) => a.graph)]);
    }
    if (w.fragments.length > 0) {
      await c.query(`INSERT INTO fragments (tid, ds, ns, idv, pid, ts, ingested, body)
        SELECT $1, $2, u.ns, u.idv, u.pid, u.ts, $3, u.body::jsonb FROM unnest($4::text[], $5::text[], $6::int8[], $7::int8[], $8::text[]) AS u(ns, idv, pid, ts, body)
        ON CONFLICT (tid, ds, ns, idv) DO UPDATE SET pid = EXCLUDED.pid, ts = EXCLUDED.ts, ingested = EXCLUDED.ingested, body = EXCLUDED.body`,
      [tid, ds, opts.ingestedAt, w.fragments.map((f) => f.primary.namespace), w.fragments.map((f) => f.primary.id), w.fragments.map((f) => f.graph),
        w.fragments.map((f) => f.timestamp), w.fragments.map((f) => JSON.stringify(f.body))]);
      result.fragments += records.filter((r) => r.kind === "profile").length;
    }
    if (w.events.length > 0) {
      const res = await c.query(`INSERT INTO events (tid, ds, eid, ns, idv, pid, ts, body)
        SELECT $1, $2, u.eid, u.ns, u.idv, u.pid, u.ts, u.body::jsonb FROM unnest($3::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::text[]) WITH ORDINALITY AS u(eid, ns, idv, pid, ts, body, ord)
        ORDER BY u.ord ON CONFLICT DO NOTHING`,
      [tid, ds, w.events.map((e) => e.eventId), w.events.map((e) => e.primary.namespace), w.events.map((e) => e.primary.id), w.events.map((e) => e.graph),
        w.events.map((e) => e.timestamp), w.events.map((e) => e.json)]);
      result.events += res.rowCount ?? 0;
      result.duplicates += w.events.length - (res.rowCount ?? 0);
    }
    result.refusedLinks.push(...w.refused);
    result.recordPids = w.recordGraphs;
    result.profileIds.push(...w.touchedGraphs.map(String));
    this.touch(tid, w.touchedGraphs);
  }

  private async moveGraph(c: pg.PoolClient, tid: number, from: number, into: number): Promise<void> {
    this.touch(tid, [from, into]);
    await c.query("UPDATE identities SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
    await c.query("UPDATE fragments SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
    await c.query("UPDATE events SET pid = $1 WHERE tid = $2 AND pid = $3", [into, tid, from]);
    // The surviving graph's own membership wins where both have one.
    await c.query(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT tid, $1, def, status, lqt FROM memberships WHERE tid = $2 AND pid = $3
      ON CONFLICT DO NOTHING`, [into, tid, from]);
    await c.query("DELETE FROM memberships WHERE tid = $1 AND pid = $2", [tid, from]);
    await c.query("DELETE FROM profiles WHERE pid = $1", [from]);
  }

  private async accountBatch(c: pg.PoolClient, tid: number, scope: TenantScope, b: NonNullable<AppendOptions["batch"]>, written: number, now: number): Promise<void> {
    const rows = await this.q<BatchRow>(c, "SELECT * FROM batches WHERE tid = $1 AND id = $2 FOR UPDATE", [tid, b.id]);
    const row = rows[0];
    if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox ${scope.sandboxName}`);
    if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${b.id} is ${row.status}; files can only be added while it is loading`);
    const errors = row.errors;
    for (const e of b.failed) {
      if (errors.length >= MAX_BATCH_ERRORS) break;
      errors.push(b.file === undefined ? e : { ...e, file: b.file });
    }
    const files = row.files;
    if (b.file !== undefined && !files.includes(b.file)) files.push(b.file);
    await c.query(`UPDATE batches SET records_read = records_read + $1, records_written = records_written + $2, records_failed = records_failed + $3,
      errors = $4, files = $5, updated = $6 WHERE tid = $7 AND id = $8`,
    [b.read, written, new Set(b.failed.map((e) => e.index)).size, JSON.stringify(errors), JSON.stringify(files), now, tid, b.id]);
  }

  private batchFromRow(r: BatchRow): IngestBatch {
    return {
      id: r.id, datasetId: r.ds, status: r.status as IngestBatchStatus, created: r.created, updated: r.updated, completed: r.completed,
      recordsRead: r.records_read, recordsWritten: r.records_written, recordsFailed: r.records_failed, files: r.files, errors: r.errors,
    };
  }

  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
    return this.write(scope, async (c, tid) => {
      await this.requireDataset(c, tid, scope, datasetId);
      const rows = await this.q<BatchRow>(c, "INSERT INTO batches (tid, id, ds, status, created, updated) VALUES ($1, $2, $3, 'loading', $4, $4) RETURNING *",
        [tid, newCatalogId(), datasetId, now]);
      return this.batchFromRow(rows[0]!);
    });
  }

  async getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null> {
    const rows = await this.q<BatchRow>(this.pool, "SELECT * FROM batches WHERE tid = $1 AND id = $2", [await this.tid(this.pool, scope, false), id]);
    return rows.length === 0 ? null : this.batchFromRow(rows[0]!);
  }

  async listBatches(scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
    const tid = await this.tid(this.pool, scope, false);
    const rows = await this.q<BatchRow>(this.pool, "SELECT * FROM batches WHERE tid = $1 AND ($2::text IS NULL OR ds = $2) ORDER BY created DESC, id LIMIT $3",
      [tid, opts.datasetId ?? null, opts.limit ?? 100]);
    return rows.map((r) => this.batchFromRow(r));
  }

  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
    return this.write(scope, async (c, tid) => {
      const done = status === "success" || status === "failed" || status === "aborted";
      const rows = await this.q<BatchRow>(c, "UPDATE batches SET status = $1, updated = $2, completed = CASE WHEN $3 THEN $2 ELSE completed END WHERE tid = $4 AND id = $5 RETURNING *",
        [status, now, done, tid, id]);
      if (rows.length === 0) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
      return this.batchFromRow(rows[0]!);
    });
  }

  /** The batch row, locked, which must exist and be loading (inside a write). */
  private async openBatch(c: pg.PoolClient, tid: number, scope: TenantScope, id: string, action: string): Promise<BatchRow> {
    const row = (await this.q<BatchRow>(c, "SELECT * FROM batches WHERE tid = $1 AND id = $2 FOR UPDATE", [tid, id]))[0];
    if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
    if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${id} is ${row.status}; only a loading batch can be ${action}`);
    return row;
  }

  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
    return this.write(scope, async (c, tid) => {
      const row = await this.openBatch(c, tid, scope, batchId, "added to");
      const dataset = await this.requireDataset(c, tid, scope, row.ds);
      for (const r of records) {
        if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${row.ds} holds ${dataset.schemaClass}`);
      }
      for (let i = 0; i < records.length; i += STAGED_CHUNK) {
        const part = records.slice(i, i + STAGED_CHUNK).map(encodeStaged);
        await c.query(`INSERT INTO batch_records (tid, batch, meta, body)
          SELECT $1, $2, u.meta, u.body FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(meta, body, ord) ORDER BY u.ord`,
        [tid, batchId, part.map((e) => e.meta), part.map((e) => e.body)]);
      }
      await this.accountBatch(c, tid, scope, { id: batchId, read: opts.read, failed: opts.failed, ...(opts.file === undefined ? {} : { file: opts.file }) }, 0, opts.now);
      return { staged: records.length };
    });
  }

  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
    return this.write(scope, async (c, tid) => {
      const row = await this.openBatch(c, tid, scope, batchId, "completed");
      const dataset = await this.requireDataset(c, tid, scope, row.ds);
      const appendOpts: AppendOptions = { ingestedAt: opts.ingestedAt, maxIdentitiesPerGraph: opts.maxIdentitiesPerGraph };
      const refusedLinks: CompletedBatch["refusedLinks"] = [];
      let written = 0;
      let after = 0;
      const refused: RecordError[] = [];
      const savepoints = { begin: () => c.query("SAVEPOINT staged"), release: () => c.query("RELEASE SAVEPOINT staged"), rollback: () => c.query("ROLLBACK TO SAVEPOINT staged") };
      // One transaction for the whole batch, applied chunk by chunk; a record the database
      // refuses is rolled back alone and reported (applyIsolated), the others are applied.
      for (;;) {
        const rows = await this.q<{ seq: number; meta: string; body: string }>(c,
          "SELECT seq, meta, body FROM batch_records WHERE tid = $1 AND batch = $2 AND seq > $3 ORDER BY seq LIMIT $4", [tid, batchId, after, STAGED_CHUNK]);
        if (rows.length === 0) break;
        after = rows[rows.length - 1]!.seq;
        const applied = await applyIsolated(rows, savepoints, async (part) => {
          const records = part.map((r) => decodeStaged(r.meta, r.body, dataset.schemaClass));
          const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
          if (!dataset.profileEnabled) await this.appendLake(c, tid, row.ds, records, appendOpts, result);
          else await this.appendProfile(c, scope, tid, row.ds, records, appendOpts, result);
          return result;
        });
        for (const result of applied.results) {
          written += result.fragments + result.events + result.lakeOnly + result.duplicates;
          for (const l of result.refusedLinks) if (refusedLinks.length < MAX_BATCH_ERRORS) refusedLinks.push(l);
        }
        refused.push(...applied.refused);
      }
      await c.query("DELETE FROM batch_records WHERE tid = $1 AND batch = $2", [tid, batchId]);
      const errors = row.errors;
      for (const e of refused) if (errors.length < MAX_BATCH_ERRORS) errors.push(e);
      const failed = row.records_failed + new Set(refused.map((e) => e.index)).size;
      // Partial ingestion: the batch succeeds when any record was written or none failed.
      const status: IngestBatchStatus = row.records_written + written > 0 || failed === 0 ? "success" : "failed";
      const done = await this.q<BatchRow>(c, `UPDATE batches SET status = $1, records_written = records_written + $2, records_failed = $6, errors = $7,
        updated = $3, completed = $3 WHERE tid = $4 AND id = $5 RETURNING *`, [status, written, opts.ingestedAt, tid, batchId, failed, JSON.stringify(errors)]);
      return { batch: this.batchFromRow(done[0]!), refusedLinks };
    });
  }

  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
    return this.write(scope, async (c, tid) => {
      await this.openBatch(c, tid, scope, batchId, "aborted");
      await c.query("DELETE FROM batch_records WHERE tid = $1 AND batch = $2", [tid, batchId]);
      const done = await this.q<BatchRow>(c, "UPDATE batches SET status = 'aborted', updated = $1, completed = $1 WHERE tid = $2 AND id = $3 RETURNING *", [now, tid, batchId]);
      return this.batchFromRow(done[0]!);
    });
  }

  // ---- identities and profiles ----------------------------------------------

  private async pidOf(c: Q, tid: number, identity: Identity): Promise<number | null> {
    const rows = await this.q<{ pid: number }>(c, "SELECT pid FROM identities WHERE tid = $1 AND ns = $2 AND idv = $3", [tid, identity.namespace, identity.id]);
    return rows[0]?.pid ?? null;
  }

  async findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    const pid = await this.pidOf(this.pool, await this.tid(this.pool, scope, false), identity);
    return pid === null ? null : String(pid);
  }

  /** One statement per IDENTITY_CHUNK identities (unnest arrays, joined on the identities' primary key). */
  async findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
    const tid = await this.tid(this.pool, scope, false);
    const out = new Array<string | null>(identities.length).fill(null);
    if (tid === NO_TENANT) return out;
    for (let start = 0; start < identities.length; start += IDENTITY_CHUNK) {
      const part = identities.slice(start, start + IDENTITY_CHUNK);
      const rows = await this.q<{ k: number; pid: number }>(this.pool, `SELECT u.k, i.pid FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(ns, idv, k)
        JOIN identities i ON i.tid = $1 AND i.ns = u.ns AND i.idv = u.idv`, [tid, part.map((i) => i.namespace), part.map((i) => i.id)]);
      for (const r of rows) out[start + r.k - 1] = String(r.pid);
    }
    return out;
  }

  async graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    const rows = await this.q<{ ns: string; idv: string }>(this.pool, "SELECT ns, idv FROM identities WHERE tid = $1 AND pid = $2 ORDER BY ns COLLATE \"C\", idv COLLATE \"C\"",
      [await this.tid(this.pool, scope, false), Number(profileId)]);
    return rows.map((r) => ({ namespace: r.ns, id: r.idv }));
  }

  private async readGraphs(scope: TenantScope, tid: number, lo: number, hi: number, withEvents: boolean, eventsSince: number | undefined): Promise<Map<number, GraphRows>> {
    const graphs = new Map<number, GraphRows>();
    const g = (pid: number): GraphRows => {
      let rows = graphs.get(pid);
      if (rows === undefined) {
        rows = { identities: [], fragments: [], events: [], memberships: [] };
        graphs.set(pid, rows);
      }
      return rows;
    };
    const [ids, frags, evs, mems] = await Promise.all([
      this.q<{ pid: number; ns: string; idv: string }>(this.pool, "SELECT pid, ns, idv FROM identities WHERE tid = $1 AND pid BETWEEN $2 AND $3 ORDER BY pid, ns COLLATE \"C\", idv COLLATE \"C\"", [tid, lo, hi]),
      this.q<{ pid: number; ds: string; ns: string; idv: string; ts: number; body: JsonObject }>(this.pool, "SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = $1 AND pid BETWEEN $2 AND $3", [tid, lo, hi]),
      withEvents
        ? this.q<EventRow>(this.pool, "SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = $1 AND pid BETWEEN $2 AND $3 AND ts >= $4 ORDER BY pid, ts, seq",
          [tid, lo, hi, eventsSince ?? Number.MIN_SAFE_INTEGER])
        : Promise.resolve([] as EventRow[]),
      this.q<MembershipRow>(this.pool, "SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND pid BETWEEN $2 AND $3 ORDER BY pid, def COLLATE \"C\"", [tid, lo, hi]),
    ]);
    for (const r of ids) g(r.pid).identities.push({ namespace: r.ns, id: r.idv });
    for (const r of frags) {
      const primary = { namespace: r.ns, id: r.idv };
      const body = this.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, r.pid, r.body);
      if (body !== null) g(r.pid).fragments.push({ datasetId: r.ds, primary, timestamp: r.ts, body });
    }
    for (const e of this.eventsFrom(scope, evs)) g(e.pid).events.push(e.event);
    for (const r of mems) g(r.pid).memberships.push(toMembership(r));
    return graphs;
  }

  async getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    const tid = await this.tid(this.pool, scope, false);
    const pid = await this.pidOf(this.pool, tid, identity);
    if (pid === null) return null;
    const rows = (await this.readGraphs(scope, tid, pid, pid, false, undefined)).get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] };
    if (policy.identityGraph.type === "none" && !rows.fragments.some((f) => identityKey(f.primary) === identityKey(identity))) {
      const ev = await this.q<EventRow>(this.pool, "SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 LIMIT 1",
        [tid, pid, identity.namespace, identity.id]);
      rows.events = this.eventsFrom(scope, ev).map((e) => e.event);
    }
    return lookupProfile(pid, rows, policy, identity);
  }

  async getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
    const tid = await this.tid(this.pool, scope, false);
    const pid = await this.pidOf(this.pool, tid, identity);
    if (pid === null) return { events: [], next: null };
    const limit = query.limit ?? 1000;
    const desc = query.order === "desc";
    const params: unknown[] = [tid, pid, query.startTime ?? Number.MIN_SAFE_INTEGER, query.endTime ?? Number.MAX_SAFE_INTEGER];
    const where = ["tid = $1", "pid = $2", "ts >= $3", "ts < $4"];
    if (policy.identityGraph.type === "none") {
      params.push(identity.namespace, identity.id);
      where.push(`ns = $${params.length - 1}`, `idv = $${params.length}`);
    }
    if (query.cursor !== undefined) {
      const cur = decodeCursor(query.cursor);
      params.push(cur.ts, cur.seq);
      const a = params.length - 1, b = params.length;
      where.push(desc ? `(ts < $${a} OR (ts = $${a} AND seq < $${b}))` : `(ts > $${a} OR (ts = $${a} AND seq > $${b}))`);
    }
    params.push(limit + 1);
    const dir = desc ? "DESC" : "ASC";
    const rows = await this.q<EventRow>(this.pool, `SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE ${where.join(" AND ")} ORDER BY ts ${dir}, seq ${dir} LIMIT $${params.length}`, params);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { events: this.eventsFrom(scope, page).map((e) => e.event), next: rows.length > limit && last !== undefined ? encodeCursor(last.ts, last.seq) : null };
  }

  async *scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
    const tid = await this.tid(this.pool, scope, false);
    const chunk = opts.chunkSize ?? 1000;
    let after = 0;
    for (;;) {
      const pids = (await this.q<{ pid: number }>(this.pool, "SELECT pid FROM profiles WHERE tid = $1 AND pid > $2 ORDER BY pid LIMIT $3", [tid, after, chunk])).map((r) => r.pid);
      if (pids.length === 0) return;
      const lo = pids[0]!, hi = pids[pids.length - 1]!;
      const graphs = await this.readGraphs(scope, tid, lo, hi, opts.events !== false, opts.eventsSince);
      const out: ScannedProfile[] = [];
      for (const pid of pids) out.push(...assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
      after = hi;
      yield out;
    }
  }

  async countProfiles(scope: TenantScope): Promise<number> {
    const rows = await this.q<{ n: number }>(this.pool, "SELECT count(*)::int8 AS n FROM profiles WHERE tid = $1", [await this.tid(this.pool, scope, false)]);
    return rows[0]!.n;
  }

  async listProfileIds(scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
    const rows = await this.q<{ pid: string }>(this.pool, "SELECT pid::text AS pid FROM profiles WHERE tid = $1 AND pid > $2 ORDER BY pid LIMIT $3",
      [await this.tid(this.pool, scope, false), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000]);
    return rows.map((r) => r.pid);
  }

  /** One statement per IDENTITY_CHUNK ids: per id, the max of fragments (tid, pid) and of events (tid, pid, ts). */
  async profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
    const tid = await this.tid(this.pool, scope, false);
    const out: ProfileDataTimes[] = profileIds.map(() => ({ lastFragmentIngestedAt: null, lastEventAt: null }));
    for (let start = 0; start < profileIds.length; start += IDENTITY_CHUNK) {
      const part = profileIds.slice(start, start + IDENTITY_CHUNK).map(Number);
      const rows = await this.q<{ k: number; f: number | null; e: number | null }>(this.pool, `SELECT u.k,
          (SELECT max(f.ingested) FROM fragments f WHERE f.tid = $1 AND f.pid = u.pid) AS f,
          (SELECT max(e.ts) FROM events e WHERE e.tid = $1 AND e.pid = u.pid) AS e
        FROM unnest($2::int8[]) WITH ORDINALITY AS u(pid, k)`, [tid, part]);
      for (const r of rows) out[start + r.k - 1] = { lastFragmentIngestedAt: r.f, lastEventAt: r.e };
    }
    return out;
  }

  async listLakeRecords(scope: TenantScope, datasetId: string, opts: { afterSeq?: number; limit?: number } = {}): Promise<LakeRecord[]> {
    const rows = await this.q<{ seq: number; eid: string | null; ns: string; idv: string; body: unknown }>(this.pool, "SELECT seq, eid, ns, idv, body FROM lake_records WHERE tid = $1 AND ds = $2 AND seq > $3 ORDER BY seq LIMIT $4",
      [await this.tid(this.pool, scope, false), datasetId, opts.afterSeq ?? 0, opts.limit ?? 1000]);
    const out: LakeRecord[] = [];
    for (const r of rows) {
      const body = this.servable(scope, "lake", datasetId, r.eid ?? `seq:${r.seq}`, { namespace: r.ns, id: r.idv }, null, r.body);
      if (body !== null) out.push({ seq: r.seq, body });
    }
    return out;
  }

  // ---- memberships ----------------------------------------------------------

  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    return this.write(scope, (c, tid) => this.membershipChanges(c, tid, changes));
  }

  async writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
    return (await this.write(scope, (c, tid) => this.membershipChanges(c, tid, changes))).length;
  }

  /** The writes of applyMembershipChanges (in the caller's write job); the transitions recorded. */
  private async membershipChanges(c: pg.PoolClient, tid: number, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    if (changes.length === 0) return [];
    // Previous statuses are read only for changes without the caller's `from`, in chunks.
    const stored: StoredStatuses = new Map();
    const unknown = changes.filter((ch) => ch.from === undefined);
    for (let i = 0; i < unknown.length; i += MEMBERSHIP_CHUNK) {
      const part = unknown.slice(i, i + MEMBERSHIP_CHUNK);
      const rows = await this.q<{ pid: number; def: string; status: MembershipStatus }>(c, `SELECT m.pid, m.def, m.status FROM memberships m
        JOIN unnest($2::int8[], $3::text[]) AS u(pid, def) ON m.pid = u.pid AND m.def = u.def WHERE m.tid = $1`,
      [tid, part.map((ch) => Number(ch.profileId)), part.map((ch) => ch.definitionId)]);
      for (const r of rows) addStoredStatus(stored, r.pid, r.def, r.status);
    }
    const plan = planMembershipChanges(changes, stored);
    const t = plan.transitions;
    for (let i = 0; i < plan.upserts.length; i += MEMBERSHIP_CHUNK) {
      const part = plan.upserts.slice(i, i + MEMBERSHIP_CHUNK);
      await c.query(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT $1, u.pid, u.def, u.status, u.lqt FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[]) AS u(pid, def, status, lqt)
        ON CONFLICT (tid, pid, def) DO UPDATE SET status = EXCLUDED.status, lqt = EXCLUDED.lqt`,
      [tid, part.map((k) => plan.pids[k]!), part.map((k) => t[k]!.definitionId), part.map((k) => t[k]!.to), part.map((k) => t[k]!.at)]);
    }
    for (let i = 0; i < t.length; i += MEMBERSHIP_CHUNK) {
      const end = Math.min(t.length, i + MEMBERSHIP_CHUNK);
      const part = t.slice(i, end);
      await c.query(`INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
        SELECT $1, u.pid, u.def, u.f, u.t, u.s, u.at FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[]) WITH ORDINALITY AS u(pid, def, f, t, s, at, ord) ORDER BY u.ord`,
      [tid, plan.pids.slice(i, end), part.map((x) => x.definitionId), part.map((x) => x.from), part.map((x) => x.to), part.map((x) => x.source), plan.ats.slice(i, end)]);
    }
    return t;
  }

  /**
   * Set by set, in chunks of MEMBERSHIP_CHUNK profiles: one statement upserts the memberships and
   * records the transitions (in the set's order) from one int8 array of `pid * 4 + kind` codes,
   * sent as array text (no per-row parameters).
   */
  async applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
    // async: an invalid set rejects (planMembershipSets throws) before anything is queued.
    const planned: PlannedSet[] = planMembershipSets(sets, opts);
    const counts = transitionCounts(planned);
    if (counts.realized + counts.exited === 0) return counts;
    const lqt = new Date(opts.at).toISOString();
    return this.write(scope, async (c, tid) => {
      for (const p of planned) {
        for (let i = 0; i < p.codes.length; i += MEMBERSHIP_CHUNK) {
          const json = jsonIntegers(p.codes, i, Math.min(p.codes.length, i + MEMBERSHIP_CHUNK)).toString("latin1");
          await c.query(`WITH u AS (SELECT code / 4 AS pid, code % 4 AS kind, ord FROM unnest($2::int8[]) WITH ORDINALITY AS x(code, ord)),
            m AS (INSERT INTO memberships (tid, pid, def, status, lqt) SELECT $1, u.pid, $3, CASE u.kind WHEN ${KIND_EXITED} THEN 'exited' ELSE 'realized' END, $4 FROM u
              ON CONFLICT (tid, pid, def) DO UPDATE SET status = EXCLUDED.status, lqt = EXCLUDED.lqt)
            INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
              SELECT $1, u.pid, $3, CASE u.kind WHEN ${KIND_REENTERED} THEN 'exited' WHEN ${KIND_EXITED} THEN 'realized' END,
                CASE u.kind WHEN ${KIND_EXITED} THEN 'exited' ELSE 'realized' END, $5, $6 FROM u ORDER BY u.ord`,
          [tid, `{${json.slice(1, -1)}}`, p.definitionId, lqt, opts.source, opts.at]);
        }
      }
      return counts;
    });
  }

  async getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    const rows = await this.q<MembershipRow>(this.pool, "SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND pid = $2 ORDER BY def COLLATE \"C\"",
      [await this.tid(this.pool, scope, false), Number(profileId)]);
    return rows.map(toMembership);
  }

  async listMembers(scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
    const rows = await this.q<MembershipRow>(this.pool, "SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND def = $2 AND status = $3 AND pid > $4 ORDER BY pid LIMIT $5",
      [await this.tid(this.pool, scope, false), definitionId, opts.status ?? "realized", Number(opts.afterProfileId ?? 0), opts.limit ?? 1000]);
    return rows.map(toMembership);
  }

  async listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
    const rows = await this.q<{ pid: string }>(this.pool, // ORDER BY m.pid (the int8 column), not the text output column of the same name.
      "SELECT m.pid::text AS pid FROM memberships m WHERE m.tid = $1 AND m.def = $2 AND m.status = $3 ORDER BY m.pid",
      [await this.tid(this.pool, scope, false), definitionId, status]);
    return rows.map((r) => r.pid);
  }

  async listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
    const rows = await this.q<{ pid: string }>(this.pool,
      "SELECT m.pid FROM memberships m WHERE m.tid = $1 AND m.def = $2 AND m.status = $3 ORDER BY m.pid",
      [await this.tid(this.pool, scope, false), definitionId, status]);
    // int8 arrives as text; profile ids stay far below 2^53.
    return Float64Array.from(rows, (r) => Number(r.pid));
  }

  async countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    const rows = await this.q<{ status: string; n: number }>(this.pool, "SELECT status, count(*)::int8 AS n FROM memberships WHERE tid = $1 AND def = $2 GROUP BY status",
      [await this.tid(this.pool, scope, false), definitionId]);
    return { realized: rows.find((r) => r.status === "realized")?.n ?? 0, exited: rows.find((r) => r.status === "exited")?.n ?? 0 };
  }

  async listTransitions(scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
    const rows = await this.q<{ pid: number; def: string; from_status: MembershipStatus | null; to_status: MembershipStatus; source: MembershipChange["source"]; at: number }>(this.pool,
      `SELECT pid, def, from_status, to_status, source, at FROM transitions WHERE tid = $1 AND at >= $2 AND at < $3
        AND ($4::text IS NULL OR def = $4) AND ($5::text[] IS NULL OR source = ANY($5)) ORDER BY at, seq LIMIT $6`,
      [await this.tid(this.pool, scope, false), q.since ?? Number.MIN_SAFE_INTEGER, q.until ?? Number.MAX_SAFE_INTEGER, q.definitionId ?? null,
        q.sources !== undefined && q.sources.length > 0 ? q.sources : null, q.limit ?? 10_000]);
    return rows.map((r) => ({ profileId: String(r.pid), definitionId: r.def, from: r.from_status, to: r.to_status, source: r.source, at: new Date(r.at).toISOString() }));
  }

  // ---- data lifecycle -------------------------------------------------------

  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
    return this.write(scope, async (c, tid) => {
      const counts: DeleteCounts = { fragments: 0, events: 0, lakeRecords: 0, identities: 0, profileIds: [] };
      const touched = new Set<number>();
      const all = datasets === "ALL";
      const dsArr = all ? null : [...datasets];
      for (const i of identities) {
        const pid = await this.pidOf(c, tid, i);
        if (pid !== null) {
          const f = (await c.query("DELETE FROM fragments WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 AND ($5::text[] IS NULL OR ds = ANY($5))", [tid, pid, i.namespace, i.id, dsArr])).rowCount ?? 0;
          const e = (await c.query("DELETE FROM events WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 AND ($5::text[] IS NULL OR ds = ANY($5))", [tid, pid, i.namespace, i.id, dsArr])).rowCount ?? 0;
          counts.fragments += f;
          counts.events += e;
          if (f + e > 0) touched.add(pid);
          if (all) {
            await c.query("DELETE FROM identities WHERE tid = $1 AND ns = $2 AND idv = $3", [tid, i.namespace, i.id]);
            counts.identities++;
            touched.add(pid);
            // An emptied graph disappears; its memberships stay so the engines can record the exits.
            const left = await this.q<{ size: number }>(c, "UPDATE profiles SET size = size - 1 WHERE pid = $1 RETURNING size", [pid]);
            if ((left[0]?.size ?? 0) <= 0) await c.query("DELETE FROM profiles WHERE pid = $1", [pid]);
          }
        }
        counts.lakeRecords += (await c.query("DELETE FROM lake_records WHERE tid = $1 AND ns = $2 AND idv = $3 AND ($4::text[] IS NULL OR ds = ANY($4))", [tid, i.namespace, i.id, dsArr])).rowCount ?? 0;
        // Quarantined records of the identity went with its data.
        await c.query("DELETE FROM quarantine WHERE tid = $1 AND ns = $2 AND idv = $3 AND ($4::text[] IS NULL OR ds = ANY($4))", [tid, i.namespace, i.id, dsArr]);
      }
      counts.profileIds = [...touched].sort((a, b) => a - b).map(String);
      this.touch(tid, touched);
      return counts;
    });
  }

  private async deleteDatasetRecordsTx(c: pg.PoolClient, tid: number, ds: string): Promise<DeleteCounts> {
    const pids = await this.q<{ pid: number }>(c, "SELECT pid FROM fragments WHERE tid = $1 AND ds = $2 UNION SELECT pid FROM events WHERE tid = $1 AND ds = $2 ORDER BY pid", [tid, ds]);
    const fragments = (await c.query("DELETE FROM fragments WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
    const events = (await c.query("DELETE FROM events WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
    const lakeRecords = (await c.query("DELETE FROM lake_records WHERE tid = $1 AND ds = $2", [tid, ds])).rowCount ?? 0;
    // Quarantined records of the dataset went with it.
    await c.query("DELETE FROM quarantine WHERE tid = $1 AND ds = $2", [tid, ds]);
    this.touch(tid, pids.map((r) => r.pid));
    return { fragments, events, lakeRecords, identities: 0, profileIds: pids.map((r) => String(r.pid)) };
  }

  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
    return this.write(scope, async (c, tid) => {
      await this.requireDataset(c, tid, scope, datasetId);
      return this.deleteDatasetRecordsTx(c, tid, datasetId);
    });
  }

  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
    return this.write(scope, async (c, tid) => {
      await this.requireDataset(c, tid, scope, update.datasetId);
      const apply = (body: JsonObject): JsonObject => {
        let out = body;
        for (const [path, value] of Object.entries(update.set ?? {})) out = setPath(out, path, value);
        for (const path of update.remove ?? []) out = removePath(out, path);
        return out;
      };
      const queries = {
        fragments: { kind: "profile", sel: "SELECT ctid::text AS k, pid, NULL::text AS rid, body FROM fragments WHERE tid = $1 AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE fragments SET body = $1 WHERE ctid = $2::tid" },
        events: { kind: "event", sel: "SELECT seq::text AS k, pid, eid AS rid, body FROM events WHERE tid = $1 AND pid = (SELECT pid FROM identities WHERE tid = $1 AND ns = $3 AND idv = $4) AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE events SET body = $1 WHERE seq = $2::int8" },
        lake: { kind: "lake", sel: "SELECT seq::text AS k, NULL::int8 AS pid, eid AS rid, body FROM lake_records WHERE tid = $1 AND ds = $2 AND ns = $3 AND idv = $4", upd: "UPDATE lake_records SET body = $1 WHERE seq = $2::int8" },
      } as const;
      let updated = 0;
      const touched = new Set<number>();
      for (const q of Object.values(queries)) {
        for (const i of update.identities) {
          for (const r of await this.q<{ k: string; pid: number | null; rid: string | null; body: unknown }>(c, q.sel, [tid, update.datasetId, i.namespace, i.id])) {
            // A body that cannot be served is left as it is (and reported), never rewritten.
            const rid = q.kind === "profile" ? fragmentRecordId(i) : r.rid ?? `seq:${r.k}`;
            const before = this.servable(scope, q.kind, update.datasetId, rid, i, r.pid, r.body);
            if (before === null) continue;
            const after = apply(before);
            if (after === before) continue;
            await c.query(q.upd, [JSON.stringify(after), r.k]);
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

