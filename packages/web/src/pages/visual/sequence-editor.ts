/**
 * A sequence: events that happen one after the other ("this, then that"),
 * each step with its event type, when it happened, how many times at least,
 * and filters on its fields. Steps can be added, removed and reordered with
 * buttons; the step's label (A, B, …) is PQL's business and is not shown.
 */
import { h } from "../../dom.js";
import type { SequenceRule, SequenceStep } from "../../visual/index.js";
import type { CanvasEnv } from "./env.js";
import { eventTypeName, eventTypeSelect, shownElsewhere, windowInputs } from "./event-parts.js";
import { freeLabel, sequenceStep } from "./new-rules.js";
import { wholeNumberInput } from "./operand-inputs.js";

function countInput(step: SequenceStep, id: string, env: CanvasEnv): HTMLElement {
  return wholeNumberInput(id, "At least (times)", step.count ?? 1, 1, env, (n) => {
    // COUNT(1) and no COUNT mean the same; a step read from PQL keeps the form it had.
    if (n === 1 && step.count === undefined) return;
    step.count = n;
    env.changed();
  });
}

function stepView(rule: SequenceRule, step: SequenceStep, i: number, env: CanvasEnv): HTMLElement {
  const n = rule.steps.length;
  const title = `Step ${i + 1}`;
  const move = (to: number, focus: string) => {
    const [s] = rule.steps.splice(i, 1);
    rule.steps.splice(to, 0, s!);
    env.restructure(focus);
    env.announce(`${title} is now step ${to + 1} of ${n}.`);
  };
  const tool = (label: string, text: string, id: string, enabled: boolean, run: () => void) =>
    h("button", { type: "button", class: "button-ghost v-mini", id, "aria-label": `${label}: ${title}`, title: label, disabled: !enabled, onclick: run }, text);
  const type = eventTypeName(step.what);
  return h("li", { class: "v-step", role: "group", "aria-labelledby": `${step.id}-title`, "data-step-id": step.id },
    h("div", { class: "v-step-head" },
      h("h5", { id: `${step.id}-title`, class: "v-step-title" }, title),
      h("span", { class: "v-tools" },
        tool("Move step earlier", "↑", `${step.id}-up`, i > 0, () => move(i - 1, `${step.id}-up`)),
        tool("Move step later", "↓", `${step.id}-down`, i < n - 1, () => move(i + 1, `${step.id}-down`)),
        tool("Remove step", "✕", `${step.id}-remove`, n > 1, () => {
          rule.steps.splice(i, 1);
          env.restructure(`${rule.id}-add-step`);
        }))),
    h("div", { class: "v-row" },
      eventTypeSelect(step.what, `${step.id}-type`, env),
      windowInputs({ get: () => step.when, set: (next) => (next ? (step.when = next) : delete step.when) }, `${step.id}-when`, env),
      countInput(step, `${step.id}-count`, env)),
    env.renderGroup(step.what, { context: "event", ...(type === undefined ? {} : { eventType: type }), hidden: shownElsewhere(step.what, false), label: `Conditions on step ${i + 1}'s event` }),
    step.where ? env.renderGroup(step.where, { context: "event", ...(type === undefined ? {} : { eventType: type }), label: `Also where (step ${i + 1})` }) : null);
}

export function sequenceEditor(rule: SequenceRule, env: CanvasEnv): HTMLElement {
  const items: HTMLElement[] = [];
  rule.steps.forEach((s, i) => {
    if (i > 0) items.push(h("li", { class: "v-then", "aria-hidden": "true" }, "then"));
    items.push(stepView(rule, s, i, env));
  });
  const add = h("button", { type: "button", class: "button-secondary v-mini", id: `${rule.id}-add-step` }, "+ Then another event");
  add.addEventListener("click", () => {
    const last = rule.steps[rule.steps.length - 1];
    // A new step starts with the previous step's type and window: "within the same time".
    const step = sequenceStep(() => env.newId(), freeLabel(rule), last ? eventTypeName(last.what) : undefined, last?.when);
    rule.steps.push(step);
    env.restructure(`${step.id}-type`);
  });
  return h("div", { class: "v-sequence" },
    h("p", { class: "hint" }, "Each event happens after the one before it."),
    h("ol", { class: "v-steps" }, ...items),
    add);
}
