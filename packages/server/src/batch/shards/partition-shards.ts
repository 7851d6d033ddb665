/**
 * Batch shards (issue #44, the first part): the columnar snapshots of some of a deployment's
 * profile-keyed partitions — one per partition, sandbox and merge policy — built from the shared
 * profile store reading only that partition's profiles, kept on disk in the snapshot file format
 * (one directory per partition: a partition that moves away and back is loaded and refreshed, not
 * rebuilt) and refreshed from the store's change feed narrowed to the partition. A job's
 * evaluation over them gives, per partition, exactly what an evaluation over every profile gives
 * for that partition's profiles: a profile's memberships are its own, so segments of segments
 * need nothing of another partition (each partition evaluates in dependency order).
 *
 * Which partition a profile is in is the caller's (cluster/partitions.ts: batch imports nothing
 * of the cluster); so is which partitions are held here. Not yet used by segment jobs: the fan-out
 * of a job to the partitions' owners is the next part of #44.
 */
import path from "node:path";
import type { MembershipReads, ScanOptions, ScannedProfile } from "../../profiles/store.js";
import type { MembershipStatus, MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import { SnapshotCache, type SnapshotStats } from "../columnar/cache.js";
import type { ColumnarCompiled } from "../columnar/predicate.js";
import type { BuildOptions, Snapshot, SnapshotStore } from "../columnar/snapshot.js";
import { evaluateJob, type EvaluationOptions, type EvaluationOutcome, type JobDefinition } from "../engine/evaluate-job.js";

/** The store a shard is read from: snapshots, member lists. */
export type ShardSource = SnapshotStore & MembershipReads;

export interface PartitionShardsOptions {
  store: ShardSource;
  partitions: number;
  /** A sandbox's partition of a profile id (cluster/partitions.ts partitionOf). */
  partitionOf: (tenant: TenantContext) => (profileId: string) => number;
  /** Where the shards' files are kept (a subdirectory per partition); none: in memory only. */
  dir?: string;
  /** Names the store (a file written for another store, or another partition count, is ignored). */
  storeIdentity?: string;
  onWarning?: (message: string, err?: unknown) => void;
}

/** Profile ids listed per page while a sandbox's ids are split into partitions. */
const LIST_PAGE = 10_000;

/** A sandbox's profile ids by partition, as listed after the change feed's `version`. */
interface IdListing {
  version: number | null;
  byPartition: Map<number, number[]>;
}

export class PartitionShards {
  private readonly caches = new Map<number, SnapshotCache>();
  private readonly listings = new Map<string, Promise<IdListing>>();

  constructor(private readonly o: PartitionShardsOptions) {
    if (!Number.isSafeInteger(o.partitions) || o.partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${o.partitions}`);
  }

  /** The partition's snapshot of a sandbox under a merge policy: loaded from its file or built, then refreshed. */
  async snapshot(tenant: TenantContext, partition: number, policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot> {
    return this.cacheOf(partition).get(this.view(tenant, partition, null), scopeOf(tenant), policy, o);
  }

  /** What the partition's last snapshot read did (built, loaded, incremental, …), per cache key. */
  stats(partition: number): ReadonlyMap<string, SnapshotStats> {
    return this.caches.get(partition)?.lastStats ?? new Map();
  }

  /**
   * A job's evaluation of `definitions` over each partition's shard, in order: per partition the
   * outcome a whole evaluation has for that partition's profiles (its memberships to write, its
   * counters). Each definition's stored members are read once for all the partitions.
   */
  async evaluate(tenant: TenantContext, partitions: readonly number[], definitions: readonly JobDefinition[], opts: Omit<EvaluationOptions, "snapshots" | "backend" | "compiled">): Promise<Map<number, EvaluationOutcome>> {
    const members = new Map<string, Promise<Map<number, Float64Array>>>();
    const scope = scopeOf(tenant);
    const partitionOf = this.o.partitionOf(tenant);
    const split = (definitionId: string, status: MembershipStatus): Promise<Map<number, Float64Array>> => {
      const k = `${status}\u0000${definitionId}`;
      let p = members.get(k);
      if (p === undefined) {
        p = this.o.store.listMemberPids(scope, definitionId, status).then((pids) => splitPids(pids, partitionOf));
        members.set(k, p);
      }
      return p;
    };
    const out = new Map<number, EvaluationOutcome>();
    // Compiled once for every partition (the same definitions at the same instant).
    const compiled = new Map<string, ColumnarCompiled>();
    for (const partition of partitions) {
      const view = this.view(tenant, partition, async (definitionId, status) => (await split(definitionId, status)).get(partition) ?? new Float64Array(0));
      out.set(partition, await evaluateJob(view, scope, [...definitions], { ...opts, compiled, snapshots: this.cacheOf(partition) }));
    }
    return out;
  }

  /** The partition is no longer held here: its snapshots leave memory; its files stay for a later hold. */
  async release(partition: number): Promise<void> {
    const cache = this.caches.get(partition);
    if (cache === undefined) return;
    this.caches.delete(partition);
    await cache.close();
  }

  async close(): Promise<void> {
    const all = [...this.caches.keys()];
    await Promise.all(all.map((p) => this.release(p)));
    this.listings.clear();
  }

  private cacheOf(partition: number): SnapshotCache {
    if (!Number.isSafeInteger(partition) || partition < 0 || partition >= this.o.partitions) throw new RangeError(`partition ${partition} is not one of 0…${this.o.partitions - 1}`);
    let c = this.caches.get(partition);
    if (c === undefined) {
      c = new SnapshotCache({
        ...(this.o.dir === undefined ? {} : { dir: path.join(this.o.dir, `p${partition}`) }),
        // The partition and the count in the identity: a file of another split is never read as this one.
        storeIdentity: `${this.o.storeIdentity ?? ""}#partition ${partition} of ${this.o.partitions}`,
        ...(this.o.onWarning === undefined ? {} : { onWarning: this.o.onWarning }),
      });
      this.caches.set(partition, c);
    }
    return c;
  }

  /**
   * The store as the partition's shard reads it: scans of the partition's profiles only, changes
   * of them only, and (during an evaluation) its share of each definition's stored members.
   */
  private view(tenant: TenantContext, partition: number, memberPids: ((definitionId: string, status: MembershipStatus) => Promise<Float64Array>) | null): ShardSource {
    const store = this.o.store;
    const partitionOf = this.o.partitionOf(tenant);
    const mine = (id: string) => partitionOf(id) === partition;
    const scan = (scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> => {
      if (opts.profileIds !== undefined) return store.scanProfiles(scope, policy, { ...opts, profileIds: opts.profileIds.filter(mine) });
      // A full scan (a build): the partition's ids, listed once per sandbox for every partition.
      const listed = this.idsOf(tenant, partition);
      return (async function* () {
        const ids = await listed;
        if (ids.length > 0) yield* store.scanProfiles(scope, policy, { ...opts, profileIds: ids });
      })();
    };
    const overrides: Partial<ShardSource> = {
      scanProfiles: scan,
      changesSince: (scope, since) => {
        const r = store.changesSince(scope, since);
        if (r.profileIds === null) return r;
        const ids = new Set<string>();
        for (const id of r.profileIds) if (mine(id)) ids.add(id);
        return { version: r.version, profileIds: ids };
      },
      ...(memberPids === null ? {} : { listMemberPids: (_scope: TenantScope, definitionId: string, status: MembershipStatus) => memberPids(definitionId, status) }),
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
   * The partition's profile ids, ascending: one listing of the sandbox's ids split into every
   * partition, reused by the partitions built after it with the ids the change feed saw since
   * (new profiles; a removed one is skipped by the scan). Listed again when the feed no longer
   * reaches back to it.
   */
  private async idsOf(tenant: TenantContext, partition: number): Promise<string[]> {
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
    const ids = [...((await listing).byPartition.get(partition) ?? [])];
    if (since !== null && since.size > 0) {
      const partitionOf = this.o.partitionOf(tenant);
      const known = new Set(ids);
      for (const id of since) {
        const n = Number(id);
        if (partitionOf(id) === partition && Number.isSafeInteger(n) && String(n) === id && !known.has(n)) ids.push(n);
      }
      ids.sort((a, b) => a - b);
    }
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
    for (const list of byPartition.values()) list.sort((a, b) => a - b);
    return { version, byPartition };
  }
}

/** Member ids split by partition. */
function splitPids(pids: Float64Array, partitionOf: (profileId: string) => number): Map<number, Float64Array> {
  const lists = new Map<number, number[]>();
  for (const pid of pids) {
    const p = partitionOf(String(pid));
    let l = lists.get(p);
    if (l === undefined) lists.set(p, (l = []));
    l.push(pid);
  }
  return new Map([...lists].map(([p, l]) => [p, Float64Array.from(l)]));
}
