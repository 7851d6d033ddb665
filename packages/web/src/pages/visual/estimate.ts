/**
 * The live estimate: the audience's estimated size with its 95% interval,
 * and each top-level rule's own count, from one POST …/builder/estimate call
 * (the figures POST /preview + GET /estimate give for the same expression).
 * Requests are debounced with at most one in flight (latest-only.ts); a
 * figure for older rules stays visible, dimmed, until the new one arrives.
 */
import { messageOf } from "../../api/errors.js";
import type { BuilderEstimates, ExpressionEstimate } from "../../api/types.js";
import type { PageContext } from "../../context.js";
import { h } from "../../dom.js";
import { formatCount, formatDateTime, profilesText } from "../../format.js";
import type { VisualModel } from "../../visual/index.js";
import type { EstimatePlan } from "./estimate-plan.js";
import { planEstimate, planKey } from "./estimate-plan.js";
import { latestOnly } from "./latest-only.js";

const DELAY_MS = 300;
const RECENT = 20;

export type RuleCount = { estimate: ExpressionEstimate; stale: boolean } | { state: "pending" | "empty" | "limit" | "invalid" };

export interface EstimateView {
  element: HTMLElement;
  /**
   * The expression (and, when rules are shown, the model) changed. `valid` is false while the PQL has errors;
   * `incomplete` says which rule on screen is not written as PQL yet (its figures would be the old text's).
   */
  update(whole: string, valid: boolean, model: VisualModel | undefined, graphType: "none" | "pdg", incomplete?: string): void;
  /** The last counts of the top-level rules, by rule id. */
  counts(): Map<string, RuleCount>;
}

type Job = { plan: EstimatePlan; graphType: "none" | "pdg"; key: string };

export function createEstimateView(ctx: PageContext, onCounts: (counts: Map<string, RuleCount>) => void): EstimateView {
  const size = h("p", { class: "v-estimate-size", "data-testid": "estimate-size" });
  const range = h("p", { class: "v-estimate-range", "data-testid": "estimate-range" });
  const meta = h("p", { class: "hint", "data-testid": "estimate-meta" });
  const status = h("p", { class: "hint v-estimate-status", "aria-live": "polite", "data-testid": "estimate-status" });
  // The new size is read out, not shown twice: the figure above already shows it.
  const said = h("p", { class: "visually-hidden", "aria-live": "polite" });
  const box = h("div", { class: "v-estimate-body" }, size, range, meta);
  let current: Job | undefined;
  /** Recent answers by request key (going back to earlier rules needs no request), and the newest. */
  const byKey = new Map<string, { job: Job; at: BuilderEstimates }>();
  let latest: { job: Job; at: BuilderEstimates } | undefined;
  let counts = new Map<string, RuleCount>();
  let incomplete: string | undefined;

  const paint = () => {
    const plan = current?.plan;
    const exact = current ? byKey.get(current.key) : undefined;
    const shown = exact ?? latest;
    const answers = new Map<string, ExpressionEstimate>();
    shown?.job.plan.expressions.forEach((text, i) => answers.set(text, shown.at.estimates[i]!));
    const whole = plan?.expressions[0];
    const e = whole === undefined ? undefined : answers.get(whole);
    box.classList.toggle("is-stale", !exact);
    if (!e || !shown) {
      size.textContent = incomplete !== undefined ? "Incomplete" : whole === undefined ? "—" : "…";
      for (const k of ["size", "low", "high"]) delete size.dataset[k];
      range.textContent = "";
      meta.textContent = "";
    } else {
      size.textContent = profilesText(e.estimatedSize, "≈ ");
      size.dataset.size = String(e.estimatedSize);
      size.dataset.low = String(e.estimatedSizeRange.low);
      size.dataset.high = String(e.estimatedSizeRange.high);
      range.textContent = `${shown.at.confidenceInterval} interval: ${formatCount(e.estimatedSizeRange.low)} – ${formatCount(e.estimatedSizeRange.high)}`;
      meta.textContent = `${formatCount(e.profilesMatchedSoFar)} of ${formatCount(e.profilesReadSoFar)} sampled profiles match, out of ${formatCount(shown.at.totalRows)} · as of ${formatDateTime(shown.at.evaluatedAt)} · ${formatCount(shown.at.tookMs)} ms`;
    }
    counts = new Map();
    if (plan) {
      for (const [id, i] of plan.rules) {
        const est = answers.get(plan.expressions[i]!);
        counts.set(id, est ? { estimate: est, stale: !exact } : { state: "pending" });
      }
      for (const [id, why] of plan.uncounted) counts.set(id, { state: why });
    }
    onCounts(counts);
  };

  const announce = (at: BuilderEstimates) => {
    status.textContent = "";
    said.textContent = `Estimated size: ${profilesText(at.estimates[0]!.estimatedSize, "about ")}.`;
  };

  const runner = latestOnly<Job, BuilderEstimates>({
    delayMs: DELAY_MS,
    run: (job) => ctx.api.builderEstimate(job.plan.expressions, job.graphType),
    done: (job, result) => {
      if (ctx.left()) return;
      if (result.ok) {
        latest = { job, at: result.value };
        byKey.delete(job.key);
        byKey.set(job.key, latest);
        if (byKey.size > RECENT) byKey.delete(byKey.keys().next().value!);
        if (job.key === current?.key) announce(result.value);
      } else if (job.key === current?.key) {
        status.textContent = `The estimate could not be computed: ${messageOf(result.error)}`;
      }
      paint();
    },
  });
  ctx.onLeave(() => runner.cancel());

  return {
    element: h("section", { class: "v-estimate", "aria-labelledby": "v-estimate-title" },
      h("h3", { id: "v-estimate-title" }, "Estimated audience size"),
      box,
      status,
      said),
    update(whole, valid, model, graphType, why) {
      incomplete = why;
      if (why !== undefined || !valid || whole.trim() === "") {
        // No figures for text that is not what the rules say: the last complete text's counts would mislead.
        runner.cancel();
        current = undefined;
        status.textContent = why !== undefined
          ? `A rule is incomplete, so there is no estimate: ${why} Complete or remove it.`
          : whole.trim() === "" ? "Add a rule to see how many profiles match." : "Fix the expression to see an estimate.";
        paint();
        return;
      }
      const plan = planEstimate(whole, model);
      const key = planKey(plan, graphType);
      current = { plan, graphType, key };
      const known = byKey.get(key);
      if (known) {
        runner.cancel();
        announce(known.at);
      } else {
        status.textContent = "Updating…";
        runner.push(current);
      }
      paint();
    },
    counts: () => counts,
  };
}
