/**
 * The PQL parser: a hand-written recursive-descent / precedence parser over
 * the token array from lexer.ts (pql.md §3). Zero dependencies.
 *
 * Precedence, loosest first (pql.md §3.2):
 *   binders (select/exists/forall/let/sum…over, lambda)  — extend to the right
 *   or < and < not/! < comparisons, in, notIn, like, matches, occurs (non-assoc)
 *   < + - < * / % < unary - < postfix . () [] < primary
 *
 * Disambiguation (pql.md §3.3): the first `and` after `between` belongs to it
 * (time references are postfix expressions, so `and` cannot be swallowed);
 * a depth-0 comma inside binder conditions starts the next binding; a `let`
 * value is an additive expression unless parenthesised; `(`…`) =>` and
 * `x =>` are lambdas (look-ahead for `=>`); `[` after a postfix expression
 * is a filter, otherwise a list literal.
 *
 * Names are resolved here (see ast.ts): a bare identifier bound by an
 * enclosing binding to its left, a let, a lambda parameter or the query head
 * is a `Var`; anything else is a `Field` of the implicit context.
 *
 * Hostile input: every construct that recurses counts one nesting level and
 * the parser refuses more than MAX_NESTING levels with PQL_TOO_DEEP, long
 * before the JS stack is at risk. Left-associative operator chains are parsed
 * iteratively, so a 50,000-term `or` costs no stack at all.
 */
import type {
  Binding,
  Chain,
  ChainStep,
  CmpOp,
  Direction,
  Expr,
  Field,
  Lambda,
  OccursTail,
  Query,
  TimeRef,
  Var,
} from "./ast.js";
import { walk } from "./ast.js";
import { canonicalName } from "./catalog.js";
import { PqlError, positionAt } from "./errors.js";
import { timeUnitOf, tokenize, type Token } from "./lexer.js";

/** The most nesting levels (brackets, prefix operators, postfix steps, binders) a query may have. */
export const MAX_NESTING = 200;

const CMP_OPS = new Set<string>(["=", "!=", "<", "<=", ">", ">="]);
/** Keywords that are binary operators: they can never start an expression. */
const OPERATOR_WORDS = new Set(["and", "or", "in", "notin", "like", "matches", "occurs", "between", "where"]);
const BINDER_WORDS = new Set(["select", "exists", "forall", "let"]);
const AGGREGATE_WORDS = new Set(["sum", "average", "min", "max"]);
const TIME_WORDS = new Set(["now", "today", "yesterday", "tomorrow"]);
const PERIOD_WORDS = new Set(["this", "last", "next"]);
const DIRECTIONS = new Set(["before", "after", "from"]);
const CLOSERS = new Set([")", "]", "}"]);
/** Keywords after which an operand must follow (named in "Expected an expression after …"). */
const OPERAND_PREFIX = new Set([...OPERATOR_WORDS, "not", "on", "before", "after", "from", "over", "in"]);

/** Parse pql/text into a Query. Throws PqlError at the first syntax error. */
export function parse(text: string): Query {
  return new Parser(text).parseQuery();
}

class Parser {
  private readonly text: string;
  private readonly toks: Token[];
  private pos = 0;
  private depth = 0;
  /** Variables in scope, innermost last. */
  private readonly scope: string[] = [];

  constructor(text: string) {
    this.text = text;
    this.toks = tokenize(text);
  }

  // ---------------------------------------------------------------- helpers

  private peek(k = 0): Token {
    return this.toks[Math.min(this.pos + k, this.toks.length - 1)]!;
  }

  private next(): Token {
    const t = this.toks[this.pos]!;
    if (t.kind !== "eof") this.pos++;
    return t;
  }

  private isPunct(t: Token, p: string): boolean {
    return t.kind === "punct" && t.text === p;
  }

  /** Case-insensitive keyword test; `word` is given in lower case. */
  private isWord(t: Token, word: string): boolean {
    return t.kind === "ident" && t.lower === word;
  }

  /** The previous token's end: where an inserted token would go. */
  private prevEnd(): number {
    return this.pos > 0 ? this.toks[this.pos - 1]!.end : 0;
  }

  private fail(code: string, message: string, t: Token): never {
    throw new PqlError(code, message, this.text, t.start, Math.max(t.end, t.start + 1));
  }

  private failAt(code: string, message: string, start: number, end: number): never {
    throw new PqlError(code, message, this.text, start, end);
  }

  /** How a token is named in messages: `'and'`, `end of input`. */
  private describe(t: Token): string {
    if (t.kind === "eof") return "end of input";
    const s = t.text.length > 30 ? `${t.text.slice(0, 27)}...` : t.text;
    return `'${s}'`;
  }

  private where(t: Token): string {
    const p = positionAt(this.text, t.start);
    return `${p.line}:${p.column}`;
  }

  private expectPunct(p: string, what: string): Token {
    const t = this.peek();
    if (!this.isPunct(t, p)) this.fail("PQL_EXPECTED_TOKEN", `Expected '${p}' ${what} but found ${this.describe(t)}`, t);
    return this.next();
  }

  /** One more nesting level; refuses hostile depth before the JS stack does. */
  private enter(t: Token): void {
    if (++this.depth > MAX_NESTING) {
      this.fail("PQL_TOO_DEEP", `Expression nesting exceeds the limit of ${MAX_NESTING} levels at ${this.where(t)}`, t);
    }
  }

  private leave(): void {
    this.depth--;
  }

  private failExpected(what: string, t: Token): never {
    if (t.kind === "punct" && CLOSERS.has(t.text) && this.pos > 0 && this.isPunct(this.toks[this.pos - 1]!, ",")) {
      this.fail("PQL_TRAILING_COMMA", `Expected ${what} after ',' but found ${this.describe(t)}; remove the trailing comma`, t);
    }
    const prev = this.pos > 0 ? this.toks[this.pos - 1]! : undefined;
    const afterOp =
      prev !== undefined &&
      ((prev.kind === "punct" && !CLOSERS.has(prev.text)) || (prev.kind === "ident" && OPERAND_PREFIX.has(prev.lower)));
    const where = afterOp ? ` after '${prev.text}'` : "";
    this.fail("PQL_EXPECTED_EXPRESSION", `Expected ${what}${where} but found ${this.describe(t)}`, t);
  }

  private lookup(name: string, start: number, end: number): Field | Var {
    return this.scope.lastIndexOf(name) >= 0
      ? { type: "Var", name, start, end }
      : { type: "Field", name, start, end };
  }

  // ------------------------------------------------------------------ query

  parseQuery(): Query {
    const params = this.tryLambdaHead();
    if (params) this.scope.push(...params);
    const body = this.parseExpr();
    const t = this.peek();
    if (t.kind !== "eof") {
      if (t.kind === "punct" && CLOSERS.has(t.text)) {
        this.fail("PQL_UNBALANCED", `Unmatched '${t.text}': there is no opening bracket for it`, t);
      }
      this.fail("PQL_UNEXPECTED_TOKEN", `Expected an operator or end of input but found ${this.describe(t)}`, t);
    }
    return { type: "Query", params: params ?? [], body, start: 0, end: this.text.length, source: this.text };
  }

  /**
   * `(a, b) =>` or `a =>` at the current position: consumes it and returns the
   * parameter names, or returns undefined and consumes nothing.
   */
  private tryLambdaHead(): string[] | undefined {
    const t = this.peek();
    if (t.kind === "ident" && this.isPunct(this.peek(1), "=>")) {
      this.pos += 2;
      return [t.text];
    }
    if (!this.isPunct(t, "(")) return undefined;
    const names: string[] = [];
    let k = 1;
    while (true) {
      const id = this.peek(k);
      if (id.kind !== "ident") return undefined;
      names.push(id.text);
      const sep = this.peek(k + 1);
      if (this.isPunct(sep, ",")) {
        k += 2;
        continue;
      }
      if (this.isPunct(sep, ")") && this.isPunct(this.peek(k + 2), "=>")) {
        this.pos += k + 3;
        return names;
      }
      return undefined;
    }
  }

  // ------------------------------------------------------- boolean levels

  private parseExpr(): Expr {
    return this.parseOr();
  }

  private parseOr(): Expr {
    let left = this.parseAnd();
    while (this.isWord(this.peek(), "or")) {
      this.next();
      const right = this.parseAnd();
      left = { type: "Binary", op: "or", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  private parseAnd(): Expr {
    let left = this.parseNot();
    while (this.isWord(this.peek(), "and")) {
      this.next();
      const right = this.parseNot();
      left = { type: "Binary", op: "and", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  private parseNot(): Expr {
    const t = this.peek();
    if (this.isWord(t, "not") || this.isPunct(t, "!")) {
      this.enter(t);
      this.next();
      const operand = this.parseNot();
      this.leave();
      return { type: "Not", operand, start: t.start, end: operand.end };
    }
    if (this.isBinderStart()) return this.parseBinder();
    return this.parseRel();
  }

  /**
   * select/exists/forall/let always start a binder here. sum/average/min/max
   * do only when an operand follows (`sum X from`, `sum E.v over`), so that
   * `max > 3` still compares a field named `max` (pql.md §3.3 rule 8).
   */
  private isBinderStart(): boolean {
    const t = this.peek();
    if (t.kind !== "ident") return false;
    if (BINDER_WORDS.has(t.lower)) return true;
    if (!AGGREGATE_WORDS.has(t.lower)) return false;
    const n = this.peek(1);
    if (n.kind === "ident") return !OPERATOR_WORDS.has(n.lower) && n.lower !== "not";
    if (n.kind === "punct") return n.text === "(" || n.text === "[" || n.text === "{" || n.text === "^";
    return n.kind !== "eof";
  }

  // ---------------------------------------------------------------- binders

  private parseBinder(): Expr {
    const t = this.next();
    this.enter(t);
    const mark = this.scope.length;
    let result: Expr;
    switch (t.lower) {
      case "select": {
        const bindings = this.parseBindings("select");
        result = { type: "Select", bindings, start: t.start, end: bindings[bindings.length - 1]!.end };
        break;
      }
      case "exists":
      case "forall": {
        const bindings = this.parseBindings(t.lower);
        result = {
          type: "Quantifier",
          quantifier: t.lower,
          bindings,
          start: t.start,
          end: bindings[bindings.length - 1]!.end,
        };
        break;
      }
      case "let":
        result = this.parseLet(t);
        break;
      default:
        result = this.parseAggregateOver(t);
    }
    this.scope.length = mark;
    this.leave();
    return result;
  }

  /** `V from A [where|: C] (, V from A [where|: C])*`. Leaves the variables in scope. */
  private parseBindings(owner: string): Binding[] {
    const bindings: Binding[] = [];
    while (true) {
      const v = this.peek();
      if (v.kind !== "ident" || OPERATOR_WORDS.has(v.lower) || v.lower === "from") {
        this.fail("PQL_EXPECTED_VARIABLE", `Expected a variable name after '${owner}' but found ${this.describe(v)}`, v);
      }
      this.next();
      const from = this.peek();
      if (!this.isWord(from, "from")) {
        this.fail(
          "PQL_EXPECTED_FROM",
          `Expected 'from' after the variable '${v.text}' in ${owner} but found ${this.describe(from)}`,
          from,
        );
      }
      this.next();
      const source = this.parseOr();
      // The variable is visible in its own condition and in every binding to its right.
      this.scope.push(v.text);
      const binding: Binding = { variable: v.text, source, start: v.start, end: source.end };
      const sep = this.peek();
      if (this.isWord(sep, "where") || this.isPunct(sep, ":")) {
        this.next();
        binding.condition = this.parseExpr();
        binding.end = binding.condition.end;
      }
      bindings.push(binding);
      if (!this.isPunct(this.peek(), ",")) return bindings;
      this.next();
    }
  }

  private parseLet(t: Token): Expr {
    const v = this.peek();
    if (v.kind !== "ident" || OPERATOR_WORDS.has(v.lower)) {
      this.fail("PQL_EXPECTED_VARIABLE", `Expected a variable name after 'let' but found ${this.describe(v)}`, v);
    }
    this.next();
    this.expectPunct("=", `after 'let ${v.text}'`);
    // pql.md §3.3 rule 4: the value is additive so that the next `in` separates it from the body.
    const value = this.parseAdd();
    const inTok = this.peek();
    if (!this.isWord(inTok, "in")) {
      this.fail("PQL_EXPECTED_IN", `Expected 'in' after the value of 'let ${v.text}' but found ${this.describe(inTok)}`, inTok);
    }
    this.next();
    this.scope.push(v.text);
    const body = this.parseExpr();
    return { type: "Let", variable: v.text, value, body, start: t.start, end: body.end };
  }

  /** `sum V from A where C` or `sum VALUE over V from A where C, …` (legacy operator form). */
  private parseAggregateOver(t: Token): Expr {
    const fn = t.lower as "sum" | "average" | "min" | "max";
    if (this.peek().kind === "ident" && this.isWord(this.peek(1), "from")) {
      const bindings = this.parseBindings(t.lower);
      return { type: "AggregateOver", fn, bindings, start: t.start, end: bindings[bindings.length - 1]!.end };
    }
    const value = this.parseOr();
    const over = this.peek();
    if (!this.isWord(over, "over")) {
      this.fail("PQL_EXPECTED_OVER", `Expected 'over' after the value of '${t.lower}' but found ${this.describe(over)}`, over);
    }
    this.next();
    const bindings = this.parseBindings(t.lower);
    // The value is written left of the bindings it uses (`sum E.price over E from …`):
    // its free occurrences of the binding variables were parsed as fields; rebind them.
    const bound = new Set(bindings.map((b) => b.variable));
    walk(value, (n) => {
      if (n.type === "Field" && bound.has(n.name)) (n as { type: string }).type = "Var";
    });
    return { type: "AggregateOver", fn, value, bindings, start: t.start, end: bindings[bindings.length - 1]!.end };
  }

  // ------------------------------------------------------------- relations

  private parseRel(): Expr {
    const left = this.parseAdd();
    const t = this.peek();
    let result: Expr;
    if (t.kind === "punct" && CMP_OPS.has(t.text)) {
      this.next();
      const right = this.parseAdd();
      result = { type: "Binary", op: t.text as CmpOp, left, right, start: left.start, end: right.end };
    } else if (t.kind === "ident" && (t.lower === "in" || t.lower === "notin" || t.lower === "like" || t.lower === "matches")) {
      this.next();
      const right = this.parseAdd();
      const op = t.lower === "notin" ? "notIn" : (t.lower as "in" | "like" | "matches");
      result = { type: "Binary", op, left, right, start: left.start, end: right.end };
    } else if (this.isWord(t, "occurs")) {
      this.next();
      const tail = this.parseTail("occurs");
      result = { type: "Occurs", subject: left, tail, start: left.start, end: tail.end };
    } else {
      if (this.isWord(t, "not") && this.isWord(this.peek(1), "in")) {
        this.fail("PQL_UNEXPECTED_TOKEN", "'not in' is not PQL; use 'notIn'", t);
      }
      return left;
    }
    const again = this.peek();
    if (
      (again.kind === "punct" && CMP_OPS.has(again.text)) ||
      (again.kind === "ident" && ["in", "notin", "like", "matches", "occurs"].includes(again.lower))
    ) {
      this.fail(
        "PQL_CHAINED_COMPARISON",
        `Comparisons cannot be chained: found ${this.describe(again)} after a comparison; combine them with 'and'`,
        again,
      );
    }
    return result;
  }

  // -------------------------------------------------------------- occurs

  /** An occurs tail (pql.md §8): after `occurs`, or inside a chain's `WHEN(…)`. */
  private parseTail(owner: string): OccursTail {
    const t = this.peek();
    const start = t.start;
    if (t.kind === "punct" && CMP_OPS.has(t.text)) {
      this.next();
      const amountTok = this.peek();
      if (amountTok.kind !== "int" || (amountTok.value as number) < 0) {
        if (amountTok.kind === "ident" && timeUnitOf(amountTok.text)) {
          this.fail(
            "PQL_OCCURS_AMOUNT",
            `Expected a number between '${t.text}' and '${amountTok.text}' (e.g. '${t.text} 3 ${amountTok.text} before now')`,
            amountTok,
          );
        }
        this.fail(
          "PQL_OCCURS_AMOUNT",
          `Expected a whole number after '${t.text}' in ${owner} but found ${this.describe(amountTok)}`,
          amountTok,
        );
      }
      this.next();
      const unitTok = this.peek();
      const unit = unitTok.kind === "ident" ? timeUnitOf(unitTok.text) : undefined;
      if (!unit) {
        this.fail(
          "PQL_OCCURS_UNIT",
          `Expected a time unit (e.g. 'days', 'hours') after '${t.text} ${amountTok.text}' but found ${this.describe(unitTok)}`,
          unitTok,
        );
      }
      this.next();
      const dirTok = this.peek();
      if (dirTok.kind !== "ident" || !DIRECTIONS.has(dirTok.lower)) {
        this.fail(
          "PQL_OCCURS_DIRECTION",
          `Expected 'before', 'after' or 'from' after '${amountTok.text} ${unitTok.text}' but found ${this.describe(dirTok)}`,
          dirTok,
        );
      }
      this.next();
      const ref = this.parseTimeRef(`'${dirTok.text}'`);
      return {
        kind: "relative",
        op: t.text as CmpOp,
        amount: amountTok.value as number,
        unit,
        direction: dirTok.lower as Direction,
        ref,
        start,
        end: ref.end,
      };
    }
    if (t.kind === "ident" && DIRECTIONS.has(t.lower)) {
      this.next();
      const ref = this.parseTimeRef(`'${t.text}'`);
      return { kind: "direction", direction: t.lower as Direction, ref, start, end: ref.end };
    }
    if (this.isWord(t, "between")) {
      this.next();
      const from = this.parseTimeRef("'between'");
      const andTok = this.peek();
      if (!this.isWord(andTok, "and")) {
        this.fail("PQL_EXPECTED_AND", `Expected 'and' after 'between …' but found ${this.describe(andTok)}`, andTok);
      }
      this.next();
      const to = this.parseTimeRef("'and'");
      return { kind: "between", from, to, start, end: to.end };
    }
    if (t.kind === "int" && this.peek(1).kind === "ident" && timeUnitOf(this.peek(1).text)) {
      this.fail(
        "PQL_OCCURS_COMPARISON",
        `Missing comparison before '${t.text} ${this.peek(1).text}' (e.g. '<= ${t.text} ${this.peek(1).text} before now')`,
        t,
      );
    }
    if (t.kind === "ident" && timeUnitOf(t.text) && !PERIOD_WORDS.has(t.lower)) {
      const n = this.peek(1);
      if (n.kind === "ident" && DIRECTIONS.has(n.lower)) {
        this.fail(
          "PQL_OCCURS_AMOUNT",
          `A time unit needs a comparison and a number: e.g. '< 3 ${t.text} ${n.text} now'`,
          t,
        );
      }
    }
    if (this.isWord(t, "on")) this.next();
    const ref = this.parseTimeRef(this.isWord(t, "on") ? "'on'" : `'${owner}'`);
    return { kind: "on", ref, start, end: ref.end };
  }

  /** A time reference: now/today/…, this/last/next U, or a postfix expression such as date(…). */
  private parseTimeRef(after: string): TimeRef {
    const t = this.peek();
    const canStart =
      t.kind === "int" ||
      t.kind === "double" ||
      t.kind === "string" ||
      t.kind === "param" ||
      (t.kind === "ident" && !OPERATOR_WORDS.has(t.lower) && !DIRECTIONS.has(t.lower) && t.lower !== "not") ||
      (t.kind === "punct" && (t.text === "(" || t.text === "[" || t.text === "{" || t.text === "^"));
    if (!canStart) {
      this.fail(
        "PQL_EXPECTED_TIME",
        `Expected a time reference (e.g. 'now', 'today', 'this month', 'date(2024, 1, 31)') after ${after} but found ${this.describe(t)}`,
        t,
      );
    }
    return this.parsePostfix();
  }

  // ------------------------------------------------------------ arithmetic

  private parseAdd(): Expr {
    let left = this.parseMul();
    while (true) {
      const t = this.peek();
      if (!(this.isPunct(t, "+") || this.isPunct(t, "-"))) return left;
      this.next();
      const right = this.parseMul();
      left = { type: "Binary", op: t.text as "+" | "-", left, right, start: left.start, end: right.end };
    }
  }

  private parseMul(): Expr {
    let left = this.parseUnary();
    while (true) {
      const t = this.peek();
      if (!(this.isPunct(t, "*") || this.isPunct(t, "/") || this.isPunct(t, "%"))) return left;
      this.next();
      const right = this.parseUnary();
      left = { type: "Binary", op: t.text as "*" | "/" | "%", left, right, start: left.start, end: right.end };
    }
  }

  private parseUnary(): Expr {
    const t = this.peek();
    if (!this.isPunct(t, "-")) return this.parsePostfix();
    const num = this.peek(1);
    const after = this.peek(2);
    // pql.md OQ-5: `-` directly before a number literal folds into a negative literal,
    // unless a postfix step follows (`-5.count()` is -(5.count()), as precedence says).
    if ((num.kind === "int" || num.kind === "double") && !this.isPunct(after, ".") && !this.isPunct(after, "[")) {
      this.pos += 2;
      return {
        type: "Literal",
        kind: num.kind === "int" ? "integer" : "double",
        value: -(num.value as number),
        start: t.start,
        end: num.end,
      };
    }
    this.enter(t);
    this.next();
    const operand = this.parseUnary();
    this.leave();
    return { type: "Negate", operand, start: t.start, end: operand.end };
  }

  // --------------------------------------------------------------- postfix

  private parsePostfix(): Expr {
    let expr = this.parsePrimary();
    const outer = this.depth;
    try {
      while (true) {
        const t = this.peek();
        if (this.isPunct(t, ".")) {
          this.enter(t);
          this.next();
          const name = this.peek();
          if (name.kind !== "ident") {
            this.fail("PQL_EXPECTED_NAME", `Expected a field or method name after '.' but found ${this.describe(name)}`, name);
          }
          this.next();
          if (this.isPunct(this.peek(), "(")) {
            const canonical = canonicalName(name.text, "method");
            const { args, end } = this.parseArgs(canonical);
            expr = { type: "Method", receiver: expr, name: canonical, args, start: expr.start, end };
          } else {
            expr = { type: "Member", object: expr, name: name.text, start: expr.start, end: name.end };
          }
        } else if (this.isPunct(t, "[")) {
          this.enter(t);
          this.next();
          if (this.isPunct(this.peek(), "]")) {
            this.fail("PQL_EXPECTED_EXPRESSION", `Expected a filter condition after '[' but found ']'`, this.peek());
          }
          const condition = this.parseExpr();
          const close = this.peek();
          if (!this.isPunct(close, "]")) {
            this.fail(
              "PQL_EXPECTED_TOKEN",
              `Expected ']' to close the filter opened at ${this.where(t)} but found ${this.describe(close)}`,
              close,
            );
          }
          this.next();
          expr = { type: "Filter", object: expr, condition, start: expr.start, end: close.end };
        } else {
          return expr;
        }
      }
    } finally {
      this.depth = outer;
    }
  }

  /** `( arg, … )` where each argument may be a lambda. */
  private parseArgs(fn: string): { args: Expr[]; end: number } {
    const open = this.next();
    this.enter(open);
    const args: Expr[] = [];
    if (!this.isPunct(this.peek(), ")")) {
      while (true) {
        args.push(this.parseArg());
        const t = this.peek();
        if (this.isPunct(t, ",")) {
          this.next();
          if (this.isPunct(this.peek(), ")")) {
            this.fail("PQL_TRAILING_COMMA", `Trailing ',' in the arguments of '${fn}'`, t);
          }
          continue;
        }
        if (this.isPunct(t, ")")) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or ')' in the arguments of '${fn}' (opened at ${this.where(open)}) but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.leave();
    return { args, end: close.end };
  }

  private parseArg(): Expr {
    const start = this.peek();
    const params = this.tryLambdaHead();
    if (!params) return this.parseExpr();
    this.enter(start);
    const body0 = this.peek();
    if (body0.kind === "eof" || (body0.kind === "punct" && (body0.text === ")" || body0.text === ","))) {
      this.fail("PQL_EXPECTED_EXPRESSION", `Expected the body of the lambda after '=>' but found ${this.describe(body0)}`, body0);
    }
    const mark = this.scope.length;
    this.scope.push(...params);
    const body = this.parseExpr();
    this.scope.length = mark;
    this.leave();
    const lambda: Lambda = { type: "Lambda", params, body, start: start.start, end: body.end };
    return lambda;
  }

  // --------------------------------------------------------------- primary

  private parsePrimary(): Expr {
    const t = this.peek();
    switch (t.kind) {
      case "int":
      case "double":
        this.next();
        return {
          type: "Literal",
          kind: t.kind === "int" ? "integer" : "double",
          value: t.value as number,
          start: t.start,
          end: t.end,
        };
      case "string":
        this.next();
        return { type: "Literal", kind: "string", value: t.value as string, start: t.start, end: t.end };
      case "param":
        this.next();
        return { type: "Param", index: t.value as number, start: t.start, end: t.end };
      case "eof":
        return this.failExpected("an expression", t);
      case "punct":
        return this.parsePunctPrimary(t);
      case "ident":
        return this.parseIdentPrimary(t);
    }
  }

  private parsePunctPrimary(t: Token): Expr {
    switch (t.text) {
      case "(": {
        if (this.tryLambdaHead()) {
          this.fail("PQL_MISPLACED_LAMBDA", "A lambda is only allowed as a function or method argument", t);
        }
        this.enter(t);
        this.next();
        if (this.isPunct(this.peek(), ")")) {
          this.fail("PQL_EXPECTED_EXPRESSION", "Expected an expression inside '()' but found ')'", this.peek());
        }
        const inner = this.parseExpr();
        const close = this.peek();
        if (!this.isPunct(close, ")")) {
          this.fail(
            "PQL_EXPECTED_TOKEN",
            `Expected ')' to close the '(' at ${this.where(t)} but found ${this.describe(close)}`,
            close,
          );
        }
        this.next();
        this.leave();
        return inner;
      }
      case "[":
        return this.parseList(t);
      case "{":
        return this.parseObject(t);
      case "^": {
        let levels = 0;
        while (this.isPunct(this.peek(), "^")) {
          this.next();
          levels++;
        }
        if (this.isPunct(this.peek(), ".")) this.next();
        const name = this.peek();
        if (name.kind !== "ident") {
          this.fail("PQL_EXPECTED_NAME", `Expected a field name after '${"^".repeat(levels)}' but found ${this.describe(name)}`, name);
        }
        this.next();
        return { type: "Up", levels, name: name.text, start: t.start, end: name.end };
      }
      default:
        return this.failExpected("an expression", t);
    }
  }

  private parseList(open: Token): Expr {
    this.enter(open);
    this.next();
    const elements: Expr[] = [];
    if (!this.isPunct(this.peek(), "]")) {
      while (true) {
        elements.push(this.parseExpr());
        const t = this.peek();
        if (this.isPunct(t, ",")) {
          this.next();
          if (this.isPunct(this.peek(), "]")) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in list literal", t);
          continue;
        }
        if (this.isPunct(t, "]")) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or ']' in the list opened at ${this.where(open)} but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.leave();
    return { type: "List", elements, start: open.start, end: close.end };
  }

  private parseObject(open: Token): Expr {
    this.enter(open);
    this.next();
    const entries: { key: string; value: Expr }[] = [];
    if (!this.isPunct(this.peek(), "}")) {
      while (true) {
        const key = this.peek();
        if (key.kind !== "string") {
          this.fail(
            "PQL_OBJECT_KEY",
            `Object keys must be string literals (e.g. {"count": …}) but found ${this.describe(key)}`,
            key,
          );
        }
        this.next();
        this.expectPunct(":", `after the object key ${key.text}`);
        entries.push({ key: key.value as string, value: this.parseExpr() });
        const t = this.peek();
        if (this.isPunct(t, ",")) {
          this.next();
          if (this.isPunct(this.peek(), "}")) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in object literal", t);
          continue;
        }
        if (this.isPunct(t, "}")) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or '}' in the object opened at ${this.where(open)} but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.leave();
    return { type: "Object", entries, start: open.start, end: close.end };
  }

  private parseIdentPrimary(t: Token): Expr {
    const w = t.lower;
    const nextTok = this.peek(1);
    if (w === "true" || w === "false") {
      this.next();
      return { type: "Literal", kind: "boolean", value: w === "true", start: t.start, end: t.end };
    }
    if (w === "null") {
      this.fail("PQL_NULL_LITERAL", "'null' is not a PQL literal; use .isNull() or .isNotNull()", t);
    }
    if (OPERATOR_WORDS.has(w)) this.failExpected("an expression", t);
    if (BINDER_WORDS.has(w) || w === "not") {
      this.fail("PQL_NEEDS_PARENTHESES", `'${t.text}' cannot appear here without parentheses: write (${t.text} …)`, t);
    }
    if (TIME_WORDS.has(w)) {
      this.next();
      return { type: "TimeWord", word: w as "now" | "today" | "yesterday" | "tomorrow", start: t.start, end: t.end };
    }
    if (PERIOD_WORDS.has(w)) {
      const unit = nextTok.kind === "ident" ? timeUnitOf(nextTok.text) : undefined;
      if (unit) {
        this.pos += 2;
        return { type: "RelPeriod", which: w as "this" | "last" | "next", unit, start: t.start, end: nextTok.end };
      }
      if (nextTok.kind === "int" && this.peek(2).kind === "ident" && timeUnitOf(this.peek(2).text)) {
        this.fail(
          "PQL_BAD_PERIOD",
          `'${t.text}' takes a time unit without a number (e.g. '${t.text} week'); for a span write e.g. '<= ${nextTok.text} ${this.peek(2).text} before now'`,
          nextTok,
        );
      }
    }
    if (w === "xevent") {
      this.next();
      return { type: "XEvent", start: t.start, end: t.end };
    }
    if (this.isPunct(nextTok, "(")) {
      this.next();
      if (w === "chain") return this.parseChain(t);
      const name = canonicalName(t.text, "function");
      const { args, end } = this.parseArgs(name);
      return { type: "Call", name, args, start: t.start, end };
    }
    this.next();
    return this.lookup(t.text, t.start, t.end);
  }

  // ----------------------------------------------------------------- chain

  /** `chain(source, tsField, [L: WHAT(…) WHEN(…) COUNT(n) WHERE(…), …])` (pql.md §7.14). */
  private parseChain(kw: Token): Chain {
    const open = this.next();
    this.enter(open);
    const source = this.parseExpr();
    this.expectPunct(",", "after the chain's event source");
    const ts = this.peek();
    if (ts.kind !== "ident") {
      this.fail("PQL_EXPECTED_NAME", `Expected the timestamp field name as the chain's second argument but found ${this.describe(ts)}`, ts);
    }
    this.next();
    this.expectPunct(",", "after the chain's timestamp field");
    const list = this.expectPunct("[", "to start the chain's step list");
    if (this.isPunct(this.peek(), "]")) {
      this.fail("PQL_EMPTY_CHAIN", "A chain needs at least one step (e.g. [A: WHAT(true)])", this.peek());
    }
    const steps: ChainStep[] = [];
    while (true) {
      steps.push(this.parseStep());
      const t = this.peek();
      if (this.isPunct(t, ",")) {
        this.next();
        if (this.isPunct(this.peek(), "]")) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in the chain's step list", t);
        continue;
      }
      if (this.isPunct(t, "]")) break;
      this.fail(
        "PQL_EXPECTED_TOKEN",
        `Expected ',' or ']' in the chain's step list opened at ${this.where(list)} but found ${this.describe(t)}`,
        t,
      );
    }
    this.next();
    const close = this.expectPunct(")", "to close the chain");
    this.leave();
    return { type: "Chain", source, timestampField: ts.text, steps, start: kw.start, end: close.end };
  }

  private parseStep(): ChainStep {
    const label = this.peek();
    if (label.kind !== "ident") {
      this.fail("PQL_EXPECTED_NAME", `Expected a step label (e.g. 'A:') but found ${this.describe(label)}`, label);
    }
    this.next();
    this.expectPunct(":", `after the step label '${label.text}'`);
    const what = this.peek();
    if (!this.isWord(what, "what")) {
      this.fail("PQL_EXPECTED_WHAT", `Expected 'WHAT(' after the step label '${label.text}' but found ${this.describe(what)}`, what);
    }
    this.next();
    const step: ChainStep = { label: label.text, what: this.parseClauseBody(what, () => this.parseExpr()), start: label.start };
    let end = this.prevEnd();
    while (true) {
      const c = this.peek();
      if (c.kind !== "ident" || !this.isPunct(this.peek(1), "(")) break;
      if (c.lower === "when") {
        if (step.when) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${label.text}' has more than one WHEN clause`, c);
        this.next();
        step.when = this.parseClauseBody(c, () => this.parseTail("WHEN"));
      } else if (c.lower === "count") {
        if (step.count !== undefined) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${label.text}' has more than one COUNT clause`, c);
        this.next();
        step.count = this.parseClauseBody(c, () => {
          const n = this.peek();
          if (n.kind !== "int" || (n.value as number) < 1) {
            this.fail("PQL_BAD_COUNT", `COUNT needs a positive whole number but found ${this.describe(n)}`, n);
          }
          this.next();
          return n.value as number;
        });
      } else if (c.lower === "where") {
        if (step.where) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${label.text}' has more than one WHERE clause`, c);
        this.next();
        step.where = this.parseClauseBody(c, () => this.parseExpr());
      } else if (c.lower === "what") {
        this.fail("PQL_DUPLICATE_CLAUSE", `Step '${label.text}' has more than one WHAT clause`, c);
      } else {
        break;
      }
      end = this.prevEnd();
    }
    step.end = end;
    return step;
  }

  /** `(` body `)` of a chain clause. */
  private parseClauseBody<T>(clause: Token, body: () => T): T {
    const word = clause.text.toUpperCase();
    const open = this.expectPunct("(", `after ${word}`);
    this.enter(open);
    if (this.isPunct(this.peek(), ")")) {
      this.fail("PQL_EXPECTED_EXPRESSION", `Expected the content of ${word}(…) but found ')'`, this.peek());
    }
    const result = body();
    this.expectPunct(")", `to close ${word}(`);
    this.leave();
    return result;
  }
}
