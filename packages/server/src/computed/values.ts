/**
 * The reference: a computed attribute's value for one profile, from its events and `now`,
 * computed from scratch without the PQL evaluators (only the event condition is PQL, and it is
 * asked per event). The engines' values (the rewritten aggregate, computed/rewrite.ts) are tested
 * against this function.
 *
 * The lookback is PQL's `timestamp occurs <= N units before now`: from now − N units (inclusive;
 * months count calendar months with the day clamped to the month's end, as PQL's addUnits does)
 * to now (exclusive). An event without a readable timestamp is outside every lookback.
 *
 *   SUM          sum of the field's numeric values (0 when there are none)
 *   COUNT        number of events
 *   MIN, MAX     smallest / largest numeric value, or, for timestamps, the earliest / latest
 *                (null when there is none)
 *   MOST_RECENT  {timestamp, value} of the latest event (its value may be null); null when none
 *   LIST         the field's values of the N latest events, latest first
 *
 * "Latest" orders by timestamp, highest first; equal timestamps keep the events' given order.
 */
import { evaluate, toBoolean, type Query } from "@segmentd/pql";
import type { ComputedAttributeRecord, DurationUnit, MergeFunction } from "../stores/computed-attributes.js";
import { analyzeAttributeExpression } from "./expression.js";

export interface AttributeDefinition {
  fn: MergeFunction;
  duration: { count: number; unit: DurationUnit };
  /** Whether an event meets the attribute's condition at `now` (true for all when it has none). */
  matches: (event: Record<string, unknown>, now: number) => boolean;
  /** The field's value in an event (undefined when absent); unused by COUNT. */
  field: (event: Record<string, unknown>) => unknown;
  /** LIST: how many values. */
  listLength: number;
}

const HOUR = 3_600_000;
const UNIT_MS: Record<Exclude<DurationUnit, "MONTHS">, number> = { HOURS: HOUR, DAYS: 24 * HOUR, WEEKS: 7 * 24 * HOUR };

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/** The first instant inside the lookback. */
export function lookbackStart(now: number, duration: { count: number; unit: DurationUnit }): number {
  if (duration.unit !== "MONTHS") return now - duration.count * UNIT_MS[duration.unit];
  const d = new Date(now);
  const months = d.getUTCFullYear() * 12 + d.getUTCMonth() - duration.count;
  const year = Math.floor(months / 12);
  const month = months - year * 12;
  const day = Math.min(d.getUTCDate(), daysIn(year, month));
  const timeOfDay = now - Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Date.UTC(year, month, day) + timeOfDay;
}

function instantOf(v: unknown): number | null {
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v !== "string") return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

/** The events inside the lookback that meet the condition, with their instants, in the given order. */
export function contributingEvents(def: AttributeDefinition, events: readonly Record<string, unknown>[], now: number): { event: Record<string, unknown>; at: number; index: number }[] {
  const start = lookbackStart(now, def.duration);
  const out: { event: Record<string, unknown>; at: number; index: number }[] = [];
  events.forEach((event, index) => {
    const at = instantOf(event.timestamp);
    if (at === null || at < start || at >= now) return;
    if (def.matches(event, now)) out.push({ event, at, index });
  });
  return out;
}

export function computeValue(def: AttributeDefinition, events: readonly Record<string, unknown>[], now: number): unknown {
  const inWindow = contributingEvents(def, events, now);
  switch (def.fn) {
    case "COUNT":
      return inWindow.length;
    case "SUM": {
      let sum = 0;
      for (const e of inWindow) {
        const v = def.field(e.event);
        if (typeof v === "number" && Number.isFinite(v)) sum += v;
      }
      return sum;
    }
    case "MIN":
    case "MAX": {
      let best: { key: number; value: unknown } | null = null;
      for (const e of inWindow) {
        const v = def.field(e.event);
        const key = typeof v === "number" ? (Number.isFinite(v) ? v : null) : instantOf(v);
        if (key === null) continue;
        if (best === null || (def.fn === "MIN" ? key < best.key : key > best.key)) best = { key, value: v };
      }
      return best === null ? null : best.value;
    }
    case "MOST_RECENT":
    case "LIST": {
      const latest = [...inWindow].sort((x, y) => y.at - x.at || x.index - y.index);
      if (def.fn === "LIST") return latest.slice(0, def.listLength).map((e) => def.field(e.event) ?? null);
      const top = latest[0];
      return top === undefined ? null : { timestamp: top.event.timestamp, value: def.field(top.event) ?? null };
    }
  }
}

/** A stored attribute as the reference reads it: its condition and field asked of one event at a time. */
export function referenceDefinition(record: Pick<ComputedAttributeRecord, "expression" | "duration">): AttributeDefinition {
  const shape = analyzeAttributeExpression(record.expression.value);
  const asQuery = (body: NonNullable<typeof shape.field>): Query => ({ type: "Query", params: [], body, start: 0, end: 0 }) as Query;
  const cond = shape.condition === null ? null : asQuery(shape.condition);
  const field = shape.field === null ? null : asQuery(shape.field);
  return {
    fn: shape.fn,
    duration: record.duration,
    listLength: shape.listLength,
    // The event is the condition's and the field's context, as inside xEvent[...] and .sum(...).
    matches: cond === null ? () => true : (event, now) => toBoolean(evaluate(cond, { profile: event, events: [], now })),
    field: field === null ? () => undefined : (event) => evaluate(field, { profile: event, events: [], now: 0 }) ?? undefined,
  };
}
