/**
 * From the query tree to the columnar plan (nodes.ts). Every node the columnar
 * code covers becomes a column node; any other node in a boolean position
 * becomes a RowFallbackNode, so a query is always evaluable and only the parts
 * that need it go through row objects.
 */
import type { Binding, CmpOp, Expr } from "../ast.js";
import { fieldPath } from "../runtime/patterns.js";
import { EventAggregateNode, numericTest, type Measure } from "./event-aggregate.js";
import { andEvents, planEventCondition, type EventNode } from "./event-condition.js";
import { toItemForm } from "./item-form.js";
import { AndNode, NotNode, OrNode, ProfileLeaf, RowFallbackNode, type ProfileNode } from "./nodes.js";
import { SegmentNode } from "./segment.js";
import { ChainNode } from "./chain.js";
import { singlePath, ValueLeaf } from "./value-leaf.js";

const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);

function flatten(e: Expr, op: "and" | "or", into: Expr[]): Expr[] {
  if (e.type === "Binary" && e.op === op) {
    flatten(e.left, op, into);
    flatten(e.right, op, into);
  } else into.push(e);
  return into;
}

function describe(e: Expr): string {
  switch (e.type) {
    case "Method":
    case "Call":
      return `${e.name}()`;
    case "Binary":
      return `operator ${e.op}`;
    default:
      return e.type;
  }
}

/** Events selected by an expression that denotes a subset of xEvent (`cond` null: all), or undefined. */
function eventSet(e: Expr, now: number): { cond: EventNode | null } | undefined {
  switch (e.type) {
    case "XEvent":
      return { cond: null };
    case "Filter":
    case "Method": {
      let source: Expr;
      let condition: Expr;
      if (e.type === "Filter") ({ object: source, condition } = e);
      else if (e.name === "filter" && e.args.length === 1 && e.args[0]!.type !== "Lambda") {
        source = e.receiver;
        condition = e.args[0]!;
      } else return undefined;
      const s = eventSet(source, now);
      if (s === undefined) return undefined;
      const c = planEventCondition(condition, now);
      return c === null ? undefined : { cond: andEvents(s.cond, c) };
    }
    case "Select":
      return e.bindings.length === 1 ? boundSet(e.bindings[0]!, now, false) : undefined;
    default:
      return undefined;
  }
}

/** The events of a binding `X from S where C` (negated: those of S failing C). */
function boundSet(b: Binding, now: number, negate: boolean): { cond: EventNode | null } | undefined {
  const s = eventSet(b.source, now);
  if (s === undefined) return undefined;
  if (b.condition === undefined) return negate ? undefined : s;
  const item = toItemForm(b.condition, b.variable);
  if (item === undefined) return undefined;
  const c = planEventCondition(negate ? { type: "Not", operand: item } : item, now);
  return c === null ? undefined : { cond: andEvents(s.cond, c) };
}

const atLeastOne: Measure = { kind: "count", test: (n) => n > 0 };

/** An aggregate of the profile's events in a boolean position, or undefined. */
function planAggregate(e: Expr, now: number, fallback: () => ProfileNode): ProfileNode | undefined {
  const set = eventSet(e, now);
  // A filter/select result in a boolean position: true when non-empty (§6.4).
  if (set !== undefined) return new EventAggregateNode(set.cond, atLeastOne, fallback());
  if (e.type === "Method" && e.name === "exists" && e.args.length === 1 && e.args[0]!.type !== "Lambda") {
    const s = eventSet(e.receiver, now);
    const c = s === undefined ? null : planEventCondition(e.args[0]!, now);
    if (s !== undefined && c !== null) return new EventAggregateNode(andEvents(s.cond, c), atLeastOne, fallback());
    return undefined;
  }
  if (e.type === "Quantifier" && e.bindings.length === 1) {
    const b = e.bindings[0]!;
    if (e.quantifier === "exists") {
      const s = boundSet(b, now, false);
      return s === undefined ? undefined : new EventAggregateNode(s.cond, atLeastOne, fallback());
    }
    // forall: no event of the source fails the condition (true for none, §7.24).
    if (b.condition === undefined) return undefined;
    const s = boundSet(b, now, true);
    return s === undefined ? undefined : new EventAggregateNode(s.cond, { kind: "count", test: (n) => n === 0 }, fallback());
  }
  if (e.type === "Binary" && CMP.has(e.op)) {
    const flipped = e.left.type === "Literal";
    const lit = flipped ? e.left : e.right;
    const agg = flipped ? e.right : e.left;
    if (lit.type !== "Literal") return undefined;
    const test = numericTest(e.op as CmpOp, lit.value, flipped);
    if (agg.type === "AggregateOver") {
      // `(sum E.f over E from xEvent where C) OP x`: the same values as xEvent[C].sum(f).
      const b = agg.bindings[0];
      if (agg.bindings.length !== 1 || agg.value === undefined || b === undefined) return undefined;
      const value = toItemForm(agg.value, b.variable);
      const path = value === undefined ? null : fieldPath(value);
      const s = boundSet(b, now, false);
      if (path === null || s === undefined) return undefined;
      return new EventAggregateNode(s.cond, { kind: agg.fn, path, test }, fallback());
    }
    if (agg.type !== "Method") return undefined;
    const s = eventSet(agg.receiver, now);
    if (s === undefined) return undefined;
    if (agg.name === "count" && agg.args.length === 0) return new EventAggregateNode(s.cond, { kind: "count", test }, fallback());
    if ((agg.name === "sum" || agg.name === "average" || agg.name === "min" || agg.name === "max") && agg.args.length === 1) {
      const path = fieldPath(agg.args[0]!);
      if (path === null) return undefined;
      return new EventAggregateNode(s.cond, { kind: agg.name, path, test }, fallback());
    }
  }
  return undefined;
}

/** The plan of a node in a boolean position. `params`: the query's lambda head, for row fallbacks. */
export function planBool(e: Expr, now: number, params: string[]): ProfileNode {
  if (e.type === "Binary" && (e.op === "and" || e.op === "or")) {
    const parts = flatten(e, e.op, []).map((x) => planBool(x, now, params));
    return e.op === "and" ? new AndNode(parts) : new OrNode(parts);
  }
  if (e.type === "Not") return new NotNode(planBool(e.operand, now, params));
  const fallback = (reason: string) => new RowFallbackNode(e, params, reason);
  // A lambda head binds names the column paths cannot see: leave the whole query to the row path.
  if (params.length > 0) return fallback("a query with a lambda head is evaluated per profile");
  if (e.type === "Call" && e.name === "inSegment" && e.args.length === 1) {
    const a = e.args[0]!;
    if (a.type === "Literal" && typeof a.value === "string") return new SegmentNode(a.value);
  }
  const path = singlePath(e);
  if (path !== undefined) return new ProfileLeaf(new ValueLeaf(e, path, now));
  if (e.type === "Chain") {
    const one = ChainNode.single(e, now);
    if (one !== null) {
      const need = one.need;
      return new EventAggregateNode(one.cond, { kind: "count", test: (n) => n >= need }, fallback("chain() is not covered by the columnar code generator"));
    }
    const c = ChainNode.plan(e, now);
    if (c !== null) return c;
  }
  const agg = planAggregate(e, now, () => fallback(`${describe(e)} over non-number event values`));
  if (agg !== undefined) return agg;
  return fallback(`${describe(e)} is not covered by the columnar code generator`);
}
