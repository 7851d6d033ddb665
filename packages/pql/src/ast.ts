/**
 * The PQL abstract syntax tree: the one contract every part of the language
 * package works on (parser, format, pql/json, check, evaluate, compile, classify)
 * and that the server's SQL compiler reads.
 *
 * Design notes
 * - Names are resolved at parse time: a bare identifier that names a variable
 *   bound to its left (select/exists/forall/over bindings, let, lambda
 *   parameters, the query's lambda head) is a `Var`; any other bare identifier is
 *   a `Field` looked up on the implicit context (the current item inside a
 *   filter / item-context method / chain WHAT-WHERE, otherwise the profile).
 *   Evaluators therefore never guess whether `X` is a variable or a field.
 * - Keywords and built-in names are case-insensitive in source text; the AST
 *   always holds the canonical spelling (see catalog.ts), so `CHAIN`, `AND` and
 *   `Count()` produce the same tree as `chain`, `and` and `count()`.
 * - `start`/`end` are UTF-16 offsets into the source text. They are optional so
 *   that trees built by code (pql/json, generators) need none; `astEqual`
 *   ignores them.
 */

export interface Span {
  /** Offset of the first character of the node in the source text. */
  start?: number;
  /** Offset just past the last character of the node. */
  end?: number;
}

export type CmpOp = "=" | "!=" | "<" | "<=" | ">" | ">=";
export type ArithOp = "+" | "-" | "*" | "/" | "%";
export type InfixOp = "in" | "notIn" | "like" | "matches";
export type BinaryOp = "and" | "or" | CmpOp | ArithOp | InfixOp;

/** Canonical (singular) time units. The lexer accepts plurals and `millenium`. */
export type TimeUnit =
  | "millisecond"
  | "second"
  | "minute"
  | "hour"
  | "day"
  | "week"
  | "month"
  | "year"
  | "decade"
  | "century"
  | "millennium";

export const TIME_UNITS: readonly TimeUnit[] = [
  "millisecond",
  "second",
  "minute",
  "hour",
  "day",
  "week",
  "month",
  "year",
  "decade",
  "century",
  "millennium",
];

export type Direction = "before" | "after" | "from";

/** A literal constant. Integers are JS numbers within the safe-integer range. */
export interface Literal extends Span {
  type: "Literal";
  kind: "string" | "integer" | "double" | "boolean";
  value: string | number | boolean;
}

export interface ListLiteral extends Span {
  type: "List";
  elements: Expr[];
}

export interface ObjectLiteral extends Span {
  type: "Object";
  entries: { key: string; value: Expr }[];
}

/** A bare identifier resolved against the implicit context (item or profile). */
export interface Field extends Span {
  type: "Field";
  name: string;
}

/** A reference to a bound variable (binding, let, lambda parameter). */
export interface Var extends Span {
  type: "Var";
  name: string;
}

/** `$n`: positional parameter, 1-based. `$1` is the profile unless params say otherwise. */
export interface Param extends Span {
  type: "Param";
  index: number;
}

/** `^name`, `^^.name`: a field of the item `levels` filter levels up (see pql.md §7.10). */
export interface Up extends Span {
  type: "Up";
  levels: number;
  name: string;
}

/** The reserved word `xEvent`: the profile's experience events. */
export interface XEvent extends Span {
  type: "XEvent";
}

/** `now`, `today`, `yesterday`, `tomorrow`: usable as TimeRefs and as values. */
export interface TimeWord extends Span {
  type: "TimeWord";
  word: "now" | "today" | "yesterday" | "tomorrow";
}

/** `this month`, `last week`, `next year`, ... */
export interface RelPeriod extends Span {
  type: "RelPeriod";
  which: "this" | "last" | "next";
  unit: TimeUnit;
}

/** `a.b` field access on any value (objects, maps, projection over arrays). */
export interface Member extends Span {
  type: "Member";
  object: Expr;
  name: string;
}

/** `recv.name(args)`. `name` is canonical for built-ins, as written otherwise. */
export interface MethodCall extends Span {
  type: "Method";
  receiver: Expr;
  name: string;
  args: Expr[];
}

/** `name(args)`: global functions (`if`, `date`, `currentMonth`, `inSegment`, `mapEntry`, ...). */
export interface Call extends Span {
  type: "Call";
  name: string;
  args: Expr[];
}

/** `array[condition]`: condition evaluated with each item as implicit context. */
export interface Filter extends Span {
  type: "Filter";
  object: Expr;
  condition: Expr;
}

/** Unary minus. The parser folds `-` applied to a numeric literal into the literal. */
export interface Negate extends Span {
  type: "Negate";
  operand: Expr;
}

/** `not x` / `!x` / `NOT(x)`: formatted canonically as `not`. */
export interface Not extends Span {
  type: "Not";
  operand: Expr;
}

export interface Binary extends Span {
  type: "Binary";
  op: BinaryOp;
  left: Expr;
  right: Expr;
}

/** A time reference inside an occurs tail or WHEN clause. */
export type TimeRef = TimeWord | RelPeriod | Expr;

export type OccursTail =
  /** `OP n UNIT before|after|from REF` */
  | (Span & {
      kind: "relative";
      op: CmpOp;
      amount: number;
      unit: TimeUnit;
      direction: Direction;
      ref: TimeRef;
    })
  /** `before|after|from REF` */
  | (Span & { kind: "direction"; direction: Direction; ref: TimeRef })
  /** `between REF and REF` */
  | (Span & { kind: "between"; from: TimeRef; to: TimeRef })
  /** `[on] REF` */
  | (Span & { kind: "on"; ref: TimeRef });

/** `subject occurs tail` */
export interface Occurs extends Span {
  type: "Occurs";
  subject: Expr;
  tail: OccursTail;
}

export interface ChainStep extends Span {
  label: string;
  what: Expr;
  when?: OccursTail;
  /** COUNT(n): at least n matching events; the step's position is its n-th match. */
  count?: number;
  where?: Expr;
}

/** `chain(source, timestampField, [L: WHAT(...) WHEN(...) COUNT(n) WHERE(...), ...])` */
export interface Chain extends Span {
  type: "Chain";
  source: Expr;
  timestampField: string;
  steps: ChainStep[];
}

/** `V from A where C` (or `V from A : C`) inside select / exists / forall / over. */
export interface Binding extends Span {
  variable: string;
  source: Expr;
  condition?: Expr;
}

/** `select V1 from A1 where C1, V2 from A2 where C2, ...` */
export interface Select extends Span {
  type: "Select";
  bindings: Binding[];
}

/** `exists V from A : C, ...` / `forall V from A : C, ...` */
export interface Quantifier extends Span {
  type: "Quantifier";
  quantifier: "exists" | "forall";
  bindings: Binding[];
}

/** `let V = value in body` */
export interface Let extends Span {
  type: "Let";
  variable: string;
  value: Expr;
  body: Expr;
}

/** `sum|average|min|max [value over] V from A where C, ...` (legacy operator form). */
export interface AggregateOver extends Span {
  type: "AggregateOver";
  fn: "sum" | "average" | "min" | "max";
  /** Absent for `sum V from numericArray where C`. */
  value?: Expr;
  bindings: Binding[];
}

/** `(a, b) => body` or `a => body` as a method argument. */
export interface Lambda extends Span {
  type: "Lambda";
  params: string[];
  body: Expr;
}

export type Expr =
  | Literal
  | ListLiteral
  | ObjectLiteral
  | Field
  | Var
  | Param
  | Up
  | XEvent
  | TimeWord
  | RelPeriod
  | Member
  | MethodCall
  | Call
  | Filter
  | Negate
  | Not
  | Binary
  | Occurs
  | Chain
  | Select
  | Quantifier
  | Let
  | AggregateOver
  | Lambda;

export type ExprType = Expr["type"];

/** A whole query: an optional lambda head `(p1, p2) =>` and the body. */
export interface Query extends Span {
  type: "Query";
  /** Names of the lambda head parameters; `params[i]` is bound to `$i+1`. Empty when absent. */
  params: string[];
  body: Expr;
  /** The source text the query was parsed from, when it came from text. */
  source?: string;
}

export type Node = Query | Expr;

const POSITION_KEYS = new Set(["start", "end"]);

/**
 * Keys that carry no structure: positions, and `source` when it is the query's
 * text. (`Binding.source` and `Chain.source` are expressions and do count.)
 */
function isPositionKey(key: string, value: unknown): boolean {
  return POSITION_KEYS.has(key) || (key === "source" && typeof value === "string");
}

/**
 * Deep structural equality of two trees, ignoring positions and source text.
 * Iterative (explicit stack): a parsed 50,000-term `or` is a 50,000-deep left
 * spine, which would overflow the JS stack in a recursive comparison.
 */
export function astEqual(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (x === y) continue;
    if (typeof x !== typeof y || x === null || y === null || typeof x !== "object") {
      if (typeof x === "number" && typeof y === "number" && Number.isNaN(x) && Number.isNaN(y)) continue;
      return false;
    }
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    if (Array.isArray(x)) {
      const yy = y as unknown[];
      if (x.length !== yy.length) return false;
      for (let i = 0; i < x.length; i++) stack.push([x[i], yy[i]]);
      continue;
    }
    const xo = x as Record<string, unknown>;
    const yo = y as Record<string, unknown>;
    let xn = 0;
    for (const k in xo) {
      const v = xo[k];
      if (v === undefined || isPositionKey(k, v)) continue;
      xn++;
      stack.push([v, yo[k]]);
    }
    let yn = 0;
    for (const k in yo) {
      const v = yo[k];
      if (v !== undefined && !isPositionKey(k, v)) yn++;
    }
    if (xn !== yn) return false;
  }
  return true;
}

/**
 * A copy of the tree without positions or source text (for snapshots and
 * comparisons). Iterative, like astEqual, so that very deep spines are safe.
 */
export function stripPositions<T>(node: T): T {
  const copy = (v: unknown): unknown => (v === null || typeof v !== "object" ? v : Array.isArray(v) ? [] : {});
  const root = copy(node);
  const stack: [unknown, unknown][] = [[node, root]];
  while (stack.length > 0) {
    const [from, to] = stack.pop()!;
    if (from === null || typeof from !== "object") continue;
    if (Array.isArray(from)) {
      const arr = to as unknown[];
      for (const item of from) {
        const c = copy(item);
        arr.push(c);
        stack.push([item, c]);
      }
      continue;
    }
    const out = to as Record<string, unknown>;
    for (const [k, v] of Object.entries(from as Record<string, unknown>)) {
      if (isPositionKey(k, v) || v === undefined) continue;
      const c = copy(v);
      out[k] = c;
      stack.push([v, c]);
    }
  }
  return root as T;
}

/** Is this time reference one of the relative-time words rather than a value expression? */
export function isTimeKeywordRef(ref: TimeRef): ref is TimeWord | RelPeriod {
  return ref.type === "TimeWord" || ref.type === "RelPeriod";
}

/**
 * The direct child expressions of a node, in source order. Occurs tails and
 * chain steps are flattened into their expressions. Used by walkers (check,
 * classify, the SQL compiler) so that none of them hand-roll the traversal.
 */
export function children(node: Node): Expr[] {
  switch (node.type) {
    case "Query":
      return [node.body];
    case "Literal":
    case "Field":
    case "Var":
    case "Param":
    case "Up":
    case "XEvent":
    case "TimeWord":
    case "RelPeriod":
      return [];
    case "List":
      return node.elements;
    case "Object":
      return node.entries.map((e) => e.value);
    case "Member":
      return [node.object];
    case "Method":
      return [node.receiver, ...node.args];
    case "Call":
      return node.args;
    case "Filter":
      return [node.object, node.condition];
    case "Negate":
    case "Not":
      return [node.operand];
    case "Binary":
      return [node.left, node.right];
    case "Occurs":
      return [node.subject, ...tailExprs(node.tail)];
    case "Chain":
      return [
        node.source,
        ...node.steps.flatMap((s) => [s.what, ...(s.when ? tailExprs(s.when) : []), ...(s.where ? [s.where] : [])]),
      ];
    case "Select":
    case "Quantifier":
      return bindingExprs(node.bindings);
    case "AggregateOver":
      return [...(node.value ? [node.value] : []), ...bindingExprs(node.bindings)];
    case "Let":
      return [node.value, node.body];
    case "Lambda":
      return [node.body];
  }
}

/** The expressions inside an occurs tail (its time references). */
export function tailExprs(tail: OccursTail): Expr[] {
  switch (tail.kind) {
    case "relative":
    case "direction":
    case "on":
      return [tail.ref];
    case "between":
      return [tail.from, tail.to];
  }
}

function bindingExprs(bindings: Binding[]): Expr[] {
  return bindings.flatMap((b) => (b.condition ? [b.source, b.condition] : [b.source]));
}

/** Depth-first pre-order visit of every node. Return `false` from `visit` to skip a subtree. */
export function walk(node: Node, visit: (n: Node, parent: Node | undefined) => boolean | void, parent?: Node): void {
  // An explicit stack keeps 10,000-deep trees from overflowing the JS stack.
  const stack: [Node, Node | undefined][] = [[node, parent]];
  while (stack.length > 0) {
    const [n, p] = stack.pop()!;
    if (visit(n, p) === false) continue;
    const kids = children(n);
    for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i]!, n]);
  }
}
