/**
 * Leaf recognisers: a PQL sub-tree → a condition (or the parts of one), when
 * it has exactly one of the shapes operators.ts writes. Each returns
 * undefined for anything else; from-pql.ts then keeps the sub-tree as a block.
 * Recognisers only match shapes; from-pql.ts rebuilds every result and
 * compares it with the sub-tree, so a too-eager match cannot change meaning.
 */
import type { Expr, OccursTail, TimeRef } from "@segmentd/pql";
import type { ConditionRule, Operand, Scalar, TimeCondition, TimeRefOperand } from "./model.js";
import type { OperatorId } from "./operators.js";

/** `a.b.c` as "a.b.c"; undefined unless a plain field path. Iterative: paths may be long. */
export function fieldPath(e: Expr): string | undefined {
  const parts: string[] = [];
  let cur = e;
  while (cur.type === "Member") {
    parts.push(cur.name);
    cur = cur.object;
  }
  if (cur.type !== "Field") return undefined;
  parts.push(cur.name);
  return parts.reverse().join(".");
}

export function scalarOf(e: Expr | undefined): Scalar | undefined {
  if (e?.type !== "Literal") return undefined;
  switch (e.kind) {
    case "string":
      return typeof e.value === "string" ? { kind: "string", value: e.value } : undefined;
    case "integer":
    case "double":
      return typeof e.value === "number" ? { kind: e.kind, value: e.value } : undefined;
    case "boolean":
      return typeof e.value === "boolean" ? { kind: "boolean", value: e.value } : undefined;
  }
}

function scalarsOf(e: Expr | undefined): Scalar[] | undefined {
  if (e?.type !== "List") return undefined;
  const out: Scalar[] = [];
  for (const x of e.elements) {
    const s = scalarOf(x);
    if (!s) return undefined;
    out.push(s);
  }
  return out;
}

function isFalse(e: Expr | undefined): boolean {
  return e?.type === "Literal" && e.kind === "boolean" && e.value === false;
}

export type Cond = Omit<ConditionRule, "id" | "kind">;

const CMP_OPERATORS: Partial<Record<string, OperatorId>> = { "<": "lessThan", "<=": "atMost", ">": "greaterThan", ">=": "atLeast" };
const CASE_METHODS: Partial<Record<string, OperatorId>> = {
  contains: "contains",
  doesNotContain: "doesNotContain",
  startsWith: "startsWith",
  doesNotStartWith: "doesNotStartWith",
  endsWith: "endsWith",
  doesNotEndWith: "doesNotEndWith",
  equals: "equals",
  notEqualTo: "notEquals",
};
const LIST_METHODS: Partial<Record<string, OperatorId>> = { intersects: "intersects", supersetOf: "supersetOf", subsetOf: "subsetOf" };

/** A one-term condition (not a compound one). */
export function conditionOf(e: Expr): Cond | undefined {
  switch (e.type) {
    case "Binary":
      return binaryCondition(e);
    case "Method":
      return methodCondition(e);
    case "Occurs": {
      const field = fieldPath(e.subject);
      const t = field === undefined ? undefined : timeConditionOf(e.tail);
      return t && { field: field!, ...t };
    }
    default:
      return undefined;
  }
}

function binaryCondition(e: Expr & { type: "Binary" }): Cond | undefined {
  const field = fieldPath(e.left);
  if (field === undefined) return undefined;
  if (e.op === "in" || e.op === "notIn") {
    const items = scalarsOf(e.right);
    return items && { field, operator: e.op, operands: items };
  }
  const v = scalarOf(e.right);
  if (!v) return undefined;
  switch (e.op) {
    case "=":
      if (v.kind === "boolean") return { field, operator: v.value ? "isTrue" : "isFalse", operands: [] };
      return { field, operator: "equals", operands: [v] };
    case "!=":
      return { field, operator: "notEquals", operands: [v] };
    case "like":
      return v.kind === "string" ? { field, operator: "like", operands: [v] } : undefined;
    default: {
      const operator = CMP_OPERATORS[e.op];
      return operator && v.kind !== "boolean" ? { field, operator, operands: [v] } : undefined;
    }
  }
}

function methodCondition(e: Expr & { type: "Method" }): Cond | undefined {
  const field = fieldPath(e.receiver);
  if (field === undefined) return undefined;
  const [a, b] = e.args;
  const n = e.args.length;
  const caseOp = CASE_METHODS[e.name];
  if (caseOp) {
    const s = scalarOf(a);
    if (s?.kind !== "string") return undefined;
    // `equals`/`notEqualTo` without the flag are `=`/`!=` spelled differently: kept as blocks.
    if (n === 2 && isFalse(b)) return { field, operator: caseOp, operands: [s], ignoreCase: true };
    if (n === 1 && caseOp !== "equals" && caseOp !== "notEquals") return { field, operator: caseOp, operands: [s] };
    return undefined;
  }
  const listOp = LIST_METHODS[e.name];
  if (listOp) {
    const items = n === 1 ? scalarsOf(a) : undefined;
    return items && { field, operator: listOp, operands: items };
  }
  switch (e.name) {
    case "matches": {
      const s = n === 1 ? scalarOf(a) : undefined;
      return s?.kind === "string" ? { field, operator: "matches", operands: [s] } : undefined;
    }
    case "includes": {
      const s = n === 1 ? scalarOf(a) : undefined;
      return s && { field, operator: "includes", operands: [s] };
    }
    case "isNull":
    case "isNotNull":
      return n === 0 ? { field, operator: e.name === "isNull" ? "notExists" : "exists", operands: [] } : undefined;
    default:
      return undefined;
  }
}

/** An occurs tail as a date operator and operands. */
export function timeConditionOf(t: OccursTail): TimeCondition | undefined {
  switch (t.kind) {
    case "on": {
      const r = timeRefOf(t.ref);
      return r && { operator: "dateOn", operands: [r] };
    }
    case "direction": {
      if (t.direction === "from") return undefined;
      const r = timeRefOf(t.ref);
      return r && { operator: t.direction === "before" ? "dateBefore" : "dateAfter", operands: [r] };
    }
    case "between": {
      const from = timeRefOf(t.from);
      const to = timeRefOf(t.to);
      return from && to && { operator: "dateBetween", operands: [from, to] };
    }
    case "relative": {
      const r = timeRefOf(t.ref);
      if (!r) return undefined;
      if (t.op === "<=" && r.kind === "time" && r.word === "now" && t.direction !== "from") {
        const duration: Operand = { kind: "duration", amount: t.amount, unit: t.unit };
        return { operator: t.direction === "before" ? "inLast" : "inNext", operands: [duration] };
      }
      return { operator: "relative", operands: [{ kind: "offset", cmp: t.op, amount: t.amount, unit: t.unit, direction: t.direction }, r] };
    }
  }
}

function isWholeLiteral(e: Expr | undefined, min: number, max: number): e is Expr & { value: number } {
  return e?.type === "Literal" && e.kind === "integer" && typeof e.value === "number" && e.value >= min && e.value <= max;
}

function timeRefOf(r: TimeRef): TimeRefOperand | undefined {
  switch (r.type) {
    case "TimeWord":
      return { kind: "time", word: r.word };
    case "RelPeriod":
      return { kind: "period", which: r.which, unit: r.unit };
    case "Call": {
      const [y, m, d] = r.args;
      if (r.name !== "date" || r.args.length !== 3) return undefined;
      if (!isWholeLiteral(y, 0, 9999) || !isWholeLiteral(m, 1, 12) || !isWholeLiteral(d, 1, 31)) return undefined;
      return { kind: "date", year: y.value, month: m.value, day: d.value };
    }
    default:
      return undefined;
  }
}

/** Two adjacent `and` terms that form one compound condition (between, ignore year). */
export function compoundOf(a: Expr, b: Expr): Cond | undefined {
  if (a.type !== "Binary" || b.type !== "Binary") return undefined;
  if (a.op === ">=" && b.op === "<=") {
    const field = fieldPath(a.left);
    const lo = scalarOf(a.right);
    const hi = scalarOf(b.right);
    if (field === undefined || field !== fieldPath(b.left) || !isNumber(lo) || !isNumber(hi)) return undefined;
    return { field, operator: "between", operands: [lo, hi] };
  }
  if (a.op === "=" && b.op === "=") {
    const field = datePartField(a, "getMonth", "currentMonth");
    if (field === undefined || field !== datePartField(b, "getDayOfMonth", "currentDayOfMonth")) return undefined;
    return { field, operator: "ignoreYear", operands: [] };
  }
  return undefined;
}

function isNumber(s: Scalar | undefined): s is Scalar & { kind: "integer" | "double" } {
  return s?.kind === "integer" || s?.kind === "double";
}

/** The field of `f.part() = current()`. */
function datePartField(e: Expr & { type: "Binary" }, part: string, current: string): string | undefined {
  const { left, right } = e;
  if (left.type !== "Method" || left.name !== part || left.args.length !== 0) return undefined;
  if (right.type !== "Call" || right.name !== current || right.args.length !== 0) return undefined;
  return fieldPath(left.receiver);
}

/** `inSegment("id")`'s id. */
export function segmentIdOf(e: Expr): string | undefined {
  if (e.type !== "Call" || e.name !== "inSegment" || e.args.length !== 1) return undefined;
  const s = scalarOf(e.args[0]);
  return s?.kind === "string" ? s.value : undefined;
}
