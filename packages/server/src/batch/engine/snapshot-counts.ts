/**
 * How many profiles of a sandbox qualify for one query at `now`, as a batch job evaluates it: over
 * the resident columnar snapshot of the sandbox's default merge policy (built on first use,
 * refreshed from the change feed otherwise — shared with jobs, previews and backfills), one
 * `qualifyOnSnapshot` predicate over every profile (in the evaluation pool when there is one).
 * What a computed attribute's first evaluation counts (computed/processing.ts, its
 * `ResidentProfiles`; wired in app.ts: batch does not import computed).
 */
import { format, type Query } from "@segmentd/pql";
import { NO_MERGE_POLICY } from "../../profiles/types.js";
import { EvaluationBudget } from "../../services/evaluation-budget.js";
import { PROFILE_SCHEMA_CLASS } from "../../services/merge-policies.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import type { MergePolicyRepository } from "../../stores/types.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { statusOverrides, type SnapshotStore } from "../columnar/snapshot.js";
import { evaluatedPolicy } from "../jobs/job-runner.js";
import { qualifyOnSnapshot } from "./columnar-engine.js";
import { usesEvents } from "./uses-events.js";
import { mergeCounts, type FleetReads } from "../previews/fleet-reads.js";

export interface CountOptions {
  /** Profiles read so far while the snapshot is built or refreshed. */
  onProgress?: (profilesRead: number) => void;
  /** Checked between the build's chunks (the build stops: BuildCancelledError). */
  isCancelled?: () => boolean;
}

export class SnapshotCounts {
  private closed = false;
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly profiles: SnapshotStore,
    private readonly mergePolicies: Pick<MergePolicyRepository, "getDefault">,
    private readonly snapshots: SnapshotCache,
    /** On a hub whose workers evaluate (#44): the shards count, not a snapshot here (no build progress to report then). */
    private readonly fleet?: FleetReads,
  ) {}

  /**
   * Live profiles of the snapshot and those qualifying (opted-out ones included: nothing is
   * activated); null once the batch area is closing (its snapshots and pool go away).
   */
  qualifying(ctx: TenantContext, query: Query, now: number, o: CountOptions = {}): Promise<{ profiles: number; qualifying: number } | null> {
    if (this.closed) return Promise.resolve(null);
    const run = this.count(ctx, query, now, o);
    this.inFlight.add(run);
    void run.catch(() => undefined).finally(() => this.inFlight.delete(run));
    return run;
  }

  /** Later calls answer null; resolves once the calls under way have finished (before the snapshots close). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
  }

  private async count(ctx: TenantContext, query: Query, now: number, o: CountOptions): Promise<{ profiles: number; qualifying: number }> {
    const scope = scopeOf(ctx);
    const d = await this.mergePolicies.getDefault(scope, PROFILE_SCHEMA_CLASS);
    const policy = d === undefined ? NO_MERGE_POLICY : evaluatedPolicy(d.policy);
    if (this.fleet !== undefined) return mergeCounts(await this.fleet.read(scope, { kind: "count", text: format(query), policy, now }));
    const snap = await this.snapshots.get(this.profiles, scope, policy, {
      events: policy.identityGraph.type !== "pdg" || usesEvents(query),
      ...(o.onProgress === undefined ? {} : { onProgress: o.onProgress }),
      ...(o.isCancelled === undefined ? {} : { isCancelled: o.isCancelled }),
    });
    // Per-profile budgets, no deadline, as a job's.
    const budget = new EvaluationBudget(ctx.limits, { deadline: false });
    const qual = await qualifyOnSnapshot(this.snapshots.pool, snap, query, now, statusOverrides(snap, new Map()), false, budget);
    let n = 0;
    for (let g = 0; g < qual.length; g++) n += qual[g]!;
    return { profiles: snap.profileCount, qualifying: n };
  }
}
