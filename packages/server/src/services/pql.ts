/**
 * The one place the server touches the PQL package. Services call these
 * helpers; when the language package's API moves, only this file changes.
 */
import { check, classify, compilePredicate, format, fromPqlJson, parse, toBoolean, toPqlJson, traceEvaluation, walk, PqlError } from "@segmentd/pql";
import type { CostLimits, Diagnostic, Query, TraceNode } from "@segmentd/pql";

export type { Diagnostic, Query, TraceNode };

export interface Classified {
  queryType: string | null;
  batch: boolean;
  continuous: boolean;
  synchronous: boolean;
  reasons: string[];
}

/**
 * Error diagnostics of `text` (warnings dropped): empty means the expression is valid.
 * With `cost`, a worst case per profile above `cost.maxUnits` is an error too (PQL_TOO_COSTLY).
 */
export function pqlErrors(text: string, cost?: CostLimits & { maxUnits: number }): Diagnostic[] {
  return check(text, cost === undefined ? {} : { cost }).filter((d) => d.severity === "error");
}

export function parsePql(text: string): Query {
  return parse(text);
}

/** A query's value for one profile and its events at `now`, with the trace of the evaluation (explain). */
export function traceQuery(query: Query, ctx: { profile: Record<string, unknown>; events: readonly Record<string, unknown>[]; now: number }): { value: unknown; trace: TraceNode } {
  return traceEvaluation(query, { profile: ctx.profile, events: [...ctx.events], now: ctx.now });
}

/** The segment reading of a query's value: `true`, or a non-empty select/filter result (pql.md §6.4), as the engines read it. */
export function qualifies(value: unknown): boolean {
  return toBoolean(value);
}

/** The compiled predicate the engines run. */
export function compiledPredicate(query: Query): (ctx: { profile: Record<string, unknown>; events: Record<string, unknown>[]; now: number }) => boolean {
  return compilePredicate(query);
}

const DAY_MS = 86_400_000;

/** The windows of the query's event conditions (a day where one has none), as the streaming sweep schedules them. */
export function eventWindowsMs(query: Query): number[] {
  return [...new Set(classify(query).events.map((e) => e.windowMs ?? DAY_MS))].sort((a, b) => a - b);
}

/** Canonical PQL text of a query. */
export function canonicalText(query: Query): string {
  return format(query);
}

/** pql/json (as AEP carries it: a JSON document serialised into a string) → query. */
export function queryFromPqlJson(value: string): Query {
  let doc: unknown;
  try {
    doc = JSON.parse(value);
  } catch (err) {
    throw new PqlJsonError(`expression.value is not valid JSON: ${(err as Error).message}`);
  }
  try {
    return fromPqlJson(doc as Parameters<typeof fromPqlJson>[0]);
  } catch (err) {
    throw new PqlJsonError(`expression.value is not a valid pql/json tree: ${(err as Error).message}`);
  }
}

/** query → pql/json string. */
export function queryToPqlJson(query: Query): string {
  const out: unknown = toPqlJson(query);
  return typeof out === "string" ? out : JSON.stringify(out);
}

export class PqlJsonError extends Error {}

/** Ids named by `inSegment("...")` calls, in first-seen order, without duplicates. */
export function inSegmentReferences(query: Query): string[] {
  const seen = new Set<string>();
  walk(query, (n) => {
    if (n.type === "Call" && n.name === "inSegment") {
      const arg = n.args[0];
      if (arg && arg.type === "Literal" && typeof arg.value === "string") seen.add(arg.value);
    }
  });
  return [...seen];
}

function reasonText(r: unknown): string {
  if (typeof r === "string") return r;
  if (typeof r === "object" && r !== null && "message" in r && typeof (r as { message: unknown }).message === "string") {
    return (r as { message: string }).message;
  }
  return JSON.stringify(r);
}

/** Classify for batch/streaming/edge (decisions.md §1). `resolveSegment` returns another definition's PQL text. */
export function classifyQuery(query: Query, resolveSegment: (id: string) => string | undefined, selfId?: string): Classified {
  const c = classify(query, { resolveSegment, ...(selfId !== undefined ? { id: selfId } : {}) });
  return {
    queryType: c.queryType ?? null,
    batch: c.batch,
    continuous: c.continuous,
    synchronous: c.synchronous,
    reasons: (c.reasons as readonly unknown[]).map(reasonText),
  };
}

export { PqlError };
export { BudgetExceededError, costDiagnostic, WorkBudget } from "@segmentd/pql";
