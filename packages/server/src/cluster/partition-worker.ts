/**
 * A streaming worker (`segmentd worker`, #25): it leases profile-keyed partitions
 * (partition-leases.ts), reads each from the position stored in PostgreSQL
 * (partition-consumers.ts) and evaluates its messages with a streaming engine of its own — the
 * same engine as the all-in-one, with the partition's profile states, reverse index and sweep.
 *
 * Time is the stream's: each message is evaluated at the hub's time in it (`at`), and the sweep
 * runs on the hub's ticks, in stream order. The engine loads a profile's events as the hub's store
 * held them when the message was published (its mark `w`; the hub has usually stored later ones
 * by now). So a partition read again after a crash, or by another worker, is evaluated exactly as
 * the first time.
 *
 * The engine's membership changes are not written one by one: a collecting sink keeps a batch's
 * changes (and answers the engine's reads of those memberships from them), and the batch is
 * written with the partition's new position in one fenced transaction (applyPartitionBatch).
 * A batch that fails, or whose fence is stale (another worker moved the partition on), drops the
 * partition's engine: the next read starts from the stored position with states loaded again.
 *
 * An engine holds the partition as of one stored position (where it was restored, then each batch
 * it wrote) and only ever continues a batch fenced right after that position. A partition lost and
 * regained finds the store moved on by its other owner meanwhile: an engine kept from before (or
 * made by a batch that was already waiting when the lease was lost) would evaluate on states and a
 * sweep schedule that miss that owner's batches, and the fence, which checks the store's position
 * only, would let it write: duplicated entries, exits never written (#37).
 */
import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { MembershipChange, MembershipReads, PartitionBatchWrite, PartitionWrites } from "../profiles/store.js";
import type { Membership, MembershipTransition, TenantScope } from "../profiles/types.js";
import { scopeOf, type TenantContext, type TenantDirectory } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { DefinitionCatalog } from "../streaming/definition-catalog.js";
import { StreamingEngine, type MembershipSink, type StoredRecord, type StreamingHub } from "../streaming/engine.js";
import { PartitionBackfillApplier, type BackfillApplyStore } from "./partition-backfill-apply.js";
import { PartitionConsumers } from "./partition-consumers.js";
import { PartitionLeases } from "./partition-leases.js";
import { decodePartitionMessage, PARTITION_STREAM, partitionFilter, partitionName, storedRecordOf, type PartitionMessage } from "./partition-wire.js";
import { partitionOf } from "./partitions.js";

interface RealizedSnapshot {
  before: Map<string, number>;
  byPartition: Map<number, Array<{ tenant: TenantContext; profileId: string; definitionId: string }>>;
  after: Map<string, number>;
}

export type WorkerStore = StreamingHub & PartitionWrites & Pick<MembershipReads, "listMemberIds"> & BackfillApplyStore;

export interface PartitionWorkerOptions {
  js: JetStreamClient;
  kv: KV;
  workerId: string;
  partitions: number;
  store: WorkerStore;
  meta: MetadataStore;
  tenants: TenantDirectory;
  /** A lease not renewed for this long is free to take (default 6 s: a dead worker's partitions move within ~8 s). */
  leaseTtlMs?: number;
  /** Messages per fetch (default 500). */
  batch?: number;
  /** Partitions' batches evaluated at once (default 4). */
  batchesInFlight?: number;
  /** Profile states kept in memory over all partitions owned (default 200,000). */
  maxCachedProfiles?: number;
  /** After each lease round that gained or lost partitions, with those owned (the batch shard follows them, #44). */
  onOwned?: (owned: ReadonlySet<number>) => void | Promise<void>;
  onError(err: unknown): void;
}

/** What a worker reports of a partition it owns (the lease's value; `segmentd workers`, the hub's /metrics). */
export interface PartitionReport {
  worker: string;
  /** The last stream sequence applied (the stored position). */
  seq: number;
  /** Messages of the partition after it when it was read. */
  pending: number;
  /** How old the last applied message was when it was applied, while more were pending (ms); 0 when caught up. */
  lagMs: number;
  /** When this was reported (epoch ms). */
  at: number;
}

/** The stream clock of a partition: the time of the message being evaluated, and its mark of the events stored. */
class StreamClock {
  t = 0;
  w: number | undefined = undefined;
  now(): number {
    return this.t;
  }
}

/**
 * A batch's changes, kept for its fenced write. Reads of memberships (a state loaded during the
 * batch) see them: the store does not have them yet.
 */
const scopeKey = (s: TenantScope): string => `${s.orgId}\u0000${s.sandboxName}`;

class CollectingSink implements MembershipSink {
  private writes = new Map<string, { scope: TenantScope; changes: MembershipChange[] }>();
  private overlay = new Map<string, Map<string, Membership>>();

  write(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    const tk = scopeKey(scope);
    let w = this.writes.get(tk);
    if (!w) this.writes.set(tk, (w = { scope, changes: [] }));
    for (const c of changes) {
      w.changes.push(c);
      const key = `${tk}\u0000${c.profileId}`;
      let m = this.overlay.get(key);
      if (!m) this.overlay.set(key, (m = new Map()));
      // As the store will hold it: the change's time, for an exit too.
      m.set(c.definitionId, { profileId: c.profileId, definitionId: c.definitionId, status: c.status, lastQualificationTime: new Date(c.at).toISOString() });
    }
    // The transitions are the fenced write's; the engine needs none back.
    return Promise.resolve([]);
  }

  idle(): Promise<void> {
    return Promise.resolve();
  }

  take(): PartitionBatchWrite[] {
    return [...this.writes.values()];
  }

  clear(): void {
    this.writes = new Map();
    this.overlay = new Map();
  }

  overlaid(scope: TenantScope, profileId: string, stored: Membership[]): Membership[] {
    const m = this.overlay.get(`${scopeKey(scope)}\u0000${profileId}`);
    if (!m) return stored;
    const out = new Map(stored.map((x) => [x.definitionId, x]));
    for (const [def, x] of m) out.set(def, x);
    return [...out.values()].sort((a, b) => (a.definitionId < b.definitionId ? -1 : a.definitionId > b.definitionId ? 1 : 0));
  }
}

interface PartitionRun {
  /** The stored position the engine's states and sweep schedule stand at. */
  position: number;
  clock: StreamClock;
  sink: CollectingSink;
  engine: StreamingEngine;
  /** The re-check of the memberships the previous owner would have swept; false when its read is older than the position the partition is read from. */
  restored: Promise<boolean>;
}

export class PartitionWorker {
  readonly catalog: DefinitionCatalog;
  readonly leases: PartitionLeases;
  readonly consumers: PartitionConsumers;
  /** Backfill chunks (`b` messages) applied in stream order (partition-backfill-apply.ts). */
  readonly backfills: PartitionBackfillApplier;
  /** `superseded`: engines dropped because the partition's stored position was not theirs (it moved on without them). */
  readonly stats = { messages: 0, batches: 0, stale: 0, failed: 0, crossPartition: 0, superseded: 0 };
  private readonly runs = new Map<number, PartitionRun>();
  private applying = 0;
  private readonly waiters: Array<() => void> = [];
  private readonly reports = new Map<number, PartitionReport>();
  private realized: Promise<RealizedSnapshot> | null = null;

  constructor(private readonly o: PartitionWorkerOptions) {
    this.catalog = new DefinitionCatalog(o.meta);
    this.backfills = new PartitionBackfillApplier({ store: o.store, meta: o.meta, catalog: this.catalog, partitions: o.partitions });
    this.consumers = new PartitionConsumers({
      js: o.js,
      stream: PARTITION_STREAM,
      filterOf: partitionFilter,
      position: (p) => o.store.partitionPosition(partitionName(p)),
      apply: (p, msgs, fence) => this.apply(p, msgs, fence),
      onError: o.onError,
      onCaughtUp: (p, position) => {
        const r = this.reports.get(p);
        if (!r || r.pending !== 0 || r.lagMs !== 0 || r.seq !== position) this.reports.set(p, { worker: o.workerId, seq: position, pending: 0, lagMs: 0, at: Date.now() });
      },
      ...(o.batch === undefined ? {} : { batch: o.batch }),
    });
    this.leases = new PartitionLeases({
      kv: o.kv,
      workerId: o.workerId,
      partitions: o.partitions,
      ttlMs: o.leaseTtlMs ?? 6_000,
      describe: (p) => JSON.stringify(this.reports.get(p) ?? { worker: o.workerId, seq: -1, pending: -1, lagMs: 0, at: Date.now() }),
      // A partition given up is written and stopped first: its next owner reads the final position.
      beforeRelease: async (ps) => {
        await this.consumers.release(ps);
        for (const p of ps) this.runs.delete(p);
      },
      onChange: async (owned, gained, lost) => {
        // What a gained partition's previous owner committed last is in the store now (it wrote and
        // stopped before releasing, or it is dead): the re-check reads it afresh.
        if (gained.length > 0) this.realized = null;
        for (const p of lost) {
          this.runs.delete(p);
          this.reports.delete(p);
        }
        await this.consumers.own(owned);
        await o.onOwned?.(owned);
      },
      onError: o.onError,
    });
  }

  async start(): Promise<void> {
    await this.leases.start();
  }

  /** Stops reading, waits for the batches in flight, gives the partitions up (unless `release` is false: a crash-like stop). */
  async stop(release = true): Promise<void> {
    await this.leases.stop(false);
    await this.consumers.close();
    if (release) await this.leases.stop(true);
    this.runs.clear();
  }

  owned(): ReadonlySet<number> {
    return this.leases.owned();
  }

  report(p: number): PartitionReport | undefined {
    return this.reports.get(p);
  }

  /** Profile states held over all partitions (for metrics). */
  get cachedStates(): number {
    let n = 0;
    for (const r of this.runs.values()) n += r.engine.cachedStates;
    return n;
  }

  /** The partition's engine standing at `position`; one standing elsewhere is dropped, a new one restored at it. */
  private runFor(p: number, position: number): PartitionRun {
    let run = this.runs.get(p);
    if (run && run.position === position) return run;
    if (run) this.stats.superseded++;
    const clock = new StreamClock();
    const sink = new CollectingSink();
    const store = this.o.store;
    // The store, but a batch's own changes are read from the sink until the batch is written.
    const hub = new Proxy(store, {
      get(target, key, receiver) {
        if (key === "getMemberships") return async (scope: TenantScope, profileId: string) => sink.overlaid(scope, profileId, await target.getMemberships(scope, profileId));
        const v = Reflect.get(target, key, receiver) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const perPartition = Math.max(1_000, Math.ceil(((this.o.maxCachedProfiles ?? 200_000) / this.o.partitions) * 2));
    const engine = new StreamingEngine({ catalog: this.catalog, hub, clock, sink, storedThrough: () => clock.w, maxCachedProfiles: perPartition, onError: this.o.onError });
    run = { position, clock, sink, engine, restored: Promise.resolve(true) };
    const r = run;
    run.restored = this.restore(p, r, position);
    this.runs.set(p, run);
    return run;
  }

  /**
   * The realized memberships of windowed definitions in this partition, re-checked at its next
   * tick: the schedule of their exits was the previous owner's, in its memory. The read is shared
   * by the partitions gained together, so it is used only if the partition's position did not
   * move while it was read and is the one the partition is read from (else a lease that expired
   * under a live owner could have let that owner commit after the read: false, read again).
   */
  private async restore(p: number, run: PartitionRun, position: number): Promise<boolean> {
    const snap = await this.realizedSnapshot();
    const name = partitionName(p);
    if ((snap.before.get(name) ?? 0) !== position || (snap.after.get(name) ?? 0) !== position) {
      this.realized = null;
      return false;
    }
    const byTenant = new Map<TenantContext, Array<{ profileId: string; definitionId: string }>>();
    for (const m of snap.byPartition.get(p) ?? []) {
      const list = byTenant.get(m.tenant);
      if (list) list.push(m);
      else byTenant.set(m.tenant, [m]);
    }
    for (const [tenant, list] of byTenant) run.engine.recheck(tenant, list);
    return true;
  }

  /** One read of the realized windowed memberships, bucketed by partition, between two reads of the positions. */
  private realizedSnapshot(): Promise<RealizedSnapshot> {
    if (this.realized) return this.realized;
    const snap = (async (): Promise<RealizedSnapshot> => {
      const before = await this.o.store.partitionPositions();
      const byPartition = new Map<number, Array<{ tenant: TenantContext; profileId: string; definitionId: string }>>();
      for (const tenant of this.o.tenants.all()) {
        const set = await this.catalog.get(tenant, "continuous");
        for (const d of set.definitions) {
          if (d.windowMs === null) continue;
          for (const profileId of await this.o.store.listMemberIds(scopeOf(tenant), d.id, "realized")) {
            const p = partitionOf(tenant.sandbox.sandboxId, profileId, this.o.partitions);
            const list = byPartition.get(p);
            const entry = { tenant, profileId, definitionId: d.id };
            if (list) list.push(entry);
            else byPartition.set(p, [entry]);
          }
        }
      }
      return { before, byPartition, after: await this.o.store.partitionPositions() };
    })();
    snap.catch(() => {
      this.realized = null;
    });
    this.realized = snap;
    return snap;
  }

  private async apply(p: number, msgs: readonly JsMsg[], fence: { after: number; through: number }): Promise<number> {
    // A few partitions' batches at once: with every owned partition's at once, their state loads
    // queued thousands of queries behind the pool's 8 connections (pg-pool's queue then costs 13 %
    // of the worker's CPU) and draining took 15 % longer (docs/performance.md).
    while (this.applying >= (this.o.batchesInFlight ?? 4)) await new Promise<void>((r) => this.waiters.push(r));
    this.applying++;
    try {
      return await this.applyNow(p, msgs, fence);
    } finally {
      this.applying--;
      this.waiters.shift()?.();
    }
  }

  private async applyNow(p: number, msgs: readonly JsMsg[], fence: { after: number; through: number }): Promise<number> {
    const run = this.runFor(p, fence.after);
    try {
      if (!(await run.restored)) {
        // Read again from the stored position, with a fresh re-check.
        this.drop(p, run);
        this.stats.stale++;
        return fence.after;
      }
      await this.evaluate(p, run, msgs);
      await run.engine.idle();
    } catch (err) {
      this.drop(p, run);
      this.stats.failed++;
      throw err;
    }
    let result;
    try {
      result = await this.o.store.applyPartitionBatch({ partition: partitionName(p), after: fence.after, through: fence.through }, run.sink.take());
    } catch (err) {
      this.drop(p, run);
      this.stats.failed++;
      throw err;
    }
    if (!result.applied) {
      // Another worker moved the partition on (a handover): what this engine holds is not what was written,
      // and the realized memberships read for the re-check may predate that worker's last batch.
      this.drop(p, run);
      this.realized = null;
      this.stats.stale++;
      return result.position;
    }
    run.sink.clear();
    run.position = result.position;
    // Written by a batch that was under way when the lease was lost: the partition is another's now.
    if (!this.leases.owned().has(p)) this.drop(p, run);
    this.stats.messages += msgs.length;
    this.stats.batches++;
    const last = msgs[msgs.length - 1]!;
    const pending = last.info.pending;
    const appliedAt = Date.now();
    this.reports.set(p, { worker: this.o.workerId, seq: result.position, pending, lagMs: pending > 0 ? Math.max(0, appliedAt - Math.floor(last.info.timestampNanos / 1e6)) : 0, at: appliedAt });
    return result.position;
  }

  /** Forgets the partition's engine if it is this one (another may have replaced it meanwhile). */
  private drop(p: number, run: PartitionRun): void {
    if (this.runs.get(p) === run) this.runs.delete(p);
  }

  /** The messages of a batch in order; a run of records of one tenant at one time is one call, as the hub's request was. */
  private async evaluate(p: number, run: PartitionRun, msgs: readonly JsMsg[]): Promise<void> {
    const decoded = msgs.map((m) => decodePartitionMessage(m.data));
    for (let i = 0; i < decoded.length; ) {
      const m = decoded[i];
      if (m === null || m === undefined) {
        i++;
        continue;
      }
      run.clock.t = m.at;
      run.clock.w = m.k === "d" ? undefined : m.w;
      if (m.k === "t") {
        await run.engine.sweep(m.at);
        i++;
        continue;
      }
      const tenant = this.o.tenants.resolve(m.o, m.n);
      if (m.k === "r") {
        const records: StoredRecord[] = [];
        const pids: number[] = [];
        let j = i;
        for (; j < decoded.length; j++) {
          const n = decoded[j];
          if (n === null || n === undefined || n.k !== "r" || n.at !== m.at || n.w !== m.w || n.o !== m.o || n.n !== m.n) break;
          this.checkPartition(p, tenant, n);
          records.push(storedRecordOf(n));
          pids.push(Number(n.p));
        }
        if (tenant) await run.engine.onRecordsStored(tenant, records, Float64Array.from(pids));
        i = j;
        continue;
      }
      if (tenant && m.k === "c") await run.engine.onProfilesChanged(tenant, [m.p]);
      if (tenant && m.k === "d") this.catalog.invalidate(scopeOf(tenant));
      if (tenant && m.k === "v") this.backfills.switchTo(tenant);
      if (tenant && m.k === "b") await this.backfills.apply(p, run, tenant, m);
      i++;
    }
  }

  /** Counts a message whose profile is another partition's (there must be none: partitions share nothing). */
  private checkPartition(p: number, tenant: TenantContext | undefined, m: Extract<PartitionMessage, { k: "r" }>): void {
    if (tenant && partitionOf(tenant.sandbox.sandboxId, m.p, this.o.partitions) !== p) this.stats.crossPartition++;
  }
}
