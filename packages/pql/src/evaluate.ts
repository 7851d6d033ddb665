/**
 * The reference interpreter of PQL: walks the AST for one profile (and its
 * events) at a given `now`. It is the executable form of pql.md §5–§8; the
 * compiler (compile.ts) must agree with it on every query, which the property
 * tests check. Recursion follows the tree's depth, which the parser caps at
 * ~200 levels (MAX_NESTING); trees built by code should respect the same cap.
 */
import { activeBudget, spend } from "./runtime/budget.js";
import type { Binding, Chain, Expr, Occurs, OccursTail, Query } from "./ast.js";
import {
  aggregate,
  aggregateMethod,
  callPlainMethod,
  count,
  currentField,
  existsItem,
  filterItems,
  groupBy,
  inSegment,
  like,
  mapEntry,
  mapItems,
  regexMatches,
  topN,
  type ItemFn,
} from "./runtime/builtins.js";
import { prepareQuery, resolveNow, type EvalContext } from "./runtime/prepare.js";
import { Tracer, type TraceNode } from "./trace.js";
import { boundsFromSpans, dateValue, inBounds, resolveTimeRef, spanOfValue, tailRefs, timeRefValue, type TimeSpan } from "./runtime/time.js";
import {
  arithmetic,
  coerceLiteral,
  compareValues,
  inList,
  isNull,
  member,
  orNull,
  toBoolean,
  toInstant,
} from "./runtime/values.js";

export type { EvalContext } from "./runtime/prepare.js";
export type { TraceNode } from "./trace.js";

interface Vars {
  name: string;
  value: unknown;
  next: Vars | null;
}

interface Env {
  readonly ctx: EvalContext;
  readonly now: number;
  /** Implicit contexts: [the first parameter, filter item, nested filter item, ...]. */
  readonly items: readonly unknown[];
  readonly vars: Vars | null;
  /** Set by traceEvaluation: records the nodes evaluated in the query's own context. */
  readonly tracer: Tracer | null;
}

/**
 * The value of a query for one profile. Segment definitions produce booleans
 * (coerce other results with `toBoolean`, or use `evaluatePredicate`); computed
 * expressions may produce numbers, strings, arrays or maps.
 */
export function evaluate(query: string | Query, context: EvalContext): unknown {
  const q = prepareQuery(query);
  return run(q, context);
}

/** The query's top level as a boolean position (pql.md §6.4): the segment predicate. */
export function evaluatePredicate(query: string | Query, context: EvalContext): boolean {
  return toBoolean(evaluate(query, context));
}

/**
 * The value of a query and the trace of its evaluation (trace.ts): the same
 * interpreter, recording each node's value as it goes, so the root's value is
 * the result.
 */
export function traceEvaluation(query: string | Query, context: EvalContext): { value: unknown; trace: TraceNode } {
  const tracer = new Tracer();
  const value = run(prepareQuery(query), context, tracer);
  tracer.root.value = value;
  return { value, trace: tracer.root };
}

function run(q: Query, context: EvalContext, tracer: Tracer | null = null): unknown {
  const budget = activeBudget();
  if (budget === null) return runOnce(q, context, tracer);
  budget.enter();
  try {
    return runOnce(q, context, tracer);
  } finally {
    budget.leave();
  }
}

function runOnce(q: Query, context: EvalContext, tracer: Tracer | null): unknown {
  const now = resolveNow(context.now);
  const root = context.params?.[0] ?? context.profile;
  let vars: Vars | null = null;
  q.params.forEach((name, i) => {
    vars = { name, value: i === 0 ? root : orNull(context.params?.[i]), next: vars };
  });
  return orNull(ev(q.body, { ctx: context, now, items: [root], vars, tracer }));
}

function lookup(vars: Vars | null, name: string): unknown {
  for (let v = vars; v !== null; v = v.next) if (v.name === name) return v.value;
  return null;
}

function bind(env: Env, name: string, value: unknown): Env {
  return { ...env, vars: { name, value, next: env.vars } };
}

function withItem(env: Env, item: unknown): Env {
  return { ...env, items: [...env.items, item] };
}

const bool = (e: Expr, env: Env) => toBoolean(ev(e, env));

/** The tracer when this evaluation records nodes (tracing, and not inside one item's evaluation). */
function tracing(env: Env): Tracer | null {
  return env.tracer !== null && env.tracer.active ? env.tracer : null;
}

function ev(e: Expr, env: Env): unknown {
  const t = tracing(env);
  return t === null ? evNode(e, env) : t.traced(e, () => evNode(e, env));
}

function evNode(e: Expr, env: Env): unknown {
  switch (e.type) {
    case "Literal":
      return e.value;
    case "List":
      return e.elements.map((x) => orNull(ev(x, env)));
    case "Object": {
      const o: Record<string, unknown> = {};
      for (const { key, value } of e.entries) o[key] = orNull(ev(value, env));
      return o;
    }
    case "Field":
      return member(env.items[env.items.length - 1], e.name);
    case "Var":
      return lookup(env.vars, e.name);
    case "Param":
      return e.index === 1 ? env.items[0] : orNull(env.ctx.params?.[e.index - 1]);
    case "Up": {
      const at = env.items.length - 1 - e.levels;
      return at < 0 ? null : member(env.items[at], e.name);
    }
    case "XEvent":
      return env.ctx.events ?? [];
    case "TimeWord":
    case "RelPeriod":
      return timeRefValue(e, env.now);
    case "Member":
      return member(ev(e.object, env), e.name);
    case "Method":
      return method(e.name, e.receiver, e.args, env);
    case "Call":
      return call(e.name, e.args, env);
    case "Filter":
      return filterItems(ev(e.object, env), itemFn(e.condition, env, true));
    case "Negate": {
      const v = ev(e.operand, env);
      return typeof v === "number" ? -v : null;
    }
    case "Not":
      return !bool(e.operand, env);
    case "Binary":
      return binary(e.op, e.left, e.right, env);
    case "Occurs":
      return occurs(e, env);
    case "Chain":
      return chain(e, env);
    case "Select": {
      const out: unknown[] = [];
      tuples(e.bindings, 0, env, [], (vals) => {
        out.push(vals.length === 1 ? vals[0] : [...vals]);
        return false;
      });
      return out;
    }
    case "Quantifier":
      return e.quantifier === "exists" ? existsTuple(e.bindings, 0, env) : forallTuple(e.bindings, 0, env);
    case "AggregateOver": {
      const values: unknown[] = [];
      const value = e.value;
      tuples(e.bindings, 0, env, [], (vals, inner) => {
        const v = orNull(value ? ev(value, inner) : vals[0]);
        if (v !== null) values.push(v);
        return false;
      });
      return aggregate(e.fn, values);
    }
    case "Let":
      return ev(e.body, bind(env, e.variable, orNull(ev(e.value, env))));
    case "Lambda":
      // A function is not a value: lambdas only make sense as method arguments.
      return null;
  }
}

/** A side of a comparison, with literal coercion (§6.5) towards the other side's runtime type. */
function comparisonSides(left: Expr, right: Expr, env: Env): [unknown, unknown] {
  let l = orNull(ev(left, env));
  let r = orNull(ev(right, env));
  if (left.type === "Literal" && right.type !== "Literal") l = coerceLiteral(l, r);
  else if (right.type === "Literal" && left.type !== "Literal") r = coerceLiteral(r, l);
  return [l, r];
}

/** `x in [literals]`: coerce each literal element towards x's runtime type. */
function listSide(x: unknown, right: Expr, env: Env): unknown {
  if (right.type !== "List") return ev(right, env);
  return right.elements.map((el) => (el.type === "Literal" ? coerceLiteral(el.value, x) : orNull(ev(el, env))));
}

function binary(op: Extract<Expr, { type: "Binary" }>["op"], left: Expr, right: Expr, env: Env): unknown {
  switch (op) {
    case "and":
      return bool(left, env) && bool(right, env);
    case "or":
      return bool(left, env) || bool(right, env);
    case "=":
    case "!=":
    case "<":
    case "<=":
    case ">":
    case ">=": {
      const [l, r] = comparisonSides(left, right, env);
      return compareValues(op, l, r);
    }
    case "+":
    case "-":
    case "*":
    case "/":
    case "%":
      return arithmetic(op, ev(left, env), ev(right, env));
    case "in": {
      const x = orNull(ev(left, env));
      return inList(x, listSide(x, right, env));
    }
    case "notIn": {
      const x = orNull(ev(left, env));
      const list = listSide(x, right, env);
      return !isNull(x) && Array.isArray(list) && !inList(x, list);
    }
    case "like":
      return like(ev(left, env), ev(right, env));
    case "matches":
      return regexMatches(ev(left, env), ev(right, env));
  }
}

/**
 * An item-context argument: the item becomes the implicit context; a lambda binds its parameters.
 * Traced, its items are evaluated untraced and counted on the iterating node (`predicate`: which held).
 */
function itemFn(arg: Expr, env: Env, predicate = false): ItemFn {
  const fn = untracedItemFn(arg, env);
  const t = tracing(env);
  if (t === null) return fn;
  const owner = t.current;
  return (item, key) => {
    const v = t.untraced(() => fn(item, key));
    if (predicate) t.item(owner, toBoolean(v), item);
    return v;
  };
}

function untracedItemFn(arg: Expr, env: Env): ItemFn {
  if (arg.type === "Lambda") {
    return (item, key) => {
      let inner = withItem(env, item);
      // One parameter: the item. Two: (key, value) over a map, (item, index) over an array.
      // Any further parameter is bound to null.
      const values =
        arg.params.length === 1 ? [orNull(item)] : typeof key === "string" ? [key, orNull(item)] : [orNull(item), key];
      arg.params.forEach((p, i) => {
        inner = bind(inner, p, i < values.length ? values[i] : null);
      });
      return ev(arg.body, inner);
    };
  }
  return (item) => ev(arg, withItem(env, item));
}

function method(name: string, recvNode: Expr, args: Expr[], env: Env): unknown {
  const recv = orNull(ev(recvNode, env));
  const a0 = args[0];
  switch (name) {
    case "filter":
      return a0 ? filterItems(recv, itemFn(a0, env, true)) : null;
    case "exists":
      return a0 ? existsItem(recv, itemFn(a0, env, true)) : false;
    case "groupBy":
      return a0 ? groupBy(recv, itemFn(a0, env)) : null;
    case "map":
      return a0 ? mapItems(recv, itemFn(a0, env)) : null;
    case "topN":
    case "bottomN":
      return a0 ? topN(recv, itemFn(a0, env), args[1] ? ev(args[1], env) : null, name === "topN") : null;
    case "sum":
    case "average":
    case "min":
    case "max":
      return aggregateMethod(name, recv, a0 ? itemFn(a0, env) : null);
    case "count":
      return count(recv);
  }
  return callPlainMethod(
    name,
    recv,
    args.map((a) => orNull(ev(a, env))),
    env.now,
  );
}

function call(name: string, args: Expr[], env: Env): unknown {
  const arg = (i: number) => (args[i] ? orNull(ev(args[i]!, env)) : null);
  switch (name) {
    case "if":
      return args[0] && bool(args[0], env) ? arg(1) : arg(2);
    case "date":
      return dateValue(arg(0), arg(1), arg(2));
    case "inSegment":
      return inSegment(env.ctx.profile, arg(0));
    case "mapEntry":
      return mapEntry(arg(0), arg(1));
    default:
      return currentField(name, env.now);
  }
}

/** The span of a time reference: keywords from `now`, expressions from their value. */
function refSpan(ref: Expr, env: Env): TimeSpan | null {
  if (ref.type === "TimeWord" || ref.type === "RelPeriod") return resolveTimeRef(ref, env.now);
  return spanOfValue(orNull(ev(ref, env)));
}

function tailHolds(tail: OccursTail, t: number | null, env: Env): boolean {
  if (t === null) return false;
  const spans: TimeSpan[] = [];
  for (const ref of tailRefs(tail)) {
    const s = refSpan(ref, env);
    if (s === null) return false;
    spans.push(s);
  }
  const bounds = boundsFromSpans(tail, spans);
  const tracer = tracing(env);
  if (tracer !== null) tracer.current.bounds = bounds;
  return inBounds(t, bounds);
}

function occurs(e: Occurs, env: Env): boolean {
  return tailHolds(e.tail, toInstant(orNull(ev(e.subject, env))), env);
}

/**
 * chain (§7.14, R): steps matched by distinct events with strictly increasing
 * timestamps. Events are taken in timestamp order (stable); each step takes the
 * earliest events after the previous step's position that satisfy WHAT, WHEN
 * and WHERE; with COUNT(n) it needs n of them and its position is the n-th.
 * Taking the earliest is optimal, so this greedy scan decides existence.
 */
function chain(e: Chain, env: Env): boolean {
  const source = ev(e.source, env);
  if (!Array.isArray(source)) return false;
  spend(source.length);
  const path = e.timestampField.split(".");
  const events: { ev: unknown; t: number }[] = [];
  for (const item of source) {
    let v: unknown = item;
    for (const p of path) v = member(v, p);
    const t = toInstant(v);
    if (t !== null) events.push({ ev: item, t });
  }
  events.sort((a, b) => a.t - b.t);
  const t = tracing(env);
  if (t === null) return chainSteps(e, events, env, null);
  const owner = t.current;
  return t.untraced(() => chainSteps(e, events, env, (item, held) => t.item(owner, held, item)));
}

/** The greedy scan of chain's steps over events in time order; `seen` counts each event tested (traces). */
function chainSteps(e: Chain, events: { ev: unknown; t: number }[], env: Env, seen: ((item: unknown, held: boolean) => void) | null): boolean {
  let pos = -Infinity;
  let i = 0;
  for (const step of e.steps) {
    const need = step.count ?? 1;
    let found = 0;
    // The first event strictly after the previous step's timestamp.
    while (i < events.length && events[i]!.t <= pos) i++;
    for (; i < events.length && found < need; i++) {
      const { ev: item, t } = events[i]!;
      const inner = withItem(env, item);
      const held = bool(step.what, inner) && (!step.when || tailHolds(step.when, t, inner)) && (!step.where || bool(step.where, inner));
      seen?.(item, held);
      if (!held) continue;
      if (++found === need) pos = t;
    }
    if (found < need) return false;
  }
  return true;
}

/**
 * Enumerate the tuples of bindings (each binding sees the variables to its
 * left; its condition must hold). `visit` returns true to stop early.
 */
function tuples(
  bindings: Binding[],
  k: number,
  env: Env,
  vals: unknown[],
  visit: (vals: unknown[], env: Env) => boolean,
): boolean {
  if (k === bindings.length) return visit(vals, env);
  const b = bindings[k]!;
  const source = ev(b.source, env);
  if (!Array.isArray(source)) return false;
  spend(source.length);
  // One item of this binding: null when its condition fails, else whether the visit stopped.
  const one = (item: unknown): boolean | null => {
    const inner = bind(env, b.variable, item);
    if (b.condition && !bool(b.condition, inner)) return null;
    vals.push(item);
    const stop = tuples(bindings, k + 1, inner, vals, visit);
    vals.pop();
    return stop;
  };
  const t = tracing(env);
  const owner = t?.current;
  for (const raw of source) {
    const item = orNull(raw);
    const r = t ? t.untraced(() => one(item)) : one(item);
    if (t) t.item(owner!, r !== null, item);
    if (r === true) return true;
  }
  return false;
}

function existsTuple(bindings: Binding[], k: number, env: Env): boolean {
  return tuples(bindings, k, env, [], () => true);
}

/** forall (R, OQ-12/13): every tuple of the cross product satisfies all conditions; empty → true. */
function forallTuple(bindings: Binding[], k: number, env: Env): boolean {
  if (k === bindings.length) return true;
  const b = bindings[k]!;
  const source = ev(b.source, env);
  if (!Array.isArray(source)) return true;
  spend(source.length);
  const one = (item: unknown): boolean => {
    const inner = bind(env, b.variable, item);
    return !(b.condition && !bool(b.condition, inner)) && forallTuple(bindings, k + 1, inner);
  };
  const t = tracing(env);
  const owner = t?.current;
  for (const raw of source) {
    const item = orNull(raw);
    const held = t ? t.untraced(() => one(item)) : one(item);
    if (t) t.item(owner!, held, item);
    if (!held) return false;
  }
  return true;
}

export { toBoolean };
