/**
 * Model → PQL tree. Pure construction: no validation beyond what building
 * needs (to-pql.ts validates first). Compound conditions (model.ts) give two
 * terms, spliced into an `and` group's chain and parenthesised elsewhere.
 */
import type { ChainStep, Expr, Literal, OccursTail, Query, TimeRef } from "@segmentd/pql";
import { parse } from "@segmentd/pql";
import type { ConditionRule, Group, Operand, Rule, SequenceRule, TimeCondition, VisualModel } from "./model.js";
import { COMPOUND_OPERATORS } from "./operators.js";

/** Thrown when a model cannot be built; `ruleId` names the offending node. */
export class ModelError extends Error {
  readonly ruleId: string | undefined;
  constructor(message: string, ruleId?: string) {
    super(message);
    this.name = "ModelError";
    this.ruleId = ruleId;
  }
}

/** The query of a model; its body is undefined when the root group is empty. */
export function buildQuery(model: VisualModel): { params: string[]; body: Expr | undefined } {
  return { params: model.params, body: groupExpr(model.root, model.params) };
}

/** The tree of a group, or undefined when it has no terms (empty, or only empty groups). */
export function groupExpr(group: Group, params: string[]): Expr | undefined {
  const terms: Expr[] = [];
  for (const child of group.children) terms.push(...ruleTerms(child, group.combinator, params));
  if (terms.length === 0) return undefined;
  let acc = terms[0]!;
  for (let i = 1; i < terms.length; i++) acc = { type: "Binary", op: group.combinator, left: acc, right: terms[i]! };
  return group.mode === "exclude" ? { type: "Not", operand: acc } : acc;
}

/** The terms a rule contributes to a chain of `parentOp`. */
function ruleTerms(rule: Rule, parentOp: "and" | "or", params: string[]): Expr[] {
  if (rule.kind === "condition" && COMPOUND_OPERATORS.has(rule.operator)) {
    const [a, b] = compoundTerms(rule);
    return parentOp === "and" ? [a, b] : [{ type: "Binary", op: "and", left: a, right: b }];
  }
  if (rule.kind === "group") {
    const e = groupExpr(rule, params);
    return e ? [e] : [];
  }
  return [ruleExpr(rule, params)];
}

/** The tree of one non-group rule (a compound condition as its parenthesised pair). */
export function ruleExpr(rule: Exclude<Rule, Group>, params: string[]): Expr {
  switch (rule.kind) {
    case "condition":
      if (COMPOUND_OPERATORS.has(rule.operator)) {
        const [a, b] = compoundTerms(rule);
        return { type: "Binary", op: "and", left: a, right: b };
      }
      return conditionExpr(rule);
    case "event": {
      const cond = groupExpr(rule.filter, params);
      const events: Expr = cond ? { type: "Filter", object: { type: "XEvent" }, condition: cond } : { type: "XEvent" };
      return {
        type: "Binary",
        op: rule.count.op,
        left: { type: "Method", receiver: events, name: "count", args: [] },
        right: integer(rule.count.value),
      };
    }
    case "sequence":
      return sequenceExpr(rule, params);
    case "segment": {
      const call: Expr = { type: "Call", name: "inSegment", args: [str(rule.segmentId)] };
      return rule.member ? call : { type: "Not", operand: call };
    }
    case "pql":
      return blockExpr(rule.pql, params, rule.id);
  }
}

/** A block's text read back as a tree, with the query's lambda head in scope. */
export function blockExpr(text: string, params: string[], ruleId?: string): Expr {
  try {
    return params.length === 0 ? parse(text).body : parse(`(${params.join(", ")}) => ${text}`).body;
  } catch (e) {
    throw new ModelError(`The PQL block does not parse: ${(e as Error).message}`, ruleId);
  }
}

function sequenceExpr(rule: SequenceRule, params: string[]): Expr {
  const steps: ChainStep[] = rule.steps.map((s) => {
    const step: ChainStep = { label: s.label, what: groupExpr(s.what, params) ?? { type: "Literal", kind: "boolean", value: true } };
    if (s.when) step.when = timeTail(s.when, s.id);
    if (s.count !== undefined) step.count = s.count;
    const where = s.where && groupExpr(s.where, params);
    if (where) step.where = where;
    return step;
  });
  return { type: "Chain", source: { type: "XEvent" }, timestampField: rule.timestampField, steps };
}

export function path(field: string): Expr {
  const parts = field.split(".");
  let e: Expr = { type: "Field", name: parts[0]! };
  for (let i = 1; i < parts.length; i++) e = { type: "Member", object: e, name: parts[i]! };
  return e;
}

function str(value: string): Literal {
  return { type: "Literal", kind: "string", value };
}
function integer(value: number): Literal {
  return { type: "Literal", kind: "integer", value };
}
const FALSE: Literal = { type: "Literal", kind: "boolean", value: false };

export function scalar(o: Operand): Literal {
  switch (o.kind) {
    case "string":
    case "integer":
    case "double":
    case "boolean":
      return { type: "Literal", kind: o.kind, value: o.value };
    default:
      throw new ModelError(`Expected a text, number or boolean value but found ${o.kind}`);
  }
}

function list(operands: Operand[]): Expr {
  return { type: "List", elements: operands.map(scalar) };
}

function method(receiver: Expr, name: string, args: Expr[]): Expr {
  return { type: "Method", receiver, name, args };
}

function cmp(op: "=" | "!=" | "<" | "<=" | ">" | ">=", left: Expr, right: Expr): Expr {
  return { type: "Binary", op, left, right };
}

const STRING_METHODS: Partial<Record<ConditionRule["operator"], string>> = {
  contains: "contains",
  doesNotContain: "doesNotContain",
  startsWith: "startsWith",
  doesNotStartWith: "doesNotStartWith",
  endsWith: "endsWith",
  doesNotEndWith: "doesNotEndWith",
};
const ORDER_OPS = { lessThan: "<", atMost: "<=", greaterThan: ">", atLeast: ">=" } as const;
const LIST_METHODS = { intersects: "intersects", supersetOf: "supersetOf", subsetOf: "subsetOf" } as const;

function conditionExpr(c: ConditionRule): Expr {
  const f = path(c.field);
  const a = c.operands[0];
  switch (c.operator) {
    case "equals":
      return c.ignoreCase ? method(f, "equals", [scalar(a!), FALSE]) : cmp("=", f, scalar(a!));
    case "notEquals":
      return c.ignoreCase ? method(f, "notEqualTo", [scalar(a!), FALSE]) : cmp("!=", f, scalar(a!));
    case "lessThan":
    case "atMost":
    case "greaterThan":
    case "atLeast":
      return cmp(ORDER_OPS[c.operator], f, scalar(a!));
    case "in":
    case "notIn":
      return { type: "Binary", op: c.operator, left: f, right: list(c.operands) };
    case "contains":
    case "doesNotContain":
    case "startsWith":
    case "doesNotStartWith":
    case "endsWith":
    case "doesNotEndWith":
      return method(f, STRING_METHODS[c.operator]!, c.ignoreCase ? [scalar(a!), FALSE] : [scalar(a!)]);
    case "like":
      return { type: "Binary", op: "like", left: f, right: scalar(a!) };
    case "matches":
      return method(f, "matches", [scalar(a!)]);
    case "isTrue":
    case "isFalse":
      return cmp("=", f, { type: "Literal", kind: "boolean", value: c.operator === "isTrue" });
    case "includes":
      return method(f, "includes", [scalar(a!)]);
    case "intersects":
    case "supersetOf":
    case "subsetOf":
      return method(f, LIST_METHODS[c.operator], [list(c.operands)]);
    case "exists":
      return method(f, "isNotNull", []);
    case "notExists":
      return method(f, "isNull", []);
    case "between":
    case "ignoreYear":
      throw new ModelError(`"${c.operator}" is written as two terms`, c.id);
    default:
      return { type: "Occurs", subject: f, tail: timeTail(c, c.id) };
  }
}

/** The two `and`-ed terms of a compound condition. */
export function compoundTerms(c: ConditionRule): [Expr, Expr] {
  const f = path(c.field);
  if (c.operator === "between") return [cmp(">=", f, scalar(c.operands[0]!)), cmp("<=", path(c.field), scalar(c.operands[1]!))];
  const call = (name: string): Expr => ({ type: "Call", name, args: [] });
  return [
    cmp("=", method(f, "getMonth", []), call("currentMonth")),
    cmp("=", method(path(c.field), "getDayOfMonth", []), call("currentDayOfMonth")),
  ];
}

/** The occurs tail of a date operator. */
export function timeTail(t: TimeCondition, ruleId?: string): OccursTail {
  const [a, b] = t.operands;
  switch (t.operator) {
    case "dateOn":
      return { kind: "on", ref: timeRef(a!) };
    case "dateBefore":
      return { kind: "direction", direction: "before", ref: timeRef(a!) };
    case "dateAfter":
      return { kind: "direction", direction: "after", ref: timeRef(a!) };
    case "dateBetween":
      return { kind: "between", from: timeRef(a!), to: timeRef(b!) };
    case "inLast":
    case "inNext": {
      if (a?.kind !== "duration") throw new ModelError(`"${t.operator}" needs a duration`, ruleId);
      const direction = t.operator === "inLast" ? "before" : "after";
      return { kind: "relative", op: "<=", amount: a.amount, unit: a.unit, direction, ref: { type: "TimeWord", word: "now" } };
    }
    case "relative": {
      if (a?.kind !== "offset") throw new ModelError(`"relative" needs an offset`, ruleId);
      return { kind: "relative", op: a.cmp, amount: a.amount, unit: a.unit, direction: a.direction, ref: timeRef(b!) };
    }
    default:
      throw new ModelError(`"${t.operator}" is not a time operator`, ruleId);
  }
}

function timeRef(o: Operand): TimeRef {
  switch (o.kind) {
    case "time":
      return { type: "TimeWord", word: o.word };
    case "period":
      return { type: "RelPeriod", which: o.which, unit: o.unit };
    case "date":
      return { type: "Call", name: "date", args: [integer(o.year), integer(o.month), integer(o.day)] };
    default:
      throw new ModelError(`Expected a time reference but found ${o.kind}`);
  }
}

/** The query tree of a whole model, as parse would give it. */
export function queryOf(model: VisualModel): Query | undefined {
  const { params, body } = buildQuery(model);
  return body ? { type: "Query", params, body } : undefined;
}
