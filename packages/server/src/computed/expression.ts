/**
 * A computed attribute's PQL expression, checked and taken apart: `xEvent[condition]` followed by
 * the function AEP documents it with (its computed attributes API guide and [CAAPI] in
 * reference/pql.md):
 *
 *   .sum(field)                                                        SUM
 *   .count()                                                           COUNT
 *   .min(field)  .max(field)                                           MIN, MAX
 *   .topN(timestamp, 1).map({"timestamp": timestamp, "value": field}).head()   MOST_RECENT
 *   .topN(timestamp, N).map(field)                                     LIST (the N latest values)
 *
 * The condition may be left out (`xEvent.count()`). The lookback is the attribute's `duration`,
 * not a clause of the expression: a `timestamp occurs` clause in the condition only narrows it.
 */
import { walk, type Expr, type Query } from "@segmentd/pql";
import { ApiError, ErrorCodes } from "../services/errors.js";
import { diagnosticItems } from "../services/definition-analysis.js";
import { PqlError, parsePql, pqlErrors } from "../services/pql.js";
import type { MergeFunction } from "../stores/computed-attributes.js";
import { COMPUTED_ERROR, MAX_LIST_LENGTH } from "./limits.js";

export interface AttributeShape {
  fn: MergeFunction;
  /** The events' condition; null when the expression has none. */
  condition: Expr | null;
  /** What is summed, compared or listed; null for COUNT. */
  field: Expr | null;
  /** The field's dotted path when it is one. */
  fieldPath: string | null;
  /** LIST: how many values at most. */
  listLength: number;
  /** `meta:xdmType` of the value. */
  returnType: string;
}

/** Types of the standard ExperienceEvent fields the checks know; any other field is taken as the function needs. */
const EVENT_FIELD_TYPES: Record<string, string> = {
  _id: "string",
  timestamp: "date-time",
  eventType: "string",
  producedBy: "string",
  "commerce.order.priceTotal": "number",
  "commerce.order.currencyCode": "string",
  "commerce.order.purchaseID": "string",
  "commerce.purchases.value": "number",
  "commerce.productViews.value": "number",
  "commerce.productListAdds.value": "number",
  "commerce.productListRemovals.value": "number",
  "commerce.productListViews.value": "number",
  "commerce.checkouts.value": "number",
  "web.webPageDetails.name": "string",
  "web.webPageDetails.URL": "string",
  "web.webPageDetails.pageViews.value": "number",
  "web.webInteraction.name": "string",
  "web.webReferrer.URL": "string",
  "placeContext.geo.countryCode": "string",
  "placeContext.geo.city": "string",
  "device.type": "string",
  "environment.browserDetails.name": "string",
};

const NUMERIC = new Set(["number", "integer", "long", "short", "byte", "double"]);

const FUNCTIONS_TEXT = "SUM (.sum(field)), COUNT (.count()), MIN (.min(field)), MAX (.max(field)), " +
  'MOST_RECENT (.topN(timestamp, 1).map({"timestamp": timestamp, "value": field}).head()) or LIST (.topN(timestamp, N).map(field))';

function invalid(message: string): ApiError {
  return new ApiError(400, COMPUTED_ERROR.invalid, message);
}

/** `a.b.c` of a field path, null for anything else. */
export function pathOf(e: Expr): string | null {
  if (e.type === "Field") return e.name;
  if (e.type === "Member") {
    const base = pathOf(e.object);
    return base === null ? null : `${base}.${e.name}`;
  }
  return null;
}

/** The first path in the expression that reads a computed attribute (AEP forbids building one on another). */
export function computedAttributeReference(query: Query): string | null {
  let found: string | null = null;
  walk(query, (n) => {
    if (found !== null) return;
    if (n.type === "Member" || n.type === "Field") {
      const p = pathOf(n as Expr);
      if (p !== null && /(^|\.)(System)?ComputedAttributes(\.|$)/.test(p)) found = p;
    }
  });
  return found;
}

/** Parse and check the text, then recognise the function; every refusal is a 400 naming the problem. */
export function analyzeAttributeExpression(text: string): AttributeShape {
  const errors = pqlErrors(text);
  if (errors.length > 0) {
    throw new ApiError(400, ErrorCodes.invalidPql, `The PQL expression is invalid (${errors.length} error${errors.length === 1 ? "" : "s"})`, diagnosticItems(errors));
  }
  let query: Query;
  try {
    query = parsePql(text);
  } catch (err) {
    if (err instanceof PqlError) throw new ApiError(400, ErrorCodes.invalidPql, "The PQL expression is invalid (1 error)", diagnosticItems([err.toDiagnostic()]));
    throw err;
  }
  const ref = computedAttributeReference(query);
  if (ref !== null) {
    throw invalid(`A computed attribute cannot be built on another computed attribute ('${ref}'): its expression reads experience events only`);
  }
  return shapeOf(query.body);
}

function eventSource(e: Expr): { condition: Expr | null } | null {
  if (e.type === "XEvent") return { condition: null };
  if (e.type === "Filter" && e.object.type === "XEvent") return { condition: e.condition };
  return null;
}

function unsupported(): ApiError {
  return invalid(`The expression must be xEvent[condition] followed by one function: ${FUNCTIONS_TEXT}`);
}

function shapeOf(body: Expr): AttributeShape {
  if (body.type !== "Method") throw unsupported();
  const base = { listLength: 0 };
  // SUM, COUNT, MIN, MAX: one call straight on the events.
  const direct = eventSource(body.receiver);
  if (direct !== null) {
    switch (body.name) {
      case "count":
        if (body.args.length !== 0) throw invalid("COUNT takes no argument: xEvent[condition].count()");
        return { ...base, fn: "COUNT", condition: direct.condition, field: null, fieldPath: null, returnType: "integer" };
      case "sum":
      case "min":
      case "max": {
        const fn = body.name.toUpperCase() as "SUM" | "MIN" | "MAX";
        const field = body.args[0];
        if (body.args.length !== 1 || field === undefined) throw invalid(`${fn} needs the field it aggregates: xEvent[condition].${body.name}(field)`);
        return { ...base, fn, condition: direct.condition, field, fieldPath: pathOf(field), returnType: aggregateType(fn, field) };
      }
      default:
        throw invalid(`Unknown function '${body.name}': a computed attribute's function is ${FUNCTIONS_TEXT}`);
    }
  }
  // MOST_RECENT: topN(timestamp, 1).map({"timestamp": timestamp, "value": field}).head()
  if (body.name === "head" && body.args.length === 0 && body.receiver.type === "Method" && body.receiver.name === "map") {
    const map = body.receiver;
    const top = latest(map.receiver);
    const obj = map.args[0];
    if (top !== null && obj !== undefined && obj.type === "Object" && top.n === 1) {
      const keys = obj.entries.map((en) => en.key).sort();
      const ts = obj.entries.find((en) => en.key === "timestamp");
      const value = obj.entries.find((en) => en.key === "value");
      if (keys.length === 2 && ts !== undefined && value !== undefined && pathOf(ts.value) === "timestamp") {
        return { ...base, fn: "MOST_RECENT", condition: top.condition, field: value.value, fieldPath: pathOf(value.value), returnType: "object" };
      }
    }
    throw invalid('MOST_RECENT is written xEvent[condition].topN(timestamp, 1).map({"timestamp": timestamp, "value": field}).head()');
  }
  // LIST: topN(timestamp, N).map(field)
  if (body.name === "map" && body.args.length === 1) {
    const top = latest(body.receiver);
    if (top !== null) {
      if (top.n < 1 || top.n > MAX_LIST_LENGTH) throw invalid(`LIST keeps from 1 to ${MAX_LIST_LENGTH} values (got ${top.n})`);
      const field = body.args[0]!;
      if (field.type === "Object") throw invalid("LIST lists one field's values: xEvent[condition].topN(timestamp, N).map(field)");
      return { fn: "LIST", condition: top.condition, field, fieldPath: pathOf(field), listLength: top.n, returnType: "array" };
    }
  }
  throw unsupported();
}

/** `xEvent[condition].topN(timestamp, N)` with an integer N. */
function latest(e: Expr): { condition: Expr | null; n: number } | null {
  if (e.type !== "Method" || e.name !== "topN" || e.args.length !== 2) return null;
  const src = eventSource(e.receiver);
  const [key, n] = e.args;
  if (src === null || key === undefined || n === undefined || pathOf(key) !== "timestamp") return null;
  if (n.type !== "Literal" || n.kind !== "integer" || typeof n.value !== "number") return null;
  return { condition: src.condition, n: n.value };
}

/** SUM needs a number; MIN and MAX a number or a timestamp (AEP's supported data types). */
function aggregateType(fn: "SUM" | "MIN" | "MAX", field: Expr): string {
  const path = pathOf(field);
  let type: string | undefined;
  if (field.type === "Literal") type = field.kind === "string" ? "string" : field.kind === "boolean" ? "boolean" : "number";
  else if (path !== null) type = EVENT_FIELD_TYPES[path];
  const allowed = fn === "SUM" ? "a numeric field" : "a numeric or timestamp field";
  if (type !== undefined && !NUMERIC.has(type) && !(fn !== "SUM" && type === "date-time")) {
    throw invalid(`${fn} needs ${allowed}; '${path ?? String((field as { value?: unknown }).value)}' is ${type === "date-time" ? "a timestamp" : `a ${type}`}`);
  }
  return type === "date-time" ? "date-time" : "number";
}
