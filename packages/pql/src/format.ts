/**
 * Canonical pql/text. `format(parse(format(x))) === format(x)` for every valid
 * query, and `parse(format(ast))` is structurally equal to `ast`.
 *
 * Canonical choices:
 * - keywords and operator words in lower case (`and`, `not`, `notIn`,
 *   `xEvent`, `chain`); built-in names as in catalog.ts; the chain clause words
 *   upper case (`WHAT`, `WHEN`, `COUNT`, `WHERE`), as Adobe's tools emit them;
 * - `not` for `!`; one space around binary operators; `, ` between items;
 * - minimal parentheses from the precedence table (pql.md §3.2), plus the
 *   ones that keep the tree intact when re-read: binders (select, exists,
 *   forall, sum…over) extend to the right and swallow commas, so they are
 *   parenthesised unless nothing follows them in their bracket; `let` and
 *   lambda bodies also extend right, so `let` is parenthesised when an
 *   operator follows it;
 * - `where` in select/over bindings, `:` in exists/forall bindings;
 * - occurs tails: plural units unless the amount is 1 (`1 day`, `3 days`);
 *   `on` is written before a value reference (`on date(2024, 1, 1)`) and
 *   left out before `today`, `this month`, …;
 * - chain clauses in the order WHAT WHEN COUNT WHERE;
 * - doubles always carry a `.` or an exponent (`5.0`, `1e+21`); strings use
 *   double quotes and Java escapes (control characters as `\uXXXX`);
 * - `-` directly before a number literal is read back as a negative literal,
 *   so a negation of a literal is written `-(5)`;
 * - lambdas always with parenthesised parameters: `(x) => body`.
 *
 * Left-associative operator chains are formatted iteratively along their
 * left spine, so a 50,000-term `or` does not overflow the stack.
 */
import type { Binding, ChainStep, Expr, OccursTail, Query, TimeUnit } from "./ast.js";
import { isTimeKeywordRef } from "./ast.js";
import { PqlError } from "./errors.js";
import { parse } from "./parser.js";

/** What follows an expression inside its bracket: nothing, a comma, or an operator/keyword. */
type Tail = "closed" | "comma" | "op";

const PREC_OR = 2;
const PREC_AND = 3;
const PREC_NOT = 4;
const PREC_REL = 5;
const PREC_ADD = 6;
const PREC_MUL = 7;
const PREC_UNARY = 8;
const PREC_POSTFIX = 9;
const PREC_PRIMARY = 10;

const BINARY_PREC: Record<string, number> = {
  or: PREC_OR,
  and: PREC_AND,
  "=": PREC_REL,
  "!=": PREC_REL,
  "<": PREC_REL,
  "<=": PREC_REL,
  ">": PREC_REL,
  ">=": PREC_REL,
  in: PREC_REL,
  notIn: PREC_REL,
  like: PREC_REL,
  matches: PREC_REL,
  "+": PREC_ADD,
  "-": PREC_ADD,
  "*": PREC_MUL,
  "/": PREC_MUL,
  "%": PREC_MUL,
};

/** The plural each time unit is written with (`3 days`). */
export const TIME_UNIT_PLURALS: Readonly<Record<TimeUnit, string>> = {
  millisecond: "milliseconds",
  second: "seconds",
  minute: "minutes",
  hour: "hours",
  day: "days",
  week: "weeks",
  month: "months",
  year: "years",
  decade: "decades",
  century: "centuries",
  millennium: "millennia",
};

/** Canonical pql/text for a query (given as text or as a tree). */
export function format(query: string | Query): string {
  const q = typeof query === "string" ? parse(query) : query;
  const body = fmt(q.body, 0, "closed");
  if (q.params.length === 0) return body;
  return `(${q.params.join(", ")}) => ${body}`;
}

/** Canonical text of a single expression (used by diagnostics and the UI). */
export function formatExpr(e: Expr): string {
  return fmt(e, 0, "closed");
}

function precOf(e: Expr): number {
  switch (e.type) {
    case "Binary":
      return BINARY_PREC[e.op]!;
    case "Not":
      return PREC_NOT;
    case "Occurs":
      return PREC_REL;
    case "Negate":
      return PREC_UNARY;
    case "Literal":
      return typeof e.value === "number" && (e.value < 0 || Object.is(e.value, -0)) ? PREC_UNARY : PREC_PRIMARY;
    case "Member":
    case "Method":
    case "Filter":
      return PREC_POSTFIX;
    case "Select":
    case "Quantifier":
    case "AggregateOver":
    case "Let":
      return PREC_NOT;
    case "Lambda":
      return 1;
    default:
      return PREC_PRIMARY;
  }
}

/** Does the expression's right end swallow what follows it (`tail`)? */
function extendsOver(e: Expr, tail: Tail): boolean {
  switch (e.type) {
    case "Select":
    case "Quantifier":
    case "AggregateOver":
      return tail !== "closed";
    case "Let":
      return tail === "op";
    default:
      return false;
  }
}

function fmt(e: Expr, minPrec: number, tail: Tail): string {
  if (precOf(e) < minPrec || extendsOver(e, tail)) return `(${fmtBare(e, "closed")})`;
  return fmtBare(e, tail);
}

function fmtBare(e: Expr, tail: Tail): string {
  switch (e.type) {
    case "Literal":
      return fmtLiteral(e.kind, e.value);
    case "List":
      return `[${fmtItems(e.elements)}]`;
    case "Object":
      return `{${e.entries
        .map((en, i) => `${quote(en.key)}: ${fmt(en.value, 0, i < e.entries.length - 1 ? "comma" : "closed")}`)
        .join(", ")}}`;
    case "Field":
    case "Var":
      return e.name;
    case "Param":
      return `$${e.index}`;
    case "Up":
      return `${"^".repeat(e.levels)}${e.name}`;
    case "XEvent":
      return "xEvent";
    case "TimeWord":
      return e.word;
    case "RelPeriod":
      return `${e.which} ${e.unit}`;
    case "Member":
      return `${fmt(e.object, PREC_POSTFIX, "op")}.${e.name}`;
    case "Method":
      return `${fmt(e.receiver, PREC_POSTFIX, "op")}.${e.name}(${fmtItems(e.args)})`;
    case "Call":
      return `${e.name}(${fmtItems(e.args)})`;
    case "Filter":
      return `${fmt(e.object, PREC_POSTFIX, "op")}[${fmt(e.condition, 0, "closed")}]`;
    case "Negate": {
      // `-5` would be read back as a negative literal: keep the negation visible.
      if (e.operand.type === "Literal" && typeof e.operand.value === "number") {
        return `-(${fmtBare(e.operand, "closed")})`;
      }
      const inner = fmt(e.operand, PREC_UNARY, tail);
      return inner.startsWith("-") ? `- ${inner}` : `-${inner}`;
    }
    case "Not":
      return `not ${fmt(e.operand, PREC_NOT, tail)}`;
    case "Binary":
      return fmtBinary(e, tail);
    case "Occurs":
      return `${fmt(e.subject, PREC_ADD, "op")} occurs ${fmtTail(e.tail, tail)}`;
    case "Chain":
      return `chain(${fmt(e.source, 0, "comma")}, ${e.timestampField}, [${e.steps.map(fmtStep).join(", ")}])`;
    case "Select":
      return `select ${fmtBindings(e.bindings, "where", tail)}`;
    case "Quantifier":
      return `${e.quantifier} ${fmtBindings(e.bindings, ":", tail)}`;
    case "Let":
      return `let ${e.variable} = ${fmt(e.value, PREC_ADD, "op")} in ${fmt(e.body, 0, tail)}`;
    case "AggregateOver": {
      if (!e.value) return `${e.fn} ${fmtBindings(e.bindings, "where", tail)}`;
      let value = fmt(e.value, PREC_OR, "op");
      // Only an operand may follow `sum` for it to start the operator form (see the parser).
      if (/^(-|!|not\b)/i.test(value)) value = `(${fmtBare(e.value, "closed")})`;
      return `${e.fn} ${value} over ${fmtBindings(e.bindings, "where", tail)}`;
    }
    case "Lambda":
      return `(${e.params.join(", ")}) => ${fmt(e.body, 0, tail)}`;
  }
}

function fmtItems(items: Expr[]): string {
  return items.map((x, i) => fmt(x, 0, i < items.length - 1 ? "comma" : "closed")).join(", ");
}

/** A left-associative chain of one precedence level, walked iteratively along its left spine. */
function fmtBinary(e: Expr & { type: "Binary" }, tail: Tail): string {
  const level = BINARY_PREC[e.op]!;
  if (level === PREC_REL) {
    // Non-associative: both operands are additive expressions.
    return `${fmt(e.left, PREC_ADD, "op")} ${e.op} ${fmt(e.right, PREC_ADD, tail)}`;
  }
  const rights: { op: string; right: Expr }[] = [];
  let left: Expr = e;
  while (left.type === "Binary" && BINARY_PREC[left.op] === level) {
    rights.push({ op: left.op, right: left.right });
    left = left.left;
  }
  const parts = [fmt(left, level, "op")];
  for (let i = rights.length - 1; i >= 0; i--) {
    const { op, right } = rights[i]!;
    parts.push(` ${op} `, fmt(right, level + 1, i === 0 ? tail : "op"));
  }
  return parts.join("");
}

function fmtTail(t: OccursTail, tail: Tail): string {
  switch (t.kind) {
    case "relative":
      return `${t.op} ${t.amount} ${t.amount === 1 ? t.unit : TIME_UNIT_PLURALS[t.unit]} ${t.direction} ${fmt(t.ref, PREC_POSTFIX, tail)}`;
    case "direction":
      return `${t.direction} ${fmt(t.ref, PREC_POSTFIX, tail)}`;
    case "between":
      return `between ${fmt(t.from, PREC_POSTFIX, "op")} and ${fmt(t.to, PREC_POSTFIX, tail)}`;
    case "on":
      return isTimeKeywordRef(t.ref) ? fmtBare(t.ref, tail) : `on ${fmt(t.ref, PREC_POSTFIX, tail)}`;
  }
}

function fmtStep(s: ChainStep): string {
  let out = `${s.label}: WHAT(${fmt(s.what, 0, "closed")})`;
  if (s.when) out += ` WHEN(${fmtTail(s.when, "closed")})`;
  if (s.count !== undefined) out += ` COUNT(${s.count})`;
  if (s.where) out += ` WHERE(${fmt(s.where, 0, "closed")})`;
  return out;
}

function fmtBindings(bindings: Binding[], sep: "where" | ":", tail: Tail): string {
  return bindings
    .map((b, i) => {
      const after: Tail = i < bindings.length - 1 ? "comma" : tail;
      const head = `${b.variable} from ${fmt(b.source, PREC_OR, b.condition ? "op" : after)}`;
      if (!b.condition) return head;
      return `${head}${sep === ":" ? " :" : " where"} ${fmt(b.condition, 0, after)}`;
    })
    .join(", ");
}

function fmtLiteral(kind: string, value: string | number | boolean): string {
  switch (kind) {
    case "string":
      return quote(String(value));
    case "boolean":
      return value ? "true" : "false";
    case "integer":
      return String(value);
    default: {
      const v = Number(value);
      if (!Number.isFinite(v)) {
        throw new PqlError("PQL_UNFORMATTABLE", `The double ${String(v)} cannot be written in PQL`, "", 0, 0);
      }
      if (Object.is(v, -0)) return "-0.0";
      const s = String(v);
      return /[.e]/.test(s) ? s : `${s}.0`;
    }
  }
}

const QUOTE_ESCAPES: Record<string, string> = {
  "\\": "\\\\",
  '"': '\\"',
  "\n": "\\n",
  "\t": "\\t",
  "\r": "\\r",
  "\b": "\\b",
  "\f": "\\f",
};

/** A PQL string literal with Java escapes; other control characters as \uXXXX. */
export function quote(s: string): string {
  // eslint-disable-next-line no-control-regex
  return `"${s.replace(/[\\"\u0000-\u001f\u007f]/g, (c) => QUOTE_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`;
}
