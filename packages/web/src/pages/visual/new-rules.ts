/**
 * The rules the builder creates: from a palette item (an attribute, an event
 * type or one of its fields, an audience) and when an operator changes (the
 * operands the new operator takes, keeping what the marketer typed where it
 * still fits). Pure: the canvas and the palette call these, tests too.
 */
import type { BuilderFieldType } from "../../api/types.js";
import type { ConditionRule, EventRule, Group, Operand, OperatorId, Scalar, SegmentRule, SequenceRule, SequenceStep, ValueType } from "../../visual/index.js";
import { OPERATORS, emptyGroup } from "../../visual/index.js";

/** Event fields that the event editor shows as its own controls rather than as filters. */
export const EVENT_TYPE_FIELD = "eventType";
export const TIMESTAMP_FIELD = "timestamp";

/** The operators a field of a palette type gets (objects are not offered; unknown types read as text). */
export function valueTypeOfField(type: BuilderFieldType | undefined): ValueType {
  switch (type) {
    case "number":
    case "integer":
      return "number";
    case "boolean":
      return "boolean";
    case "date":
    case "date-time":
      return "date";
    case "array":
      return "array";
    default:
      return "text";
  }
}

/** The operator a new condition on a field of this type starts with. */
export const FIRST_OPERATOR: Readonly<Record<ValueType, OperatorId>> = {
  text: "equals",
  number: "equals",
  boolean: "isTrue",
  date: "inLast",
  array: "includes",
};

function todayDate(now: Date): Operand {
  return { kind: "date", year: now.getUTCFullYear(), month: now.getUTCMonth() + 1, day: now.getUTCDate() };
}

/** A value of the field's type: the item type for arrays, a number for numbers, else text. */
export function blankScalar(vt: ValueType, itemType?: BuilderFieldType): Scalar {
  const t = vt === "array" ? valueTypeOfField(itemType) : vt;
  if (t === "number") return { kind: "integer", value: 0 };
  if (t === "boolean") return { kind: "boolean", value: true };
  return { kind: "string", value: "" };
}

function isScalar(o: Operand | undefined): o is Scalar {
  return o !== undefined && (o.kind === "string" || o.kind === "integer" || o.kind === "double" || o.kind === "boolean");
}

/**
 * The operands for `operator`, reusing the previous ones where their kind is
 * allowed (a value typed before switching from "equals" to "contains" stays).
 */
export function operandsFor(operator: OperatorId, vt: ValueType, previous: Operand[], now = new Date(), itemType?: BuilderFieldType): Operand[] {
  const spec = OPERATORS[operator].operands;
  const scalars = previous.filter(isScalar);
  if ("list" in spec) {
    const kept = scalars.filter((s) => spec.list.includes(s.kind));
    return kept.length > 0 ? kept : [blankScalar(vt, itemType)];
  }
  return spec.fixed.map((kinds, i): Operand => {
    const prev = previous[i];
    if (prev && kinds.includes(prev.kind)) return prev;
    if (kinds.includes("duration")) return { kind: "duration", amount: 7, unit: "day" };
    if (kinds.includes("offset")) return { kind: "offset", cmp: "<=", amount: 7, unit: "day", direction: "before" };
    if (kinds.includes("time")) return operator === "relative" ? { kind: "time", word: "now" } : todayDate(now);
    const s = scalars[0];
    if (s && kinds.includes(s.kind)) return s;
    const blank = blankScalar(vt, itemType);
    return kinds.includes(blank.kind) ? blank : { kind: "string", value: "" };
  });
}

/** A condition on a field, with the first operator of its type. */
export function conditionOn(id: string, field: string, type: BuilderFieldType | undefined, items?: BuilderFieldType): ConditionRule {
  const vt = valueTypeOfField(type);
  const operator = FIRST_OPERATOR[vt];
  return { kind: "condition", id, field, operator, operands: operandsFor(operator, vt, [], new Date(), items) };
}

export function eventTypeCondition(id: string, eventType: string): ConditionRule {
  return { kind: "condition", id, field: EVENT_TYPE_FIELD, operator: "equals", operands: [{ kind: "string", value: eventType }] };
}

/** "At least 1 event of this type" (any time until a window is chosen); `filter` adds a condition on one of its fields. */
export function eventRuleFor(newId: () => string, eventType: string | undefined, filter?: ConditionRule): EventRule {
  const group: Group = emptyGroup(newId());
  if (eventType !== undefined) group.children.push(eventTypeCondition(newId(), eventType));
  if (filter) group.children.push(filter);
  return { kind: "event", id: newId(), filter: group, count: { op: ">=", value: 1 } };
}

export function segmentRuleFor(id: string, segmentId: string): SegmentRule {
  return { kind: "segment", id, segmentId, member: true };
}

/** Step labels as Segment Builder writes them: A, B, …, Z, then C26, C27, …. */
export function stepLabel(index: number): string {
  return index < 26 ? String.fromCharCode(65 + index) : `C${index}`;
}

/** A label the sequence does not use yet. */
export function freeLabel(rule: SequenceRule): string {
  const used = new Set(rule.steps.map((s) => s.label));
  for (let i = rule.steps.length; ; i++) if (!used.has(stepLabel(i))) return stepLabel(i);
}

export function sequenceStep(newId: () => string, label: string, eventType: string | undefined, when?: SequenceStep["when"]): SequenceStep {
  const what = emptyGroup(newId());
  if (eventType !== undefined) what.children.push(eventTypeCondition(newId(), eventType));
  return when ? { id: newId(), label, what, when: structuredClone(when) } : { id: newId(), label, what };
}

/** "This, then that": two steps, of the two most frequent event types when there are two. */
export function sequenceRuleFor(newId: () => string, eventTypes: string[]): SequenceRule {
  return {
    kind: "sequence",
    id: newId(),
    timestampField: TIMESTAMP_FIELD,
    steps: [sequenceStep(newId, "A", eventTypes[0]), sequenceStep(newId, "B", eventTypes[1] ?? eventTypes[0])],
  };
}

/** An include or exclude group. */
export function groupOf(id: string, mode: Group["mode"]): Group {
  return { ...emptyGroup(id), mode };
}
