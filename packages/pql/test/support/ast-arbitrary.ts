/**
 * fast-check generators of random well-formed PQL trees, for round-trip and
 * differential property tests (format ⇄ parse, pql/json, evaluators).
 *
 * Every node type and every occurs-tail kind can appear. Trees are
 * "well-formed" in the parser's sense: a `Var` only where its name is bound
 * (by a binding to its left, a let, a lambda or the query head), lambdas
 * only as call arguments, identifiers that are never keywords where a
 * keyword would change the reading, field names and variable names drawn
 * from disjoint pools (fields start lower case, variables upper case), and
 * literal values that survive text and JSON exactly (safe integers, finite
 * doubles). Trees carry no positions.
 *
 * Generation is imperative (fc.gen) because what may be generated depends
 * on the variables in scope.
 */
import fc from "fast-check";
import type { Binding, ChainStep, CmpOp, Direction, Expr, OccursTail, Query, TimeRef } from "../../src/ast.js";
import { TIME_UNITS } from "../../src/ast.js";
import { BUILTINS, KEYWORDS } from "../../src/catalog.js";

type Gen = fc.GeneratorValue;

export interface AstArbitraryOptions {
  /** Maximum nesting depth of generated expressions (default 4). */
  maxDepth?: number;
}

/** Words that must not be used as bare field, variable or function names. */
export const RESERVED_WORDS: ReadonlySet<string> = new Set(
  [
    ...KEYWORDS,
    "if", "date", "chain", "xevent", "null", "true", "false",
    "millisecond", "milliseconds", "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days",
    "week", "weeks", "month", "months", "year", "years", "decade", "decades", "century", "centuries",
    "millennium", "millennia", "millenium", "millenia", "millenniums", "milleniums",
  ].map((w) => w.toLowerCase()),
);

const FIELD_POOL = ["age", "person", "eventType", "city", "a1", "b_2", "_id", "score", "items", "tags", "timestamp", "k"];
const VAR_POOL = ["X", "Y", "E", "K", "G", "A1", "Order1", "V_2"];
const METHOD_NAMES = BUILTINS.filter((b) => b.form === "method").map((b) => b.name);
const FUNCTION_NAMES = BUILTINS.filter((b) => b.form === "function").map((b) => b.name);
/** Member names after `.` may be keywords (pql.md §2.6). */
const MEMBER_EXTRA = ["from", "last", "count", "this", "next", "date", "select", "and", "WHAT"];
const CMP_OPS: CmpOp[] = ["=", "!=", "<", "<=", ">", ">="];
const BINARY_OPS = ["and", "or", "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "in", "notIn", "like", "matches"] as const;
const DIRECTIONS: Direction[] = ["before", "after", "from"];
const TIME_WORDS = ["now", "today", "yesterday", "tomorrow"] as const;

const LOWER = "abcdefghijklmnopqrstuvwxyz";
const UPPER = LOWER.toUpperCase();
const IDENT_CHARS = LOWER + UPPER + "0123456789_";

function safe(name: string): string {
  return RESERVED_WORDS.has(name.toLowerCase()) ? `${name}_` : name;
}

class Builder {
  constructor(
    private readonly g: Gen,
    private readonly maxDepth: number,
  ) {}

  int(min: number, max: number): number {
    return this.g(fc.integer, { min, max });
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.int(0, xs.length - 1)]!;
  }

  /** An identifier: one character of `first`, then up to `rest` identifier characters. */
  word(first: string, rest: number): string {
    let w = first[this.int(0, first.length - 1)]!;
    const n = this.int(0, rest);
    for (let i = 0; i < n; i++) w += IDENT_CHARS[this.int(0, IDENT_CHARS.length - 1)];
    return w;
  }

  chance(p: number): boolean {
    return this.int(0, 999) < p * 1000;
  }

  fieldName(): string {
    if (this.chance(0.7)) return this.pick(FIELD_POOL);
    return safe(this.word(LOWER + "_", 6));
  }

  varName(): string {
    if (this.chance(0.7)) return this.pick(VAR_POOL);
    return safe(this.word(UPPER, 4));
  }

  memberName(): string {
    return this.chance(0.2) ? this.pick(MEMBER_EXTRA) : this.fieldName();
  }

  methodName(): string {
    return this.chance(0.8) ? this.pick(METHOD_NAMES) : this.customCallName();
  }

  /** A non-built-in call name that the parser keeps as written. */
  customCallName(): string {
    const n = safe(this.word(LOWER, 6));
    return BUILTINS.some((b) => b.name.toLowerCase() === n.toLowerCase()) ? `${n}X` : n;
  }

  literal(): Expr {
    switch (this.int(0, 3)) {
      case 0:
        return { type: "Literal", kind: "string", value: this.g(fc.string, { unit: this.chance(0.5) ? "grapheme" : "binary", maxLength: 8 }) };
      case 1:
        return { type: "Literal", kind: "integer", value: this.chance(0.7) ? this.int(-1000, 1000) : this.g(fc.maxSafeInteger) };
      case 2:
        return {
          type: "Literal",
          kind: "double",
          value: this.chance(0.5) ? this.int(-100, 100) / 4 : this.g(fc.double, { noNaN: true, noDefaultInfinity: true }),
        };
      default:
        return { type: "Literal", kind: "boolean", value: this.chance(0.5) };
    }
  }

  leaf(scope: string[]): Expr {
    switch (this.int(0, 8)) {
      case 0:
      case 1:
        return this.literal();
      case 2:
      case 3:
        return { type: "Field", name: this.fieldName() };
      case 4:
        return scope.length > 0 ? { type: "Var", name: this.pick(scope) } : { type: "Field", name: this.fieldName() };
      case 5:
        return { type: "Param", index: this.int(1, 5) };
      case 6:
        return { type: "Up", levels: this.int(1, 3), name: this.fieldName() };
      case 7:
        return this.chance(0.5) ? { type: "XEvent" } : { type: "TimeWord", word: this.pick(TIME_WORDS) };
      default:
        return { type: "RelPeriod", which: this.pick(["this", "last", "next"] as const), unit: this.pick(TIME_UNITS) };
    }
  }

  expr(depth: number, scope: string[]): Expr {
    if (depth >= this.maxDepth || this.chance(0.25)) return this.leaf(scope);
    const d = depth + 1;
    switch (this.int(0, 19)) {
      case 0:
        return { type: "List", elements: this.items(d, scope, 0, 3) };
      case 1:
        return {
          type: "Object",
          entries: Array.from({ length: this.int(0, 3) }, () => ({
            key: this.g(fc.string, { maxLength: 5 }),
            value: this.expr(d, scope),
          })),
        };
      case 2:
        return { type: "Member", object: this.expr(d, scope), name: this.memberName() };
      case 3:
        return { type: "Method", receiver: this.expr(d, scope), name: this.methodName(), args: this.args(d, scope) };
      case 4: {
        const name = this.chance(0.7) ? this.pick(FUNCTION_NAMES) : this.customCallName();
        return { type: "Call", name, args: this.args(d, scope) };
      }
      case 5:
        return { type: "Filter", object: this.expr(d, scope), condition: this.expr(d, scope) };
      case 6:
        return { type: "Negate", operand: this.expr(d, scope) };
      case 7:
        return { type: "Not", operand: this.expr(d, scope) };
      case 8:
      case 9:
      case 10:
        return { type: "Binary", op: this.pick(BINARY_OPS), left: this.expr(d, scope), right: this.expr(d, scope) };
      case 11:
        return { type: "Occurs", subject: this.expr(d, scope), tail: this.tail(d, scope) };
      case 12:
        return this.chain(d, scope);
      case 13:
        return { type: "Select", bindings: this.bindings(d, scope).bindings };
      case 14:
        return { type: "Quantifier", quantifier: this.pick(["exists", "forall"] as const), bindings: this.bindings(d, scope).bindings };
      case 15: {
        const variable = this.varName();
        return { type: "Let", variable, value: this.expr(d, scope), body: this.expr(d, [...scope, variable]) };
      }
      case 16: {
        const { bindings, inner } = this.bindings(d, scope);
        const node: Expr = { type: "AggregateOver", fn: this.pick(["sum", "average", "min", "max"] as const), bindings };
        if (this.chance(0.7)) node.value = this.expr(d, inner);
        return node;
      }
      case 17:
        return { type: "Member", object: { type: "XEvent" }, name: this.memberName() };
      default:
        return this.leaf(scope);
    }
  }

  items(d: number, scope: string[], min: number, max: number): Expr[] {
    return Array.from({ length: this.int(min, max) }, () => this.expr(d, scope));
  }

  /** Call arguments; a lambda may appear in any position. */
  args(d: number, scope: string[]): Expr[] {
    return Array.from({ length: this.int(0, 3) }, () => {
      if (!this.chance(0.2)) return this.expr(d, scope);
      const params = Array.from({ length: this.int(1, 2) }, () => this.varName());
      return { type: "Lambda", params, body: this.expr(d, [...scope, ...params]) };
    });
  }

  timeRef(d: number, scope: string[]): TimeRef {
    switch (this.int(0, 2)) {
      case 0:
        return { type: "TimeWord", word: this.pick(TIME_WORDS) };
      case 1:
        return { type: "RelPeriod", which: this.pick(["this", "last", "next"] as const), unit: this.pick(TIME_UNITS) };
      default:
        return this.expr(d, scope);
    }
  }

  tail(d: number, scope: string[]): OccursTail {
    switch (this.int(0, 3)) {
      case 0:
        return {
          kind: "relative",
          op: this.pick(CMP_OPS),
          amount: this.chance(0.2) ? 1 : this.int(0, 1000),
          unit: this.pick(TIME_UNITS),
          direction: this.pick(DIRECTIONS),
          ref: this.timeRef(d, scope),
        };
      case 1:
        return { kind: "direction", direction: this.pick(DIRECTIONS), ref: this.timeRef(d, scope) };
      case 2:
        return { kind: "between", from: this.timeRef(d, scope), to: this.timeRef(d, scope) };
      default:
        return { kind: "on", ref: this.timeRef(d, scope) };
    }
  }

  chain(d: number, scope: string[]): Expr {
    const steps: ChainStep[] = Array.from({ length: this.int(1, 3) }, () => {
      const step: ChainStep = { label: this.varName(), what: this.expr(d, scope) };
      if (this.chance(0.5)) step.when = this.tail(d, scope);
      if (this.chance(0.3)) step.count = this.int(1, 20);
      if (this.chance(0.3)) step.where = this.expr(d, scope);
      return step;
    });
    return { type: "Chain", source: this.expr(d, scope), timestampField: this.fieldName(), steps };
  }

  /** 1–3 bindings, each seeing the variables of the bindings to its left. */
  bindings(d: number, scope: string[]): { bindings: Binding[]; inner: string[] } {
    let inner = scope;
    const bindings = Array.from({ length: this.int(1, 3) }, () => {
      const variable = this.varName();
      const b: Binding = { variable, source: this.expr(d, inner) };
      inner = [...inner, variable];
      if (this.chance(0.7)) b.condition = this.expr(d, inner);
      return b;
    });
    return { bindings, inner };
  }
}

/** Random well-formed queries (with an occasional lambda head). */
export function queryArbitrary(options: AstArbitraryOptions = {}): fc.Arbitrary<Query> {
  const maxDepth = options.maxDepth ?? 4;
  return fc.gen().map((g) => {
    const b = new Builder(g, maxDepth);
    const params = b.chance(0.15) ? Array.from({ length: b.int(1, 2) }, () => b.varName()) : [];
    return { type: "Query", params, body: b.expr(0, params) } satisfies Query;
  });
}

/** Random well-formed expressions with no variables in scope. */
export function exprArbitrary(options: AstArbitraryOptions = {}): fc.Arbitrary<Expr> {
  const maxDepth = options.maxDepth ?? 4;
  return fc.gen().map((g) => new Builder(g, maxDepth).expr(0, []));
}
