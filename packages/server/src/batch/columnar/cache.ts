/**
 * Resident snapshots, one per (tenant, merge policy semantics), kept between
 * jobs and previews and brought up to date before each use through the
 * profile store's change feed (`refreshSnapshot`). Refreshes of one key are
 * serialised; readers keep the Snapshot object they were given (refreshing
 * creates a new one), so a preview and a job never disturb each other.
 */
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { buildSnapshot, refreshSnapshot, type BuildOptions, type Snapshot, type SnapshotStore } from "./snapshot.js";

export interface SnapshotStats {
  mode: "built" | "unchanged" | "incremental" | "rebuilt";
  /** Profiles re-read incrementally (-1 for a full build). */
  changed: number;
  ms: number;
}

function policyKey(p: MergePolicySpec): string {
  return JSON.stringify([p.identityGraph.type, p.attributeMerge.type, p.attributeMerge.order ?? null]);
}

export interface SnapshotCacheOptions {
  /** Overlay share of the base above which a refresh rebuilds (default 0.05). */
  maxOverlayShare?: number;
}

export class SnapshotCache {
  private readonly entries = new Map<string, { snapshot: Snapshot | null; lock: Promise<unknown> }>();
  /** What the last `get` did, per key (benchmarks, logs). */
  readonly lastStats = new Map<string, SnapshotStats>();

  constructor(private readonly o: SnapshotCacheOptions = {}) {}

  private key(scope: TenantScope, policy: MergePolicySpec): string {
    return `${scope.orgId}\u0000${scope.sandboxName}\u0000${policyKey(policy)}`;
  }

  /** The current snapshot (built on first use, refreshed otherwise). */
  async get(store: SnapshotStore, scope: TenantScope, policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot> {
    const k = this.key(scope, policy);
    let e = this.entries.get(k);
    if (e === undefined) {
      e = { snapshot: null, lock: Promise.resolve() };
      this.entries.set(k, e);
    }
    const entry = e;
    const run = entry.lock.then(async () => {
      const t0 = performance.now();
      if (entry.snapshot === null) {
        // Events are read whenever the policy keeps them relevant, so one snapshot serves every later definition.
        entry.snapshot = await buildSnapshot(store, scope, policy, o);
        this.lastStats.set(k, { mode: "built", changed: -1, ms: performance.now() - t0 });
      } else {
        const r = await refreshSnapshot(store, scope, entry.snapshot, { ...o, events: o.events || entry.snapshot.withEvents, ...(this.o.maxOverlayShare === undefined ? {} : { maxOverlayShare: this.o.maxOverlayShare }) });
        if (r.snapshot !== entry.snapshot) entry.snapshot.releaseUnshared(r.snapshot);
        entry.snapshot = r.snapshot;
        this.lastStats.set(k, { mode: r.mode, changed: r.changed, ms: performance.now() - t0 });
      }
      return entry.snapshot;
    });
    entry.lock = run.catch(() => undefined);
    return run;
  }

  /** Stats of the last `get` for a key. */
  stats(scope: TenantScope, policy: MergePolicySpec): SnapshotStats | undefined {
    return this.lastStats.get(this.key(scope, policy));
  }

  /** Forgets every snapshot (tests; memory). */
  clear(): void {
    this.entries.clear();
  }
}
