/**
 * Event parsing: occurs tails (`occurs … between … and …`), time references
 * and chains (`CHAIN(xEvent, …, [step, …])`). See parser.ts for the grammar.
 */

import type { Chain, ChainStep, CmpOp, Direction, Expr, OccursTail, TimeRef, TimeUnit } from "./ast.js";
import * as lexer from "./lexer.js";
import * as core from "./parser-core.js";
import { ParserCore } from "./parser-core.js";

// Local copies of the shared constants and helpers: V8 folds a module's own consts into the code
// it optimizes, but reads an imported binding through its module cell at every use (#42: the
// split parser was slower than the one-file parser by this alone).
const { T_DOUBLE, T_IDENT, T_INT, T_PARAM, T_STRING, keywordText, unitOfKeyword } = lexer;
const {
  P_LPAREN, P_RPAREN, P_LBRACKET, P_RBRACKET, P_LBRACE, P_COMMA, P_COLON, P_CARET, SYMBOL, isCmp, KW_AND,
  KW_NOT, KW_BETWEEN, KW_WHERE, KW_ON, KW_WHAT, KW_WHEN, KW_COUNT, F_OPERATOR, F_PERIOD, F_DIRECTION, FLAGS,
  CLAUSE_EXPR, CLAUSE_TAIL, CLAUSE_COUNT,
} = core;

export abstract class EventParser extends ParserCore {
  protected abstract parseExpr(): Expr;
  protected abstract parsePostfix(): Expr;

  // -------------------------------------------------------------- occurs

  /** An occurs tail (pql.md §8): after `occurs`, or inside a chain's `WHEN(…)`. */
  protected parseTail(owner: string): OccursTail {
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
  protected parseTimeRef(afterTok: number, after: string): TimeRef {
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

  // ----------------------------------------------------------------- chain

  /** `chain(source, tsField, [L: WHAT(…) WHEN(…) COUNT(n) WHERE(…), …])` (pql.md §7.14). */
  protected parseChain(kw: number): Chain {
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

  protected parseStep(): ChainStep {
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
  protected parseClauseBody(clause: number, body: number): Expr | OccursTail | number {
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
