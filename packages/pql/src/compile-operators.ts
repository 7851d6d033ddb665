/**
 * The operator half of the closure compiler (compile.ts): and/or, arithmetic,
 * in/like/matches and comparisons, with the inline fast paths for a field
 * compared with a literal, plus the state and scope types both halves share.
 */
import { countAtLeast } from "./runtime/patterns.js";
import { spend } from "./runtime/budget.js";
import type { BinaryOp, CmpOp, Expr } from "./ast.js";
import { like, regexMatches } from "./runtime/builtins.js";
import type { EvalContext } from "./runtime/prepare.js";
import { arithmetic, coerceLiteral, compareValues, inList, isNull, member, orNull, toBoolean } from "./runtime/values.js";

export interface State {
  ctx: EvalContext;
  now: number;
  items: unknown[];
  depth: number;
  vars: unknown[];
}

export type Fn = (s: State) => unknown;
export type BoolFn = (s: State) => boolean;

/** Compile-time scope: variable name → slot. */
export interface Scope {
  names: Map<string, number>;
  next: { n: number };
}

/** `obj.name` for a plain object read directly; everything else through `member`. */
export function step(v: unknown, name: string): unknown {
  if (typeof v === "object" && v !== null && (v as object).constructor === Object) {
    const r = (v as Record<string, unknown>)[name];
    return r === undefined ? null : r;
  }
  return member(v, name);
}

export function readPath(v: unknown, path: readonly string[]): unknown {
  for (let i = 0; i < path.length; i++) {
    if (v === null || v === undefined) return null;
    v = step(v, path[i]!);
  }
  return orNull(v);
}

const CMP = new Set<BinaryOp>(["=", "!=", "<", "<=", ">", ">="]);

/** Does this node always produce a boolean? (Then no coercion is needed in boolean positions.) */
function isBoolNode(e: Expr): boolean {
  switch (e.type) {
    case "Not":
    case "Occurs":
    case "Chain":
    case "Quantifier":
      return true;
    case "Binary":
      return !["+", "-", "*", "/", "%"].includes(e.op);
    case "Literal":
      return e.kind === "boolean";
    case "Method":
      return [
        "exists", "intersects", "subsetOf", "supersetOf", "includes", "matches", "isNull", "isNotNull",
        "startsWith", "doesNotStartWith", "endsWith", "doesNotEndWith", "contains", "doesNotContain", "equals", "notEqualTo",
      ].includes(e.name);
    case "Call":
      return e.name === "inSegment";
    default:
      return false;
  }
}

/** Compiles operators; the subclass (compile.ts) compiles every other node. */
export abstract class OperatorCompiler {
  abstract expr(e: Expr, sc: Scope): Fn;

  bool(e: Expr, sc: Scope): BoolFn {
    const f = this.expr(e, sc);
    return isBoolNode(e) ? (f as BoolFn) : (s) => toBoolean(f(s));
  }

  private literalSide(e: Expr): { value: unknown } | null {
    return e.type === "Literal" ? { value: e.value } : null;
  }

  protected binary(op: BinaryOp, left: Expr, right: Expr, sc: Scope): Fn {
    if (op === "and") {
      const l = this.bool(left, sc);
      const r = this.bool(right, sc);
      return (s) => l(s) && r(s);
    }
    if (op === "or") {
      const l = this.bool(left, sc);
      const r = this.bool(right, sc);
      return (s) => l(s) || r(s);
    }
    if (CMP.has(op)) return this.comparison(op as CmpOp, left, right, sc);
    const l = this.expr(left, sc);
    switch (op) {
      case "+":
      case "-":
      case "*":
      case "/":
      case "%": {
        const r = this.expr(right, sc);
        return (s) => arithmetic(op, l(s), r(s));
      }
      case "in": {
        const r = this.listSide(right, sc);
        return (s) => {
          const x = orNull(l(s));
          return inList(x, r(s, x));
        };
      }
      case "notIn": {
        const r = this.listSide(right, sc);
        return (s) => {
          const x = orNull(l(s));
          const list = r(s, x);
          return !isNull(x) && Array.isArray(list) && !inList(x, list);
        };
      }
      case "like": {
        const r = this.expr(right, sc);
        return (s) => like(l(s), r(s));
      }
      default: {
        const r = this.expr(right, sc);
        return (s) => regexMatches(l(s), r(s));
      }
    }
  }

  /** The right side of in/notIn; literal elements of a list literal are coerced towards x. */
  private listSide(right: Expr, sc: Scope): (s: State, x: unknown) => unknown {
    if (right.type !== "List") {
      const f = this.expr(right, sc);
      return (s) => f(s);
    }
    const els = right.elements.map((el) =>
      el.type === "Literal" ? { lit: true as const, value: el.value } : { lit: false as const, f: this.expr(el, sc) },
    );
    return (s, x) => els.map((el) => (el.lit ? coerceLiteral(el.value, x) : orNull(el.f(s))));
  }

  private comparison(op: CmpOp, left: Expr, right: Expr, sc: Scope): Fn {
    // `A[cond].count() >= n`: stop counting at n.
    const atLeast = countAtLeast(op, left, right);
    if (atLeast) {
      const { filter, need } = atLeast;
      const counter = this.filterCount(filter.object, filter.condition, sc, need);
      return (s) => counter(s) >= need;
    }
    const litR = right.type !== "Literal" ? null : this.literalSide(right);
    const litL = left.type !== "Literal" ? null : this.literalSide(left);
    if (litR !== null && litL === null) return this.compareWithLiteral(op, this.expr(left, sc), litR.value, false);
    if (litL !== null && litR === null) return this.compareWithLiteral(op, this.expr(right, sc), litL.value, true);
    const l = this.expr(left, sc);
    const r = this.expr(right, sc);
    return (s) => compareValues(op, orNull(l(s)), orNull(r(s)));
  }

  /** `x OP literal` (or `literal OP x` when flipped): common types inline, the general rules otherwise. */
  private compareWithLiteral(op: CmpOp, x: Fn, lit: unknown, flipped: boolean): Fn {
    const slow = (v: unknown) => {
      const c = coerceLiteral(lit, v);
      return flipped ? compareValues(op, c, v) : compareValues(op, v, c);
    };
    if (typeof lit === "string" && (op === "=" || op === "!=")) {
      const eq = op === "=";
      return (s) => {
        const v = x(s);
        if (typeof v === "string") return (v === lit) === eq;
        return v === null || v === undefined ? false : slow(v);
      };
    }
    if (typeof lit === "number") {
      const n = lit;
      const fast = this.numberTest(op, n, flipped);
      return (s) => {
        const v = x(s);
        if (typeof v === "number") return v === v && fast(v);
        return v === null || v === undefined ? false : slow(v);
      };
    }
    return (s) => {
      const v = orNull(x(s));
      return v === null ? false : slow(v);
    };
  }

  private numberTest(op: CmpOp, n: number, flipped: boolean): (v: number) => boolean {
    const o: CmpOp = !flipped ? op : ({ "=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=" } as const)[op];
    switch (o) {
      case "=":
        return (v) => v === n;
      case "!=":
        return (v) => v !== n;
      case "<":
        return (v) => v < n;
      case "<=":
        return (v) => v <= n;
      case ">":
        return (v) => v > n;
      case ">=":
        return (v) => v >= n;
    }
  }

  /** Count the items of `object` satisfying `cond`, stopping at `limit`. */
  protected filterCount(object: Expr, condition: Expr, sc: Scope, limit: number): (s: State) => number {
    const obj = this.expr(object, sc);
    const cond = this.bool(condition, sc);
    return (s) => {
      const arr = obj(s);
      // A filter over a non-array is null, and count(null) is 0 (§7.8).
      if (!Array.isArray(arr)) return 0;
      spend(arr.length);
      let n = 0;
      const d = ++s.depth;
      for (let i = 0; i < arr.length && n < limit; i++) {
        s.items[d] = arr[i];
        if (cond(s)) n++;
      }
      s.depth--;
      return n;
    };
  }
}
