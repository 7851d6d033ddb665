/**
 * The PQL parser: a hand-written recursive-descent / precedence parser over
 * the tokens from lexer.ts (pql.md §3). Zero dependencies.
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
 *
 * Speed: tokens are indexes into the lexer's typed arrays (`TOKENS`), tested
 * by integer kind and keyword id (no per-token objects, no lower-casing);
 * source text is sliced only for names the AST keeps and for messages;
 * canonical built-in names are found by keyword id; scope look-ups use a
 * count map. The
 * AST, positions and errors are exactly those of the object-token parser
 * this replaced (pinned by the tests).
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
  Node,
  OccursTail,
  Query,
  TimeRef,
  TimeUnit,
  Var,
} from "./ast.js";
import { walk } from "./ast.js";
import { BUILTINS, canonicalName, lookupBuiltin } from "./catalog.js";
import { PqlError, positionAt } from "./errors.js";
import {
  T_ARROW,
  T_DOUBLE,
  T_EOF,
  T_GE,
  T_IDENT,
  T_INT,
  T_LE,
  T_NE,
  T_PARAM,
  T_STRING,
  TOKENS,
  keywordCount,
  keywordId,
  keywordText,
  scan,
  unitOfKeyword,
} from "./lexer.js";

/** The most nesting levels (brackets, prefix operators, postfix steps, binders) a query may have. */
export const MAX_NESTING = 200;

// Punctuation token kinds are character codes (see lexer.ts).
const P_LPAREN = 40; // (
const P_RPAREN = 41; // )
const P_LBRACKET = 91; // [
const P_RBRACKET = 93; // ]
const P_LBRACE = 123; // {
const P_RBRACE = 125; // }
const P_COMMA = 44; // ,
const P_COLON = 58; // :
const P_DOT = 46; // .
const P_EQ = 61; // =
const P_LT = 60; // <
const P_GT = 62; // >
const P_PLUS = 43; // +
const P_MINUS = 45; // -
const P_STAR = 42; // *
const P_SLASH = 47; // /
const P_PERCENT = 37; // %
const P_BANG = 33; // !
const P_CARET = 94; // ^

/** The symbol of each punctuation kind. */
const SYMBOL: string[] = [];
for (const p of "()[]{},:.=<>+-*/%!^") SYMBOL[p.charCodeAt(0)] = p;
SYMBOL[T_LE] = "<=";
SYMBOL[T_NE] = "!=";
SYMBOL[T_GE] = ">=";
SYMBOL[T_ARROW] = "=>";

function isPunctKind(k: number): boolean {
  return k > T_PARAM;
}

function isCloser(k: number): boolean {
  return k === P_RPAREN || k === P_RBRACKET || k === P_RBRACE;
}

function isCmp(k: number): boolean {
  return k === P_EQ || k === T_NE || k === P_LT || k === T_LE || k === P_GT || k === T_GE;
}

// Keyword ids (case-insensitive spellings, see lexer.ts).
const KW_AND = keywordId("and");
const KW_OR = keywordId("or");
const KW_NOT = keywordId("not");
const KW_IN = keywordId("in");
const KW_NOTIN = keywordId("notin");
const KW_LIKE = keywordId("like");
const KW_MATCHES = keywordId("matches");
const KW_OCCURS = keywordId("occurs");
const KW_BETWEEN = keywordId("between");
const KW_WHERE = keywordId("where");
const KW_ON = keywordId("on");
const KW_FROM = keywordId("from");
const KW_OVER = keywordId("over");
const KW_SELECT = keywordId("select");
const KW_EXISTS = keywordId("exists");
const KW_FORALL = keywordId("forall");
const KW_LET = keywordId("let");
const KW_TRUE = keywordId("true");
const KW_FALSE = keywordId("false");
const KW_NULL = keywordId("null");
const KW_XEVENT = keywordId("xevent");
const KW_CHAIN = keywordId("chain");
const KW_WHAT = keywordId("what");
const KW_WHEN = keywordId("when");
const KW_COUNT = keywordId("count");

// Keyword classes, as bit flags by keyword id.
/** Keywords that are binary operators: they can never start an expression. */
const F_OPERATOR = 1;
const F_BINDER = 2;
const F_AGGREGATE = 4;
const F_TIME = 8;
const F_PERIOD = 16;
const F_DIRECTION = 32;
/** Keywords after which an operand must follow (named in "Expected an expression after …"). */
const F_OPERAND_PREFIX = 64;

const FLAGS = new Uint8Array(256);
function flag(words: string[], f: number): void {
  for (const w of words) {
    const id = keywordId(w);
    if (id === 0) throw new Error(`lexer.ts does not know the keyword '${w}'`);
    FLAGS[id]! |= f;
  }
}
flag(["and", "or", "in", "notin", "like", "matches", "occurs", "between", "where"], F_OPERATOR);
flag(["select", "exists", "forall", "let"], F_BINDER);
flag(["sum", "average", "min", "max"], F_AGGREGATE);
flag(["now", "today", "yesterday", "tomorrow"], F_TIME);
flag(["this", "last", "next"], F_PERIOD);
flag(["before", "after", "from"], F_DIRECTION);
flag(
  ["and", "or", "in", "notin", "like", "matches", "occurs", "between", "where", "not", "on", "before", "after", "from", "over"],
  F_OPERAND_PREFIX,
);

/**
 * canonicalName() by keyword id: the lexer gives every built-in name an id, so
 * a method or function name's canonical spelling is a table look-up; names
 * that are not built-ins keep their spelling (undefined here).
 */
const METHOD_NAMES: (string | undefined)[] = [undefined];
const FUNCTION_NAMES: (string | undefined)[] = [undefined];
for (let id = 1; id <= keywordCount(); id++) {
  METHOD_NAMES.push(lookupBuiltin(keywordText(id), "method")?.name);
  FUNCTION_NAMES.push(lookupBuiltin(keywordText(id), "function")?.name);
}
/** Whether every built-in name has a keyword id (so that id 0 means "not a built-in"). */
const ALL_BUILTINS_HAVE_IDS = BUILTINS.every((b) => keywordId(b.name.toLowerCase()) !== 0);

/** Variables of an `AggregateOver`'s bindings, for rebinding its value (see parseAggregateOver). */
let rebound: Set<string> = new Set();
function rebind(n: Node): void {
  if (n.type === "Field" && rebound.has(n.name)) (n as { type: string }).type = "Var";
}

/** Parse pql/text into a Query. Throws PqlError at the first syntax error. */
export function parse(text: string): Query {
  return new Parser(text).parseQuery();
}

/** Which body a chain clause `WHAT(…)`, `WHEN(…)`, `COUNT(…)`, `WHERE(…)` has. */
const CLAUSE_EXPR = 0;
const CLAUSE_TAIL = 1;
const CLAUSE_COUNT = 2;

class Parser {
  private readonly text: string;
  private readonly kind: Uint8Array;
  private readonly kw: Uint8Array;
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  private readonly num: Float64Array;
  private readonly str: string[];
  /** Index of the EOF token. */
  private readonly last: number;
  /** The current token. */
  private pos = 0;
  private depth = 0;
  /** Variables in scope, innermost last, and how many times each name is in scope. */
  private readonly scope: string[] = [];
  private inScope: Map<string, number> | undefined;
  /** The end offset of the last parseArgs() call's closing parenthesis. */
  private argsEnd = 0;

  constructor(text: string) {
    this.text = text;
    const count = scan(text);
    this.kind = TOKENS.kind;
    this.kw = TOKENS.kw;
    this.starts = TOKENS.start;
    this.ends = TOKENS.end;
    this.num = TOKENS.num;
    this.str = TOKENS.str;
    this.last = count - 1;
  }

  // ---------------------------------------------------------------- helpers

  /** The index of the token k ahead (the EOF token past the end). */
  private peek(k: number): number {
    const i = this.pos + k;
    return i < this.last ? i : this.last;
  }

  /** Consumes the current token (never the EOF token) and returns its index. */
  private next(): number {
    const t = this.pos;
    if (t < this.last) this.pos++;
    return t;
  }

  /** The source text of a token (for strings: including quotes; EOF: ""). */
  private textOf(t: number): string {
    return this.text.slice(this.starts[t], this.ends[t]);
  }

  /** The previous token's end: where an inserted token would go. */
  private prevEnd(): number {
    return this.pos > 0 ? this.ends[this.pos - 1]! : 0;
  }

  private fail(code: string, message: string, t: number): never {
    const start = this.starts[t]!;
    throw new PqlError(code, message, this.text, start, Math.max(this.ends[t]!, start + 1));
  }

  /** How a token is named in messages: `'and'`, `end of input`. */
  private describe(t: number): string {
    if (this.kind[t] === T_EOF) return "end of input";
    const text = this.textOf(t);
    const s = text.length > 30 ? `${text.slice(0, 27)}...` : text;
    return `'${s}'`;
  }

  private where(t: number): string {
    const p = positionAt(this.text, this.starts[t]!);
    return `${p.line}:${p.column}`;
  }

  private expectPunct(p: number, what: string): number {
    const t = this.pos;
    if (this.kind[t] !== p) this.fail("PQL_EXPECTED_TOKEN", `Expected '${SYMBOL[p]}' ${what} but found ${this.describe(t)}`, t);
    return this.next();
  }

  /** One more nesting level; refuses hostile depth before the JS stack does. */
  private enter(t: number): void {
    if (++this.depth > MAX_NESTING) {
      this.fail("PQL_TOO_DEEP", `Expression nesting exceeds the limit of ${MAX_NESTING} levels at ${this.where(t)}`, t);
    }
  }

  private failExpected(what: string, t: number): never {
    const pos = this.pos;
    if (isCloser(this.kind[t]!) && pos > 0 && this.kind[pos - 1] === P_COMMA) {
      this.fail("PQL_TRAILING_COMMA", `Expected ${what} after ',' but found ${this.describe(t)}; remove the trailing comma`, t);
    }
    let where = "";
    if (pos > 0) {
      const pk = this.kind[pos - 1]!;
      const afterOp =
        (isPunctKind(pk) && !isCloser(pk)) || (pk === T_IDENT && (FLAGS[this.kw[pos - 1]!]! & F_OPERAND_PREFIX) !== 0);
      if (afterOp) where = ` after '${this.textOf(pos - 1)}'`;
    }
    this.fail("PQL_EXPECTED_EXPRESSION", `Expected ${what}${where} but found ${this.describe(t)}`, t);
  }

  /** canonicalName() of an identifier token, from the tables above. */
  private canonical(table: (string | undefined)[], t: number, form: "method" | "function"): string {
    const id = this.kw[t]!;
    if (id === 0 && !ALL_BUILTINS_HAVE_IDS) return canonicalName(this.textOf(t), form);
    return table[id] ?? this.textOf(t);
  }

  private pushScope(name: string): void {
    this.scope.push(name);
    const inScope = (this.inScope ??= new Map());
    inScope.set(name, (inScope.get(name) ?? 0) + 1);
  }

  private popScope(mark: number): void {
    const scope = this.scope;
    if (scope.length <= mark) return;
    const inScope = this.inScope!;
    while (scope.length > mark) {
      const name = scope.pop()!;
      const n = inScope.get(name)! - 1;
      if (n === 0) inScope.delete(name);
      else inScope.set(name, n);
    }
  }

  private lookup(name: string, start: number, end: number): Field | Var {
    return this.scope.length !== 0 && this.inScope!.has(name)
      ? { type: "Var", name, start, end }
      : { type: "Field", name, start, end };
  }

  // ------------------------------------------------------------------ query

  parseQuery(): Query {
    const params = this.tryLambdaHead();
    if (params) for (const p of params) this.pushScope(p);
    const body = this.parseExpr();
    const t = this.pos;
    const k = this.kind[t]!;
    if (k !== T_EOF) {
      if (isCloser(k)) {
        this.fail("PQL_UNBALANCED", `Unmatched '${SYMBOL[k]}': there is no opening bracket for it`, t);
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
    const t = this.pos;
    const kind = this.kind;
    if (kind[t] === T_IDENT && kind[this.peek(1)] === T_ARROW) {
      this.pos += 2;
      return [this.textOf(t)];
    }
    if (kind[t] !== P_LPAREN) return undefined;
    let k = 1;
    while (true) {
      if (kind[this.peek(k)] !== T_IDENT) return undefined;
      const sep = kind[this.peek(k + 1)];
      if (sep === P_COMMA) {
        k += 2;
        continue;
      }
      if (sep === P_RPAREN && kind[this.peek(k + 2)] === T_ARROW) {
        const names: string[] = [];
        for (let j = 1; j <= k; j += 2) names.push(this.textOf(t + j));
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
    while (this.kw[this.pos] === KW_OR) {
      this.next();
      const right = this.parseAnd();
      left = { type: "Binary", op: "or", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  private parseAnd(): Expr {
    let left = this.parseNot();
    while (this.kw[this.pos] === KW_AND) {
      this.next();
      const right = this.parseNot();
      left = { type: "Binary", op: "and", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  private parseNot(): Expr {
    const t = this.pos;
    if (this.kw[t] === KW_NOT || this.kind[t] === P_BANG) {
      this.enter(t);
      this.next();
      const operand = this.parseNot();
      this.depth--;
      return { type: "Not", operand, start: this.starts[t], end: operand.end };
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
    const f = FLAGS[this.kw[this.pos]!]!;
    if ((f & F_BINDER) !== 0) return true;
    if ((f & F_AGGREGATE) === 0) return false;
    const n = this.peek(1);
    const k = this.kind[n]!;
    if (k === T_IDENT) return (FLAGS[this.kw[n]!]! & F_OPERATOR) === 0 && this.kw[n] !== KW_NOT;
    if (isPunctKind(k)) return k === P_LPAREN || k === P_LBRACKET || k === P_LBRACE || k === P_CARET;
    return k !== T_EOF;
  }

  // ---------------------------------------------------------------- binders

  private parseBinder(): Expr {
    const t = this.next();
    this.enter(t);
    const mark = this.scope.length;
    const w = this.kw[t]!;
    let result: Expr;
    if (w === KW_SELECT) {
      const bindings = this.parseBindings("select");
      result = { type: "Select", bindings, start: this.starts[t], end: bindings[bindings.length - 1]!.end };
    } else if (w === KW_EXISTS || w === KW_FORALL) {
      const quantifier = w === KW_EXISTS ? "exists" : "forall";
      const bindings = this.parseBindings(quantifier);
      result = {
        type: "Quantifier",
        quantifier,
        bindings,
        start: this.starts[t],
        end: bindings[bindings.length - 1]!.end,
      };
    } else if (w === KW_LET) {
      result = this.parseLet(t);
    } else {
      result = this.parseAggregateOver(t);
    }
    this.popScope(mark);
    this.depth--;
    return result;
  }

  /** `V from A [where|: C] (, V from A [where|: C])*`. Leaves the variables in scope. */
  private parseBindings(owner: string): Binding[] {
    const bindings: Binding[] = [];
    while (true) {
      const v = this.pos;
      if (this.kind[v] !== T_IDENT || (FLAGS[this.kw[v]!]! & F_OPERATOR) !== 0 || this.kw[v] === KW_FROM) {
        this.fail("PQL_EXPECTED_VARIABLE", `Expected a variable name after '${owner}' but found ${this.describe(v)}`, v);
      }
      this.next();
      const from = this.pos;
      const variable = this.textOf(v);
      if (this.kw[from] !== KW_FROM) {
        this.fail(
          "PQL_EXPECTED_FROM",
          `Expected 'from' after the variable '${variable}' in ${owner} but found ${this.describe(from)}`,
          from,
        );
      }
      this.next();
      const source = this.parseOr();
      // The variable is visible in its own condition and in every binding to its right.
      this.pushScope(variable);
      const sep = this.pos;
      let binding: Binding;
      if (this.kw[sep] === KW_WHERE || this.kind[sep] === P_COLON) {
        this.next();
        const condition = this.parseExpr();
        binding = { variable, source, start: this.starts[v], end: condition.end, condition };
      } else {
        binding = { variable, source, start: this.starts[v], end: source.end };
      }
      bindings.push(binding);
      if (this.kind[this.pos] !== P_COMMA) return bindings;
      this.next();
    }
  }

  private parseLet(t: number): Expr {
    const v = this.pos;
    if (this.kind[v] !== T_IDENT || (FLAGS[this.kw[v]!]! & F_OPERATOR) !== 0) {
      this.fail("PQL_EXPECTED_VARIABLE", `Expected a variable name after 'let' but found ${this.describe(v)}`, v);
    }
    this.next();
    const variable = this.textOf(v);
    if (this.kind[this.pos] !== P_EQ) this.expectPunct(P_EQ, `after 'let ${variable}'`);
    this.next();
    // pql.md §3.3 rule 4: the value is additive so that the next `in` separates it from the body.
    const value = this.parseAdd();
    const inTok = this.pos;
    if (this.kw[inTok] !== KW_IN) {
      this.fail("PQL_EXPECTED_IN", `Expected 'in' after the value of 'let ${variable}' but found ${this.describe(inTok)}`, inTok);
    }
    this.next();
    this.pushScope(variable);
    const body = this.parseExpr();
    return { type: "Let", variable, value, body, start: this.starts[t], end: body.end };
  }

  /** `sum V from A where C` or `sum VALUE over V from A where C, …` (legacy operator form). */
  private parseAggregateOver(t: number): Expr {
    const fn = keywordText(this.kw[t]!) as "sum" | "average" | "min" | "max";
    if (this.kind[this.pos] === T_IDENT && this.kw[this.peek(1)] === KW_FROM) {
      const bindings = this.parseBindings(fn);
      return { type: "AggregateOver", fn, bindings, start: this.starts[t], end: bindings[bindings.length - 1]!.end };
    }
    const value = this.parseOr();
    const over = this.pos;
    if (this.kw[over] !== KW_OVER) {
      this.fail("PQL_EXPECTED_OVER", `Expected 'over' after the value of '${fn}' but found ${this.describe(over)}`, over);
    }
    this.next();
    const bindings = this.parseBindings(fn);
    // The value is written left of the bindings it uses (`sum E.price over E from …`):
    // its free occurrences of the binding variables were parsed as fields; rebind them.
    const bound = new Set<string>();
    for (const b of bindings) bound.add(b.variable);
    rebound = bound;
    walk(value, rebind);
    rebound = new Set();
    return { type: "AggregateOver", fn, value, bindings, start: this.starts[t], end: bindings[bindings.length - 1]!.end };
  }

  // ------------------------------------------------------------- relations

  private parseRel(): Expr {
    const left = this.parseAdd();
    const t = this.pos;
    const k = this.kind[t]!;
    const w = this.kw[t]!;
    let result: Expr;
    if (isCmp(k)) {
      this.next();
      const right = this.parseAdd();
      result = { type: "Binary", op: SYMBOL[k] as CmpOp, left, right, start: left.start, end: right.end };
    } else if (w === KW_IN || w === KW_NOTIN || w === KW_LIKE || w === KW_MATCHES) {
      this.next();
      const right = this.parseAdd();
      const op = w === KW_NOTIN ? "notIn" : w === KW_IN ? "in" : w === KW_LIKE ? "like" : "matches";
      result = { type: "Binary", op, left, right, start: left.start, end: right.end };
    } else if (w === KW_OCCURS) {
      this.next();
      const tail = this.parseTail("occurs");
      result = { type: "Occurs", subject: left, tail, start: left.start, end: tail.end };
    } else {
      if (w === KW_NOT && this.kw[this.peek(1)] === KW_IN) {
        this.fail("PQL_UNEXPECTED_TOKEN", "'not in' is not PQL; use 'notIn'", t);
      }
      return left;
    }
    const again = this.pos;
    const ak = this.kw[again]!;
    if (isCmp(this.kind[again]!) || ak === KW_IN || ak === KW_NOTIN || ak === KW_LIKE || ak === KW_MATCHES || ak === KW_OCCURS) {
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
    const t = this.pos;
    const kind = this.kind;
    const kw = this.kw;
    const start = this.starts[t]!;
    const k = kind[t]!;
    if (isCmp(k)) {
      this.next();
      const amountTok = this.pos;
      if (kind[amountTok] !== T_INT || this.num[amountTok]! < 0) {
        if (unitOfKeyword(kw[amountTok]!)) {
          const op = SYMBOL[k]!;
          const word = this.textOf(amountTok);
          this.fail(
            "PQL_OCCURS_AMOUNT",
            `Expected a number between '${op}' and '${word}' (e.g. '${op} 3 ${word} before now')`,
            amountTok,
          );
        }
        this.fail(
          "PQL_OCCURS_AMOUNT",
          `Expected a whole number after '${SYMBOL[k]}' in ${owner} but found ${this.describe(amountTok)}`,
          amountTok,
        );
      }
      this.next();
      const unitTok = this.pos;
      const unit: TimeUnit | undefined = unitOfKeyword(kw[unitTok]!);
      if (!unit) {
        this.fail(
          "PQL_OCCURS_UNIT",
          `Expected a time unit (e.g. 'days', 'hours') after '${SYMBOL[k]} ${this.textOf(amountTok)}' but found ${this.describe(unitTok)}`,
          unitTok,
        );
      }
      this.next();
      const dirTok = this.pos;
      if ((FLAGS[kw[dirTok]!]! & F_DIRECTION) === 0) {
        this.fail(
          "PQL_OCCURS_DIRECTION",
          `Expected 'before', 'after' or 'from' after '${this.textOf(amountTok)} ${this.textOf(unitTok)}' but found ${this.describe(dirTok)}`,
          dirTok,
        );
      }
      this.next();
      const ref = this.parseTimeRef(dirTok, "");
      return {
        kind: "relative",
        op: SYMBOL[k] as CmpOp,
        amount: this.num[amountTok]!,
        unit,
        direction: keywordText(kw[dirTok]!) as Direction,
        ref,
        start,
        end: ref.end,
      };
    }
    const w = kw[t]!;
    if ((FLAGS[w]! & F_DIRECTION) !== 0) {
      this.next();
      const ref = this.parseTimeRef(t, "");
      return { kind: "direction", direction: keywordText(w) as Direction, ref, start, end: ref.end };
    }
    if (w === KW_BETWEEN) {
      this.next();
      const from = this.parseTimeRef(-1, "'between'");
      const andTok = this.pos;
      if (kw[andTok] !== KW_AND) {
        this.fail("PQL_EXPECTED_AND", `Expected 'and' after 'between …' but found ${this.describe(andTok)}`, andTok);
      }
      this.next();
      const to = this.parseTimeRef(-1, "'and'");
      return { kind: "between", from, to, start, end: to.end };
    }
    if (k === T_INT && unitOfKeyword(kw[this.peek(1)]!)) {
      const text = this.textOf(t);
      const unitText = this.textOf(this.peek(1));
      this.fail(
        "PQL_OCCURS_COMPARISON",
        `Missing comparison before '${text} ${unitText}' (e.g. '<= ${text} ${unitText} before now')`,
        t,
      );
    }
    if (unitOfKeyword(w) && (FLAGS[w]! & F_PERIOD) === 0) {
      const n = this.peek(1);
      if ((FLAGS[kw[n]!]! & F_DIRECTION) !== 0) {
        this.fail(
          "PQL_OCCURS_AMOUNT",
          `A time unit needs a comparison and a number: e.g. '< 3 ${this.textOf(t)} ${this.textOf(n)} now'`,
          t,
        );
      }
    }
    if (w === KW_ON) this.next();
    const ref = this.parseTimeRef(-1, w === KW_ON ? "'on'" : `'${owner}'`);
    return { kind: "on", ref, start, end: ref.end };
  }

  /**
   * A time reference: now/today/…, this/last/next U, or a postfix expression
   * such as date(…). `afterTok` (or, when negative, `after`) names what it follows.
   */
  private parseTimeRef(afterTok: number, after: string): TimeRef {
    const t = this.pos;
    const k = this.kind[t]!;
    const canStart =
      k === T_INT ||
      k === T_DOUBLE ||
      k === T_STRING ||
      k === T_PARAM ||
      (k === T_IDENT && (FLAGS[this.kw[t]!]! & (F_OPERATOR | F_DIRECTION)) === 0 && this.kw[t] !== KW_NOT) ||
      k === P_LPAREN ||
      k === P_LBRACKET ||
      k === P_LBRACE ||
      k === P_CARET;
    if (!canStart) {
      const what = afterTok >= 0 ? `'${this.textOf(afterTok)}'` : after;
      this.fail(
        "PQL_EXPECTED_TIME",
        `Expected a time reference (e.g. 'now', 'today', 'this month', 'date(2024, 1, 31)') after ${what} but found ${this.describe(t)}`,
        t,
      );
    }
    return this.parsePostfix();
  }

  // ------------------------------------------------------------ arithmetic

  private parseAdd(): Expr {
    let left = this.parseMul();
    while (true) {
      const k = this.kind[this.pos]!;
      if (k !== P_PLUS && k !== P_MINUS) return left;
      this.next();
      const right = this.parseMul();
      left = { type: "Binary", op: k === P_PLUS ? "+" : "-", left, right, start: left.start, end: right.end };
    }
  }

  private parseMul(): Expr {
    let left = this.parseUnary();
    while (true) {
      const k = this.kind[this.pos]!;
      if (k !== P_STAR && k !== P_SLASH && k !== P_PERCENT) return left;
      this.next();
      const right = this.parseUnary();
      left = { type: "Binary", op: k === P_STAR ? "*" : k === P_SLASH ? "/" : "%", left, right, start: left.start, end: right.end };
    }
  }

  private parseUnary(): Expr {
    const t = this.pos;
    if (this.kind[t] !== P_MINUS) return this.parsePostfix();
    const num = this.peek(1);
    const nk = this.kind[num]!;
    const after = this.kind[this.peek(2)]!;
    // pql.md OQ-5: `-` directly before a number literal folds into a negative literal,
    // unless a postfix step follows (`-5.count()` is -(5.count()), as precedence says).
    if ((nk === T_INT || nk === T_DOUBLE) && after !== P_DOT && after !== P_LBRACKET) {
      this.pos += 2;
      return {
        type: "Literal",
        kind: nk === T_INT ? "integer" : "double",
        value: -this.num[num]!,
        start: this.starts[t],
        end: this.ends[num],
      };
    }
    this.enter(t);
    this.next();
    const operand = this.parseUnary();
    this.depth--;
    return { type: "Negate", operand, start: this.starts[t], end: operand.end };
  }

  // --------------------------------------------------------------- postfix

  private parsePostfix(): Expr {
    let expr = this.parsePrimary();
    const outer = this.depth;
    while (true) {
      const t = this.pos;
      const k = this.kind[t];
      if (k === P_DOT) {
        this.enter(t);
        this.next();
        const name = this.pos;
        if (this.kind[name] !== T_IDENT) {
          this.fail("PQL_EXPECTED_NAME", `Expected a field or method name after '.' but found ${this.describe(name)}`, name);
        }
        this.next();
        if (this.kind[this.pos] === P_LPAREN) {
          const method = this.canonical(METHOD_NAMES, name, "method");
          const args = this.parseArgs(method);
          expr = { type: "Method", receiver: expr, name: method, args, start: expr.start, end: this.argsEnd };
        } else {
          expr = { type: "Member", object: expr, name: this.textOf(name), start: expr.start, end: this.ends[name] };
        }
      } else if (k === P_LBRACKET) {
        this.enter(t);
        this.next();
        if (this.kind[this.pos] === P_RBRACKET) {
          this.fail("PQL_EXPECTED_EXPRESSION", `Expected a filter condition after '[' but found ']'`, this.pos);
        }
        const condition = this.parseExpr();
        const close = this.pos;
        if (this.kind[close] !== P_RBRACKET) {
          this.fail(
            "PQL_EXPECTED_TOKEN",
            `Expected ']' to close the filter opened at ${this.where(t)} but found ${this.describe(close)}`,
            close,
          );
        }
        this.next();
        expr = { type: "Filter", object: expr, condition, start: expr.start, end: this.ends[close] };
      } else {
        this.depth = outer;
        return expr;
      }
    }
  }

  /** `( arg, … )` where each argument may be a lambda; sets `argsEnd` to the `)`'s end. */
  private parseArgs(fn: string): Expr[] {
    const open = this.next();
    this.enter(open);
    const args: Expr[] = [];
    if (this.kind[this.pos] !== P_RPAREN) {
      while (true) {
        args.push(this.parseArg());
        const t = this.pos;
        const k = this.kind[t];
        if (k === P_COMMA) {
          this.next();
          if (this.kind[this.pos] === P_RPAREN) {
            this.fail("PQL_TRAILING_COMMA", `Trailing ',' in the arguments of '${fn}'`, t);
          }
          continue;
        }
        if (k === P_RPAREN) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or ')' in the arguments of '${fn}' (opened at ${this.where(open)}) but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.depth--;
    this.argsEnd = this.ends[close]!;
    return args;
  }

  private parseArg(): Expr {
    const start = this.pos;
    const params = this.tryLambdaHead();
    if (!params) return this.parseExpr();
    this.enter(start);
    const body0 = this.pos;
    const bk = this.kind[body0];
    if (bk === T_EOF || bk === P_RPAREN || bk === P_COMMA) {
      this.fail("PQL_EXPECTED_EXPRESSION", `Expected the body of the lambda after '=>' but found ${this.describe(body0)}`, body0);
    }
    const mark = this.scope.length;
    for (const p of params) this.pushScope(p);
    const body = this.parseExpr();
    this.popScope(mark);
    this.depth--;
    const lambda: Lambda = { type: "Lambda", params, body, start: this.starts[start], end: body.end };
    return lambda;
  }

  // --------------------------------------------------------------- primary

  private parsePrimary(): Expr {
    const t = this.pos;
    switch (this.kind[t]) {
      case T_INT:
        this.next();
        return { type: "Literal", kind: "integer", value: this.num[t]!, start: this.starts[t], end: this.ends[t] };
      case T_DOUBLE:
        this.next();
        return { type: "Literal", kind: "double", value: this.num[t]!, start: this.starts[t], end: this.ends[t] };
      case T_STRING:
        this.next();
        return { type: "Literal", kind: "string", value: this.str[this.num[t]!]!, start: this.starts[t], end: this.ends[t] };
      case T_PARAM:
        this.next();
        return { type: "Param", index: this.num[t]!, start: this.starts[t], end: this.ends[t] };
      case T_EOF:
        return this.failExpected("an expression", t);
      case T_IDENT:
        return this.parseIdentPrimary(t);
      default:
        return this.parsePunctPrimary(t);
    }
  }

  private parsePunctPrimary(t: number): Expr {
    switch (this.kind[t]) {
      case P_LPAREN: {
        if (this.tryLambdaHead()) {
          this.fail("PQL_MISPLACED_LAMBDA", "A lambda is only allowed as a function or method argument", t);
        }
        this.enter(t);
        this.next();
        if (this.kind[this.pos] === P_RPAREN) {
          this.fail("PQL_EXPECTED_EXPRESSION", "Expected an expression inside '()' but found ')'", this.pos);
        }
        const inner = this.parseExpr();
        const close = this.pos;
        if (this.kind[close] !== P_RPAREN) {
          this.fail(
            "PQL_EXPECTED_TOKEN",
            `Expected ')' to close the '(' at ${this.where(t)} but found ${this.describe(close)}`,
            close,
          );
        }
        this.next();
        this.depth--;
        return inner;
      }
      case P_LBRACKET:
        return this.parseList(t);
      case P_LBRACE:
        return this.parseObject(t);
      case P_CARET: {
        let levels = 0;
        while (this.kind[this.pos] === P_CARET) {
          this.next();
          levels++;
        }
        if (this.kind[this.pos] === P_DOT) this.next();
        const name = this.pos;
        if (this.kind[name] !== T_IDENT) {
          this.fail("PQL_EXPECTED_NAME", `Expected a field name after '${"^".repeat(levels)}' but found ${this.describe(name)}`, name);
        }
        this.next();
        return { type: "Up", levels, name: this.textOf(name), start: this.starts[t], end: this.ends[name] };
      }
      default:
        return this.failExpected("an expression", t);
    }
  }

  private parseList(open: number): Expr {
    this.enter(open);
    this.next();
    const elements: Expr[] = [];
    if (this.kind[this.pos] !== P_RBRACKET) {
      while (true) {
        elements.push(this.parseExpr());
        const t = this.pos;
        const k = this.kind[t];
        if (k === P_COMMA) {
          this.next();
          if (this.kind[this.pos] === P_RBRACKET) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in list literal", t);
          continue;
        }
        if (k === P_RBRACKET) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or ']' in the list opened at ${this.where(open)} but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.depth--;
    return { type: "List", elements, start: this.starts[open], end: this.ends[close] };
  }

  private parseObject(open: number): Expr {
    this.enter(open);
    this.next();
    const entries: { key: string; value: Expr }[] = [];
    if (this.kind[this.pos] !== P_RBRACE) {
      while (true) {
        const key = this.pos;
        if (this.kind[key] !== T_STRING) {
          this.fail(
            "PQL_OBJECT_KEY",
            `Object keys must be string literals (e.g. {"count": …}) but found ${this.describe(key)}`,
            key,
          );
        }
        this.next();
        if (this.kind[this.pos] !== P_COLON) this.expectPunct(P_COLON, `after the object key ${this.textOf(key)}`);
        this.next();
        entries.push({ key: this.str[this.num[key]!]!, value: this.parseExpr() });
        const t = this.pos;
        const k = this.kind[t];
        if (k === P_COMMA) {
          this.next();
          if (this.kind[this.pos] === P_RBRACE) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in object literal", t);
          continue;
        }
        if (k === P_RBRACE) break;
        this.fail(
          "PQL_EXPECTED_TOKEN",
          `Expected ',' or '}' in the object opened at ${this.where(open)} but found ${this.describe(t)}`,
          t,
        );
      }
    }
    const close = this.next();
    this.depth--;
    return { type: "Object", entries, start: this.starts[open], end: this.ends[close] };
  }

  private parseIdentPrimary(t: number): Expr {
    const w = this.kw[t]!;
    const nextTok = this.peek(1);
    if (w !== 0) {
      const f = FLAGS[w]!;
      if (w === KW_TRUE || w === KW_FALSE) {
        this.next();
        return { type: "Literal", kind: "boolean", value: w === KW_TRUE, start: this.starts[t], end: this.ends[t] };
      }
      if (w === KW_NULL) {
        this.fail("PQL_NULL_LITERAL", "'null' is not a PQL literal; use .isNull() or .isNotNull()", t);
      }
      if ((f & F_OPERATOR) !== 0) this.failExpected("an expression", t);
      if ((f & F_BINDER) !== 0 || w === KW_NOT) {
        const text = this.textOf(t);
        this.fail("PQL_NEEDS_PARENTHESES", `'${text}' cannot appear here without parentheses: write (${text} …)`, t);
      }
      if ((f & F_TIME) !== 0) {
        this.next();
        return {
          type: "TimeWord",
          word: keywordText(w) as "now" | "today" | "yesterday" | "tomorrow",
          start: this.starts[t],
          end: this.ends[t],
        };
      }
      if ((f & F_PERIOD) !== 0) {
        const unit = unitOfKeyword(this.kw[nextTok]!);
        if (unit) {
          this.pos += 2;
          return {
            type: "RelPeriod",
            which: keywordText(w) as "this" | "last" | "next",
            unit,
            start: this.starts[t],
            end: this.ends[nextTok],
          };
        }
        if (this.kind[nextTok] === T_INT && unitOfKeyword(this.kw[this.peek(2)]!)) {
          const text = this.textOf(t);
          this.fail(
            "PQL_BAD_PERIOD",
            `'${text}' takes a time unit without a number (e.g. '${text} week'); for a span write e.g. '<= ${this.textOf(nextTok)} ${this.textOf(this.peek(2))} before now'`,
            nextTok,
          );
        }
      }
      if (w === KW_XEVENT) {
        this.next();
        return { type: "XEvent", start: this.starts[t], end: this.ends[t] };
      }
    }
    if (this.kind[nextTok] === P_LPAREN) {
      this.next();
      if (w === KW_CHAIN) return this.parseChain(t);
      const name = this.canonical(FUNCTION_NAMES, t, "function");
      const args = this.parseArgs(name);
      return { type: "Call", name, args, start: this.starts[t], end: this.argsEnd };
    }
    this.next();
    return this.lookup(this.textOf(t), this.starts[t]!, this.ends[t]!);
  }

  // ----------------------------------------------------------------- chain

  /** `chain(source, tsField, [L: WHAT(…) WHEN(…) COUNT(n) WHERE(…), …])` (pql.md §7.14). */
  private parseChain(kw: number): Chain {
    const open = this.next();
    this.enter(open);
    const source = this.parseExpr();
    this.expectPunct(P_COMMA, "after the chain's event source");
    const ts = this.pos;
    if (this.kind[ts] !== T_IDENT) {
      this.fail("PQL_EXPECTED_NAME", `Expected the timestamp field name as the chain's second argument but found ${this.describe(ts)}`, ts);
    }
    this.next();
    this.expectPunct(P_COMMA, "after the chain's timestamp field");
    const list = this.expectPunct(P_LBRACKET, "to start the chain's step list");
    if (this.kind[this.pos] === P_RBRACKET) {
      this.fail("PQL_EMPTY_CHAIN", "A chain needs at least one step (e.g. [A: WHAT(true)])", this.pos);
    }
    const steps: ChainStep[] = [];
    while (true) {
      steps.push(this.parseStep());
      const t = this.pos;
      const k = this.kind[t];
      if (k === P_COMMA) {
        this.next();
        if (this.kind[this.pos] === P_RBRACKET) this.fail("PQL_TRAILING_COMMA", "Trailing ',' in the chain's step list", t);
        continue;
      }
      if (k === P_RBRACKET) break;
      this.fail(
        "PQL_EXPECTED_TOKEN",
        `Expected ',' or ']' in the chain's step list opened at ${this.where(list)} but found ${this.describe(t)}`,
        t,
      );
    }
    this.next();
    const close = this.expectPunct(P_RPAREN, "to close the chain");
    this.depth--;
    return {
      type: "Chain",
      source,
      timestampField: this.textOf(ts),
      steps,
      start: this.starts[kw],
      end: this.ends[close],
    };
  }

  private parseStep(): ChainStep {
    const label = this.pos;
    if (this.kind[label] !== T_IDENT) {
      this.fail("PQL_EXPECTED_NAME", `Expected a step label (e.g. 'A:') but found ${this.describe(label)}`, label);
    }
    this.next();
    const labelText = this.textOf(label);
    if (this.kind[this.pos] !== P_COLON) this.expectPunct(P_COLON, `after the step label '${labelText}'`);
    this.next();
    const what = this.pos;
    if (this.kw[what] !== KW_WHAT) {
      this.fail("PQL_EXPECTED_WHAT", `Expected 'WHAT(' after the step label '${labelText}' but found ${this.describe(what)}`, what);
    }
    this.next();
    const step: ChainStep = { label: labelText, what: this.parseClauseBody(what, CLAUSE_EXPR) as Expr, start: this.starts[label] };
    let end = this.prevEnd();
    while (true) {
      const c = this.pos;
      if (this.kind[c] !== T_IDENT || this.kind[this.peek(1)] !== P_LPAREN) break;
      const w = this.kw[c];
      if (w === KW_WHEN) {
        if (step.when) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${labelText}' has more than one WHEN clause`, c);
        this.next();
        step.when = this.parseClauseBody(c, CLAUSE_TAIL) as OccursTail;
      } else if (w === KW_COUNT) {
        if (step.count !== undefined) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${labelText}' has more than one COUNT clause`, c);
        this.next();
        step.count = this.parseClauseBody(c, CLAUSE_COUNT) as number;
      } else if (w === KW_WHERE) {
        if (step.where) this.fail("PQL_DUPLICATE_CLAUSE", `Step '${labelText}' has more than one WHERE clause`, c);
        this.next();
        step.where = this.parseClauseBody(c, CLAUSE_EXPR) as Expr;
      } else if (w === KW_WHAT) {
        this.fail("PQL_DUPLICATE_CLAUSE", `Step '${labelText}' has more than one WHAT clause`, c);
      } else {
        break;
      }
      end = this.prevEnd();
    }
    step.end = end;
    return step;
  }

  /** `(` body `)` of a chain clause: an expression, an occurs tail or a COUNT number. */
  private parseClauseBody(clause: number, body: number): Expr | OccursTail | number {
    if (this.kind[this.pos] !== P_LPAREN) this.expectPunct(P_LPAREN, `after ${this.textOf(clause).toUpperCase()}`);
    const open = this.next();
    this.enter(open);
    if (this.kind[this.pos] === P_RPAREN) {
      this.fail("PQL_EXPECTED_EXPRESSION", `Expected the content of ${this.textOf(clause).toUpperCase()}(…) but found ')'`, this.pos);
    }
    let result: Expr | OccursTail | number;
    if (body === CLAUSE_EXPR) {
      result = this.parseExpr();
    } else if (body === CLAUSE_TAIL) {
      result = this.parseTail("WHEN");
    } else {
      const n = this.pos;
      if (this.kind[n] !== T_INT || this.num[n]! < 1) {
        this.fail("PQL_BAD_COUNT", `COUNT needs a positive whole number but found ${this.describe(n)}`, n);
      }
      this.next();
      result = this.num[n]!;
    }
    if (this.kind[this.pos] !== P_RPAREN) this.expectPunct(P_RPAREN, `to close ${this.textOf(clause).toUpperCase()}(`);
    this.next();
    this.depth--;
    return result;
  }
}
