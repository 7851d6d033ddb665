/**
 * The body of each rule card: a condition (operator fitting the field's
 * type, then its operands), an event count (type, how many, when, filters),
 * an audience membership, and the read-only PQL block. Sequences have their
 * own module. Every control has an id derived from its rule's id, so the
 * canvas can redraw and put focus back where it was.
 */
import { h } from "../../dom.js";
import type { CmpOp } from "@segmentd/pql";
import type { ConditionRule, EventRule, OperatorChoice, OperatorId, PqlBlock, RuleContext, SegmentRule, ValueType } from "../../visual/index.js";
import { COUNT_OPERATORS, OPERATORS, OPERATORS_BY_TYPE, valueTypeOf } from "../../visual/index.js";
import type { CanvasEnv } from "./env.js";
import { eventField, profileField } from "./env.js";
import { eventTypeName, eventTypeSelect, filterWindow, shownElsewhere, windowInputs } from "./event-parts.js";
import { operandsFor, valueTypeOfField } from "./new-rules.js";
import { operandInputs, wholeNumberInput } from "./operand-inputs.js";

/** The operators offered: the type's, plus the current one if it is another type's (read from PQL). */
export function operatorChoices(vt: ValueType, current: OperatorId): OperatorChoice[] {
  const list = [...OPERATORS_BY_TYPE[vt]];
  if (!list.some((c) => c.id === current)) {
    const label = Object.values(OPERATORS_BY_TYPE).flat().find((c) => c.id === current)?.label ?? current;
    list.push({ id: current, label });
  }
  return list;
}

function labelled(id: string, name: string, control: HTMLElement, hiddenLabel = false): HTMLElement {
  return h("span", { class: "v-input" }, h("label", { for: id, class: hiddenLabel ? "visually-hidden" : "v-input-label" }, name), control);
}

export function conditionEditor(rule: ConditionRule, context: RuleContext, eventType: string | undefined, env: CanvasEnv): HTMLElement {
  const info = context === "profile" ? profileField(env.palette(), rule.field) : eventField(env.palette(), eventType, rule.field);
  const vt: ValueType = info ? valueTypeOfField(info.type) : (valueTypeOf(rule) ?? "text");
  const opId = `${rule.id}-op`;
  const select = h("select", { id: opId }, ...operatorChoices(vt, rule.operator).map((c) => h("option", { value: c.id, selected: c.id === rule.operator }, c.label)));
  select.addEventListener("change", () => {
    rule.operator = select.value as OperatorId;
    rule.operands = operandsFor(rule.operator, vt, rule.operands, new Date(), info?.items);
    if (!OPERATORS[rule.operator].caseOption) delete rule.ignoreCase;
    env.restructure(opId);
  });
  const caseBox = OPERATORS[rule.operator].caseOption && rule.operands[0]?.kind === "string" ? ignoreCaseBox(rule, env) : null;
  return h("div", { class: "v-row" },
    labelled(opId, "Operator", select),
    operandInputs(rule, { idBase: rule.id, valueType: vt, examples: info?.examples ?? [], env }),
    caseBox);
}

function ignoreCaseBox(rule: ConditionRule, env: CanvasEnv): HTMLElement {
  const id = `${rule.id}-case`;
  const box = h("input", { type: "checkbox", id, checked: rule.ignoreCase === true });
  box.addEventListener("change", () => {
    if (box.checked) rule.ignoreCase = true;
    else delete rule.ignoreCase;
    env.changed();
  });
  return h("span", { class: "v-check" }, box, h("label", { for: id }, "ignore case"));
}

export function eventEditor(rule: EventRule, env: CanvasEnv): HTMLElement {
  const type = eventTypeName(rule.filter);
  const opId = `${rule.id}-count-op`;
  const countId = `${rule.id}-count`;
  const ops = h("select", { id: opId }, ...COUNT_OPERATORS.map((c) => h("option", { value: c.op, selected: c.op === rule.count.op }, c.label)));
  ops.addEventListener("change", () => {
    rule.count.op = ops.value as CmpOp;
    env.changed();
  });
  const count = wholeNumberInput(countId, "Events", rule.count.value, 0, env, (n) => {
    rule.count.value = n;
    env.changed();
  });
  return h("div", { class: "v-event" },
    h("div", { class: "v-row" },
      eventTypeSelect(rule.filter, `${rule.id}-type`, env),
      labelled(opId, "How many", ops),
      count,
      windowInputs(filterWindow(rule.filter, env), `${rule.id}-when`, env)),
    env.renderGroup(rule.filter, { context: "event", ...(type === undefined ? {} : { eventType: type }), hidden: shownElsewhere(rule.filter, true), label: "Conditions on the event" }));
}

export function segmentEditor(rule: SegmentRule, env: CanvasEnv): HTMLElement {
  const memberId = `${rule.id}-member`;
  const audienceId = `${rule.id}-audience`;
  const member = h("select", { id: memberId },
    h("option", { value: "true", selected: rule.member }, "is a member of"),
    h("option", { value: "false", selected: !rule.member }, "is not a member of"));
  member.addEventListener("change", () => {
    rule.member = member.value === "true";
    env.restructure(memberId);
  });
  const list = env.audiences();
  const options = list.map((a) => h("option", { value: a.id, selected: a.id === rule.segmentId }, a.name));
  if (!list.some((a) => a.id === rule.segmentId)) options.unshift(h("option", { value: rule.segmentId, selected: true }, rule.segmentId === "" ? "Choose an audience" : `audience ${rule.segmentId}`));
  const audience = h("select", { id: audienceId }, ...options);
  audience.addEventListener("change", () => {
    rule.segmentId = audience.value;
    env.changed();
  });
  return h("div", { class: "v-row" }, labelled(memberId, "Membership", member), labelled(audienceId, "Audience", audience));
}

export function blockView(rule: PqlBlock): HTMLElement {
  return h("div", { class: "v-block" },
    h("pre", { class: "pql-view", "data-testid": "pql-block" }, rule.pql),
    h("p", { class: "hint" }, "The builder cannot show this part as rules, so it is kept exactly as written. Edit it in the PQL tab."));
}
