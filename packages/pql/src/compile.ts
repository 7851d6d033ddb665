/**
 * PQL compiled once into a tree of closures for repeated evaluation (edge,
 * streaming, small batches). Same semantics as the interpreter (evaluate.ts),
 * which the property tests check; the speed comes from work done at compile
 * time instead of per evaluation:
 * - variables are resolved to slots of one array, the implicit item contexts
 *   live on a preallocated stack, and the state object is reused between calls
 *   (a compiled query is not re-entrant and never needs to be: PQL has no
 *   recursion and no callbacks into user code);
 * - field paths (`a.b.c`) become one loop over the names, with a direct
 *   property read for plain objects;
 * - a comparison of a field with a literal tests the common types inline and
 *   only falls back to the generic rules (coercion, time values) otherwise;
 * - `A[cond].count()` counts without building the filtered array, and
 *   `A[cond].count() >= n` stops at the n-th match;
 * - occurs bounds whose references are time keywords are computed once per
 *   distinct `now`, not per event.
 * Recursion depth of the compiler follows the tree depth (capped by the parser).
 */
import { fieldPath } from "./runtime/patterns.js";
import { activeBudget, spend } from "./runtime/budget.js";
import type { Binding, Chain, Expr, OccursTail, Query } from "./ast.js";
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
  mapEntry,
  mapItems,
  topN,
  type ItemFn,
} from "./runtime/builtins.js";
import { prepareQuery, resolveNow, type EvalContext } from "./runtime/prepare.js";
import { OperatorCompiler, readPath, step, type BoolFn, type Fn, type Scope, type State } from "./compile-operators.js";
import { generate, type StateFn } from "./runtime/codegen.js";
import { hoistedConditions } from "./hoist.js";
import {
  boundsFromSpans,
  dateValue,
  inBounds,
  resolveTimeRef,
  spanOfValue,
  tailRefs,
  timeRefValue,
  type OccursBounds,
  type TimeSpan,
} from "./runtime/time.js";
import {
  DateInterval,
  MapEntry,
  member,
  orNull,
  toBoolean,
  toInstant,
} from "./runtime/values.js";

export type CompiledQuery = (context: EvalContext) => unknown;

/** Compile a query once; call the result once per profile. */
export function compile(query: string | Query): CompiledQuery {
  const q = prepareQuery(query);
  const counter = { n: 0 };
  const names = new Map<string, number>();
  const headSlots = q.params.map((p) => {
    const slot = counter.n++;
    names.set(p, slot);
    return slot;
  });
  const compiler = new Compiler();
  const top: Scope = { names, next: counter };
  // Generated code for the hot subset when possible; the closure tree otherwise.
  const body = generate(q.body, (e) => compiler.expr(e, top) as StateFn) ?? compiler.expr(q.body, top);
  const state: State = { ctx: { profile: {}, now: 0 }, now: 0, items: [], depth: 0, vars: new Array(counter.n).fill(null) };
  const once = (context: EvalContext): unknown => {
    const root = context.params?.[0] ?? context.profile;
    state.ctx = context;
    const now = context.now;
    state.now = typeof now === "number" && Number.isFinite(now) ? now : resolveNow(now);
    state.items[0] = root;
    state.depth = 0;
    for (let i = 0; i < headSlots.length; i++) state.vars[headSlots[i]!] = i === 0 ? root : orNull(context.params?.[i]);
    return orNull(body(state));
  };
  return (context: EvalContext) => {
    const budget = activeBudget();
    if (budget === null) return once(context);
    budget.enter();
    try {
      return once(context);
    } finally {
      budget.leave();
    }
  };
}

/** Compile a segment predicate: the top level is a boolean position (§6.4). */
export function compilePredicate(query: string | Query): (context: EvalContext) => boolean {
  const f = compile(query);
  return (context) => toBoolean(f(context));
}

class Compiler extends OperatorCompiler {
  override expr(e: Expr, sc: Scope): Fn {
    switch (e.type) {
      case "Literal": {
        const v = e.value;
        return () => v;
      }
      case "List": {
        const els = e.elements.map((x) => this.expr(x, sc));
        return (s) => els.map((f) => orNull(f(s)));
      }
      case "Object": {
        const entries = e.entries.map(({ key, value }) => [key, this.expr(value, sc)] as const);
        return (s) => {
          const o: Record<string, unknown> = {};
          for (const [k, f] of entries) o[k] = orNull(f(s));
          return o;
        };
      }
      case "Field":
      case "Member": {
        const path = fieldPath(e);
        if (path !== null) {
          if (path.length === 1) {
            const name = path[0]!;
            return (s) => orNull(step(s.items[s.depth], name));
          }
          if (path.length === 2) {
            const [n0, n1] = path as [string, string];
            return (s) => {
              const a = step(s.items[s.depth], n0);
              return a === null ? null : orNull(step(a, n1));
            };
          }
          return (s) => readPath(s.items[s.depth], path);
        }
        if (e.type === "Field") {
          const name = e.name;
          return (s) => member(s.items[s.depth], name);
        }
        const obj = this.expr(e.object, sc);
        const name = e.name;
        return (s) => member(obj(s), name);
      }
      case "Var": {
        const slot = sc.names.get(e.name);
        if (slot === undefined) return () => null;
        return (s) => s.vars[slot];
      }
      case "Param": {
        const i = e.index;
        return i === 1 ? (s) => s.items[0] : (s) => orNull(s.ctx.params?.[i - 1]);
      }
      case "Up": {
        const { levels, name } = e;
        return (s) => (s.depth - levels < 0 ? null : member(s.items[s.depth - levels], name));
      }
      case "XEvent":
        return (s) => s.ctx.events ?? [];
      case "TimeWord":
      case "RelPeriod": {
        const ref = e;
        return (s) => timeRefValue(ref, s.now);
      }
      case "Method":
        return this.method(e.name, e.receiver, e.args, sc);
      case "Call":
        return this.call(e.name, e.args, sc);
      case "Filter": {
        const obj = this.expr(e.object, sc);
        const cond = this.bool(e.condition, sc);
        return (s) => {
          const arr = obj(s);
          if (!Array.isArray(arr)) return null;
          spend(arr.length);
          const out: unknown[] = [];
          const d = ++s.depth;
          for (let i = 0; i < arr.length; i++) {
            s.items[d] = arr[i];
            if (cond(s)) out.push(arr[i]);
          }
          s.depth--;
          return out;
        };
      }
      case "Negate": {
        const f = this.expr(e.operand, sc);
        return (s) => {
          const v = f(s);
          return typeof v === "number" ? -v : null;
        };
      }
      case "Not": {
        const f = this.bool(e.operand, sc);
        return (s) => !f(s);
      }
      case "Binary":
        return this.binary(e.op, e.left, e.right, sc);
      case "Occurs":
        return this.occurs(e.subject, e.tail, sc);
      case "Chain":
        return this.chain(e, sc);
      case "Select": {
        const out: { list: unknown[] } = { list: [] };
        const single = e.bindings.length === 1;
        const slots: number[] = [];
        const enumerate = this.tuples(e.bindings, sc, slots, (s) => {
          out.list.push(single ? s.vars[slots[0]!] : slots.map((k) => s.vars[k]));
          return false;
        });
        return (s) => {
          const list: unknown[] = [];
          const saved = out.list;
          out.list = list;
          enumerate(s);
          out.list = saved;
          return list;
        };
      }
      case "Quantifier":
        return e.quantifier === "exists"
          ? this.tuples(e.bindings, sc, [], () => true)
          : this.forall(e.bindings, 0, sc);
      case "AggregateOver": {
        const acc: { values: unknown[] } = { values: [] };
        const slots: number[] = [];
        let valueFn: Fn | null = null;
        const enumerate = this.tuples(
          e.bindings,
          sc,
          slots,
          (s) => {
            const v = orNull(valueFn ? valueFn(s) : s.vars[slots[0]!]);
            if (v !== null) acc.values.push(v);
            return false;
          },
          (inner) => {
            if (e.value) valueFn = this.expr(e.value, inner);
          },
        );
        const fn = e.fn;
        return (s) => {
          const values: unknown[] = [];
          const saved = acc.values;
          acc.values = values;
          enumerate(s);
          acc.values = saved;
          return aggregate(fn, values);
        };
      }
      case "Let": {
        const value = this.expr(e.value, sc);
        const inner = this.declare(sc, e.variable);
        const body = this.expr(e.body, inner.scope);
        const slot = inner.slot;
        return (s) => {
          s.vars[slot] = orNull(value(s));
          return body(s);
        };
      }
      case "Lambda":
        return () => null;
    }
  }

  private declare(sc: Scope, name: string): { scope: Scope; slot: number } {
    const slot = sc.next.n++;
    const names = new Map(sc.names);
    names.set(name, slot);
    return { scope: { names, next: sc.next }, slot };
  }

  /** An item-context argument as a factory of ItemFns bound to the current state. */
  private itemFn(arg: Expr, sc: Scope): (s: State) => ItemFn {
    if (arg.type === "Lambda") {
      let inner = sc;
      const slots: number[] = [];
      for (const p of arg.params) {
        const d = this.declare(inner, p);
        inner = d.scope;
        slots.push(d.slot);
      }
      const body = this.expr(arg.body, inner);
      const [p0, p1] = slots;
      const extra = slots.slice(2);
      return (s) => (item, key) => {
        if (p0 !== undefined && p1 === undefined) s.vars[p0] = orNull(item);
        else if (p0 !== undefined && p1 !== undefined) {
          s.vars[p0] = typeof key === "string" ? key : orNull(item);
          s.vars[p1] = typeof key === "string" ? orNull(item) : key;
        }
        for (const x of extra) s.vars[x] = null;
        const d = ++s.depth;
        s.items[d] = item;
        const r = body(s);
        s.depth--;
        return r;
      };
    }
    const f = this.expr(arg, sc);
    return (s) => (item) => {
      const d = ++s.depth;
      s.items[d] = item;
      const r = f(s);
      s.depth--;
      return r;
    };
  }

  private method(name: string, recvNode: Expr, args: Expr[], sc: Scope): Fn {
    const a0 = args[0];
    if (name === "count" && recvNode.type === "Filter") {
      const counter = this.filterCount(recvNode.object, recvNode.condition, sc, Infinity);
      return counter;
    }
    const recv = this.expr(recvNode, sc);
    const item = a0 ? this.itemFn(a0, sc) : null;
    switch (name) {
      case "filter":
        return item ? (s) => filterItems(orNull(recv(s)), item(s)) : () => null;
      case "exists":
        return item ? (s) => existsItem(orNull(recv(s)), item(s)) : () => false;
      case "groupBy":
        return item ? (s) => groupBy(orNull(recv(s)), item(s)) : () => null;
      case "map":
        return item ? (s) => mapItems(orNull(recv(s)), item(s)) : () => null;
      case "topN":
      case "bottomN": {
        const nArg = args[1] ? this.expr(args[1], sc) : () => null;
        const highest = name === "topN";
        return item ? (s) => {
          const r = orNull(recv(s));
          return topN(r, item(s), nArg(s), highest);
        } : () => null;
      }
      case "sum":
      case "average":
      case "min":
      case "max":
        return (s) => aggregateMethod(name, orNull(recv(s)), item ? item(s) : null);
      case "count":
        return (s) => count(orNull(recv(s)));
    }
    const argFns = args.map((a) => this.expr(a, sc));
    return (s) => {
      const r = orNull(recv(s));
      const vals = argFns.map((f) => orNull(f(s)));
      return callPlainMethod(name, r, vals, s.now);
    };
  }

  private call(name: string, args: Expr[], sc: Scope): Fn {
    const fns = args.map((a) => this.expr(a, sc));
    const arg = (s: State, i: number) => (fns[i] ? orNull(fns[i]!(s)) : null);
    switch (name) {
      case "if": {
        const test = args[0] ? this.bool(args[0], sc) : () => false;
        return (s) => (test(s) ? arg(s, 1) : arg(s, 2));
      }
      case "date":
        return (s) => dateValue(arg(s, 0), arg(s, 1), arg(s, 2));
      case "inSegment":
        return (s) => inSegment(s.ctx.profile, arg(s, 0));
      case "mapEntry":
        return (s): MapEntry | null => mapEntry(arg(s, 0), arg(s, 1));
      default:
        return (s) => currentField(name, s.now);
    }
  }

  /**
   * An occurs test as a function of (state, instant). When every reference is
   * a time keyword the bounds depend on `now` only and are cached per `now`.
   */
  private tail(tail: OccursTail, sc: Scope): (s: State, t: number) => boolean {
    const refs = tailRefs(tail);
    if (refs.every((r) => r.type === "TimeWord" || r.type === "RelPeriod")) {
      const kw = refs as Extract<Expr, { type: "TimeWord" | "RelPeriod" }>[];
      // The bounds of the last `now` seen, kept as plain values: `now` changes with nearly every
      // request, and a test closure per change was garbage on every request.
      let cachedNow = NaN;
      let bounds: OccursBounds | null = null;
      let window = false;
      let lower = 0;
      let upper = 0;
      return (s, t) => {
        if (s.now !== cachedNow) {
          const b = boundsFromSpans(tail, kw.length === 1 ? [resolveTimeRef(kw[0]!, s.now)] : kw.map((r) => resolveTimeRef(r, s.now)));
          // The common shape, a closed-open window, is tested inline; anything else by inBounds.
          window = !b.empty && b.exclude === undefined && b.lower !== undefined && b.upper !== undefined && b.lowerInclusive && !b.upperInclusive;
          lower = b.lower ?? 0;
          upper = b.upper ?? 0;
          bounds = b;
          cachedNow = s.now;
        }
        if (window) return t >= lower && t < upper;
        return inBounds(t, bounds!);
      };
    }
    const spanFns = refs.map((r): ((s: State) => TimeSpan | null) => {
      if (r.type === "TimeWord" || r.type === "RelPeriod") return (s) => resolveTimeRef(r, s.now);
      const f = this.expr(r, sc);
      return (s) => spanOfValue(orNull(f(s)));
    });
    return (s, t) => {
      const spans: TimeSpan[] = [];
      for (const f of spanFns) {
        const sp = f(s);
        if (sp === null) return false;
        spans.push(sp);
      }
      return inBounds(t, boundsFromSpans(tail, spans));
    };
  }

  private occurs(subject: Expr, tail: OccursTail, sc: Scope): Fn {
    const subj = this.expr(subject, sc);
    const test = this.tail(tail, sc);
    return (s) => {
      const v = subj(s);
      const t = typeof v === "number" ? (Number.isFinite(v) ? v : null) : toInstant(orNull(v));
      return t !== null && test(s, t);
    };
  }

  /** chain: the same greedy scan as the interpreter (see evaluate.ts). */
  private chain(e: Chain, sc: Scope): Fn {
    const source = this.expr(e.source, sc);
    const path = e.timestampField.split(".");
    const steps = e.steps.map((st) => ({
      need: st.count ?? 1,
      what: this.bool(st.what, sc),
      when: st.when ? this.tail(st.when, sc) : null,
      where: st.where ? this.bool(st.where, sc) : null,
    }));
    // The events and their times, in two arrays kept by the closure and reused by every call
    // (chains run for every profile and request; a pair object per event was most of their
    // garbage). A nested call of the same chain, should one happen, gets arrays of its own.
    const scratchEvents: unknown[] = [];
    const scratchTimes: number[] = [];
    let busy = false;
    return (s) => {
      const src = source(s);
      if (!Array.isArray(src)) return false;
      spend(src.length);
      const own = !busy;
      const evs = own ? scratchEvents : [];
      const ts = own ? scratchTimes : [];
      let n = 0;
      // Events usually arrive in time order: sort only when they do not (a sort with a
      // comparator allocates a work copy on every call).
      let sorted = true;
      let last = -Infinity;
      for (const item of src) {
        let v: unknown = item;
        for (const p of path) v = member(v, p);
        const t = toInstant(v);
        if (t === null) continue;
        if (t >= last) last = t;
        else sorted = false; // also NaN: left to the sort, as before
        evs[n] = item;
        ts[n] = t;
        n++;
      }
      if (!sorted) {
        const pairs: { ev: unknown; t: number }[] = [];
        for (let k = 0; k < n; k++) pairs.push({ ev: evs[k], t: ts[k]! });
        pairs.sort((a, b) => a.t - b.t);
        for (let k = 0; k < n; k++) {
          evs[k] = pairs[k]!.ev;
          ts[k] = pairs[k]!.t;
        }
      }
      let pos = -Infinity;
      let i = 0;
      const d = ++s.depth;
      if (own) busy = true;
      try {
        for (const st of steps) {
          let found = 0;
          while (i < n && ts[i]! <= pos) i++;
          for (; i < n && found < st.need; i++) {
            const t = ts[i]!;
            s.items[d] = evs[i];
            if (!st.what(s)) continue;
            if (st.when && !st.when(s, t)) continue;
            if (st.where && !st.where(s)) continue;
            if (++found === st.need) pos = t;
          }
          if (found < st.need) return false;
        }
        return true;
      } finally {
        s.depth--;
        if (own) {
          busy = false;
          // Hold no event past the call.
          for (let k = 0; k < n; k++) evs[k] = undefined;
        }
      }
    };
  }

  /**
   * Enumerate binding tuples; `visit` returns true to stop. The slots of the
   * bound variables are appended to `slots`; `withInner` receives the scope in
   * which every variable is visible (for the aggregated value expression).
   */
  private tuples(
    bindings: Binding[],
    sc: Scope,
    slots: number[],
    visit: (s: State) => boolean,
    withInner?: (inner: Scope) => void,
  ): BoolFn {
    let scope = sc;
    const compiled: { source: Fn; cond: BoolFn | null; slot: number }[] = [];
    const conds = hoistedConditions(bindings);
    for (let k = 0; k < bindings.length; k++) {
      const b = bindings[k]!;
      const source = this.expr(b.source, scope);
      const d = this.declare(scope, b.variable);
      scope = d.scope;
      slots.push(d.slot);
      compiled.push({ source, cond: allOf(conds[k]!.map((c) => this.bool(c, d.scope))), slot: d.slot });
    }
    withInner?.(scope);
    const go = (s: State, k: number): boolean => {
      if (k === compiled.length) return visit(s);
      const b = compiled[k]!;
      const src = b.source(s);
      if (!Array.isArray(src)) return false;
      spend(src.length);
      for (const raw of src) {
        s.vars[b.slot] = orNull(raw);
        if (b.cond && !b.cond(s)) continue;
        if (go(s, k + 1)) return true;
      }
      return false;
    };
    return (s) => go(s, 0);
  }

  private forall(bindings: Binding[], k: number, sc: Scope): BoolFn {
    if (k === bindings.length) return () => true;
    const b = bindings[k]!;
    const source = this.expr(b.source, sc);
    const d = this.declare(sc, b.variable);
    const cond = b.condition ? this.bool(b.condition, d.scope) : null;
    const rest = this.forall(bindings, k + 1, d.scope);
    const slot = d.slot;
    return (s) => {
      const src = source(s);
      if (!Array.isArray(src)) return true;
      spend(src.length);
      for (const raw of src) {
        s.vars[slot] = orNull(raw);
        if (cond && !cond(s)) return false;
        if (!rest(s)) return false;
      }
      return true;
    };
  }
}

/** The conjunction of conditions (null: none). */
function allOf(fs: BoolFn[]): BoolFn | null {
  if (fs.length === 0) return null;
  if (fs.length === 1) return fs[0]!;
  if (fs.length === 2) {
    const [a, b] = fs as [BoolFn, BoolFn];
    return (s) => a(s) && b(s);
  }
  return (s) => {
    for (const f of fs) if (!f(s)) return false;
    return true;
  };
}

export { DateInterval };
