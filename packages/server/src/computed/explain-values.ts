/**
 * What explain shows of each computed attribute an expression reads: its value for the profile
 * at the evaluation's `now`, from the same events the trace reads, and the events that
 * contribute to it — in the lookback and meeting the condition, latest first — each with the
 * instant it leaves the lookback (with no new data, the value changes then at the latest).
 * Computed by the reference (computed/values.ts), which the engines' values are tested against.
 */
import type { Query } from "@segmentd/pql";
import type { ComputedAttributeExplanation } from "../services/computed-explanation.js";
import { tenantIdOf } from "../services/schema-registry.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { ComputedAttributeRecord, ComputedAttributeRepository } from "../stores/computed-attributes.js";
import { definitionExpander } from "./expand.js";
import { referencedAttributes } from "./rewrite.js";
import { computeValue, contributingEvents, lookbackStart, referenceDefinition } from "./values.js";

/** Contributing events listed per attribute (the latest); `contributing` counts them all. */
export const EXPLAIN_MAX_CONTRIBUTING = 50;


/** The first instant t at which lookbackStart(t) > at: the lookback's start only moves forward with now. */
export function leavesLookbackAt(at: number, duration: ComputedAttributeRecord["duration"]): number {
  let lo = at;
  let hi = at + 1;
  while (lookbackStart(hi, duration) <= at) hi = at + (hi - at) * 2;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (lookbackStart(mid, duration) > at) hi = mid;
    else lo = mid;
  }
  return hi;
}

export function explainAttribute(record: ComputedAttributeRecord, path: string, events: readonly Record<string, unknown>[], now: number): ComputedAttributeExplanation {
  const def = referenceDefinition(record);
  const inWindow = contributingEvents(def, events, now);
  const latest = [...inWindow].sort((x, y) => y.at - x.at || x.index - y.index);
  const oldest = inWindow.length === 0 ? null : Math.min(...inWindow.map((e) => e.at));
  return {
    name: record.name,
    path,
    status: record.status,
    function: record.mergeFunction,
    duration: record.duration,
    value: computeValue(def, events, now),
    contributing: inWindow.length,
    events: latest.slice(0, EXPLAIN_MAX_CONTRIBUTING).map((e) => ({
      _id: e.event._id ?? null,
      eventType: e.event.eventType ?? null,
      timestamp: new Date(e.at).toISOString(),
      value: record.mergeFunction === "COUNT" ? null : def.field(e.event) ?? null,
      leavesAt: new Date(leavesLookbackAt(e.at, record.duration)).toISOString(),
    })),
    oldestLeavesAt: oldest === null ? null : new Date(leavesLookbackAt(oldest, record.duration)).toISOString(),
  };
}

/** What explain asks of computed attributes (metrics/explain.ts ExplainComputedAttributes), over the sandbox's stored ones. */
export function explainComputed(repo: ComputedAttributeRepository): {
  expand: (ctx: TenantContext, query: Query) => Promise<Query>;
  explain: (ctx: TenantContext, written: Query, events: readonly Record<string, unknown>[], now: number) => Promise<ComputedAttributeExplanation[]>;
} {
  return {
    expand: definitionExpander(repo),
    async explain(ctx, written, events, now) {
      const tenantId = tenantIdOf(ctx.orgId);
      const names = referencedAttributes(written, tenantId);
      if (names.length === 0) return [];
      // Any status: a definition saved while an attribute was live computes its aggregate still.
      const byName = new Map((await repo.list(scopeOf(ctx))).map((r) => [r.name, r]));
      return names.flatMap((name) => {
        const r = byName.get(name);
        return r === undefined ? [] : [explainAttribute(r, `_${tenantId}.ComputedAttributes.${name}`, events, now)];
      });
    },
  };
}
