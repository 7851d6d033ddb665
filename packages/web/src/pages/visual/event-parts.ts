/**
 * The parts of an event rule and of a sequence step that are not plain
 * filters: which event type, and when (the time window). In the model both
 * are conditions of the event's filter (`eventType = "…"`,
 * `timestamp occurs …`); the editors show the first of each as a list of
 * choices and the other conditions as filters. Only in an `and` filter: in
 * an `or` filter every condition is shown as a filter, and choosing a type
 * or window there puts the `or` conditions into a group of their own first.
 */
import { h } from "../../dom.js";
import type { ConditionRule, Group, OperatorId, TimeCondition } from "../../visual/index.js";
import { OPERATORS_BY_TYPE, TIME_OPERATORS, emptyGroup } from "../../visual/index.js";
import type { CanvasEnv } from "./env.js";
import { EVENT_TYPE_FIELD, TIMESTAMP_FIELD, eventTypeCondition, operandsFor } from "./new-rules.js";
import { operandInputs } from "./operand-inputs.js";

function shownApart(group: Group): boolean {
  return group.combinator === "and" || group.children.length <= 1;
}

/** The filter's event-type condition, if it has one the type list can show. */
export function eventTypeOf(group: Group): ConditionRule | undefined {
  if (!shownApart(group)) return undefined;
  for (const c of group.children) {
    if (c.kind === "condition" && c.field === EVENT_TYPE_FIELD && c.operator === "equals" && !c.ignoreCase && c.operands[0]?.kind === "string") return c;
  }
  return undefined;
}

/** The filter's time window on `timestamp`, if it has one. */
export function windowOf(group: Group): ConditionRule | undefined {
  if (!shownApart(group)) return undefined;
  for (const c of group.children) if (c.kind === "condition" && c.field === TIMESTAMP_FIELD && TIME_OPERATORS.has(c.operator)) return c;
  return undefined;
}

export function eventTypeName(group: Group): string | undefined {
  const c = eventTypeOf(group);
  return c?.operands[0]?.kind === "string" ? c.operands[0].value : undefined;
}

/** The ids the filter editor leaves out because the type and window controls show them. */
export function shownElsewhere(group: Group, withWindow: boolean): Set<string> {
  const out = new Set<string>();
  const t = eventTypeOf(group);
  if (t) out.add(t.id);
  const w = withWindow ? windowOf(group) : undefined;
  if (w) out.add(w.id);
  return out;
}

/** Makes an `or` filter an `and` of one `or` group, so a type or window can be added beside it. */
function apart(group: Group, env: CanvasEnv): void {
  if (shownApart(group)) return;
  const inner: Group = { ...emptyGroup(env.newId()), combinator: "or", children: group.children };
  group.combinator = "and";
  group.children = [inner];
}

export function eventTypeSelect(group: Group, id: string, env: CanvasEnv): HTMLElement {
  const current = eventTypeName(group);
  const types = (env.palette()?.events.eventTypes ?? []).map((t) => t.eventType);
  if (current !== undefined && !types.includes(current)) types.unshift(current);
  const select = h("select", { id },
    h("option", { value: "", selected: current === undefined }, "any event type"),
    ...types.map((t) => h("option", { value: t, selected: t === current }, t)));
  select.addEventListener("change", () => {
    const cond = eventTypeOf(group);
    if (select.value === "") {
      if (cond) group.children.splice(group.children.indexOf(cond), 1);
    } else if (cond) {
      cond.operands = [{ kind: "string", value: select.value }];
    } else {
      apart(group, env);
      group.children.unshift(eventTypeCondition(env.newId(), select.value));
    }
    env.restructure(id);
  });
  return h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, "Event type"), select);
}

/** The date operators a time window offers ("any time" is the absence of one). */
export const WINDOW_OPERATORS: OperatorId[] = OPERATORS_BY_TYPE.date.map((c) => c.id).filter((op) => TIME_OPERATORS.has(op));

export interface WindowSlot {
  get(): TimeCondition | undefined;
  set(next: TimeCondition | undefined): void;
}

/** The window of an event filter: its timestamp condition, added after the event type. */
export function filterWindow(group: Group, env: CanvasEnv): WindowSlot {
  return {
    get: () => windowOf(group),
    set(next) {
      const cond = windowOf(group);
      if (!next) {
        if (cond) group.children.splice(group.children.indexOf(cond), 1);
        return;
      }
      if (cond) {
        cond.operator = next.operator;
        cond.operands = next.operands;
        return;
      }
      apart(group, env);
      const t = eventTypeOf(group);
      const at = t ? group.children.indexOf(t) + 1 : 0;
      group.children.splice(at, 0, { kind: "condition", id: env.newId(), field: TIMESTAMP_FIELD, ...next });
    },
  };
}

/** "When": any time, in the last N units, between two dates, …, with the chosen operator's inputs. */
export function windowInputs(slot: WindowSlot, id: string, env: CanvasEnv): HTMLElement {
  const current = slot.get();
  const labels = new Map(OPERATORS_BY_TYPE.date.map((c) => [c.id, c.label]));
  const select = h("select", { id },
    h("option", { value: "", selected: !current }, "any time"),
    ...WINDOW_OPERATORS.map((op) => h("option", { value: op, selected: current?.operator === op }, labels.get(op) ?? op)));
  select.addEventListener("change", () => {
    if (select.value === "") slot.set(undefined);
    else {
      const operator = select.value as OperatorId;
      slot.set({ operator, operands: operandsFor(operator, "date", current?.operands ?? []) });
    }
    env.restructure(id);
  });
  return h("span", { class: "v-inline v-when" },
    h("span", { class: "v-input" }, h("label", { for: id, class: "v-input-label" }, "When"), select),
    current ? operandInputs(current, { idBase: `${id}-w`, valueType: "date", examples: [], env }) : null);
}
