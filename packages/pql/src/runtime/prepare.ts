/**
 * What both evaluators do before running a query: parse text, resolve the
 * evaluation context (now, $1, events) and reject problems of the QUERY itself
 * (unknown functions, invalid regex literals) with a PqlError at the node's
 * position, so that `evaluate` and `compile` fail identically and up front.
 * Problems of the DATA never throw (pql.md §6).
 */
import { walk, type Expr, type Node, type Query } from "../ast.js";
import { PqlError } from "../errors.js";
import { parse } from "../parser.js";
import { ITEM_METHODS, STRING_PREDICATES } from "./builtins.js";
import { validateJavaRegex } from "./regex.js";
import { toInstant } from "./values.js";

export interface EvalContext {
  /** The profile (union view): the implicit first parameter. */
  profile: Record<string, unknown>;
  /** The profile's experience events, bound to `xEvent` (absent = none). */
  events?: Record<string, unknown>[];
  /** The evaluation instant: a Date, epoch milliseconds or an ISO 8601 string. */
  now: Date | string | number;
  /** `$1..$n` and the lambda head's parameters; `$1` defaults to the profile. */
  params?: unknown[];
}

export const GLOBAL_FUNCTIONS = new Set([
  "if",
  "date",
  "currentMonth",
  "currentYear",
  "currentDayOfMonth",
  "inSegment",
  "mapEntry",
]);

/** Methods that are functions of their receiver and arguments only (no item context, no profile). */
export const PLAIN_METHODS: ReadonlySet<string> = new Set([
  ...STRING_PREDICATES,
  "intersects",
  "intersection",
  "subsetOf",
  "supersetOf",
  "includes",
  "distinct",
  "head",
  "count",
  "get",
  "keys",
  "values",
  "matches",
  "regexGroup",
  "isNull",
  "isNotNull",
  "getMonth",
  "getYear",
  "getDayOfMonth",
]);

export function isKnownMethod(name: string): boolean {
  return PLAIN_METHODS.has(name) || ITEM_METHODS.has(name);
}

/** Parse (if needed) and validate a query for evaluation. */
export function prepareQuery(query: string | Query): Query {
  const q = typeof query === "string" ? parse(query) : query;
  const text = q.source ?? (typeof query === "string" ? query : "");
  walk(q, (n: Node) => {
    checkNode(n, text);
  });
  return q;
}

function fail(text: string, code: string, message: string, node: Expr): never {
  throw new PqlError(code, message, text, node.start ?? 0, node.end ?? (node.start ?? 0) + 1);
}

function checkNode(n: Node, text: string): void {
  if (n.type === "Call" && !GLOBAL_FUNCTIONS.has(n.name))
    fail(text, "PQL_UNKNOWN_FUNCTION", `unknown function ${n.name}()`, n);
  if (n.type === "Method" && !isKnownMethod(n.name)) fail(text, "PQL_UNKNOWN_FUNCTION", `unknown method .${n.name}()`, n);
  let pattern: Expr | undefined;
  if (n.type === "Binary" && n.op === "matches") pattern = n.right;
  if (n.type === "Method" && (n.name === "matches" || n.name === "regexGroup")) pattern = n.args[0];
  if (pattern?.type === "Literal" && typeof pattern.value === "string") {
    const v = validateJavaRegex(pattern.value);
    if (!v.ok) fail(text, v.code, v.message, pattern);
  }
}

/** The evaluation instant in epoch ms. An invalid `now` is a caller error. */
export function resolveNow(now: EvalContext["now"]): number {
  const t = toInstant(now instanceof Date ? now : now);
  if (t === null) throw new TypeError(`EvalContext.now is not a valid instant: ${String(now)}`);
  return t;
}
