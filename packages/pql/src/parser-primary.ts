/**
 * Primary expressions: literals, lists, objects, parameters, parenthesised
 * expressions, names, calls and their arguments. See parser.ts for the grammar.
 */

import type { Expr, Lambda } from "./ast.js";
import * as lexer from "./lexer.js";
import * as core from "./parser-core.js";
import { EventParser } from "./parser-events.js";

// Local copies of the shared constants and helpers: V8 folds a module's own consts into the code
// it optimizes, but reads an imported binding through its module cell at every use (#42: the
// split parser was slower than the one-file parser by this alone).
const { T_DOUBLE, T_EOF, T_IDENT, T_INT, T_PARAM, T_STRING, keywordText, unitOfKeyword } = lexer;
const {
  P_LPAREN, P_RPAREN, P_LBRACKET, P_RBRACKET, P_LBRACE, P_RBRACE, P_COMMA, P_COLON, P_DOT, P_CARET, KW_NOT,
  KW_TRUE, KW_FALSE, KW_NULL, KW_XEVENT, KW_CHAIN, F_OPERATOR, F_BINDER, F_TIME, F_PERIOD, FLAGS,
  FUNCTION_NAMES,
} = core;

export abstract class PrimaryParser extends EventParser {
  protected abstract tryLambdaHead(): string[] | undefined;

  /** `( arg, … )` where each argument may be a lambda; sets `argsEnd` to the `)`'s end. */
  protected parseArgs(fn: string): Expr[] {
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

  protected parseArg(): Expr {
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

  protected parsePrimary(): Expr {
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

  protected parsePunctPrimary(t: number): Expr {
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

  protected parseList(open: number): Expr {
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

  protected parseObject(open: number): Expr {
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

  protected parseIdentPrimary(t: number): Expr {
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
}
