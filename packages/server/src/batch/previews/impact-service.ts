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
import { membersOfPids, statusOverrides, type Snapshot } from "../columnar/snapshot.js";
import { qualifyOnSnapshot } from "../engine/columnar-engine.js";
import { evaluatedPolicy } from "../jobs/job-runner.js";
import { usesEvents } from "../engine/uses-events.js";
import { inSegmentMemberPids, type PreviewStore } from "./preview-service.js";

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
    const c = await compareEdit(this.profiles, this.snapshots, scope, before, after, now, wanted, new EvaluationBudget(ctx.limits, { deadline: true }));
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

/**
 * Both versions over every profile of their snapshots (refreshed from the change feed first) and
 * the three groups, each with up to `wanted` profiles and their identities.
 */
export async function compareEdit(profiles: ImpactStore, snapshots: SnapshotCache, scope: TenantScope, before: ImpactSide, after: ImpactSide, now: number, wanted: number, budget?: EvaluationBudget): Promise<Comparison> {
  const was = await evaluateSide(profiles, snapshots, scope, before, now, budget);
  const will = after.policy === before.policy && after.query === before.query && after.excludeOptOut === before.excludeOptOut
    ? was
    : await evaluateSide(profiles, snapshots, scope, after, now, budget);
  const groups = { enter: { count: 0, pids: [] as string[] }, leave: { count: 0, pids: [] as string[] }, stay: { count: 0, pids: [] as string[] } };
  const add = (g: { count: number; pids: string[] }, pid: () => string) => {
    g.count++;
    if (g.pids.length < wanted) g.pids.push(pid());
  };
  // Profiles are matched across the two snapshots by id when the merge policies differ.
  const inAfter = will.snap === was.snap ? will.qual : remap(will, was.snap);
  let qualifiedBefore = 0;
  for (let g = 0; g < was.qual.length; g++) {
    const b = was.qual[g] === 1;
    const a = inAfter[g] === 1;
    if (b) qualifiedBefore++;
    if (a && !b) add(groups.enter, () => was.snap.profileIdOf(g));
    else if (b && !a) add(groups.leave, () => was.snap.profileIdOf(g));
    else if (a && b) add(groups.stay, () => was.snap.profileIdOf(g));
  }
  // A profile only the new policy's snapshot holds (stitched differently) can only enter.
  if (will.snap !== was.snap) {
    for (let g = 0; g < will.qual.length; g++) {
      if (will.qual[g] === 1 && was.snap.locate(will.snap.profileIdOf(g)) < 0) add(groups.enter, () => will.snap.profileIdOf(g));
    }
  }
  const sample = async (g: { count: number; pids: string[] }): Promise<ImpactGroup> => ({
    count: g.count,
    sample: await Promise.all(g.pids.map(async (profileId) => ({ profileId, identities: await profiles.graphIdentities(scope, profileId) }))),
  });
  return {
    profiles: Math.max(was.snap.profileCount, will.snap.profileCount),
    before: qualifiedBefore,
    after: groups.enter.count + groups.stay.count,
    enter: await sample(groups.enter),
    leave: await sample(groups.leave),
    stay: await sample(groups.stay),
  };
}

async function evaluateSide(profiles: ImpactStore, snapshots: SnapshotCache, scope: TenantScope, s: ImpactSide, now: number, budget: EvaluationBudget | undefined): Promise<{ snap: Snapshot; qual: Uint8Array }> {
  const snap = await snapshots.get(profiles, scope, s.policy, { events: s.policy.identityGraph.type !== "pdg" || usesEvents(s.query) });
  const members = new Map<string, Uint8Array>();
  for (const [ref, pids] of await inSegmentMemberPids(profiles, scope, s.query)) members.set(ref, membersOfPids(snap, pids));
  const qual = await qualifyOnSnapshot(snapshots.pool, snap, s.query, now, statusOverrides(snap, members), s.excludeOptOut, budget ?? new EvaluationBudget(DEFAULT_LIMITS, { deadline: false }));
  return { snap, qual };
}

/** `r`'s flags over another snapshot's ordinals (the same profile id). */
function remap(r: { snap: Snapshot; qual: Uint8Array }, onto: Snapshot): Uint8Array {
  const out = new Uint8Array(onto.ordinals);
  for (let g = 0; g < r.qual.length; g++) {
    if (r.qual[g] !== 1) continue;
    const t = onto.locate(r.snap.profileIdOf(g));
    if (t >= 0) out[t] = 1;
  }
  return out;
}
