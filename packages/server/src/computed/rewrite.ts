/**
 * Computed attributes in definitions: `_<TENANT_ID>.ComputedAttributes.<name>` (also without the
 * underscore, as AEP's `path` writes it, and under AEP's `SystemComputedAttributes` field group)
 * is rewritten into the attribute's own aggregate over `xEvent`, with its lookback as a
 * `timestamp occurs <= N units before now` clause. Every evaluator (interpreter, closures,
 * columnar, SQL, edge) then computes the value itself, from the same events, at the same `now`:
 * exact by construction, and the streaming sweep that closes event windows expires it.
 *
 * Kept here, in the server, because the language package knows nothing of stored attributes; it
 * is applied where a definition's PQL is compiled for evaluation.
 */
import { format, parse, type Expr, type Query, type TimeUnit } from "@segmentd/pql";
import type { ComputedAttributeRecord, DurationUnit } from "../stores/computed-attributes.js";
import { analyzeAttributeExpression, pathOf, type AttributeShape } from "./expression.js";

const PQL_UNIT: Record<DurationUnit, TimeUnit> = { HOURS: "hour", DAYS: "day", WEEKS: "week", MONTHS: "month" };

function exprText(e: Expr): string {
  return format({ type: "Query", params: [], body: e, start: 0, end: 0 } as Query);
}

/** The windowed aggregate an attribute stands for, as PQL text. */
export function attributeAggregateText(shape: AttributeShape, duration: { count: number; unit: DurationUnit }): string {
  const unit = PQL_UNIT[duration.unit];
  const window = `timestamp occurs <= ${duration.count} ${unit}${duration.count === 1 ? "" : "s"} before now`;
  const events = shape.condition === null ? `xEvent[${window}]` : `xEvent[(${exprText(shape.condition)}) and ${window}]`;
  const field = shape.field === null ? "" : exprText(shape.field);
  switch (shape.fn) {
    case "COUNT":
      return `${events}.count()`;
    case "SUM":
      return `${events}.sum(${field})`;
    case "MIN":
      return `${events}.min(${field})`;
    case "MAX":
      return `${events}.max(${field})`;
    case "MOST_RECENT":
      return `${events}.topN(timestamp, 1).map({"timestamp": timestamp, "value": ${field}}).head()`;
    case "LIST":
      return `${events}.topN(timestamp, ${shape.listLength}).map(${field})`;
  }
}

export function attributeAggregate(record: Pick<ComputedAttributeRecord, "expression" | "duration">): Expr {
  return parse(attributeAggregateText(analyzeAttributeExpression(record.expression.value), record.duration)).body;
}

/** The attribute name a path reads, when it is one of this tenant's computed attribute paths. */
export function attributeNameOf(path: string, tenantId: string): string | null {
  const m = /^_?([^.]+)\.(?:System)?ComputedAttributes\.([A-Za-z][A-Za-z0-9]*)$/.exec(path);
  return m !== null && m[1] === tenantId ? m[2]! : null;
}

/** The computed attribute names a query reads (first seen first). */
export function referencedAttributes(query: Query, tenantId: string): string[] {
  const out = new Set<string>();
  visit(query, (e) => {
    const p = pathOf(e);
    const name = p === null ? null : attributeNameOf(p, tenantId);
    if (name !== null) out.add(name);
    return undefined;
  });
  return [...out];
}

/**
 * The query with every reference to one of `attributes` (by name) replaced by its aggregate.
 * Returns the query itself when it reads none; a name not in `attributes` is left as written
 * (it reads an absent profile field: null).
 */
export function rewriteComputedAttributes(query: Query, tenantId: string, attributes: ReadonlyMap<string, Pick<ComputedAttributeRecord, "expression" | "duration">>): Query {
  if (referencedAttributes(query, tenantId).length === 0) return query;
  const cache = new Map<string, Expr>();
  const body = visit(query.body, (e) => {
    const p = pathOf(e);
    const name = p === null ? null : attributeNameOf(p, tenantId);
    const rec = name === null ? undefined : attributes.get(name);
    if (rec === undefined || name === null) return undefined;
    let agg = cache.get(name);
    if (agg === undefined) cache.set(name, (agg = attributeAggregate(rec)));
    return agg;
  }) as Expr;
  // Formatted and read again, so that the result's positions and source agree.
  return parse(format({ ...query, body }));
}

/** Rebuilds the tree; `replace` returns a replacement for a node, or undefined to descend into it. */
function visit<T>(node: T, replace: (e: Expr) => Expr | undefined): T {
  if (Array.isArray(node)) return node.map((x: unknown) => visit(x, replace)) as T;
  if (node === null || typeof node !== "object") return node;
  const rec = node as Record<string, unknown>;
  if (rec.type === "Field" || rec.type === "Member") {
    const r = replace(node as unknown as Expr);
    if (r !== undefined) return r as unknown as T;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rec)) out[k] = visit(v, replace);
  return out as T;
}
