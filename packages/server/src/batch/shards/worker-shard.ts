/**
 * A worker's batch shard (issue #44): one columnar snapshot per sandbox and merge policy over the
 * profiles of the profile-keyed partitions this worker holds — built from the shared profile
 * store reading only those partitions' profiles, kept on disk in the snapshot file format and
 * refreshed from the store's change feed narrowed to them. One snapshot for all the held
 * partitions, not one per partition: a snapshot's dictionaries and per-entry work are then paid
 * once per worker, so N workers together spend about what one process spends (bench:shards).
 *
 * The held set can change (a partition moves): the partitions that came or went are reported to
 * the snapshots' next refresh as changed profiles — those of a partition that came are read and
 * added, those of one that went are masked — so a move costs the moved partitions' profiles, not
 * a rebuild (a refresh past the overlay share rebuilds as any other). A file records the held set
 * its snapshot was built for (in the store identity): a restart with the same set loads it and
 * refreshes it; with another set, it is built again.
 *
 * Which partition a profile is in is the caller's (cluster/partitions.ts: batch imports nothing of
 * the cluster). Segment jobs (cluster/batch-participant.ts) and the fleet's previews, estimates
 * and edit impact (batch/shards/shard-reads.ts) read it.
 */
import type { MembershipReads, ScanOptions, ScannedProfile } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import { SnapshotCache, type SnapshotStats } from "../columnar/cache.js";
import type { BuildOptions, Snapshot, SnapshotStore } from "../columnar/snapshot.js";
import { evaluateJob, type EvaluationOptions, type EvaluationOutcome, type JobDefinition } from "../engine/evaluate-job.js";
import type { PartitionOutcome } from "../engine/evaluation-types.js";
import { PartitionTally } from "../engine/partition-split.js";
import type { EvaluationPool } from "../pool/evaluation-pool.js";

/** The store a shard is read from: snapshots, member lists. */
export type ShardSource = SnapshotStore & MembershipReads;

export interface WorkerShardOptions {
  store: ShardSource;
  partitions: number;
  /** A sandbox's partition of a profile id (cluster/partitions.ts partitionOf). */
  partitionOf: (tenant: TenantContext) => (profileId: string) => number;
  /** The partitions held at the start (hold() changes them). */
  held: Iterable<number>;
  /** Where the shard's files are kept; none: in memory only. */
  dir?: string;
  /** Names the store (a file written for another store, partition count or held set is ignored). */
  storeIdentity?: string;
  onWarning?: (message: string, err?: unknown) => void;
}

/** What a read over a shard sees (WorkerShard.read). */
export interface ShardRead {
  /** The held partitions, ascending: the slots. */
  partitions: readonly number[];
  /** The store as the shard reads it (member lists for inSegment). */
  profiles: ShardSource;
  pool: EvaluationPool | null;
  snapshot(policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot>;
  /** Each global ordinal's slot in `partitions`, -1 for a masked one. */
  slots(snap: Snapshot): Int32Array;
}

/** Profile ids listed per page while a sandbox's ids are split into partitions. */
const LIST_PAGE = 10_000;
/** Moves remembered per sandbox; a snapshot older than the oldest forgotten one is rebuilt. */
const MOVES_KEPT = 64;

/** A sandbox's profile ids by partition, as listed after the change feed's `version`. */
interface IdListing {
  version: number | null;
  byPartition: Map<number, number[]>;
}

/** Partitions that came or went, at the change feed's version of that instant. */
interface Move {
  version: number;
  partitions: readonly number[];
}

interface SandboxMoves {
  moves: Move[];
  /** The newest version of a forgotten move: a snapshot at or before it cannot be told what moved. */
  forgotten: number | null;
}

export class WorkerShard {
  private held: ReadonlySet<number>;
  private readonly cache: SnapshotCache;
  private readonly listings = new Map<string, Promise<IdListing>>();
  private readonly sandboxes = new Map<string, SandboxMoves>();
  private readonly functions = new Map<string, (profileId: string) => number>();
  /** Snapshot reads and evaluations run one at a time, and a move waits for them: each sees one held set. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: WorkerShardOptions) {
    if (!Number.isSafeInteger(o.partitions) || o.partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${o.partitions}`);
    this.held = this.checked(o.held);
    this.cache = new SnapshotCache({
      ...(o.dir === undefined ? {} : { dir: o.dir }),
      // The count and the held set in the identity: a file of another split is never read as this one.
      storeIdentity: () => `${o.storeIdentity ?? ""}#partitions ${this.heldPartitions().join(",")} of ${o.partitions}`,
      ...(o.onWarning === undefined ? {} : { onWarning: o.onWarning }),
    });
  }

  /** The partitions held, ascending. */
  heldPartitions(): number[] {
    return [...this.held].sort((a, b) => a - b);
  }

  /**
   * Holds `partitions` from now on, once the reads and evaluations in progress have ended: the
   * snapshots' next refresh reads the profiles of those that came and masks those of those that went.
   */
  hold(partitions: Iterable<number>): Promise<void> {
    const next = this.checked(partitions);
    return this.serial(async () => {
      const moved = [...new Set([...next, ...this.held])].filter((p) => next.has(p) !== this.held.has(p));
      if (moved.length === 0) return;
      for (const [k, s] of this.sandboxes) {
        const [orgId, sandboxName] = k.split("\u0000") as [string, string];
        s.moves.push({ version: this.o.store.changesSince({ orgId, sandboxName }, null).version, partitions: moved });
        if (s.moves.length > MOVES_KEPT) s.forgotten = s.moves.shift()!.version;
      }
      this.held = next;
    });
  }

  /** A sandbox's snapshot under a merge policy over the held partitions: loaded from its file or built, then refreshed. */
  snapshot(tenant: TenantContext, policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot> {
    return this.serial(async () => this.cache.get(await this.view(tenant), scopeOf(tenant), policy, o));
  }

  /**
   * A read over the held partitions (previews, estimates, edit impact over the fleet, #44),
   * serialized with evaluations and moves: `f` gets the snapshots of this held set and, for a
   * snapshot, each global ordinal's slot in `partitions` (-1: masked).
   */
  read<T>(tenant: TenantContext, f: (r: ShardRead) => Promise<T>): Promise<T> {
    return this.serial(async () => {
      const view = await this.view(tenant);
      const scope = scopeOf(tenant);
      const split = { partitions: this.heldPartitions(), of: this.partitionOf(tenant) };
      const tally = new PartitionTally(split);
      return f({
        partitions: split.partitions,
        profiles: view,
        pool: this.cache.pool,
        snapshot: (policy, o) => this.cache.get(view, scope, policy, o),
        slots: (snap) => {
          const out = new Int32Array(snap.ordinals).fill(-1);
          for (const { part, masked, offset } of snap.parts()) {
            const slots = tally.slotsOfPart(part);
            for (let o = 0; o < slots.length; o++) if (masked === null || masked[o] === 0) out[offset + o] = tally.check(slots[o]!, part, o);
          }
          return out;
        },
      });
    });
  }

  /** What the last snapshot read did (built, loaded, incremental, …). */
  stats(tenant: TenantContext, policy: MergePolicySpec): SnapshotStats | undefined {
    return this.cache.stats(scopeOf(tenant), policy);
  }

  /**
   * A job's evaluation of `definitions` over the held partitions: the outcome a whole evaluation
   * has for their profiles (memberships to write, counters), and its part per held partition
   * (`byPartition`, every held partition present). Stored members of other partitions in the
   * store's lists are not in the snapshot and so are not looked at.
   */
  evaluate(tenant: TenantContext, definitions: readonly JobDefinition[], opts: Omit<EvaluationOptions, "snapshots" | "backend" | "split">): Promise<EvaluationOutcome & { byPartition: Map<number, PartitionOutcome> }> {
    return this.serial(async () => {
      const split = { partitions: this.heldPartitions(), of: this.partitionOf(tenant) };
      const out = await evaluateJob(await this.view(tenant), scopeOf(tenant), [...definitions], { ...opts, snapshots: this.cache, split });
      return { ...out, byPartition: out.byPartition! };
    });
  }

  /** Resolves once the shard's files written so far are on disk. */
  idle(): Promise<void> {
    return this.cache.idle();
  }

  async close(): Promise<void> {
    await this.serial(async () => {
      await this.cache.close();
      this.listings.clear();
    });
  }

  private serial<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** A sandbox's partition function, one per sandbox (the engine keeps each part's partitions for it). */
  private partitionOf(tenant: TenantContext): (profileId: string) => number {
    const k = `${tenant.orgId}\u0000${tenant.sandbox.sandboxName}`;
    let f = this.functions.get(k);
    if (f === undefined) this.functions.set(k, (f = this.o.partitionOf(tenant)));
    return f;
  }

  private checked(partitions: Iterable<number>): ReadonlySet<number> {
    const out = new Set<number>();
    for (const p of partitions) {
      if (!Number.isSafeInteger(p) || p < 0 || p >= this.o.partitions) throw new RangeError(`partition ${p} is not one of 0…${this.o.partitions - 1}`);
      out.add(p);
    }
    return out;
  }

  /**
   * The store as the shard reads it: scans of the held partitions' profiles only, and changes of
   * them only — plus, for a snapshot older than a move, every profile of the moved partitions.
   */
  private async view(tenant: TenantContext): Promise<ShardSource> {
    const store = this.o.store;
    const scope = scopeOf(tenant);
    const sk = `${scope.orgId}\u0000${scope.sandboxName}`;
    let moves = this.sandboxes.get(sk);
    if (moves === undefined) this.sandboxes.set(sk, (moves = { moves: [], forgotten: null }));
    const { moves: log, forgotten } = moves;
    const movedIds = new Map<number, string[]>();
    for (const m of log) for (const p of m.partitions) if (!movedIds.has(p)) movedIds.set(p, await this.idsOf(tenant, [p]));
    const partitionOf = this.partitionOf(tenant);
    const held = this.held;
    const mine = (id: string) => held.has(partitionOf(id));
    const scan = (s: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> => {
      if (opts.profileIds !== undefined) return store.scanProfiles(s, policy, { ...opts, profileIds: opts.profileIds.filter(mine) });
      // A full scan (a build): the held partitions' ids, from one listing of the sandbox.
      const listed = this.idsOf(tenant, [...held]);
      return (async function* () {
        const ids = await listed;
        if (ids.length > 0) yield* store.scanProfiles(s, policy, { ...opts, profileIds: ids });
      })();
    };
    const overrides: Partial<ShardSource> = {
      scanProfiles: scan,
      changesSince: (s, since) => {
        const r = store.changesSince(s, since);
        if (r.profileIds === null) return r;
        if (forgotten !== null && since !== null && since <= forgotten) return { version: r.version, profileIds: null };
        const ids = new Set<string>();
        for (const id of r.profileIds) if (mine(id)) ids.add(id);
        // A move at or after the snapshot's version: its partitions' profiles came or went.
        for (const m of log) if (since === null || m.version >= since) for (const p of m.partitions) for (const id of movedIds.get(p)!) ids.add(id);
        return { version: r.version, profileIds: ids };
      },
    };
    return new Proxy(store, {
      get(target, key) {
        if (typeof key === "string" && key in overrides) return overrides[key as keyof ShardSource];
        const v: unknown = Reflect.get(target, key, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  /**
   * The profile ids of some partitions, ascending: one listing of the sandbox's ids split into
   * every partition, reused later with the ids the change feed saw since (new profiles; a removed
   * one is skipped by the scan). Listed again when the feed no longer reaches back to it.
   */
  private async idsOf(tenant: TenantContext, partitions: readonly number[]): Promise<string[]> {
    const scope = scopeOf(tenant);
    const k = `${scope.orgId}\u0000${scope.sandboxName}`;
    const store = this.o.store;
    let listing = this.listings.get(k);
    let since: ReadonlySet<string> | null = null;
    if (listing !== undefined) {
      const l = await listing;
      since = l.version === null ? null : store.changesSince(scope, l.version).profileIds;
      if (since === null) listing = undefined;
    }
    if (listing === undefined) {
      listing = this.list(tenant);
      this.listings.set(k, listing);
      // A failed listing is not kept: the next build lists again.
      listing.catch(() => {
        if (this.listings.get(k) === listing) this.listings.delete(k);
      });
      since = null;
    }
    const l = await listing;
    const wanted = new Set(partitions);
    const ids: number[] = [];
    for (const p of wanted) for (const id of l.byPartition.get(p) ?? []) ids.push(id);
    if (since !== null && since.size > 0) {
      const partitionOf = this.o.partitionOf(tenant);
      const known = new Set(ids);
      for (const id of since) {
        const n = Number(id);
        if (wanted.has(partitionOf(id)) && Number.isSafeInteger(n) && String(n) === id && !known.has(n)) ids.push(n);
      }
    }
    ids.sort((a, b) => a - b);
    return ids.map(String);
  }

  private async list(tenant: TenantContext): Promise<IdListing> {
    const scope = scopeOf(tenant);
    const store = this.o.store;
    // The version first: profiles created while listing are among the changes since it.
    const version = store.changesSince(scope, null).version;
    const partitionOf = this.o.partitionOf(tenant);
    const byPartition = new Map<number, number[]>();
    for (let after: string | undefined; ;) {
      const page = await store.listProfileIds(scope, after === undefined ? { limit: LIST_PAGE } : { afterProfileId: after, limit: LIST_PAGE });
      for (const id of page) {
        const p = partitionOf(id);
        let list = byPartition.get(p);
        if (list === undefined) byPartition.set(p, (list = []));
        list.push(Number(id));
      }
      if (page.length < LIST_PAGE) break;
      after = page[page.length - 1];
    }
    return { version, byPartition };
  }
}
