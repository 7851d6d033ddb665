/**
 * Parser state and token helpers shared by every parsing layer (parser.ts
 * describes the parser). The layers extend one another over this one state,
 * acorn-style: core ← events (occurs tails, time refs, chains) ← primary
 * (literals, calls, names) ← parser.ts (operators, binders). A layer calls the
 * later ones through abstract declarations, so no file imports a later one.
 */

import type { Field, Var } from "./ast.js";
import { BUILTINS, canonicalName, lookupBuiltin } from "./catalog.js";
import { PqlError, positionAt } from "./errors.js";
import * as lexer from "./lexer.js";

// Local copies of the shared constants and helpers: V8 folds a module's own consts into the code
// it optimizes, but reads an imported binding through its module cell at every use (#42: the
// split parser was slower than the one-file parser by this alone).
const {
  T_ARROW, T_EOF, T_GE, T_IDENT, T_LE, T_NE, T_PARAM, TOKENS, keywordCount, keywordId, keywordText, scan,
} = lexer;


/** The most nesting levels (brackets, prefix operators, postfix steps, binders) a query may have. */
export const MAX_NESTING = 200;

// Punctuation token kinds are character codes (see lexer.ts).
export const P_LPAREN = 40; // (
export const P_RPAREN = 41; // )
export const P_LBRACKET = 91; // [
export const P_RBRACKET = 93; // ]
export const P_LBRACE = 123; // {
export const P_RBRACE = 125; // }
export const P_COMMA = 44; // ,
export const P_COLON = 58; // :
export const P_DOT = 46; // .
export const P_EQ = 61; // =
export const P_LT = 60; // <
export const P_GT = 62; // >
export const P_PLUS = 43; // +
export const P_MINUS = 45; // -
export const P_STAR = 42; // *
export const P_SLASH = 47; // /
export const P_PERCENT = 37; // %
export const P_BANG = 33; // !
export const P_CARET = 94; // ^

/** The symbol of each punctuation kind. */
export const SYMBOL: string[] = [];
for (const p of "()[]{},:.=<>+-*/%!^") SYMBOL[p.charCodeAt(0)] = p;
SYMBOL[T_LE] = "<=";
SYMBOL[T_NE] = "!=";
SYMBOL[T_GE] = ">=";
SYMBOL[T_ARROW] = "=>";

export function isPunctKind(k: number): boolean {
  return k > T_PARAM;
}

export function isCloser(k: number): boolean {
  return k === P_RPAREN || k === P_RBRACKET || k === P_RBRACE;
}

export function isCmp(k: number): boolean {
  return k === P_EQ || k === T_NE || k === P_LT || k === T_LE || k === P_GT || k === T_GE;
}

// Keyword ids (case-insensitive spellings, see lexer.ts).
export const KW_AND = keywordId("and");
export const KW_OR = keywordId("or");
export const KW_NOT = keywordId("not");
export const KW_IN = keywordId("in");
export const KW_NOTIN = keywordId("notin");
export const KW_LIKE = keywordId("like");
export const KW_MATCHES = keywordId("matches");
export const KW_OCCURS = keywordId("occurs");
export const KW_BETWEEN = keywordId("between");
export const KW_WHERE = keywordId("where");
export const KW_ON = keywordId("on");
export const KW_FROM = keywordId("from");
export const KW_OVER = keywordId("over");
export const KW_SELECT = keywordId("select");
export const KW_EXISTS = keywordId("exists");
export const KW_FORALL = keywordId("forall");
export const KW_LET = keywordId("let");
export const KW_TRUE = keywordId("true");
export const KW_FALSE = keywordId("false");
export const KW_NULL = keywordId("null");
export const KW_XEVENT = keywordId("xevent");
export const KW_CHAIN = keywordId("chain");
export const KW_WHAT = keywordId("what");
export const KW_WHEN = keywordId("when");
export const KW_COUNT = keywordId("count");

// Keyword classes, as bit flags by keyword id.
/** Keywords that are binary operators: they can never start an expression. */
export const F_OPERATOR = 1;
export const F_BINDER = 2;
export const F_AGGREGATE = 4;
export const F_TIME = 8;
export const F_PERIOD = 16;
export const F_DIRECTION = 32;
/** Keywords after which an operand must follow (named in "Expected an expression after …"). */
export const F_OPERAND_PREFIX = 64;

export const FLAGS = new Uint8Array(256);
export function flag(words: string[], f: number): void {
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
export const METHOD_NAMES: (string | undefined)[] = [undefined];
export const FUNCTION_NAMES: (string | undefined)[] = [undefined];
for (let id = 1; id <= keywordCount(); id++) {
  METHOD_NAMES.push(lookupBuiltin(keywordText(id), "method")?.name);
  FUNCTION_NAMES.push(lookupBuiltin(keywordText(id), "function")?.name);
}
/** Whether every built-in name has a keyword id (so that id 0 means "not a built-in"). */
export const ALL_BUILTINS_HAVE_IDS = BUILTINS.every((b) => keywordId(b.name.toLowerCase()) !== 0);

/** Which body a chain clause `WHAT(…)`, `WHEN(…)`, `COUNT(…)`, `WHERE(…)` has. */
export const CLAUSE_EXPR = 0;
export const CLAUSE_TAIL = 1;
export const CLAUSE_COUNT = 2;

/** Above this many names in scope, look-ups use a count map (see ParserCore.inScope). */
const SCOPE_SCAN = 16;

function countNames(names: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const name of names) counts.set(name, (counts.get(name) ?? 0) + 1);
  return counts;
}

export abstract class ParserCore {
  // The state of the current parse: parse() keeps one parser and resets it (begin()) for each
  // query, so that a parse allocates its AST and little else.
  protected text = "";
  protected kind: Uint8Array = TOKENS.kind;
  protected kw: Uint8Array = TOKENS.kw;
  protected starts: Int32Array = TOKENS.start;
  protected ends: Int32Array = TOKENS.end;
  protected num: Float64Array = TOKENS.num;
  protected str: string[] = TOKENS.str;
  /** Index of the EOF token. */
  protected last = 0;
  /** The current token. */
  protected pos = 0;
  protected depth = 0;
  /** Variables in scope, innermost last. */
  protected readonly scope: string[] = [];
  /**
   * How many times each name is in scope, kept only while the scope holds more than SCOPE_SCAN
   * names (a hostile query's thousand bindings): a short scope is searched directly, which costs
   * less than keeping a Map (#42: set/delete on one long-lived Map made popScope ~18 % of a parse).
   */
  protected inScope: Map<string, number> | undefined = undefined;
  /** The end offset of the last parseArgs() call's closing parenthesis. */
  protected argsEnd = 0;

  /** Lexes `text` and makes it the parser's input (the lexer's buffers may have been replaced). */
  protected begin(text: string): void {
    const count = scan(text);
    this.text = text;
    this.kind = TOKENS.kind;
    this.kw = TOKENS.kw;
    this.starts = TOKENS.start;
    this.ends = TOKENS.end;
    this.num = TOKENS.num;
    this.str = TOKENS.str;
    this.last = count - 1;
    this.pos = 0;
    this.depth = 0;
    this.argsEnd = 0;
    if (this.scope.length !== 0) {
      // A parse that threw left its variables behind.
      this.scope.length = 0;
      this.inScope = undefined;
    }
  }

  /** Drops the reference to the last query's text (a large query is not kept alive). */
  end(): void {
    this.text = "";
  }

  // ---------------------------------------------------------------- helpers

  /** The index of the token k ahead (the EOF token past the end). */
  protected peek(k: number): number {
    const i = this.pos + k;
    return i < this.last ? i : this.last;
  }

  /** Consumes the current token (never the EOF token) and returns its index. */
  protected next(): number {
    const t = this.pos;
    if (t < this.last) this.pos++;
    return t;
  }

  /** The source text of a token (for strings: including quotes; EOF: ""). */
  protected textOf(t: number): string {
    return this.text.slice(this.starts[t], this.ends[t]);
  }

  /** The previous token's end: where an inserted token would go. */
  protected prevEnd(): number {
    return this.pos > 0 ? this.ends[this.pos - 1]! : 0;
  }

  protected fail(code: string, message: string, t: number): never {
    const start = this.starts[t]!;
    throw new PqlError(code, message, this.text, start, Math.max(this.ends[t]!, start + 1));
  }

  /** How a token is named in messages: `'and'`, `end of input`. */
  protected describe(t: number): string {
    if (this.kind[t] === T_EOF) return "end of input";
    const text = this.textOf(t);
    const s = text.length > 30 ? `${text.slice(0, 27)}...` : text;
    return `'${s}'`;
  }

  protected where(t: number): string {
    const p = positionAt(this.text, this.starts[t]!);
    return `${p.line}:${p.column}`;
  }

  protected expectPunct(p: number, what: string): number {
    const t = this.pos;
    if (this.kind[t] !== p) this.fail("PQL_EXPECTED_TOKEN", `Expected '${SYMBOL[p]}' ${what} but found ${this.describe(t)}`, t);
    return this.next();
  }

  /** One more nesting level; refuses hostile depth before the JS stack does. */
  protected enter(t: number): void {
    if (++this.depth > MAX_NESTING) {
      this.fail("PQL_TOO_DEEP", `Expression nesting exceeds the limit of ${MAX_NESTING} levels at ${this.where(t)}`, t);
    }
  }

  protected failExpected(what: string, t: number): never {
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
  protected canonical(table: (string | undefined)[], t: number, form: "method" | "function"): string {
    const id = this.kw[t]!;
    if (id === 0 && !ALL_BUILTINS_HAVE_IDS) return canonicalName(this.textOf(t), form);
    return table[id] ?? this.textOf(t);
  }

  protected pushScope(name: string): void {
    const scope = this.scope;
    scope.push(name);
    const inScope = this.inScope;
    if (inScope !== undefined) inScope.set(name, (inScope.get(name) ?? 0) + 1);
    else if (scope.length > SCOPE_SCAN) this.inScope = countNames(scope);
  }

  protected popScope(mark: number): void {
    const scope = this.scope;
    const inScope = this.inScope;
    if (inScope === undefined) {
      while (scope.length > mark) scope.pop();
      return;
    }
    while (scope.length > mark) {
      const name = scope.pop()!;
      const n = inScope.get(name)! - 1;
      if (n === 0) inScope.delete(name);
      else inScope.set(name, n);
    }
    if (scope.length <= SCOPE_SCAN) this.inScope = undefined;
  }

  protected lookup(name: string, start: number, end: number): Field | Var {
    const scope = this.scope;
    let bound = false;
    if (scope.length !== 0) {
      const inScope = this.inScope;
      if (inScope !== undefined) {
        bound = inScope.has(name);
      } else {
        for (let i = scope.length - 1; i >= 0; i--) {
          if (scope[i] === name) {
            bound = true;
            break;
          }
        }
      }
    }
    return bound ? { type: "Var", name, start, end } : { type: "Field", name, start, end };
  }
}
