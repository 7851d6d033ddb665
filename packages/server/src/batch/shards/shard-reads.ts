/**
 * A worker's side of previews, the builder's estimates and edit impact over the fleet (issue #44;
 * the requests and the merge are batch/previews/fleet-reads.ts): the answer over its shard, one per
 * partition it holds. The requests carry PQL texts (computed attributes already expanded by the
 * hub) and merge policies; inSegment reads the stored memberships as jobs do (a worker sees its
 * partitions' members only, as its snapshot holds only their profiles).
 */
import { parse } from "@segmentd/pql";
import { EvaluationBudget } from "../../services/evaluation-budget.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import { sampleCounts } from "../builder/estimates.js";
import { statusOverrides } from "../columnar/snapshot.js";
import { qualifyOnSnapshot } from "../engine/columnar-engine.js";
import { usesEvents } from "../engine/uses-events.js";
import type { ShardReadAnswer, ShardReadRequest, SideText } from "../previews/fleet-reads.js";
import { compareSides, type ImpactSide } from "../previews/impact-service.js";
import { previewPolicy } from "../previews/preview-service.js";
import type { ShardRead } from "./worker-shard.js";

/** A worker's answers over its shard, one per held partition. */
export async function answerOnShard(r: ShardRead, tenant: TenantContext, req: ShardReadRequest): Promise<Map<number, ShardReadAnswer>> {
  const scope = scopeOf(tenant);
  const budget = new EvaluationBudget(tenant.limits, { deadline: true });
  const n = r.partitions.length;
  const out = new Map<number, ShardReadAnswer>();
  if (req.kind === "sample") {
    const queries = req.expressions.map((t) => parse(t));
    const policy = previewPolicy(req.graphType);
    const snap = await r.snapshot(policy, { events: policy.identityGraph.type !== "pdg" || queries.some(usesEvents) });
    const slots = r.slots(snap);
    // As the builder counts in process (an `and`/`or` of other expressions combined from their flags).
    const per = await sampleCounts({ snap, profiles: r.profiles, scope, pool: r.pool }, queries, req.now, req.fraction, req.keepMembers, budget, slots, n);
    r.partitions.forEach((p, slot) => out.set(p, { kind: "sample", counts: per.map((c) => c[slot]!) }));
    return out;
  }
  if (req.kind === "count") {
    const q = parse(req.text);
    const snap = await r.snapshot(req.policy, { events: req.policy.identityGraph.type !== "pdg" || usesEvents(q) });
    // Per-profile budgets, no deadline, as a job's (snapshot-counts.ts).
    const qual = await qualifyOnSnapshot(r.pool, snap, q, req.now, statusOverrides(snap, new Map()), false, new EvaluationBudget(tenant.limits, { deadline: false }));
    const slots = r.slots(snap);
    const profiles = new Array<number>(n).fill(0);
    const qualifying = new Array<number>(n).fill(0);
    for (let g = 0; g < slots.length; g++) {
      const slot = slots[g]!;
      if (slot < 0) continue;
      profiles[slot]!++;
      qualifying[slot]! += qual[g]!;
    }
    r.partitions.forEach((p, slot) => out.set(p, { kind: "count", profiles: profiles[slot]!, qualifying: qualifying[slot]! }));
    return out;
  }
  const side = (s: SideText): ImpactSide => ({ query: parse(s.text), text: s.text, policy: s.policy, mergePolicyId: "", excludeOptOut: s.excludeOptOut });
  const before = side(req.before);
  const same = req.after.text === req.before.text && req.after.excludeOptOut === req.before.excludeOptOut && JSON.stringify(req.after.policy) === JSON.stringify(req.before.policy);
  const after = same ? before : { ...side(req.after), ...(req.after.text === req.before.text ? { query: before.query } : {}), ...(JSON.stringify(req.after.policy) === JSON.stringify(req.before.policy) ? { policy: before.policy } : {}) };
  const counts = await compareSides(r, scope, before, after, req.now, req.wanted, budget, { slots: (s) => r.slots(s), n });
  r.partitions.forEach((p, slot) => out.set(p, { kind: "compare", counts: counts[slot]! }));
  return out;
}

