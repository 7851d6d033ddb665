/**
 * The builder's operators: what each one writes in PQL, the operands it
 * takes, and the choices (with labels) a UI offers per value type. Each
 * operator id stands for exactly one PQL shape, so a condition reads back as
 * the operator it was written with.
 */
import { TIME_UNIT_PLURALS, type CmpOp, type Direction, type TimeUnit } from "@segmentd/pql";
import type { ConditionRule, Operand } from "./model.js";

export type OperatorId =
  | "equals"
  | "notEquals"
  | "lessThan"
  | "atMost"
  | "greaterThan"
  | "atLeast"
  | "between"
  | "in"
  | "notIn"
  | "contains"
  | "doesNotContain"
  | "startsWith"
  | "doesNotStartWith"
  | "endsWith"
  | "doesNotEndWith"
  | "like"
  | "matches"
  | "isTrue"
  | "isFalse"
  | "dateOn"
  | "dateBefore"
  | "dateAfter"
  | "dateBetween"
  | "inLast"
  | "inNext"
  | "relative"
  | "ignoreYear"
  | "includes"
  | "intersects"
  | "supersetOf"
  | "subsetOf"
  | "exists"
  | "notExists";

export type OperandKind = Operand["kind"];
export type ValueType = "text" | "number" | "boolean" | "date" | "array";

const TEXT: OperandKind[] = ["string"];
const NUMBER: OperandKind[] = ["integer", "double"];
const ORDERED: OperandKind[] = ["string", "integer", "double"];
const SCALAR: OperandKind[] = ["string", "integer", "double", "boolean"];
const TIME_REF: OperandKind[] = ["time", "period", "date"];

export interface OperatorSpec {
  id: OperatorId;
  /** The PQL it writes, with `f` for the field and `a`, `b`, `[…]` for operands. */
  pql: string;
  /** Allowed kinds per operand position, or `list` (any number, each of `item`). */
  operands: { fixed: OperandKind[][] } | { list: OperandKind[] };
  /** Takes the "ignore case" option (text predicates with a case flag). */
  caseOption?: boolean;
}

function op(id: OperatorId, pql: string, fixed: OperandKind[][], caseOption = false): OperatorSpec {
  return caseOption ? { id, pql, operands: { fixed }, caseOption } : { id, pql, operands: { fixed } };
}
function listOp(id: OperatorId, pql: string, item: OperandKind[]): OperatorSpec {
  return { id, pql, operands: { list: item } };
}

export const OPERATORS: Readonly<Record<OperatorId, OperatorSpec>> = {
  equals: op("equals", 'f = a; ignoring case f.equals(a, false)', [ORDERED], true),
  notEquals: op("notEquals", "f != a; ignoring case f.notEqualTo(a, false)", [SCALAR], true),
  lessThan: op("lessThan", "f < a", [ORDERED]),
  atMost: op("atMost", "f <= a", [ORDERED]),
  greaterThan: op("greaterThan", "f > a", [ORDERED]),
  atLeast: op("atLeast", "f >= a", [ORDERED]),
  between: op("between", "f >= a and f <= b", [NUMBER, NUMBER]),
  in: listOp("in", "f in [a, …]", SCALAR),
  notIn: listOp("notIn", "f notIn [a, …]", SCALAR),
  contains: op("contains", "f.contains(a)", [TEXT], true),
  doesNotContain: op("doesNotContain", "f.doesNotContain(a)", [TEXT], true),
  startsWith: op("startsWith", "f.startsWith(a)", [TEXT], true),
  doesNotStartWith: op("doesNotStartWith", "f.doesNotStartWith(a)", [TEXT], true),
  endsWith: op("endsWith", "f.endsWith(a)", [TEXT], true),
  doesNotEndWith: op("doesNotEndWith", "f.doesNotEndWith(a)", [TEXT], true),
  like: op("like", "f like a", [TEXT]),
  matches: op("matches", "f.matches(a)", [TEXT]),
  isTrue: op("isTrue", "f = true", []),
  isFalse: op("isFalse", "f = false", []),
  dateOn: op("dateOn", "f occurs a  (on date(…), today, this month, …)", [TIME_REF]),
  dateBefore: op("dateBefore", "f occurs before a", [TIME_REF]),
  dateAfter: op("dateAfter", "f occurs after a", [TIME_REF]),
  dateBetween: op("dateBetween", "f occurs between a and b", [TIME_REF, TIME_REF]),
  inLast: op("inLast", "f occurs <= N units before now", [["duration"]]),
  inNext: op("inNext", "f occurs <= N units after now", [["duration"]]),
  relative: op("relative", "f occurs OP N units before|after|from a", [["offset"], TIME_REF]),
  ignoreYear: op("ignoreYear", "f.getMonth() = currentMonth() and f.getDayOfMonth() = currentDayOfMonth()", []),
  includes: op("includes", "f.includes(a)", [SCALAR]),
  intersects: listOp("intersects", "f.intersects([a, …])", SCALAR),
  supersetOf: listOp("supersetOf", "f.supersetOf([a, …])", SCALAR),
  subsetOf: listOp("subsetOf", "f.subsetOf([a, …])", SCALAR),
  exists: op("exists", "f.isNotNull()", []),
  notExists: op("notExists", "f.isNull()", []),
};

/** Operators whose PQL is two `and`-ed terms (see model.ts). */
export const COMPOUND_OPERATORS: ReadonlySet<OperatorId> = new Set<OperatorId>(["between", "ignoreYear"]);

/** Date operators that also serve as a chain step's WHEN. */
export const TIME_OPERATORS: ReadonlySet<OperatorId> = new Set<OperatorId>([
  "dateOn",
  "dateBefore",
  "dateAfter",
  "dateBetween",
  "inLast",
  "inNext",
  "relative",
]);

export interface OperatorChoice {
  id: OperatorId;
  label: string;
}

/** The operators a UI offers for a field of each value type, in menu order. */
export const OPERATORS_BY_TYPE: Readonly<Record<ValueType, readonly OperatorChoice[]>> = {
  text: [
    { id: "equals", label: "equals" },
    { id: "notEquals", label: "does not equal" },
    { id: "contains", label: "contains" },
    { id: "doesNotContain", label: "does not contain" },
    { id: "startsWith", label: "starts with" },
    { id: "doesNotStartWith", label: "does not start with" },
    { id: "endsWith", label: "ends with" },
    { id: "doesNotEndWith", label: "does not end with" },
    { id: "in", label: "is one of" },
    { id: "notIn", label: "is none of" },
    { id: "like", label: "matches the pattern (% and _)" },
    { id: "matches", label: "matches the regular expression" },
    { id: "exists", label: "exists" },
    { id: "notExists", label: "does not exist" },
  ],
  number: [
    { id: "equals", label: "=" },
    { id: "notEquals", label: "≠" },
    { id: "lessThan", label: "<" },
    { id: "atMost", label: "≤" },
    { id: "greaterThan", label: ">" },
    { id: "atLeast", label: "≥" },
    { id: "between", label: "between" },
    { id: "in", label: "is one of" },
    { id: "notIn", label: "is none of" },
    { id: "exists", label: "exists" },
    { id: "notExists", label: "does not exist" },
  ],
  boolean: [
    { id: "isTrue", label: "is true" },
    { id: "isFalse", label: "is false" },
    { id: "exists", label: "exists" },
    { id: "notExists", label: "does not exist" },
  ],
  date: [
    { id: "inLast", label: "in the last" },
    { id: "inNext", label: "in the next" },
    { id: "dateOn", label: "is on / during" },
    { id: "dateBefore", label: "before" },
    { id: "dateAfter", label: "after" },
    { id: "dateBetween", label: "between" },
    { id: "relative", label: "relative to" },
    { id: "ignoreYear", label: "is today, ignoring the year" },
    { id: "exists", label: "exists" },
    { id: "notExists", label: "does not exist" },
  ],
  array: [
    { id: "includes", label: "includes" },
    { id: "intersects", label: "contains any of" },
    { id: "supersetOf", label: "contains all of" },
    { id: "subsetOf", label: "contains only" },
    { id: "exists", label: "exists" },
    { id: "notExists", label: "does not exist" },
  ],
};

/** Labels of an event rule's count comparison. */
export const COUNT_OPERATORS: readonly { op: CmpOp; label: string }[] = [
  { op: ">=", label: "at least" },
  { op: "<=", label: "at most" },
  { op: "=", label: "exactly" },
  { op: ">", label: "more than" },
  { op: "<", label: "fewer than" },
  { op: "!=", label: "not exactly" },
];

/** Labels of the general relative form's parts. */
export const DIRECTION_LABELS: Readonly<Record<Direction, string>> = { before: "before", after: "after", from: "from" };
/** Time units as the builder's menus name them: PQL's own plurals. */
export const TIME_UNIT_LABELS: Readonly<Record<TimeUnit, string>> = TIME_UNIT_PLURALS;

/**
 * The value type a condition is about, from its operator and operands
 * (`equals` on a number is a number condition); undefined for `exists` /
 * `notExists`, which fit any type.
 */
export function valueTypeOf(cond: Pick<ConditionRule, "operator" | "operands">): ValueType | undefined {
  if (cond.operator === "exists" || cond.operator === "notExists") return undefined;
  const first = cond.operands[0]?.kind;
  const numeric = first === "integer" || first === "double";
  for (const type of Object.keys(OPERATORS_BY_TYPE) as ValueType[]) {
    if (!OPERATORS_BY_TYPE[type].some((c) => c.id === cond.operator)) continue;
    if (type === "text" && numeric) continue;
    if (type === "number" && !numeric && first !== undefined) continue;
    return type;
  }
  return undefined;
}

/** Why the operands do not fit the operator, or undefined when they do. */
export function operandProblem(cond: Pick<ConditionRule, "operator" | "operands" | "ignoreCase">): string | undefined {
  const spec = OPERATORS[cond.operator];
  if (!spec) return `unknown operator "${String(cond.operator)}"`;
  if (!Array.isArray(cond.operands)) return "operands must be a list";
  if (cond.ignoreCase !== undefined && typeof cond.ignoreCase !== "boolean") return "ignoreCase must be true or false";
  if (cond.ignoreCase && !spec.caseOption) return `"${spec.id}" has no ignore-case option`;
  const kinds = "fixed" in spec.operands ? spec.operands.fixed : cond.operands.map(() => (spec.operands as { list: OperandKind[] }).list);
  if (cond.operands.length !== kinds.length) return `"${spec.id}" takes ${kinds.length} operand(s), not ${cond.operands.length}`;
  for (let i = 0; i < kinds.length; i++) {
    const o = cond.operands[i]!;
    if (!kinds[i]!.includes(o?.kind)) return `operand ${i + 1} of "${spec.id}" must be ${kinds[i]!.join(" or ")}`;
    const bad = badOperand(o);
    if (bad) return `operand ${i + 1}: ${bad}`;
  }
  if (cond.ignoreCase && cond.operands[0]?.kind !== "string") return "ignore case needs a text operand";
  return undefined;
}

const UNITS = new Set(Object.keys(TIME_UNIT_LABELS));
const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);

function isWhole(n: unknown, min: number, max = Number.MAX_SAFE_INTEGER): boolean {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= min && n <= max;
}

function badOperand(o: Operand): string | undefined {
  switch (o.kind) {
    case "string":
      return typeof o.value === "string" ? undefined : "not a text value";
    case "integer":
      return isWhole(o.value, Number.MIN_SAFE_INTEGER) ? undefined : "not a whole number";
    case "double":
      return typeof o.value === "number" && Number.isFinite(o.value) ? undefined : "not a finite number";
    case "boolean":
      return typeof o.value === "boolean" ? undefined : "not true or false";
    case "time":
      return ["now", "today", "yesterday", "tomorrow"].includes(o.word) ? undefined : "unknown time word";
    case "period":
      return ["this", "last", "next"].includes(o.which) && UNITS.has(o.unit) ? undefined : "unknown period";
    case "date":
      return isWhole(o.year, 0, 9999) && isWhole(o.month, 1, 12) && isWhole(o.day, 1, 31) ? undefined : "not a calendar date";
    case "duration":
      return isWhole(o.amount, 0) && UNITS.has(o.unit) ? undefined : "not a duration";
    case "offset":
      return isWhole(o.amount, 0) && UNITS.has(o.unit) && CMP.has(o.cmp) && ["before", "after", "from"].includes(o.direction)
        ? undefined
        : "not a relative offset";
  }
}
