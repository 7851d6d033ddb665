/**
 * What one live-estimate request asks for: the whole expression and each
 * top-level rule alone (the count shown beside it), in one
 * POST …/builder/estimate call of at most 20 expressions. The same text is
 * asked for once (a lone top-level rule is the whole expression), and what
 * does not fit in the call is named so the canvas can say so.
 */
import type { VisualModel } from "../../visual/index.js";
import { tryRulesToPql } from "../../visual/index.js";

export const MAX_EXPRESSIONS = 20;

export interface EstimatePlan {
  /** Distinct expressions, the whole one first. */
  expressions: string[];
  /** Top-level rule id → its index in `expressions`. */
  rules: Map<string, number>;
  /** Top-level rules left out: they write nothing (an empty group) or did not fit. */
  uncounted: Map<string, "empty" | "limit" | "invalid">;
}

/** The PQL of one top-level rule alone (its own query, with the model's lambda head). */
export function rulePql(model: VisualModel, index: number): { ok: true; pql: string } | { ok: false } {
  const child = model.root.children[index];
  if (!child) return { ok: false };
  const r = tryRulesToPql({ ...model, root: { ...model.root, combinator: "and", children: [child] } });
  return r.ok ? { ok: true, pql: r.pql } : { ok: false };
}

/** The request for the whole expression `whole` and, when rules are shown, each top-level rule of `model`. */
export function planEstimate(whole: string, model: VisualModel | undefined, max = MAX_EXPRESSIONS): EstimatePlan {
  const plan: EstimatePlan = { expressions: [], rules: new Map(), uncounted: new Map() };
  if (whole.trim() !== "") plan.expressions.push(whole);
  if (!model) return plan;
  model.root.children.forEach((child, i) => {
    const r = rulePql(model, i);
    if (!r.ok) {
      plan.uncounted.set(child.id, "invalid");
      return;
    }
    if (r.pql === "") {
      plan.uncounted.set(child.id, "empty");
      return;
    }
    let at = plan.expressions.indexOf(r.pql);
    if (at < 0) {
      if (plan.expressions.length >= max) {
        plan.uncounted.set(child.id, "limit");
        return;
      }
      at = plan.expressions.push(r.pql) - 1;
    }
    plan.rules.set(child.id, at);
  });
  return plan;
}

/** A key that is equal for plans asking the same thing (a request is sent only when it changes). */
export function planKey(plan: EstimatePlan, graphType: string): string {
  return JSON.stringify([graphType, plan.expressions]);
}
