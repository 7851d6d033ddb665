/**
 * "Impact of this change" in the builder when editing an audience: who would
 * enter, leave and stay if the edited expression and merge policy were saved
 * (segmentd's POST …/definitions/{id}/impact), before → after counts and a
 * sample of each group, exact over every profile on the current data.
 *
 * It runs by itself a moment after each change (and on "Show impact"). So
 * that nobody saves an edit without seeing what it does, `seen()` tells the
 * builder whether the panel shows the answer — or the failure — for exactly
 * the draft about to be saved; if not, the builder calls `showNow()` and asks
 * for a second Save.
 */
import { detailsOf, messageOf } from "../api/errors.js";
import type { ImpactAnswer, ImpactGroup } from "../api/types.js";
import type { PageContext } from "../context.js";
import { h, notice } from "../dom.js";
import { changeText, checkIdentity, identityText } from "../explain-words.js";
import { audiencePath } from "../router.js";
import { formatCount, formatDateTime } from "../format.js";

const DELAY_MS = 700;
const SAMPLE_SIZE = 10;

export interface ImpactPanel {
  element: HTMLElement;
  /** The draft changed; `valid` is false while the expression has errors. */
  changed(expression: string, mergePolicyId: string, valid: boolean): void;
  /** Whether the panel shows the impact (or why it could not be computed) of this draft, or the draft changes nothing. */
  seen(expression: string, mergePolicyId: string): boolean;
  /** Compute the impact of the current draft now (no wait), unless it is shown or on its way. */
  showNow(): void;
}

function keyOf(expression: string, mergePolicyId: string): string {
  return JSON.stringify([expression, mergePolicyId]);
}

/** The one-sentence summary read out when the figures arrive. */
export function impactSummary(a: ImpactAnswer): string {
  return `Saving changes the audience from ${formatCount(a.before.qualified)} to ${formatCount(a.after.qualified)} profiles: ${formatCount(a.enter.count)} enter, ${formatCount(a.leave.count)} leave, ${formatCount(a.stay.count)} stay.`;
}

/** A sampled profile's identities and a link that checks it against the saved audience. */
function sampleItem(definitionId: string, p: ImpactGroup["sample"][number]): HTMLElement {
  const who = checkIdentity(p.identities);
  const text = p.identities.length > 0 ? p.identities.map(identityText).join(", ") : `profile ${p.profileId}`;
  if (!who) return h("li", {}, text);
  const href = `${audiencePath(definitionId)}?${new URLSearchParams({ tab: "check", ns: who.namespace, id: who.id }).toString()}`;
  // A new tab: following it must not lose the edit being reviewed.
  return h("li", {}, text, " ", h("a", { href, class: "impact-check", target: "_blank", rel: "noopener", "aria-label": `Check ${identityText(who)} (opens a new tab)` }, "Check"));
}

function groupView(definitionId: string, title: string, kind: "enter" | "leave" | "stay", g: ImpactGroup, empty: string): HTMLElement {
  const more = g.count - g.sample.length;
  return h("section", { class: `impact-group impact-${kind}`, "aria-labelledby": `impact-${kind}-title` },
    h("h3", { id: `impact-${kind}-title` }, title),
    h("p", { class: "impact-count", "data-testid": `impact-${kind}` }, formatCount(g.count)),
    g.count === 0 ? h("p", { class: "muted small" }, empty) : h("ul", { class: "plain-list impact-sample", "aria-label": `${title}: sample` },
      ...g.sample.map((p) => sampleItem(definitionId, p)),
      more > 0 ? h("li", { class: "muted" }, `and ${formatCount(more)} more`) : null));
}

function answerView(definitionId: string, a: ImpactAnswer): HTMLElement {
  return h("div", { class: "impact-answer" },
    h("dl", { class: "figures impact-figures" },
      h("div", { class: "figure" }, h("dt", {}, "Qualified now"), h("dd", { "data-testid": "impact-before" }, formatCount(a.before.qualified))),
      h("div", { class: "figure impact-arrow", "aria-hidden": "true" }, "→"),
      h("div", { class: "figure" }, h("dt", {}, "After saving"), h("dd", { "data-testid": "impact-after" }, formatCount(a.after.qualified))),
      h("div", { class: "figure figure-small" }, h("dt", {}, "Change"), h("dd", {}, changeText(a.before.qualified, a.after.qualified)))),
    h("div", { class: "impact-groups" },
      groupView(definitionId, "Entering", "enter", a.enter, "Nobody new qualifies."),
      groupView(definitionId, "Leaving", "leave", a.leave, "Nobody leaves."),
      groupView(definitionId, "Staying", "stay", a.stay, "Nobody stays.")),
    h("p", { class: "muted small", "data-testid": "impact-exact" },
      a.exact
        ? `Exact: every one of the ${formatCount(a.profiles)} profiles was evaluated with both expressions on the data as of ${formatDateTime(a.evaluatedAt)} (${formatCount(a.tookMs)} ms). A batch job on this data writes these figures; new data may change them.`
        : `Computed over ${formatCount(a.profiles)} profiles on the data as of ${formatDateTime(a.evaluatedAt)}.`),
    h("details", { class: "helper" },
      h("summary", {}, "Expressions compared"),
      h("div", { class: "impact-expressions" },
        h("p", { class: "small muted" }, "Saved"), h("pre", { class: "pql-view" }, a.before.expression),
        h("p", { class: "small muted" }, "Edited"), h("pre", { class: "pql-view" }, a.after.expression))));
}

export function createImpactPanel(ctx: PageContext, definitionId: string, saved: { expression: string; mergePolicyId: string }): ImpactPanel {
  const savedKey = keyOf(saved.expression, saved.mergePolicyId);
  const body = h("div", { class: "impact-body" });
  const status = h("p", { class: "impact-status muted", "aria-live": "polite" });
  const button = h("button", { type: "button", class: "button-secondary" }, "Show impact");
  let draft = { expression: saved.expression, mergePolicyId: saved.mergePolicyId, valid: true };
  let shownKey: string | undefined;
  let shownSummary = "";
  // A failure counts as seen (the save may go ahead) but "Show impact" may retry it.
  let failedKey: string | undefined;
  let pendingKey: string | undefined;
  let timer: number | undefined;
  let seq = 0;
  ctx.onLeave(() => window.clearTimeout(timer));

  const run = () => {
    window.clearTimeout(timer);
    const key = keyOf(draft.expression, draft.mergePolicyId);
    if (!draft.valid || key === savedKey || key === shownKey || key === pendingKey) return;
    const mine = ++seq;
    pendingKey = key;
    body.setAttribute("aria-busy", "true");
    body.classList.add("is-stale");
    status.textContent = "Evaluating every profile with the edited expression…";
    ctx.api.impact(definitionId, draft.expression, draft.mergePolicyId, SAMPLE_SIZE).then(
      (a) => {
        if (mine !== seq || ctx.left()) return;
        pendingKey = undefined;
        shownKey = key;
        failedKey = undefined;
        body.setAttribute("aria-busy", "false");
        body.classList.remove("is-stale");
        body.replaceChildren(answerView(definitionId, a));
        shownSummary = impactSummary(a);
        status.textContent = shownSummary;
      },
      (err: unknown) => {
        if (mine !== seq || ctx.left()) return;
        pendingKey = undefined;
        shownKey = undefined;
        failedKey = key;
        body.setAttribute("aria-busy", "false");
        body.classList.remove("is-stale");
        const details = detailsOf(err);
        body.replaceChildren(notice("error", "The impact of this change could not be computed.", messageOf(err),
          details.length > 0 ? h("ul", { class: "notice-list" }, ...details.map((d) => h("li", {}, d))) : null));
        status.textContent = "";
      },
    );
  };
  button.addEventListener("click", run);

  const element = h("section", { class: "impact", "aria-labelledby": "impact-title", "data-testid": "impact-panel" },
    h("div", { class: "card-head" }, h("h2", { id: "impact-title" }, "Impact of this change"), button),
    status,
    body);

  const panel: ImpactPanel = {
    element,
    changed(expression, mergePolicyId, valid) {
      draft = { expression, mergePolicyId, valid };
      window.clearTimeout(timer);
      const key = keyOf(expression, mergePolicyId);
      button.disabled = !valid || key === savedKey;
      if (key === savedKey) {
        seq++;
        pendingKey = undefined;
        shownKey = undefined;
        failedKey = undefined;
        body.classList.remove("is-stale");
        body.setAttribute("aria-busy", "false");
        body.replaceChildren();
        status.textContent = "The expression and merge policy are as saved: saving keeps the same members.";
        return;
      }
      if (!valid) {
        body.classList.add("is-stale");
        status.textContent = "Fix the errors in the expression to see the impact of this change.";
        return;
      }
      if (key === shownKey) {
        // Back to the draft on show: an answer for another draft must not replace it.
        seq++;
        pendingKey = undefined;
        body.classList.remove("is-stale");
        body.setAttribute("aria-busy", "false");
        status.textContent = shownSummary;
        return;
      }
      body.classList.add("is-stale");
      status.textContent = "The figures below are for an earlier version; updating…";
      if (shownKey === undefined && pendingKey === undefined) status.textContent = "Working out who would enter and leave…";
      timer = window.setTimeout(run, DELAY_MS);
    },
    seen(expression, mergePolicyId) {
      const key = keyOf(expression, mergePolicyId);
      return key === savedKey || key === shownKey || key === failedKey;
    },
    showNow: run,
  };
  panel.changed(saved.expression, saved.mergePolicyId, true);
  return panel;
}
