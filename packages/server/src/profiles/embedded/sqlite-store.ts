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
import Database from "better-sqlite3";
import { identitiesOf, planAppend, type LoadedState } from "../append-plan.js";
import { newCatalogId } from "../ids.js";
import { assembleGraph, decodeCursor, encodeCursor, lookupProfile, parseBody, toMembership, type GraphRows, type MembershipRow } from "../scan-assembly.js";
import {
  MAX_BATCH_ERRORS,
  StoreError,
  type AppendOptions,
  type AppendResult,
  type DeleteCounts,
  type EventPage,
  type EventQuery,
  type FieldUpdate,
  type IngestBatch,
  type IngestBatchStatus,
  type MembershipChange,
  type ProfileStore,
  type ScanOptions,
  type ScannedProfile,
  type TransitionQuery,
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
import { SQLITE_SCHEMA } from "./schema.js";

export interface EmbeddedStoreOptions {
  /** Database file; ":memory:" for throw-away stores. */
  path: string;
  /** "full" (default) fsyncs every commit; "normal" survives process crashes but not power loss. */
  synchronous?: "full" | "normal";
  /** Page cache in MiB (default 256). */
  cacheMiB?: number;
}

interface DatasetRow { id: string; name: string; description: string | null; schema_class: string; profile_enabled: number; identity_fields: string; created: number; updated: number }
interface BatchRow { id: string; ds: string; status: string; created: number; updated: number; completed: number | null; records_read: number; records_written: number; records_failed: number; files: string; errors: string }
interface FragmentRow { pid: number; ds: string; ns: string; idv: string; ts: number; body: string }
interface EventRow { seq: number; pid: number; ds: string; eid: string; ns: string; idv: string; ts: number; body: string }

interface QueuedWrite { run: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void }

const NO_TENANT = -1;

export class EmbeddedProfileStore implements ProfileStore {
  readonly kind = "embedded" as const;
  private readonly db: Database.Database;
  private readonly tids = new Map<string, number>();
  private queue: QueuedWrite[] = [];
  private flushScheduled = false;
  private closed = false;

  constructor(opts: EmbeddedStoreOptions) {
    this.db = new Database(opts.path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma(`synchronous = ${opts.synchronous === "normal" ? "NORMAL" : "FULL"}`);
    this.db.pragma(`cache_size = -${(opts.cacheMiB ?? 256) * 1024}`);
    this.db.pragma("temp_store = MEMORY");
    this.db.pragma("busy_timeout = 5000");
    this.db.exec(SQLITE_SCHEMA);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.queue.length > 0) this.flush();
    this.closed = true;
    this.db.close();
  }

  // ---- plumbing -------------------------------------------------------------

  /**
   * Creates the tenant row outside any write transaction, so that a write that
   * rolls back cannot leave a cached tenant id that was never committed.
   */
  private tenantForWrite(scope: TenantScope): number {
    return this.tid(scope, true);
  }

  private write<T>(run: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new Error("profile store is closed"));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (v: unknown) => void, reject });
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
    const outcomes: WriteOutcome[] = [];
    try {
      this.db.transaction(() => {
        for (const job of jobs) {
          try {
            // A nested transaction is a savepoint: a failing job rolls back alone.
            outcomes.push({ ok: true, value: this.db.transaction(job.run)() });
          } catch (error) {
            outcomes.push({ ok: false, error });
          }
        }
      })();
    } catch (error) {
      settleGroup(jobs, outcomes, { error });
      return;
    }
    // Resolve only now: the outer COMMIT (and its fsync) has returned.
    settleGroup(jobs, outcomes);
  }

  private tid(scope: TenantScope, create: boolean): number {
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    const cached = this.tids.get(key);
    if (cached !== undefined) return cached;
    const row = this.db.prepare("SELECT tid FROM tenants WHERE org = ? AND sandbox = ?").get(scope.orgId, scope.sandboxName) as { tid: number } | undefined;
    if (row !== undefined) {
      this.tids.set(key, row.tid);
      return row.tid;
    }
    if (!create) return NO_TENANT;
    const info = this.db.prepare("INSERT INTO tenants (org, sandbox) VALUES (?, ?)").run(scope.orgId, scope.sandboxName);
    const tid = Number(info.lastInsertRowid);
    this.tids.set(key, tid);
    return tid;
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
    return this.write(() => {
      const dataset = this.requireDataset(tid, scope, datasetId);
      const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
      for (const r of records) {
        if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${datasetId} holds ${dataset.schemaClass}`);
      }
      if (!dataset.profileEnabled) this.appendLake(tid, datasetId, records, opts, result);
      else this.appendProfile(tid, datasetId, records, opts, result);
      if (opts.batch !== undefined) {
        const written = result.fragments + result.events + result.lakeOnly + result.duplicates;
        this.accountBatch(tid, scope, opts.batch, written, opts.ingestedAt);
      }
      return result;
    });
  }

  private appendLake(tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
    const ins = this.stmt("INSERT INTO lake_records (tid, ds, eid, ns, idv, ts, body) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    for (const r of records) {
      const info = ins.run(tid, ds, r.eventId, r.primary.namespace, r.primary.id, r.timestamp ?? opts.ingestedAt, r.json);
      if (info.changes === 0) result.duplicates++;
      else result.lakeOnly++;
    }
  }

  private appendProfile(tid: number, ds: string, records: readonly ValidRecord[], opts: AppendOptions, result: AppendResult): void {
    const loaded: LoadedState = { graphs: new Map(), sizes: new Map(), fragments: new Map() };
    const getPid = this.stmt("SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?");
    const getSize = this.stmt("SELECT size FROM profiles WHERE pid = ?");
    for (const i of identitiesOf(records)) {
      const row = getPid.get(tid, i.namespace, i.id) as { pid: number } | undefined;
      if (row === undefined) continue;
      loaded.graphs.set(identityKey(i), row.pid);
      if (!loaded.sizes.has(row.pid)) loaded.sizes.set(row.pid, (getSize.get(row.pid) as { size: number }).size);
    }
    const getFrag = this.stmt("SELECT ts, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?");
    for (const r of records) {
      if (r.kind !== "profile") continue;
      const k = identityKey(r.primary);
      // A fragment is keyed by a primary identity that is always stored in a graph: an unknown identity has none.
      if (loaded.fragments.has(k) || !loaded.graphs.has(k)) continue;
      const row = getFrag.get(tid, ds, r.primary.namespace, r.primary.id) as { ts: number; body: string } | undefined;
      if (row !== undefined) loaded.fragments.set(k, { timestamp: row.ts, body: parseBody(row.body) });
    }
    const plan = planAppend(records, loaded, opts.maxIdentitiesPerGraph, opts.ingestedAt);
    const newProfile = this.stmt("INSERT INTO profiles (tid, size, created) VALUES (?, 0, ?)");
    const allocated = plan.outcome.created.map(() => Number(newProfile.run(tid, opts.ingestedAt).lastInsertRowid));
    const w = plan.finalize(allocated);
    for (const m of w.merges) this.moveGraph(tid, m.from, m.into);
    const setSize = this.stmt("UPDATE profiles SET size = ? WHERE pid = ?");
    for (const [g, s] of w.sizes) setSize.run(s, g);
    const insId = this.stmt("INSERT INTO identities (tid, ns, idv, pid) VALUES (?, ?, ?, ?)");
    for (const a of w.assigned) insId.run(tid, a.identity.namespace, a.identity.id, a.graph);
    const upFrag = this.stmt(`INSERT INTO fragments (tid, ds, ns, idv, pid, ts, ingested, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (tid, ds, ns, idv) DO UPDATE SET pid = excluded.pid, ts = excluded.ts, ingested = excluded.ingested, body = excluded.body`);
    for (const f of w.fragments) upFrag.run(tid, ds, f.primary.namespace, f.primary.id, f.graph, f.timestamp, opts.ingestedAt, JSON.stringify(f.body));
    result.fragments += records.filter((r) => r.kind === "profile").length;
    const insEvent = this.stmt("INSERT INTO events (tid, ds, eid, ns, idv, pid, ts, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
    for (const e of w.events) {
      const info = insEvent.run(tid, ds, e.eventId, e.primary.namespace, e.primary.id, e.graph, e.timestamp, e.json);
      if (info.changes === 0) result.duplicates++;
      else result.events++;
    }
    result.refusedLinks.push(...w.refused);
    result.profileIds.push(...w.touchedGraphs.map(String));
  }

  /** Re-points every row of graph `from` to graph `into` (graphs merged). */
  private moveGraph(tid: number, from: number, into: number): void {
    this.stmt("UPDATE identities SET pid = ? WHERE tid = ? AND pid = ?").run(into, tid, from);
    this.stmt("UPDATE fragments SET pid = ? WHERE tid = ? AND pid = ?").run(into, tid, from);
    this.stmt("UPDATE events SET pid = ? WHERE tid = ? AND pid = ?").run(into, tid, from);
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

  // ---- identities and profiles ----------------------------------------------

  private pidOf(tid: number, identity: Identity): number | null {
    const row = this.stmt("SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?").get(tid, identity.namespace, identity.id) as { pid: number } | undefined;
    return row === undefined ? null : row.pid;
  }

  async findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    const pid = this.pidOf(this.tid(scope, false), identity);
    return pid === null ? null : String(pid);
  }

  async graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    const rows = this.stmt("SELECT ns, idv FROM identities WHERE tid = ? AND pid = ? ORDER BY ns, idv").all(this.tid(scope, false), Number(profileId)) as Array<{ ns: string; idv: string }>;
    return rows.map((r) => ({ namespace: r.ns, id: r.idv }));
  }

  private readGraphs(tid: number, lo: number, hi: number, withEvents: boolean, eventsSince: number | undefined): Map<number, GraphRows> {
    const graphs = new Map<number, GraphRows>();
    const g = (pid: number): GraphRows => {
      let rows = graphs.get(pid);
      if (rows === undefined) {
        rows = { identities: [], fragments: [], events: [], memberships: [] };
        graphs.set(pid, rows);
      }
      return rows;
    };
    for (const r of this.stmt("SELECT pid, ns, idv FROM identities WHERE tid = ? AND pid BETWEEN ? AND ? ORDER BY pid, ns, idv").all(tid, lo, hi) as Array<{ pid: number; ns: string; idv: string }>) {
      g(r.pid).identities.push({ namespace: r.ns, id: r.idv });
    }
    for (const r of this.stmt("SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = ? AND pid BETWEEN ? AND ?").all(tid, lo, hi) as FragmentRow[]) {
      g(r.pid).fragments.push({ datasetId: r.ds, primary: { namespace: r.ns, id: r.idv }, timestamp: r.ts, body: parseBody(r.body) });
    }
    if (withEvents) {
      const rows = this.stmt("SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = ? AND pid BETWEEN ? AND ? AND ts >= ? ORDER BY pid, ts, seq")
        .all(tid, lo, hi, eventsSince ?? Number.MIN_SAFE_INTEGER) as EventRow[];
      for (const r of rows) g(r.pid).events.push(eventFromRow(r));
    }
    for (const r of this.stmt("SELECT pid, def, status, lqt FROM memberships WHERE tid = ? AND pid BETWEEN ? AND ? ORDER BY pid, def").all(tid, lo, hi) as MembershipRow[]) {
      g(r.pid).memberships.push(toMembership(r));
    }
    return graphs;
  }

  async getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    const tid = this.tid(scope, false);
    const pid = this.pidOf(tid, identity);
    if (pid === null) return null;
    // Events are only needed to tell whether an identity has data of its own (policy none).
    const rows = this.readGraphs(tid, pid, pid, false, undefined).get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] };
    if (policy.identityGraph.type === "none" && !rows.fragments.some((f) => identityKey(f.primary) === identityKey(identity))) {
      const ev = this.stmt("SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = ? AND pid = ? AND ns = ? AND idv = ? LIMIT 1")
        .all(tid, pid, identity.namespace, identity.id) as EventRow[];
      rows.events = ev.map(eventFromRow);
    }
    return lookupProfile(pid, rows, policy, identity);
  }

  async getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
    const tid = this.tid(scope, false);
    const pid = this.pidOf(tid, identity);
    if (pid === null) return { events: [], next: null };
    const limit = query.limit ?? 1000;
    const desc = query.order === "desc";
    const where = ["tid = ?", "pid = ?", "ts >= ?", "ts < ?"];
    const params: Array<number | string> = [tid, pid, query.startTime ?? Number.MIN_SAFE_INTEGER, query.endTime ?? Number.MAX_SAFE_INTEGER];
    if (policy.identityGraph.type === "none") {
      where.push("ns = ?", "idv = ?");
      params.push(identity.namespace, identity.id);
    }
    if (query.cursor !== undefined) {
      const c = decodeCursor(query.cursor);
      where.push(desc ? "(ts < ? OR (ts = ? AND seq < ?))" : "(ts > ? OR (ts = ? AND seq > ?))");
      params.push(c.ts, c.ts, c.seq);
    }
    const dir = desc ? "DESC" : "ASC";
    const rows = this.stmt(`SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE ${where.join(" AND ")} ORDER BY ts ${dir}, seq ${dir} LIMIT ?`)
      .all(...params, limit + 1) as EventRow[];
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { events: page.map(eventFromRow), next: rows.length > limit && last !== undefined ? encodeCursor(last.ts, last.seq) : null };
  }

  async *scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
    const tid = this.tid(scope, false);
    const chunk = opts.chunkSize ?? 1000;
    let after = 0;
    for (;;) {
      const pids = (this.stmt("SELECT pid FROM profiles WHERE tid = ? AND pid > ? ORDER BY pid LIMIT ?").all(tid, after, chunk) as Array<{ pid: number }>).map((r) => r.pid);
      if (pids.length === 0) return;
      const lo = pids[0]!, hi = pids[pids.length - 1]!;
      const graphs = this.readGraphs(tid, lo, hi, opts.events !== false, opts.eventsSince);
      const out: ScannedProfile[] = [];
      for (const pid of pids) out.push(...assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
      after = hi;
      yield out;
    }
  }

  async countProfiles(scope: TenantScope): Promise<number> {
    return (this.stmt("SELECT count(*) AS n FROM profiles WHERE tid = ?").get(this.tid(scope, false)) as { n: number }).n;
  }

  // ---- memberships ----------------------------------------------------------

  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    const tid = this.tenantForWrite(scope);
    return this.write(() => {
      const get = this.stmt("SELECT status FROM memberships WHERE tid = ? AND pid = ? AND def = ?");
      const put = this.stmt("INSERT INTO memberships (tid, pid, def, status, lqt) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tid, pid, def) DO UPDATE SET status = excluded.status, lqt = excluded.lqt");
      const log = this.stmt("INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at) VALUES (?, ?, ?, ?, ?, ?, ?)");
      const out: MembershipTransition[] = [];
      for (const c of changes) {
        const pid = Number(c.profileId);
        const prev = (get.get(tid, pid, c.definitionId) as { status: MembershipStatus } | undefined)?.status ?? null;
        if (prev === c.status || (prev === null && c.status === "exited")) continue;
        const at = new Date(c.at).toISOString();
        put.run(tid, pid, c.definitionId, c.status, at);
        log.run(tid, pid, c.definitionId, prev, c.status, c.source, c.at);
        out.push({ profileId: c.profileId, definitionId: c.definitionId, from: prev, to: c.status, source: c.source, at });
      }
      return out;
    });
  }

  async getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    const rows = this.stmt("SELECT pid, def, status, lqt FROM memberships WHERE tid = ? AND pid = ? ORDER BY def").all(this.tid(scope, false), Number(profileId)) as MembershipRow[];
    return rows.map(toMembership);
  }

  async listMembers(scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
    const rows = this.stmt(`SELECT pid, def, status, lqt FROM memberships WHERE tid = ? AND def = ? AND status = ? AND pid > ? ORDER BY pid LIMIT ?`)
      .all(this.tid(scope, false), definitionId, opts.status ?? "realized", Number(opts.afterProfileId ?? 0), opts.limit ?? 1000) as MembershipRow[];
    return rows.map(toMembership);
  }

  async countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    const rows = this.stmt("SELECT status, count(*) AS n FROM memberships WHERE tid = ? AND def = ? GROUP BY status").all(this.tid(scope, false), definitionId) as Array<{ status: string; n: number }>;
    return { realized: rows.find((r) => r.status === "realized")?.n ?? 0, exited: rows.find((r) => r.status === "exited")?.n ?? 0 };
  }

  async listTransitions(scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
    const where = ["tid = ?", "at >= ?", "at < ?"];
    const params: Array<string | number> = [this.tid(scope, false), q.since ?? Number.MIN_SAFE_INTEGER, q.until ?? Number.MAX_SAFE_INTEGER];
    if (q.definitionId !== undefined) { where.push("def = ?"); params.push(q.definitionId); }
    if (q.sources !== undefined && q.sources.length > 0) { where.push(`source IN (${q.sources.map(() => "?").join(", ")})`); params.push(...q.sources); }
    const rows = this.db.prepare(`SELECT pid, def, from_status, to_status, source, at FROM transitions WHERE ${where.join(" AND ")} ORDER BY at, seq LIMIT ?`)
      .all(...params, q.limit ?? 10_000) as Array<{ pid: number; def: string; from_status: MembershipStatus | null; to_status: MembershipStatus; source: MembershipChange["source"]; at: number }>;
    return rows.map((r) => ({ profileId: String(r.pid), definitionId: r.def, from: r.from_status, to: r.to_status, source: r.source, at: new Date(r.at).toISOString() }));
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
      const delEvents = this.db.prepare(`DELETE FROM events WHERE tid = ? AND pid = ? AND ns = ? AND idv = ?${dsFilter}`);
      const delLake = this.db.prepare(`DELETE FROM lake_records WHERE tid = ? AND ns = ? AND idv = ?${dsFilter}`);
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
            counts.identities++;
            touched.add(pid);
            const size = (this.stmt("SELECT size FROM profiles WHERE pid = ?").get(pid) as { size: number }).size - 1;
            // An emptied graph disappears; its memberships stay so the engines can record the exits.
            if (size <= 0) this.stmt("DELETE FROM profiles WHERE pid = ?").run(pid);
            else this.stmt("UPDATE profiles SET size = ? WHERE pid = ?").run(size, pid);
          }
        }
        counts.lakeRecords += delLake.run(tid, i.namespace, i.id, ...dsList).changes;
      }
      counts.profileIds = [...touched].sort((a, b) => a - b).map(String);
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
        fragments: { sql: "SELECT rowid AS k, pid, body FROM fragments WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
        events: {
          sql: "SELECT seq AS k, pid, body FROM events WHERE tid = ? AND pid = (SELECT pid FROM identities WHERE tid = ? AND ns = ? AND idv = ?) AND ds = ? AND ns = ? AND idv = ?",
          args: (i: Identity) => [tid, tid, i.namespace, i.id, update.datasetId, i.namespace, i.id],
        },
        lake_records: { sql: "SELECT seq AS k, NULL AS pid, body FROM lake_records WHERE tid = ? AND ds = ? AND ns = ? AND idv = ?", args: (i: Identity) => [tid, update.datasetId, i.namespace, i.id] },
      } as const;
      for (const table of ["fragments", "events", "lake_records"] as const) {
        const key = table === "fragments" ? "rowid" : "seq";
        const sel = this.stmt(queries[table].sql);
        const upd = this.stmt(`UPDATE ${table} SET body = ? WHERE ${key} = ?`);
        for (const i of update.identities) {
          for (const r of sel.all(...queries[table].args(i)) as Array<{ k: number; pid: number | null; body: string }>) {
            const before = parseBody(r.body);
            const after = apply(before);
            if (after === before) continue;
            upd.run(JSON.stringify(after), r.k);
            updated++;
            if (r.pid !== null) touched.add(r.pid);
          }
        }
      }
      return { updated, profileIds: [...touched].sort((a, b) => a - b).map(String) };
    });
  }
}

function eventFromRow(r: EventRow): StoredEvent {
  return { datasetId: r.ds, eventId: r.eid, primary: { namespace: r.ns, id: r.idv }, timestamp: r.ts, body: parseBody(r.body) };
}
