/**
 * The meaning of a definition for eligibility: which event conditions it
 * holds (whatever the spelling), how many events each needs, whether each is
 * negated, the time window of each, its profile attributes, its inSegment
 * references and its "ignore year" constraints (decisions.md §1).
 *
 * Recognised event conditions — an *event collection* is `xEvent`, a filter
 * of one (`xEvent[c]`, `.filter(c)`), a one-binding `select` over one, or a
 * `let` variable holding one:
 *   - in a boolean position: the collection itself (non-empty), `.exists(c)`,
 *     `exists`/`forall`/`select` bindings over it, `chain(...)` steps over it;
 *   - compared with a number literal: `.count()`, `.sum(...)`,
 *     `.average/min/max(...)`, `sum/average/min/max ... over E from ...`.
 * A condition is *negated* when it holds for a profile without any matching
 * event (`not exists`, `forall`, `count() = 0`, `count() < 3`, ...). Any other
 * use of events (inside arithmetic, `if`, `head()`, ...) is reported as
 * unsupported rather than guessed at.
 */
import type { Binding, Chain, CmpOp, Expr, Query } from "../ast.js";
import { walk } from "../ast.js";
import { NO_BOUND, tailBound, type Anchor, type Bound } from "./windows.js";

export interface EventCondition {
  /** Index in Analysis.events. */
  id: number;
  /** How it was written: "chain", "select", "exists", "forall", "filter", "aggregate". */
  spelling: string;
  /** Events needed: COUNT(n), `count() >= n`; 1 otherwise. */
  count: number;
  /** True for a profile with no matching event. */
  negated: boolean;
  bound: Bound;
}

export interface SegmentRef {
  /** The literal id, or null when the argument is not a text literal. */
  id: string | null;
}

export interface Analysis {
  events: EventCondition[];
  segmentRefs: SegmentRef[];
  /** Refers to at least one profile attribute (outside event data). */
  profile: boolean;
  ignoreYear: boolean;
  /** Descriptions of event uses that are not recognised. */
  unsupported: string[];
}

type Item = { kind: "profile" } | { kind: "event"; id: number; timestampField: string };

type VarBinding = Item | { kind: "let"; value: Expr; ctx: Ctx };

interface Ctx {
  /** The implicit context, innermost last; [0] is the profile. */
  levels: Item[];
  vars: ReadonlyMap<string, VarBinding>;
  /** Inside a negation (not, forall, a negated event's own condition). */
  negated: boolean;
}

/** A pending condition of an event collection, with the context it was written in. */
interface PendingCond {
  expr: Expr;
  ctx: Ctx;
  /** Bound as a variable (select binding) rather than as the implicit item. */
  variable?: string;
}

interface Collection {
  conds: PendingCond[];
  spelling: string;
}

const PROFILE: Item = { kind: "profile" };
const IGNORE_YEAR_METHODS = new Set(["getMonth", "getDayOfMonth"]);
const IGNORE_YEAR_FUNCTIONS = new Set(["currentMonth", "currentDayOfMonth"]);
const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);
const AGG_METHODS = new Set(["count", "sum", "average", "min", "max"]);
const CONDITION_METHODS = new Set(["filter", "exists"]);
const BINARY_OPS = ["and", "or", "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "in", "notIn", "like", "matches"];

export function analyze(q: Query): Analysis {
  return new Analyzer().run(q);
}

class Analyzer {
  private readonly out: Analysis = { events: [], segmentRefs: [], profile: false, ignoreYear: false, unsupported: [] };

  run(q: Query): Analysis {
    walk(q, (n) => {
      if (n.type === "Method" && IGNORE_YEAR_METHODS.has(n.name)) this.out.ignoreYear = true;
      if (n.type === "Call" && IGNORE_YEAR_FUNCTIONS.has(n.name)) this.out.ignoreYear = true;
      if (n.type === "Call" && n.name === "inSegment") {
        const a = n.args[0];
        this.out.segmentRefs.push({ id: a?.type === "Literal" && a.kind === "string" ? String(a.value) : null });
      }
    });
    const vars = new Map<string, VarBinding>();
    // The lambda head's first parameter is the profile ($1); the others are parameters, also outside events.
    for (const p of q.params) vars.set(p, PROFILE);
    this.bool(q.body, { levels: [PROFILE], vars, negated: false });
    return this.out;
  }

  // ---------------------------------------------------------------- boolean positions

  private bool(e: Expr, ctx: Ctx): void {
    switch (e.type) {
      case "Binary":
        if (e.op === "and" || e.op === "or") {
          for (const operand of spine(e, ["and", "or"])) this.bool(operand, ctx);
          return;
        }
        if (CMP.has(e.op) && this.aggregateComparison(e, ctx)) return;
        return this.scan(e, ctx);
      case "Not":
        return this.bool(e.operand, { ...ctx, negated: !ctx.negated });
      case "Let":
        return this.bool(e.body, this.bindLet(e, ctx));
      case "Chain":
        if (this.collection(e.source, ctx)) return this.chain(e, ctx);
        return this.scan(e, ctx);
      case "Quantifier":
        return this.bindings(e.bindings, ctx, e.quantifier === "forall" ? "forall" : "exists");
      case "Select":
        return this.bindings(e.bindings, ctx, "select");
      case "Method":
        if (e.name === "exists") {
          const c = this.collection(e.receiver, ctx);
          if (c) {
            const arg = e.args[0];
            const conds = arg ? [...c.conds, { expr: arg, ctx }] : c.conds;
            this.event({ conds, spelling: c.spelling }, ctx, 1, false);
            return;
          }
        }
        return this.scan(e, ctx);
      default: {
        const c = this.collection(e, ctx);
        if (c) {
          this.event(c, ctx, 1, false);
          return;
        }
        return this.scan(e, ctx);
      }
    }
  }

  /** `agg(events) OP literal` (either order). Returns false when `e` is not of that shape. */
  private aggregateComparison(e: Extract<Expr, { type: "Binary" }>, ctx: Ctx): boolean {
    const leftAgg = this.aggregate(e.left, ctx);
    const rightAgg = leftAgg ? undefined : this.aggregate(e.right, ctx);
    const agg = leftAgg ?? rightAgg;
    if (!agg) return false;
    const op = leftAgg ? (e.op as CmpOp) : flip(e.op as CmpOp);
    const other = leftAgg ? e.right : e.left;
    const k = numberLiteral(other);
    if (k === undefined) {
      this.out.unsupported.push("a number of events compared with a value that is not a fixed number");
      this.scan(other, ctx);
      return true;
    }
    // With no matching event, count and sum are 0; average, min and max have no value (false).
    const zero = agg.fn === "count" || agg.fn === "sum" ? compare(0, op, k) : false;
    const count = agg.fn === "count" ? minimumCount(op, k) : 1;
    const id = this.event(agg.collection, ctx, count, zero, agg.fn === "count" ? agg.collection.spelling : "aggregate");
    // The aggregated value is evaluated on each event (it may still mention profile attributes).
    const item: Item = { kind: "event", id, timestampField: "timestamp" };
    for (const v of agg.values) {
      this.scan(v.expr, v.variable ? { ...v.ctx, vars: withVar(v.ctx.vars, v.variable, item) } : { ...v.ctx, levels: [...v.ctx.levels, item] });
    }
    return true;
  }

  /** An aggregation over an event collection: its function, the collection and the per-event value expressions. */
  private aggregate(e: Expr, ctx: Ctx): { fn: string; collection: Collection; values: PendingCond[] } | undefined {
    if (e.type === "Method" && AGG_METHODS.has(e.name)) {
      const c = this.collection(e.receiver, ctx);
      if (!c) return undefined;
      return { fn: e.name, collection: c, values: e.args.map((a) => ({ expr: a.type === "Lambda" ? a.body : a, ctx })) };
    }
    if (e.type === "AggregateOver" && e.bindings.length === 1) {
      const b = e.bindings[0]!;
      const c = this.collection(b.source, ctx);
      if (!c) return undefined;
      const conds = b.condition ? [...c.conds, { expr: b.condition, ctx, variable: b.variable }] : c.conds;
      const values = e.value ? [{ expr: e.value, ctx, variable: b.variable }] : [];
      return { fn: e.fn, collection: { conds, spelling: "aggregate" }, values };
    }
    return undefined;
  }

  // ---------------------------------------------------------------- events

  /**
   * The event collection `e` denotes, with its pending conditions, or undefined.
   * Only the shapes listed in the file header are collections.
   */
  private collection(e: Expr, ctx: Ctx): Collection | undefined {
    switch (e.type) {
      case "XEvent":
        return { conds: [], spelling: "filter" };
      case "Filter": {
        const inner = this.collection(e.object, ctx);
        return inner && { conds: [...inner.conds, { expr: e.condition, ctx }], spelling: "filter" };
      }
      case "Method": {
        if (e.name !== "filter" || e.args.length !== 1) return undefined;
        const inner = this.collection(e.receiver, ctx);
        return inner && { conds: [...inner.conds, { expr: e.args[0]!, ctx }], spelling: "filter" };
      }
      case "Select": {
        if (e.bindings.length !== 1) return undefined;
        const b = e.bindings[0]!;
        const inner = this.collection(b.source, ctx);
        if (!inner) return undefined;
        return { conds: b.condition ? [...inner.conds, { expr: b.condition, ctx, variable: b.variable }] : inner.conds, spelling: "select" };
      }
      case "Var": {
        const v = ctx.vars.get(e.name);
        return v?.kind === "let" ? this.collection(v.value, v.ctx) : undefined;
      }
      default:
        return undefined;
    }
  }

  /** Records one event condition over `c` and analyses its conditions; returns its id. */
  private event(c: Collection, ctx: Ctx, count: number, zeroSatisfies: boolean, spelling = c.spelling, extra: Bound[] = []): number {
    const id = this.out.events.length;
    const negated = zeroSatisfies !== ctx.negated;
    const cond: EventCondition = { id, spelling, count, negated, bound: NO_BOUND };
    this.out.events.push(cond);
    const item: Item = { kind: "event", id, timestampField: "timestamp" };
    const parts: Bound[] = [...extra];
    for (const p of c.conds) {
      const inner = p.variable
        ? { ...p.ctx, vars: withVar(p.ctx.vars, p.variable, item), negated: negated || p.ctx.negated }
        : { ...p.ctx, levels: [...p.ctx.levels, item], negated: negated || p.ctx.negated };
      this.bool(p.expr, inner);
      parts.push(this.windowOf(p.expr, inner, id));
    }
    cond.bound = parts.length === 1 ? parts[0]! : { kind: "all", parts };
    return id;
  }

  private chain(e: Chain, ctx: Ctx): void {
    const source = this.collection(e.source, ctx)!;
    let previous: number | undefined;
    for (const step of e.steps) {
      const id = this.out.events.length;
      const negated = ctx.negated;
      const cond: EventCondition = { id, spelling: "chain", count: step.count ?? 1, negated, bound: NO_BOUND };
      this.out.events.push(cond);
      const item: Item = { kind: "event", id, timestampField: e.timestampField };
      const inner: Ctx = { ...ctx, levels: [...ctx.levels, item] };
      const parts: Bound[] = [];
      for (const p of source.conds) {
        const c = p.variable ? { ...p.ctx, vars: withVar(p.ctx.vars, p.variable, item) } : { ...p.ctx, levels: [...p.ctx.levels, item] };
        this.bool(p.expr, c);
        parts.push(this.windowOf(p.expr, c, id));
      }
      for (const x of [step.what, step.where]) {
        if (!x) continue;
        this.bool(x, inner);
        parts.push(this.windowOf(x, inner, id));
      }
      if (step.when) {
        for (const r of [step.when].flatMap((t) => (t.kind === "between" ? [t.from, t.to] : [t.ref]))) this.scan(r, ctx);
        parts.push(tailBound(step.when, (r) => this.anchor(r, ctx)));
      }
      // Chain steps are ordered: a step happens after the previous one, so it is no older.
      if (previous !== undefined) parts.push({ kind: "event", event: previous, ms: 0 });
      cond.bound = parts.length === 0 ? NO_BOUND : parts.length === 1 ? parts[0]! : { kind: "all", parts };
      previous = id;
    }
  }

  private bindings(bindings: Binding[], ctx: Ctx, quantifier: "exists" | "forall" | "select"): void {
    let cur = ctx;
    for (const b of bindings) {
      const c = this.collection(b.source, cur);
      if (c) {
        const conds = b.condition ? [...c.conds, { expr: b.condition, ctx: cur, variable: b.variable }] : c.conds;
        const id = this.event({ conds, spelling: quantifier }, cur, 1, quantifier === "forall");
        cur = { ...cur, vars: withVar(cur.vars, b.variable, { kind: "event", id, timestampField: "timestamp" }) };
      } else {
        this.scan(b.source, cur);
        cur = { ...cur, vars: withVar(cur.vars, b.variable, this.itemOf(b.source, cur)) };
        if (b.condition) this.bool(b.condition, quantifier === "forall" ? { ...cur, negated: !cur.negated } : cur);
      }
    }
  }

  /** The item kind of a non-event collection's elements: event data when it is derived from an event. */
  private itemOf(source: Expr, ctx: Ctx): Item {
    let root: Expr = source;
    while (root.type === "Member" || root.type === "Filter" || root.type === "Method") {
      root = root.type === "Method" ? root.receiver : root.object;
    }
    if (root.type === "Var") {
      const v = ctx.vars.get(root.name);
      if (v?.kind === "event") return v;
    }
    if (root.type === "Field") return ctx.levels[ctx.levels.length - 1]!;
    if (root.type === "Up") return ctx.levels[Math.max(0, ctx.levels.length - 1 - root.levels)]!;
    return PROFILE;
  }

  // ---------------------------------------------------------------- windows

  /** The bound a condition puts on event `id`'s time, following and/or (not is never a bound). */
  private windowOf(e: Expr, ctx: Ctx, id: number): Bound {
    if (e.type === "Binary" && (e.op === "and" || e.op === "or")) {
      // Only a uniform spine can be flattened; a mixed one is split at its top operator.
      const parts = spine(e, [e.op]).map((x) => this.windowOf(x, ctx, id));
      return { kind: e.op === "and" ? "all" : "any", parts };
    }
    if (e.type === "Let") return this.windowOf(e.body, this.bindLet(e, ctx), id);
    if (e.type === "Occurs" && this.isTimestampOf(e.subject, ctx, id)) {
      return tailBound(e.tail, (r) => this.anchor(r, ctx));
    }
    return NO_BOUND;
  }

  /** Is `e` the timestamp of event `id` in this context? */
  private isTimestampOf(e: Expr, ctx: Ctx, id: number): boolean {
    const ev = this.eventTimestamp(e, ctx);
    return ev !== undefined && ev === id;
  }

  /** The event whose timestamp `e` denotes, if any. */
  private eventTimestamp(e: Expr, ctx: Ctx): number | undefined {
    let item: Item | VarBinding | undefined;
    let name: string | undefined;
    if (e.type === "Field") {
      item = ctx.levels[ctx.levels.length - 1];
      name = e.name;
    } else if (e.type === "Up") {
      item = ctx.levels[ctx.levels.length - 1 - e.levels];
      name = e.name;
    } else if (e.type === "Member" && e.object.type === "Var") {
      item = ctx.vars.get(e.object.name);
      name = e.name;
    }
    return item?.kind === "event" && item.timestampField === name ? item.id : undefined;
  }

  /** How a non-keyword time reference is anchored: another event's time, a fixed date, or a profile date. */
  private anchor(r: Expr, ctx: Ctx): Anchor {
    const ev = this.eventTimestamp(r, ctx);
    if (ev !== undefined) return { base: "event", event: ev, start: 0, end: 0, instant: true };
    if (r.type === "Call" && r.name === "date") return { base: "unbounded", why: "fixed-date" };
    return { base: "unbounded", why: "profile-date" };
  }

  // ---------------------------------------------------------------- everything else

  /** A non-boolean position: marks profile attributes, follows nested conditions, reports stray event uses. */
  private scan(e: Expr, ctx: Ctx): void {
    switch (e.type) {
      case "Literal":
      case "TimeWord":
      case "RelPeriod":
        return;
      case "Field":
        return this.markItem(ctx.levels[ctx.levels.length - 1]!);
      case "Up":
        return this.markItem(ctx.levels[Math.max(0, ctx.levels.length - 1 - e.levels)]!);
      case "Param":
        this.out.profile = true;
        return;
      case "Var": {
        const v = ctx.vars.get(e.name);
        if (v?.kind === "let") {
          if (this.collection(v.value, v.ctx)) this.out.unsupported.push("events held in a 'let' variable used as a value");
          else this.scan(v.value, v.ctx);
        } else if (v) this.markItem(v);
        return;
      }
      case "XEvent":
        this.out.unsupported.push("events used as a value");
        return;
      case "List":
        return e.elements.forEach((x) => this.scan(x, ctx));
      case "Object":
        return e.entries.forEach((x) => this.scan(x.value, ctx));
      case "Member":
        return this.scan(e.object, ctx);
      case "Negate":
      case "Not":
        return this.scan(e.operand, ctx);
      case "Binary":
        // Any left-nested operator chain (`1 + 2 - 3 ...`, thousands long) is walked without recursion.
        for (const x of spine(e, BINARY_OPS)) this.scan(x, ctx);
        return;
      case "Occurs":
        this.scan(e.subject, ctx);
        for (const r of e.tail.kind === "between" ? [e.tail.from, e.tail.to] : [e.tail.ref]) this.scan(r, ctx);
        return;
      case "Call":
        return e.args.forEach((x) => this.scan(x, ctx));
      case "Method": {
        if (this.collection(e.receiver, ctx)) {
          this.out.unsupported.push(`the method '${e.name}' applied to events`);
          return;
        }
        this.scan(e.receiver, ctx);
        const item = this.itemOf(e.receiver, ctx);
        e.args.forEach((a, i) => {
          const inner = a.type === "Lambda" ? this.lambdaCtx(a.params, ctx, item) : i === 0 && isItemMethod(e.name) ? { ...ctx, levels: [...ctx.levels, item] } : ctx;
          const body = a.type === "Lambda" ? a.body : a;
          if (CONDITION_METHODS.has(e.name)) this.bool(body, inner);
          else this.scan(body, inner);
        });
        return;
      }
      case "Filter": {
        if (this.collection(e, ctx)) {
          this.out.unsupported.push("filtered events used as a value");
          return;
        }
        this.scan(e.object, ctx);
        return this.bool(e.condition, { ...ctx, levels: [...ctx.levels, this.itemOf(e.object, ctx)] });
      }
      case "Chain":
        if (this.collection(e.source, ctx)) {
          this.out.unsupported.push("a chain of events used as a value");
          return;
        }
        this.scan(e.source, ctx);
        for (const s of e.steps) {
          const inner = { ...ctx, levels: [...ctx.levels, this.itemOf(e.source, ctx)] };
          this.bool(s.what, inner);
          if (s.where) this.bool(s.where, inner);
        }
        return;
      case "Select":
      case "Quantifier":
      case "AggregateOver": {
        if (e.bindings.some((b) => this.collection(b.source, ctx))) {
          this.out.unsupported.push("events used inside a calculation");
          return;
        }
        let cur = ctx;
        for (const b of e.bindings) {
          this.scan(b.source, cur);
          cur = { ...cur, vars: withVar(cur.vars, b.variable, this.itemOf(b.source, cur)) };
          if (b.condition) this.bool(b.condition, cur);
        }
        if (e.type === "AggregateOver" && e.value) this.scan(e.value, cur);
        return;
      }
      case "Let":
        return this.scan(e.body, this.bindLet(e, ctx));
      case "Lambda":
        return this.scan(e.body, this.lambdaCtx(e.params, ctx, PROFILE));
    }
  }

  private markItem(item: VarBinding): void {
    if (item.kind === "profile") this.out.profile = true;
  }

  private bindLet(e: Extract<Expr, { type: "Let" }>, ctx: Ctx): Ctx {
    // A let value is analysed where the variable is used (it may be an event collection).
    return { ...ctx, vars: withVar(ctx.vars, e.variable, { kind: "let", value: e.value, ctx }) };
  }

  private lambdaCtx(params: string[], ctx: Ctx, item: Item): Ctx {
    let vars = ctx.vars;
    for (const p of params) vars = withVar(vars, p, item);
    return { ...ctx, vars };
  }
}

/** Methods whose first argument is evaluated per item (catalog itemArgs [0]). */
function isItemMethod(name: string): boolean {
  return ["groupBy", "filter", "map", "topN", "bottomN", "exists", "sum", "average", "min", "max"].includes(name);
}

function withVar(vars: ReadonlyMap<string, VarBinding>, name: string, v: VarBinding): Map<string, VarBinding> {
  const m = new Map(vars);
  m.set(name, v);
  return m;
}

/** The operands of a left-nested chain of the given operators, in source order, without recursion. */
export function spine(e: Expr, ops: string[]): Expr[] {
  const right: Expr[] = [];
  let cur = e;
  while (cur.type === "Binary" && ops.includes(cur.op)) {
    right.push(cur.right);
    cur = cur.left;
  }
  return [cur, ...right.reverse()];
}

function numberLiteral(e: Expr): number | undefined {
  if (e.type === "Literal" && typeof e.value === "number") return e.value;
  if (e.type === "Negate" && e.operand.type === "Literal" && typeof e.operand.value === "number") return -e.operand.value;
  return undefined;
}

function flip(op: CmpOp): CmpOp {
  const m: Record<CmpOp, CmpOp> = { "=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=" };
  return m[op];
}

function compare(a: number, op: CmpOp, b: number): boolean {
  switch (op) {
    case "=":
      return a === b;
    case "!=":
      return a !== b;
    case "<":
      return a < b;
    case "<=":
      return a <= b;
    case ">":
      return a > b;
    case ">=":
      return a >= b;
  }
}

/** The fewest events (at least 1) for which `count OP k` holds; 1 when no positive count does. */
function minimumCount(op: CmpOp, k: number): number {
  let c: number;
  switch (op) {
    case ">":
      c = Math.floor(k) + 1;
      break;
    case ">=":
    case "=":
      c = Math.ceil(k);
      break;
    default:
      c = 1;
  }
  return Number.isSafeInteger(c) && c >= 1 ? c : 1;
}
