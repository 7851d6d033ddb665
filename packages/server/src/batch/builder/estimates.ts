/**
 * The builder's live estimate (issue #29): the size of an audience and of each of its top-level
 * rules, answered in one request instead of a preview to create and poll per expression. Each
 * expression is counted exactly as POST /preview + GET /estimate count it — the same sample (a
 * stable hash of the profile id, AEP's sample sizes), the same resident snapshot and columnar
 * predicate (preview-service.ts `sampleOnSnapshot`), the same interval — so the builder's figures
 * equal the estimate API's for the same data. Nothing is stored.
 *
 * The builder sends an audience with its top-level rules: an expression that is the `and` (or
 * `or`) of other expressions of the request is not evaluated again but combined from their entry
 * flags — exact: PQL's `and`/`or` read each operand as the engines read a top-level value
 * (`toBoolean`) and give a boolean, so an entry's flag for `a and b` is its flag for `a` and its
 * flag for `b`.
 */
import type { QueryExpander } from "../../services/definition-analysis.js";
import { format, parse, PqlError, type Expr, type Query } from "@segmentd/pql";
import type { Clock } from "../../platform/clock.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import { costRefusal, EvaluationBudget } from "../../services/evaluation-budget.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { usesEvents } from "../engine/uses-events.js";
import { countSampleBySlot, entryFlags, estimateFrom, inSegmentMemberPids, previewPolicy, sampleSize, type PreviewStore, type SampleCount } from "../previews/preview-service.js";
import { mergeSamples, type FleetReads } from "../previews/fleet-reads.js";
import type { Snapshot } from "../columnar/snapshot.js";
import type { EvaluationPool } from "../pool/evaluation-pool.js";
import type { MembershipReads } from "../../profiles/store.js";
import type { TenantScope } from "../../profiles/types.js";

export const MAX_ESTIMATE_EXPRESSIONS = 20;

export interface BuilderEstimateInput {
  expressions: string[];
  graphType?: "none" | "pdg";
}

export interface ExpressionEstimate {
  estimatedSize: number;
  standardError: number;
  estimatedSizeRange: { low: number; high: number };
  profilesReadSoFar: number;
  profilesMatchedSoFar: number;
}

export interface BuilderEstimates {
  evaluatedAt: string;
  totalRows: number;
  numRowsToRead: number;
  confidenceInterval: "95%";
  estimates: ExpressionEstimate[];
  tookMs: number;
}

export class BuilderEstimator {
  constructor(
    private readonly profiles: PreviewStore,
    private readonly snapshots: SnapshotCache,
    private readonly clock: Clock,
    /** Computed attribute paths become their aggregates, as a definition's save makes them (computed/expand.ts). */
    private readonly expand?: QueryExpander,
    /** On a hub whose workers evaluate (#44): the shards count, not a snapshot here. */
    private readonly fleet?: FleetReads,
  ) {}

  async estimate(ctx: TenantContext, input: BuilderEstimateInput): Promise<BuilderEstimates> {
    const t0 = performance.now();
    const queries = input.expressions.map((text, i) => {
      const bytes = Buffer.byteLength(text, "utf8");
      if (bytes > ctx.limits.expressionBytes) throw new ApiError(400, ErrorCodes.limit, `expressions[${i}] is ${bytes} bytes; the limit is ${ctx.limits.expressionBytes} bytes`);
      let q: Query;
      try {
        q = parse(text);
      } catch (e) {
        if (e instanceof PqlError) throw new ApiError(400, ErrorCodes.invalidPql, `expressions[${i}] is not valid PQL: ${e.message}`);
        throw e;
      }
      const costly = costRefusal(text, q, ctx.limits, `expressions[${i}]`);
      if (costly !== null) throw costly;
      return q;
    });
    if (this.expand !== undefined) {
      for (const [i, q] of queries.entries()) {
        const x = await this.expand(ctx, q);
        if (x === q) continue;
        const costly = costRefusal(format(x), x, ctx.limits, `expressions[${i}]`);
        if (costly !== null) throw costly;
        queries[i] = x;
      }
    }
    const budget = new EvaluationBudget(ctx.limits, { deadline: true });
    const scope = scopeOf(ctx);
    const total = await this.profiles.countProfiles(scope);
    const want = sampleSize(total);
    const fraction = total === 0 ? 1 : want / total;
    const now = this.clock.now();
    const counts = this.fleet === undefined
      ? await this.onSnapshot(ctx, queries, input.graphType, fraction, now, budget)
      : mergeSamples(await this.fleet.read(scope, { kind: "sample", graphType: input.graphType ?? "none", expressions: queries.map((q) => format(q)), fraction, keepMembers: 0, now }), queries.length, 0);
    const estimates = counts.map((r): ExpressionEstimate => {
      const e = estimateFrom({ totalRows: total, read: r.read, matched: r.matched });
      return { estimatedSize: e.size, standardError: e.standardError, estimatedSizeRange: { low: e.low, high: e.high }, profilesReadSoFar: r.read, profilesMatchedSoFar: r.matched };
    });
    return { evaluatedAt: new Date(now).toISOString(), totalRows: total, numRowsToRead: want, confidenceInterval: "95%", estimates, tookMs: Math.round(performance.now() - t0) };
  }

  /** Over the resident snapshot of the preview's merge rule. */
  private async onSnapshot(ctx: TenantContext, queries: Query[], graphType: "none" | "pdg" | undefined, fraction: number, now: number, budget: EvaluationBudget): Promise<SampleCount[]> {
    const policy = previewPolicy(graphType);
    const snap = await this.snapshots.get(this.profiles, scopeOf(ctx), policy, { events: policy.identityGraph.type !== "pdg" || queries.some(usesEvents) });
    return (await sampleCounts({ snap, profiles: this.profiles, scope: scopeOf(ctx), pool: this.snapshots.pool }, queries, now, fraction, 0, budget, null, 1)).map((c) => c[0]!);
  }
}

/**
 * Each expression's sample counts over a snapshot, per slot (`slots`: each global ordinal's slot,
 * null: one slot) — an `and`/`or` of other expressions combined from their entry flags. The
 * builder's estimates in process and a worker's answer over its shard (#44) both count here.
 */
export async function sampleCounts(on: { snap: Snapshot; profiles: MembershipReads; scope: TenantScope; pool: EvaluationPool | null }, queries: readonly Query[], now: number, fraction: number, keepMembers: number, budget: EvaluationBudget, slots: Int32Array | null, n: number): Promise<SampleCount[][]> {
  const plans = combinations(queries);
  const flags: Array<Array<Uint8Array | null>> = [];
  for (const [i, q] of queries.entries()) {
    if (plans[i] === null) flags[i] = await entryFlags(on.snap, q, now, await inSegmentMemberPids(on.profiles, on.scope, q), budget, on.pool);
  }
  const out: SampleCount[][] = [];
  for (const [i, plan] of plans.entries()) {
    if (plan !== null) flags[i] = combine(plan.op, plan.of.map((j) => flags[j]!));
    out.push(await countSampleBySlot(on.snap, flags[i]!, fraction, keepMembers, slots, n));
  }
  return out;
}

/** Each expression's operands when it is the `and`/`or` of other (evaluated) expressions of the list; null otherwise. */
export function combinations(queries: readonly Query[]): Array<{ op: "and" | "or"; of: number[] } | null> {
  const byText = new Map<string, number>();
  queries.forEach((q, i) => {
    const text = format(q);
    if (q.params.length === 0 && !byText.has(text)) byText.set(text, i);
  });
  const plans = queries.map((q, i): { op: "and" | "or"; of: number[] } | null => {
    if (q.params.length > 0 || q.body.type !== "Binary" || (q.body.op !== "and" && q.body.op !== "or")) return null;
    const op = q.body.op;
    const of: number[] = [];
    for (const operand of operands(q.body, op)) {
      const j = byText.get(format({ type: "Query", params: [], body: operand }));
      if (j === undefined || j === i) return null;
      of.push(j);
    }
    return { op, of };
  });
  // Only expressions evaluated on their own are combined (no chains of combinations).
  return plans.map((p) => (p !== null && p.of.every((j) => plans[j] === null) ? p : null));
}

/** The operands of a left- or right-nested run of one boolean operator. */
function operands(e: Expr, op: "and" | "or"): Expr[] {
  const out: Expr[] = [];
  const stack: Expr[] = [e];
  while (stack.length > 0) {
    const x = stack.pop()!;
    if (x.type === "Binary" && x.op === op) stack.push(x.right, x.left);
    else out.push(x);
  }
  return out;
}

/** Entry flags of an `and`/`or` from its operands' flags. */
export function combine(op: "and" | "or", parts: ReadonlyArray<ReadonlyArray<Uint8Array | null>>): Array<Uint8Array | null> {
  return parts[0]!.map((first, k) => {
    if (first === null) return null;
    const out = new Uint8Array(first);
    for (const p of parts.slice(1)) {
      const f = p[k]!;
      if (op === "and") for (let r = 0; r < out.length; r++) out[r] = out[r]! & f[r]!;
      else for (let r = 0; r < out.length; r++) out[r] = out[r]! | f[r]!;
    }
    return out;
  });
}
