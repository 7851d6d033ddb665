/**
 * The builder's live estimate (issue #29): the size of an audience and of each of its top-level
 * rules, answered in one request instead of a preview to create and poll per expression. Each
 * expression is counted exactly as POST /preview + GET /estimate count it — the same sample (a
 * stable hash of the profile id, AEP's sample sizes), the same resident snapshot and columnar
 * predicate (preview-service.ts `sampleOnSnapshot`), the same interval — so the builder's figures
 * equal the estimate API's for the same data. Nothing is stored.
 */
import { parse, PqlError } from "@segmentd/pql";
import type { Clock } from "../../platform/clock.js";
import { NO_MERGE_POLICY, type MergePolicySpec } from "../../profiles/types.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { usesEvents } from "../engine/uses-events.js";
import { estimateFrom, inSegmentMemberPids, sampleOnSnapshot, sampleSize, type PreviewStore } from "../previews/preview-service.js";

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
  ) {}

  async estimate(ctx: TenantContext, input: BuilderEstimateInput): Promise<BuilderEstimates> {
    const t0 = performance.now();
    const queries = input.expressions.map((text, i) => {
      const bytes = Buffer.byteLength(text, "utf8");
      if (bytes > ctx.limits.expressionBytes) throw new ApiError(400, ErrorCodes.limit, `expressions[${i}] is ${bytes} bytes; the limit is ${ctx.limits.expressionBytes} bytes`);
      try {
        return parse(text);
      } catch (e) {
        if (e instanceof PqlError) throw new ApiError(400, ErrorCodes.invalidPql, `expressions[${i}] is not valid PQL: ${e.message}`);
        throw e;
      }
    });
    const scope = scopeOf(ctx);
    // The preview's merge rule for its graphType (preview-service.ts).
    const policy: MergePolicySpec = input.graphType === "pdg" ? { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } } : NO_MERGE_POLICY;
    const total = await this.profiles.countProfiles(scope);
    const want = sampleSize(total);
    const fraction = total === 0 ? 1 : want / total;
    const snap = await this.snapshots.get(this.profiles, scope, policy, { events: policy.identityGraph.type !== "pdg" || queries.some(usesEvents) });
    const now = this.clock.now();
    const estimates: ExpressionEstimate[] = [];
    for (const q of queries) {
      const r = sampleOnSnapshot(snap, q, fraction, now, await inSegmentMemberPids(this.profiles, scope, q), 0);
      const e = estimateFrom({ totalRows: total, read: r.read, matched: r.matched });
      estimates.push({ estimatedSize: e.size, standardError: e.standardError, estimatedSizeRange: { low: e.low, high: e.high }, profilesReadSoFar: r.read, profilesMatchedSoFar: r.matched });
    }
    return { evaluatedAt: new Date(now).toISOString(), totalRows: total, numRowsToRead: want, confidenceInterval: "95%", estimates, tookMs: Math.round(performance.now() - t0) };
  }
}
