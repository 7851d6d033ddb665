/**
 * Edit impact (issue #28): what saving a new expression, merge policy or consent rule for a
 * definition would do to its audience — the profiles that would enter, leave and stay, with a
 * sample of each, and the new expression's eligibility. Both the stored and the edited
 * definition run as a batch job runs them (columnar-engine.ts `qualifyOnSnapshot`, the same
 * compiled predicate, inSegment read from the stored memberships) over the resident snapshot of
 * their merge policy, refreshed from the change feed first: the counts are exact for the data
 * as it is now, and equal what a batch job before and one after the edit would write.
 */
import { parse, type Query } from "@segmentd/pql";
import type { Clock } from "../../platform/clock.js";
import type { Identity, MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { NO_MERGE_POLICY } from "../../profiles/types.js";
import { analyzeExpression, type ExpressionInput, type QueryExpander } from "../../services/definition-analysis.js";
import { EvaluationBudget } from "../../services/evaluation-budget.js";
import { DEFAULT_LIMITS } from "../../platform/config.js";
import { evaluationInfoOf, type EvaluationInfoInput } from "../../services/definitions.js";
import { ApiError, ErrorCodes, badRequest, notFound } from "../../services/errors.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import type { EvaluationInfo } from "../../stores/records.js";
import type { MetadataStore } from "../../stores/types.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { membersOfPids, statusOverrides, type BuildOptions, type Snapshot } from "../columnar/snapshot.js";
import type { EvaluationPool } from "../pool/evaluation-pool.js";
import type { MembershipReads } from "../../profiles/store.js";
import { qualifyOnSnapshot } from "../engine/columnar-engine.js";
import { evaluatedPolicy } from "../jobs/job-runner.js";
import { usesEvents } from "../engine/uses-events.js";
import { inSegmentMemberPids, type PreviewStore } from "./preview-service.js";
import { mergeComparisons, type ComparisonCounts, type FleetReads } from "./fleet-reads.js";

export type { ComparisonCounts } from "./fleet-reads.js";

export const IMPACT_DEFAULT_SAMPLE = 10;
export const IMPACT_MAX_SAMPLE = 100;

export interface ImpactInput {
  expression?: ExpressionInput;
  mergePolicyId?: string;
  dataGovernancePolicy?: { excludeOptOut: boolean };
  /** The evaluation methods the edit would ask for (as on save: a flag left out is off). */
  evaluationInfo?: EvaluationInfoInput;
  sampleSize?: number;
}

/** The answer of POST /segment/eligibility for the edited expression (services/definitions.ts). */
export type EligibilityOf = (ctx: TenantContext, expr: ExpressionInput, mergePolicyId: string, schemaName: string) => Promise<{ reasons: { continuous: string[]; synchronous: string[] } }>;

/** One version of the definition: what a job would evaluate. */
export interface ImpactSide {
  query: Query;
  text: string;
  policy: MergePolicySpec;
  mergePolicyId: string;
  excludeOptOut: boolean;
}

/** What impact reports of each version beside its count. */
type SideView = { qualified: number; expression: string; mergePolicyId: string; excludeOptOut: boolean; evaluationInfo: EvaluationInfo };

export interface ImpactGroup {
  count: number;
  sample: { profileId: string; identities: Identity[] }[];
}

export interface Comparison {
  profiles: number;
  before: number;
  after: number;
  enter: ImpactGroup;
  leave: ImpactGroup;
  stay: ImpactGroup;
}

export interface Impact {
  segmentId: string;
  evaluatedAt: string;
  /** Every profile of the snapshot was evaluated both ways: no sampling, no interval. */
  exact: true;
  profiles: number;
  before: SideView;
  after: SideView;
  enter: ImpactGroup;
  leave: ImpactGroup;
  stay: ImpactGroup;
  eligibility: unknown;
  /** Methods the edit asks for that the edited definition is not eligible for: saving it would be refused (SEGMENTD-ELIGIBILITY-400). */
  refused: { method: "continuous" | "synchronous"; message: string }[];
  tookMs: number;
}

export type ImpactStore = PreviewStore;

export class ImpactService {
  constructor(
    private readonly meta: MetadataStore,
    private readonly profiles: ImpactStore,
    private readonly snapshots: SnapshotCache,
    private readonly clock: Clock,
    private readonly eligibility: EligibilityOf,
    /** Computed attribute paths become their aggregates, as a definition's save makes them. */
    private readonly expand?: QueryExpander,
    /** On a hub whose workers evaluate (#44): the shards compare, not the snapshots here. */
    private readonly fleet?: FleetReads,
  ) {}

  async impact(ctx: TenantContext, id: string, input: ImpactInput): Promise<Impact> {
    const t0 = performance.now();
    if (input.expression === undefined && input.mergePolicyId === undefined && input.dataGovernancePolicy === undefined && input.evaluationInfo === undefined) {
      throw badRequest("Send the edit to measure: an expression, a mergePolicyId, a dataGovernancePolicy or an evaluationInfo");
    }
    const scope = scopeOf(ctx);
    const rec = await this.meta.definitions.get(scope, id);
    if (!rec) throw notFound("Segment definition", id);
    const before: ImpactSide = {
      query: parse(rec.canonicalText),
      text: rec.canonicalText,
      mergePolicyId: rec.definition.mergePolicyId,
      policy: await this.policy(ctx, rec.definition.mergePolicyId, false),
      excludeOptOut: rec.definition.dataGovernancePolicy.excludeOptOut,
    };
    let after: ImpactSide = { ...before };
    if (input.expression !== undefined) {
      // Validation, limits and an inSegment cycle through this definition are refused as on save.
      const expand = this.expand;
      const a = await analyzeExpression(this.meta.definitions, scope, input.expression, ctx.limits, id, expand === undefined ? undefined : (q) => expand(ctx, q));
      after = { ...after, query: a.query, text: a.text };
    }
    if (input.mergePolicyId !== undefined) after = { ...after, mergePolicyId: input.mergePolicyId, policy: await this.policy(ctx, input.mergePolicyId, true) };
    if (input.dataGovernancePolicy !== undefined) after = { ...after, excludeOptOut: input.dataGovernancePolicy.excludeOptOut };
    const eligibility = await this.eligibility(ctx, { type: "PQL", format: "pql/text", value: after.text }, after.mergePolicyId, rec.definition.schema.name);
    const methods = { before: rec.definition.evaluationInfo, after: input.evaluationInfo === undefined ? rec.definition.evaluationInfo : evaluationInfoOf(input.evaluationInfo) };
    const refused = (["synchronous", "continuous"] as const).flatMap((m) => (methods.after[m].enabled ? eligibility.reasons[m].map((message) => ({ method: m, message })) : []));

    const now = this.clock.now();
    const wanted = Math.min(input.sampleSize ?? IMPACT_DEFAULT_SAMPLE, IMPACT_MAX_SAMPLE);
    const wire = (x: ImpactSide) => ({ text: x.text, policy: x.policy, excludeOptOut: x.excludeOptOut });
    const c = this.fleet === undefined
      ? await compareEdit(this.profiles, this.snapshots, scope, before, after, now, wanted, new EvaluationBudget(ctx.limits, { deadline: true }))
      : await withIdentities(this.profiles, scope, mergeComparisons(await this.fleet.read(scope, { kind: "compare", before: wire(before), after: wire(after), now, wanted }), wanted));
    const side = (s: ImpactSide, qualified: number, evaluationInfo: EvaluationInfo): SideView => ({ qualified, expression: s.text, mergePolicyId: s.mergePolicyId, excludeOptOut: s.excludeOptOut, evaluationInfo });
    return {
      segmentId: id,
      evaluatedAt: new Date(now).toISOString(),
      exact: true,
      profiles: c.profiles,
      before: side(before, c.before, methods.before),
      after: side(after, c.after, methods.after),
      enter: c.enter,
      leave: c.leave,
      stay: c.stay,
      eligibility,
      refused,
      tookMs: Math.round(performance.now() - t0),
    };
  }

  /** A merge policy as the job runner resolves it (a missing stored one: no merging, as jobs do). */
  private async policy(ctx: TenantContext, id: string, named: boolean): Promise<MergePolicySpec> {
    const p = (await this.meta.mergePolicies.get(scopeOf(ctx), id))?.policy;
    if (p === undefined) {
      if (named) throw new ApiError(400, ErrorCodes.mergePolicy, `merge policy '${id}' does not exist in sandbox '${ctx.sandbox.sandboxName}'`);
      return NO_MERGE_POLICY;
    }
    return evaluatedPolicy(p);
  }
}

/** A sandbox's snapshot under a merge policy (the resident cache's, or a worker shard's), and the pool that evaluates over it. */
export interface SnapshotSource {
  profiles: MembershipReads;
  snapshot(policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot>;
  pool: EvaluationPool | null;
}

/** One version's qualifying profiles over its snapshot (flags by global ordinal). */
export interface EvaluatedSide {
  snap: Snapshot;
  qual: Uint8Array;
}

/**
 * Both versions over every profile of their snapshots (refreshed from the change feed first) and
 * the three groups, each with up to `wanted` profiles and their identities.
 */
export async function compareEdit(profiles: ImpactStore, snapshots: SnapshotCache, scope: TenantScope, before: ImpactSide, after: ImpactSide, now: number, wanted: number, budget?: EvaluationBudget): Promise<Comparison> {
  const source: SnapshotSource = { profiles, pool: snapshots.pool, snapshot: (policy, o) => snapshots.get(profiles, scope, policy, o) };
  const [c] = await compareSides(source, scope, before, after, now, wanted, budget, null);
  return withIdentities(profiles, scope, c!);
}

/** Both versions evaluated and compared (per slot with `split`, as compareFlags). */
export async function compareSides(source: SnapshotSource, scope: TenantScope, before: ImpactSide, after: ImpactSide, now: number, wanted: number, budget: EvaluationBudget | undefined, split: { slots: (snap: Snapshot) => Int32Array; n: number } | null): Promise<ComparisonCounts[]> {
  const was = await evaluateSide(source, scope, before, now, budget);
  const will = after.policy === before.policy && after.query === before.query && after.excludeOptOut === before.excludeOptOut
    ? was
    : await evaluateSide(source, scope, after, now, budget);
  return compareFlags(was, will, wanted, split);
}

/** Sample ids with their identities, as the API answers them. */
export async function withIdentities(profiles: Pick<ImpactStore, "graphIdentities">, scope: TenantScope, c: ComparisonCounts): Promise<Comparison> {
  const sample = async (g: { count: number; pids: string[] }): Promise<ImpactGroup> => ({
    count: g.count,
    sample: await Promise.all(g.pids.map(async (profileId) => ({ profileId, identities: await profiles.graphIdentities(scope, profileId) }))),
  });
  return { profiles: c.profiles, before: c.before, after: c.after, enter: await sample(c.enter), leave: await sample(c.leave), stay: await sample(c.stay) };
}

/**
 * The groups of two evaluations, in one slot or per slot (`split.slots` gives each global ordinal
 * of a snapshot its slot, -1: not counted).
 */
export function compareFlags(was: EvaluatedSide, will: EvaluatedSide, wanted: number, split: { slots: (snap: Snapshot) => Int32Array; n: number } | null): ComparisonCounts[] {
  const n = split?.n ?? 1;
  const out: ComparisonCounts[] = Array.from({ length: n }, () => ({ profiles: 0, before: 0, after: 0, enter: { count: 0, pids: [] }, leave: { count: 0, pids: [] }, stay: { count: 0, pids: [] } }));
  const add = (g: { count: number; pids: string[] }, pid: () => string) => {
    g.count++;
    if (g.pids.length < wanted) g.pids.push(pid());
  };
  const wasSlots = split?.slots(was.snap) ?? null;
  // Profiles are matched across the two snapshots by id when the merge policies differ.
  const inAfter = will.snap === was.snap ? will.qual : remap(will, was.snap);
  for (let g = 0; g < was.qual.length; g++) {
    const slot = wasSlots === null ? 0 : wasSlots[g]!;
    if (slot < 0) continue;
    const c = out[slot]!;
    const b = was.qual[g] === 1;
    const a = inAfter[g] === 1;
    if (b) c.before++;
    if (a) c.after++;
    if (a && !b) add(c.enter, () => was.snap.profileIdOf(g));
    else if (b && !a) add(c.leave, () => was.snap.profileIdOf(g));
    else if (a && b) add(c.stay, () => was.snap.profileIdOf(g));
  }
  const willSlots = will.snap === was.snap ? wasSlots : split?.slots(will.snap) ?? null;
  // A profile only the new policy's snapshot holds (stitched differently) can only enter.
  if (will.snap !== was.snap) {
    for (let g = 0; g < will.qual.length; g++) {
      const slot = willSlots === null ? 0 : willSlots[g]!;
      if (slot < 0 || will.qual[g] !== 1 || was.snap.locate(will.snap.profileIdOf(g)) >= 0) continue;
      out[slot]!.after++;
      add(out[slot]!.enter, () => will.snap.profileIdOf(g));
    }
  }
  if (split === null) out[0]!.profiles = Math.max(was.snap.profileCount, will.snap.profileCount);
  else {
    const live = (slots: Int32Array | null) => {
      const per = new Array<number>(n).fill(0);
      if (slots !== null) for (const s of slots) if (s >= 0) per[s]!++;
      return per;
    };
    const a = live(wasSlots);
    const b = will.snap === was.snap ? a : live(willSlots);
    out.forEach((c, s) => (c.profiles = Math.max(a[s]!, b[s]!)));
  }
  return out;
}

async function evaluateSide(source: SnapshotSource, scope: TenantScope, s: ImpactSide, now: number, budget: EvaluationBudget | undefined): Promise<EvaluatedSide> {
  const snap = await source.snapshot(s.policy, { events: s.policy.identityGraph.type !== "pdg" || usesEvents(s.query) });
  const members = new Map<string, Uint8Array>();
  for (const [ref, pids] of await inSegmentMemberPids(source.profiles, scope, s.query)) members.set(ref, membersOfPids(snap, pids));
  const qual = await qualifyOnSnapshot(source.pool, snap, s.query, now, statusOverrides(snap, members), s.excludeOptOut, budget ?? new EvaluationBudget(DEFAULT_LIMITS, { deadline: false }));
  return { snap, qual };
}

/** `r`'s flags over another snapshot's ordinals (the same profile id). */
function remap(r: EvaluatedSide, onto: Snapshot): Uint8Array {
  const out = new Uint8Array(onto.ordinals);
  for (let g = 0; g < r.qual.length; g++) {
    if (r.qual[g] !== 1) continue;
    const t = onto.locate(r.snap.profileIdOf(g));
    if (t >= 0) out[t] = 1;
  }
  return out;
}
