/**
 * JavaScript code generation for the hot subset of PQL, used by compile.ts.
 * Segment predicates are mostly and/or/not over field-with-literal comparisons,
 * `A[cond].count() OP n` and `occurs` against time keywords; for these the
 * closure tree costs a few indirect calls per node, which matters at millions
 * of evaluations. This module turns that subset into one generated function
 * (`new Function`) with field paths and comparisons inlined and each filter
 * count as a plain loop. Every other node becomes a call to the closure that
 * compile.ts built for it, so semantics are shared, not re-implemented:
 * - the slow side of every comparison (coercion, time values, odd types) calls
 *   the same `compareValues`/`coerceLiteral` as the interpreter;
 * - item contexts are kept on the same state stack, so closures called from
 *   generated loops see the right item.
 * Generated source contains no text from the query other than JSON-encoded
 * literals and field names. Where `new Function` is forbidden (a strict CSP in
 * a browser) compile.ts keeps the closure tree.
 */
import { spend } from "./budget.js";
import { countAtLeast, fieldPath } from "./patterns.js";
import type { CmpOp, Expr, OccursTail, RelPeriod, TimeWord } from "../ast.js";
import { boundsFromSpans, resolveTimeRef, tailRefs, type OccursBounds } from "./time.js";
import { coerceLiteral, compareValues, member, orNull, toBoolean, toInstant } from "./values.js";

/** The evaluation state shared with compile.ts's closures. */
export interface GenState {
  ctx: { events?: unknown[] };
  now: number;
  items: unknown[];
  depth: number;
}

export type StateFn = (s: GenState) => unknown;

const CMP = new Set(["=", "!=", "<", "<=", ">", ">="]);

interface FnCtx {
  temps: number;
  item: string;
  /** Depth variable of the enclosing generated loop ("0" at the top). */
  depth: string;
}

class Gen {
  readonly externals: unknown[] = [];
  readonly helpers: string[] = [];
  readonly prelude: string[] = [];
  readonly nowChecks: string[] = [];
  private ids = 0;
  /** Number of compile.ts closures called from generated code so far. */
  private closures = 0;

  constructor(private readonly fallback: (e: Expr) => StateFn) {}

  private ext(v: unknown): string {
    this.externals.push(v);
    return `X[${this.externals.length - 1}]`;
  }

  private temp(f: FnCtx): string {
    return `t${f.temps++}`;
  }

  private readSites = 0;

  /**
   * One field read, inlined at its own site. A shared helper would funnel every
   * field of every query through one property access, which V8 then treats as
   * megamorphic (many shapes, many keys); a read per site keeps each inline cache
   * monomorphic, as in hand-written code (measured: 150 → 106 ms per 1M profiles
   * for the bench predicate). The site's temporary is assigned and consumed within
   * the expression, with no generated code in between, so nesting cannot clobber it.
   * Plain objects are read directly; anything else (arrays: projection, maps, null)
   * goes through the runtime's `member` (M). `fieldPath` has already refused names
   * that could reach Object.prototype.
   */
  private read(obj: string, name: string): string {
    const r = `rd${this.readSites++}`;
    this.prelude.push(`let ${r};`);
    const k = JSON.stringify(name);
    return `((${r} = ${obj}) === null || ${r} === undefined ? null : (typeof ${r} === "object" && ${r}.constructor === Object ? ${r}[${k}] : M(${r}, ${k})))`;
  }

  /**
   * Code for a node's value. With `raw`, a field path may also yield undefined
   * or NaN (callers that test `== null` and `t === t` need no normalisation).
   */
  value(e: Expr, f: FnCtx, raw = false): string {
    if (e.type === "Literal") return typeof e.value === "string" ? JSON.stringify(e.value) : lit(e.value);
    const path = fieldPath(e);
    if (path !== null) {
      const read = path.reduce((acc, n) => this.read(acc, n), f.item);
      return raw ? read : `ON(${read})`;
    }
    if (e.type === "XEvent") return "(s.ctx.events ?? [])";
    if (e.type === "Binary" && (e.op === "and" || e.op === "or" || CMP.has(e.op))) return this.bool(e, f);
    if (e.type === "Not" || e.type === "Occurs") return this.bool(e, f);
    if (e.type === "Method" && e.name === "count" && e.args.length === 0 && e.receiver.type === "Filter")
      return this.filterCount(e.receiver.object, e.receiver.condition, f, null);
    return this.external(e, f);
  }

  /** A node compiled by compile.ts, called with the state (the item stack is current). */
  private external(e: Expr, f: FnCtx): string {
    this.closures++;
    const fn = this.ext(this.fallback(e));
    return f.depth === "0" ? `${fn}(s)` : `(s.depth = ${f.depth}, ${fn}(s))`;
  }

  /** Code for a node in a boolean position (§6.4). */
  bool(e: Expr, f: FnCtx): string {
    if (e.type === "Binary" && (e.op === "and" || e.op === "or"))
      return `(${this.bool(e.left, f)} ${e.op === "and" ? "&&" : "||"} ${this.bool(e.right, f)})`;
    if (e.type === "Not") return `!${this.bool(e.operand, f)}`;
    if (e.type === "Literal" && typeof e.value === "boolean") return String(e.value);
    if (e.type === "Binary" && CMP.has(e.op)) return this.comparison(e.op as CmpOp, e.left, e.right, f);
    if (e.type === "Occurs") return this.occurs(e.subject, e.tail, f);
    return `TB(${this.value(e, f)})`;
  }

  private comparison(op: CmpOp, left: Expr, right: Expr, f: FnCtx): string {
    const atLeast = countAtLeast(op, left, right);
    if (atLeast) {
      const { filter, need } = atLeast;
      return `(${this.filterCount(filter.object, filter.condition, f, need)} >= ${lit(need)})`;
    }
    const lr = right.type === "Literal";
    const ll = left.type === "Literal";
    if (lr === ll) {
      return `CV(${JSON.stringify(op)}, ON(${this.value(left, f)}), ON(${this.value(right, f)}))`;
    }
    const other = lr ? left : right;
    // Raw: undefined is caught by `== null` and NaN by `t === t` below.
    const x = this.value(other, f, true);
    const litValue = ((lr ? right : left) as Extract<Expr, { type: "Literal" }>).value;
    const flipped = ll;
    const slow = this.ext((v: unknown) => {
      const c = coerceLiteral(litValue, v);
      return flipped ? compareValues(op, c, v) : compareValues(op, v, c);
    });
    const t = this.temp(f);
    if (typeof litValue === "string" && (op === "=" || op === "!=")) {
      const eq = `${t} ${op === "=" ? "===" : "!=="} ${JSON.stringify(litValue)}`;
      return `((${t} = ${x}), typeof ${t} === "string" ? ${eq} : ${t} == null ? false : ${slow}(${t}))`;
    }
    if (typeof litValue === "number") {
      const jsOp = op === "=" ? "===" : op === "!=" ? "!==" : op;
      const test = flipped ? `${lit(litValue)} ${jsOp} ${t}` : `${t} ${jsOp} ${lit(litValue)}`;
      return `((${t} = ${x}), typeof ${t} === "number" ? (${t} === ${t} && ${test}) : ${t} == null ? false : ${slow}(${t}))`;
    }
    return `((${t} = ON(${x})), ${t} === null ? false : ${slow}(${t}))`;
  }

  /** A helper function counting the items of `object` that satisfy `cond`, up to `limit`. */
  private filterCount(object: Expr, cond: Expr, f: FnCtx, limit: number | null): string {
    const id = this.ids++;
    const inner: FnCtx = { temps: 0, item: `it${id}`, depth: `d${id}` };
    const arr = this.value(object, f);
    const closuresBefore = this.closures;
    const test = this.bool(cond, inner);
    // Only closures read the item stack; without them the loop keeps the item in a local.
    const store = this.closures > closuresBefore ? `\n    s.items[d${id}] = it${id};` : "";
    const temps = Array.from({ length: inner.temps }, (_, i) => `t${i}`);
    const stop = limit === null ? "" : ` && n < ${lit(limit)}`;
    this.helpers.push(
      `function fc${id}(s, a, dp) {
  // A filter over a non-array is null, and count(null) is 0 (pql.md §7.8).
  if (!Array.isArray(a)) return 0;
  SP(a.length);
  let n = 0;${temps.length ? ` let ${temps.join(", ")};` : ""}
  const d${id} = dp + 1;
  for (let i = 0; i < a.length${stop}; i++) {
    const it${id} = a[i];${store}
    if (${test}) n++;
  }
  s.depth = d${id} - 1;
  return n;
}`,
    );
    return `fc${id}(s, ${arr}, ${f.depth})`;
  }

  private occurs(subject: Expr, tail: OccursTail, f: FnCtx): string {
    const refs = tailRefs(tail);
    if (!refs.every((r) => r.type === "TimeWord" || r.type === "RelPeriod")) {
      return `TB(${this.external({ type: "Occurs", subject, tail }, f)})`;
    }
    const kw = refs as (TimeWord | RelPeriod)[];
    const id = this.ids++;
    const bounds = this.ext(boundsOf(tail, kw));
    // Bounds of this site, recomputed once per call when `now` changes.
    this.prelude.push(`let cn${id} = NaN, em${id} = true, lo${id} = 0, li${id} = true, hi${id} = 0, ui${id} = false, xs${id} = NaN, xe${id} = NaN;`);
    this.nowChecks.push(
      `if (s.now !== cn${id}) { const b = ${bounds}(s.now); cn${id} = s.now; em${id} = b.empty === true; lo${id} = b.lower ?? -Infinity; li${id} = b.lowerInclusive || b.lower === undefined; hi${id} = b.upper ?? Infinity; ui${id} = b.upperInclusive || b.upper === undefined; xs${id} = b.exclude ? b.exclude.start : NaN; xe${id} = b.exclude ? b.exclude.end : NaN; }`,
    );
    const t = this.temp(f);
    const instant = `(typeof ${t} === "number" ? (${t} === ${t} && ${t} !== Infinity && ${t} !== -Infinity ? ${t} : null) : TI(${t}))`;
    // Which bounds exist and their inclusivity depend on the tail's form, not on `now`:
    // emit only the comparisons this form needs.
    const b0 = boundsOf(tail, kw)(0);
    const tests = [`!em${id}`];
    if (b0.lower !== undefined) tests.push(b0.lowerInclusive ? `${t} >= lo${id}` : `${t} > lo${id}`);
    if (b0.upper !== undefined) tests.push(b0.upperInclusive ? `${t} <= hi${id}` : `${t} < hi${id}`);
    if (b0.exclude !== undefined) tests.push(`!(${t} >= xs${id} && ${t} < xe${id})`);
    return `((${t} = ${this.value(subject, f, true)}), (${t} = ${instant}) !== null && ${tests.join(" && ")})`;
  }
}

/** The bounds of a keyword-only tail as a function of `now`. */
function boundsOf(tail: OccursTail, kw: readonly (TimeWord | RelPeriod)[]): (now: number) => OccursBounds {
  return (now) => boundsFromSpans(tail, kw.map((r) => resolveTimeRef(r, now)));
}

function lit(v: unknown): string {
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  return JSON.stringify(v);
}

/** Nodes worth generating code for; anything else stays a closure. */
function worthGenerating(e: Expr): boolean {
  return (
    (e.type === "Binary" && (e.op === "and" || e.op === "or" || CMP.has(e.op))) ||
    e.type === "Not" ||
    e.type === "Occurs" ||
    (e.type === "Method" && e.name === "count" && e.receiver.type === "Filter")
  );
}

/**
 * Generate a function for `body` (evaluated at item depth 0), or null when the
 * root is outside the generated subset or code generation is not allowed.
 */
export function generate(body: Expr, fallback: (e: Expr) => StateFn): StateFn | null {
  if (!worthGenerating(body)) return null;
  const g = new Gen(fallback);
  const top: FnCtx = { temps: 0, item: "it0", depth: "0" };
  const code = g.value(body, top);
  const temps = Array.from({ length: top.temps }, (_, i) => `t${i}`);
  const src = `"use strict";
${g.prelude.join("\n")}
${g.helpers.join("\n")}
return function main(s) {
  ${g.nowChecks.join("\n  ")}
  const it0 = s.items[0];${temps.length ? ` let ${temps.join(", ")};` : ""}
  return ${code};
};`;
  try {
    const factory = new Function("X", "M", "ON", "TB", "TI", "CV", "SP", src) as (...a: unknown[]) => StateFn;
    return factory(g.externals, member, orNull, toBoolean, toInstant, compareValues, spend);
  } catch {
    return null;
  }
}
