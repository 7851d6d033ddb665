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
 * canonical built-in names are found by keyword id; a scope look-up
 * searches the few names in scope (a count map only past 16). One parser
 * object is reset for every query (no per-parse parser or scope array), and
 * each layer keeps local copies of the constants it tests (an imported
 * binding is read through its module cell at every use). The AST,
 * positions and errors are exactly those of the object-token parser this
 * replaced and of the one-file parser before the split
 * (test/parse-snapshots.test.ts pins them).
 *
 * Split by concern over one parser state, each layer extending the last:
 * parser-core.ts (tokens, scope, errors) ← parser-events.ts (occurs tails,
 * time references, chains) ← parser-primary.ts (literals, names, calls) ←
 * this file (binders, operators, postfix, the query).
 */

import type { Binding, CmpOp, Expr, Node, Query } from "./ast.js";
import { walk } from "./ast.js";
import { PqlError, positionAt } from "./errors.js";
import * as lexer from "./lexer.js";
import * as core from "./parser-core.js";
import { PrimaryParser } from "./parser-primary.js";

// Local copies of the shared constants and helpers: V8 folds a module's own consts into the code
// it optimizes, but reads an imported binding through its module cell at every use (#42: the
// split parser was slower than the one-file parser by this alone).
const { T_ARROW, T_DOUBLE, T_EOF, T_IDENT, T_INT, keywordText } = lexer;
const {
  P_LPAREN, P_RPAREN, P_LBRACKET, P_RBRACKET, P_LBRACE, P_COMMA, P_COLON, P_DOT, P_EQ, P_PLUS, P_MINUS,
  P_STAR, P_SLASH, P_PERCENT, P_BANG, P_CARET, SYMBOL, isPunctKind, isCloser, isCmp, KW_AND, KW_OR, KW_NOT,
  KW_IN, KW_NOTIN, KW_LIKE, KW_MATCHES, KW_OCCURS, KW_WHERE, KW_FROM, KW_OVER, KW_SELECT, KW_EXISTS,
  KW_FORALL, KW_LET, F_OPERATOR, F_BINDER, F_AGGREGATE, FLAGS, METHOD_NAMES,
} = core;

export { MAX_NESTING } from "./parser-core.js";

/** Variables of an `AggregateOver`'s bindings, for rebinding its value (see parseAggregateOver). */
const NO_NAMES: ReadonlySet<string> = new Set();
let rebound: ReadonlySet<string> = NO_NAMES;
function rebind(n: Node): void {
  if (n.type === "Field" && rebound.has(n.name)) (n as { type: string }).type = "Var";
}

/** The one parser parse() resets for each query (parsing never re-enters parse()). */
let parser: Parser | undefined;

/** Parse pql/text into a Query. Throws PqlError at the first syntax error. */
export function parse(text: string): Query {
  const p = (parser ??= new Parser());
  try {
    return p.parseQuery(text);
  } finally {
    p.end();
  }
}

class Parser extends PrimaryParser {
  /**
   * Inside the value of `sum VALUE over V from …` the aggregate's variables are not known yet
   * (they are declared to the right), so a nested binder's forward-use check waits until the
   * outermost such aggregate has rebound them (an outer variable is not a forward use).
   */
  private deferDepth = 0;
  private deferred: Binding[][] = [];

  override end(): void {
    this.deferDepth = 0;
    if (this.deferred.length !== 0) this.deferred = [];
    super.end();
  }

  // ------------------------------------------------------------------ query

  parseQuery(text: string): Query {
    this.begin(text);
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
  protected tryLambdaHead(): string[] | undefined {
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

  /** An expression: the `or` level, the loosest. */
  protected parseExpr(): Expr {
    let left = this.parseAnd();
    while (this.kw[this.pos] === KW_OR) {
      this.next();
      const right = this.parseAnd();
      left = { type: "Binary", op: "or", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  protected parseAnd(): Expr {
    let left = this.parseNot();
    while (this.kw[this.pos] === KW_AND) {
      this.next();
      const right = this.parseNot();
      left = { type: "Binary", op: "and", left, right, start: left.start, end: right.end };
    }
    return left;
  }

  protected parseNot(): Expr {
    const t = this.pos;
    if (this.kw[t] === KW_NOT || this.kind[t] === P_BANG) {
      this.enter(t);
      this.next();
      const operand = this.parseNot();
      this.depth--;
      return { type: "Not", operand, start: this.starts[t], end: operand.end };
    }
    // Most operands start with no keyword of a binder's class: one table look-up settles it.
    if ((FLAGS[this.kw[t]!]! & (F_BINDER | F_AGGREGATE)) !== 0 && this.isBinderStart()) return this.parseBinder();
    return this.parseRel();
  }

  /**
   * select/exists/forall/let always start a binder here. sum/average/min/max
   * do only when an operand follows (`sum X from`, `sum E.v over`), so that
   * `max > 3` still compares a field named `max` (pql.md §3.3 rule 8).
   */
  protected isBinderStart(): boolean {
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

  protected parseBinder(): Expr {
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
  protected parseBindings(owner: string): Binding[] {
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
      const source = this.parseExpr();
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
      if (this.kind[this.pos] !== P_COMMA) {
        if (bindings.length > 1) {
          if (this.deferDepth > 0) this.deferred.push(bindings);
          else this.refuseForwardUse(bindings);
        }
        return bindings;
      }
      this.next();
    }
  }

  /**
   * A binding sees its own variable and those of the bindings to its left, never those to its
   * right (pql.md §5): a bare name declared further right was parsed as a field of the context,
   * and PQL refuses it rather than reading a field of that name.
   */
  private refuseForwardUse(bindings: Binding[]): void {
    // The index of each variable's last declaration: a field of that name in binding i < it is a forward use.
    const lastIndex = new Map<string, number>();
    bindings.forEach((b, j) => lastIndex.set(b.variable, j));
    for (let i = 0; i < bindings.length - 1; i++) {
      let first: { name: string; start: number; end: number } | undefined;
      const visit = (n: Node): void => {
        if (n.type === "Field" && (lastIndex.get(n.name) ?? -1) > i && (first === undefined || n.start! < first.start)) {
          first = { name: n.name, start: n.start!, end: n.end! };
        }
      };
      walk(bindings[i]!.source, visit);
      const condition = bindings[i]!.condition;
      if (condition) walk(condition, visit);
      if (first === undefined) continue;
      const { name, start, end } = first;
      const decl = bindings.find((b, j) => j > i && b.variable === name)!;
      const at = positionAt(this.text, decl.start!);
      throw new PqlError(
        "PQL_VARIABLE_BEFORE_DECLARATION",
        `The variable '${name}' is used before its declaration at ${at.line}:${at.column}: a binding can use only its own variable and those of the bindings to its left`,
        this.text,
        start,
        end,
      );
    }
  }

  protected parseLet(t: number): Expr {
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
  protected parseAggregateOver(t: number): Expr {
    const fn = keywordText(this.kw[t]!) as "sum" | "average" | "min" | "max";
    if (this.kind[this.pos] === T_IDENT && this.kw[this.peek(1)] === KW_FROM) {
      const bindings = this.parseBindings(fn);
      return { type: "AggregateOver", fn, bindings, start: this.starts[t], end: bindings[bindings.length - 1]!.end };
    }
    // This value's nested binders wait for this aggregate's variables, not for an aggregate in its bindings.
    const enclosing = this.deferred;
    this.deferred = [];
    this.deferDepth++;
    const value = this.parseExpr();
    this.deferDepth--;
    const pending = this.deferred;
    this.deferred = enclosing;
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
    rebound = NO_NAMES;
    if (this.deferDepth > 0) for (const b of pending) this.deferred.push(b);
    else for (const b of pending) this.refuseForwardUse(b);
    return { type: "AggregateOver", fn, value, bindings, start: this.starts[t], end: bindings[bindings.length - 1]!.end };
  }

  // ------------------------------------------------------------- relations

  protected parseRel(): Expr {
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

  // ------------------------------------------------------------ arithmetic

  protected parseAdd(): Expr {
    let left = this.parseMul();
    while (true) {
      const k = this.kind[this.pos]!;
      if (k !== P_PLUS && k !== P_MINUS) return left;
      this.next();
      const right = this.parseMul();
      left = { type: "Binary", op: k === P_PLUS ? "+" : "-", left, right, start: left.start, end: right.end };
    }
  }

  protected parseMul(): Expr {
    // parseUnary() only for a `-`: one call less per operand.
    let left = this.kind[this.pos] === P_MINUS ? this.parseUnary() : this.parsePostfix();
    while (true) {
      const k = this.kind[this.pos]!;
      if (k !== P_STAR && k !== P_SLASH && k !== P_PERCENT) return left;
      this.next();
      const right = this.kind[this.pos] === P_MINUS ? this.parseUnary() : this.parsePostfix();
      left = { type: "Binary", op: k === P_STAR ? "*" : k === P_SLASH ? "/" : "%", left, right, start: left.start, end: right.end };
    }
  }

  protected parseUnary(): Expr {
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

  protected parsePostfix(): Expr {
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
}
