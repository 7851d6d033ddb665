/**
 * Window arithmetic for edge/streaming eligibility (docs/eligibility.md).
 *
 * What is measured: an event's *lookback* — the longest time before `now`
 * at which an event satisfying the condition can have happened, over every
 * possible `now`, at the millisecond resolution of timestamps. An event
 * condition is eligible when its lookback is less than 24 hours
 * (86,400,000 ms), i.e. every qualifying event is less than 24 hours old.
 *
 * Consequences: `< 24 hours before now` reaches back 24 h − 1 ms (eligible);
 * `<= 24 hours before now` reaches back exactly 24 h (not eligible); `today`
 * reaches back at most 24 h − 1 ms (just before midnight) and is eligible, as
 * in Adobe's documented edge example `WHEN(today)`; windows wholly in the future
 * (`tomorrow`, `after now`) have lookback 0.
 *
 * The interval rules follow pql.md §8 exactly; only the lower end of the
 * interval matters, because no event is in the future of `now` by more than
 * the window allows and nothing older can qualify.
 */
import type { Expr, OccursTail, TimeRef, TimeUnit } from "../ast.js";

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
/** The eligibility limit: lookback must be strictly below this. */
export const EDGE_WINDOW_LIMIT_MS = DAY_MS;

/** Longest and shortest length of one unit (calendar units vary). */
const UNIT_MS: Record<TimeUnit, { min: number; max: number }> = {
  millisecond: { min: 1, max: 1 },
  second: { min: 1000, max: 1000 },
  minute: { min: 60_000, max: 60_000 },
  hour: { min: HOUR_MS, max: HOUR_MS },
  // UTC days have no daylight-saving changes (pql.md §8.1).
  day: { min: DAY_MS, max: DAY_MS },
  week: { min: 7 * DAY_MS, max: 7 * DAY_MS },
  month: { min: 28 * DAY_MS, max: 31 * DAY_MS },
  year: { min: 365 * DAY_MS, max: 366 * DAY_MS },
  decade: { min: 3652 * DAY_MS, max: 3653 * DAY_MS },
  century: { min: 36524 * DAY_MS, max: 36525 * DAY_MS },
  millennium: { min: 365_242 * DAY_MS, max: 365_243 * DAY_MS },
};

/** Why a condition has no lookback relative to now. */
export type Unbounded = "none" | "fixed-date" | "profile-date";

/**
 * The lower bound an event condition puts on an event's time, as a lookback:
 * relative to now, to another event's time, a combination, or none.
 */
export type Bound =
  | { kind: "now"; ms: number }
  /** At most `ms` before event `event`'s time (negative: after it). */
  | { kind: "event"; event: number; ms: number }
  | { kind: "unbounded"; why: Unbounded }
  /** Every part holds (`and`): the tightest wins. */
  | { kind: "all"; parts: Bound[] }
  /** One of the parts holds (`or`): the loosest wins. */
  | { kind: "any"; parts: Bound[] };

export const NO_BOUND: Bound = { kind: "unbounded", why: "none" };

/** A time reference resolved against now or an event: sup(now − start) and sup(now − end). */
export type Anchor =
  | { base: "now"; start: number; end: number; instant: boolean }
  | { base: "event"; event: number; start: number; end: number; instant: boolean }
  | { base: "unbounded"; why: Unbounded };

/** How a non-keyword time reference is anchored; supplied by the analysis, which knows the variables. */
export type RefResolver = (ref: Expr) => Anchor;

/** The lookbacks of a relative-time keyword (pql.md §8.1), for the worst possible `now`. */
export function keywordAnchor(ref: TimeRef): Anchor | undefined {
  if (ref.type === "TimeWord") {
    switch (ref.word) {
      case "now":
        return { base: "now", start: 0, end: 0, instant: true };
      case "today":
        return { base: "now", start: DAY_MS - 1, end: -1, instant: false };
      case "yesterday":
        return { base: "now", start: 2 * DAY_MS - 1, end: DAY_MS - 1, instant: false };
      case "tomorrow":
        return { base: "now", start: -1, end: -DAY_MS - 1, instant: false };
    }
  }
  if (ref.type === "RelPeriod") {
    const u = UNIT_MS[ref.unit];
    switch (ref.which) {
      case "this":
        return { base: "now", start: u.max - 1, end: -1, instant: false };
      case "last":
        return { base: "now", start: 2 * u.max - 1, end: u.max - 1, instant: false };
      case "next":
        return { base: "now", start: -1, end: -1 - u.min, instant: false };
    }
  }
  return undefined;
}

/** The bound `subject occurs <tail>` puts on the subject's time (pql.md §8.2). */
export function tailBound(tail: OccursTail, resolve: RefResolver): Bound {
  const anchor = (r: TimeRef): Anchor => keywordAnchor(r) ?? resolve(r as Expr);
  switch (tail.kind) {
    case "on":
      return lower(anchor(tail.ref), "start", 0);
    case "between":
      return lower(anchor(tail.from), "start", 0);
    case "direction": {
      if (tail.direction === "before") return NO_BOUND;
      const a = anchor(tail.ref);
      return lower(a, "end", a.base !== "unbounded" && a.instant ? -1 : 0);
    }
    case "relative":
      return relativeBound(tail.op, tail.amount, tail.unit, tail.direction, anchor(tail.ref));
  }
}

function relativeBound(op: string, n: number, unit: TimeUnit, direction: string, a: Anchor): Bound {
  const u = UNIT_MS[unit];
  if (direction === "before") {
    // Anchor A = start of the reference; T < A always.
    switch (op) {
      case "<":
        return lower(a, "start", n * u.max - 1);
      case "<=":
        return lower(a, "start", n * u.max);
      case "=":
        return lower(a, "start", n * u.max);
      default:
        // `>`, `>=` and `!=` leave the past open: no lower bound.
        return NO_BOUND;
    }
  }
  // after / from: anchor A = end of the reference (strict for an instant).
  const strict = a.base !== "unbounded" && a.instant ? -1 : 0;
  switch (op) {
    case "<":
    case "<=":
    case "!=":
      return lower(a, "end", strict);
    case ">":
      return lower(a, "end", strict - n * u.min - 1);
    case ">=":
      return lower(a, "end", strict - n * u.min);
    default:
      // `=`: [A + (n−1)U, A + nU); n = 0 means [A − U, A).
      return lower(a, "end", n === 0 ? u.max : strict - (n - 1) * u.min);
  }
}

function lower(a: Anchor, edge: "start" | "end", extra: number): Bound {
  if (a.base === "unbounded") return { kind: "unbounded", why: a.why };
  const ms = a[edge] + extra;
  return a.base === "now" ? { kind: "now", ms } : { kind: "event", event: a.event, ms };
}

/** The resolved lookback of a bound: a number of ms (≥ 0), or why there is none. */
export type Lookback = { ms: number } | { why: Unbounded };

/**
 * Resolves a bound; `eventLookback` gives another event's resolved lookback
 * (the analysis detects reference cycles and answers "none" for them).
 */
export function resolveBound(b: Bound, eventLookback: (event: number) => Lookback): Lookback {
  switch (b.kind) {
    case "now":
      return { ms: Math.max(0, b.ms) };
    case "event": {
      const base = eventLookback(b.event);
      return "ms" in base ? { ms: Math.max(0, base.ms + b.ms) } : base;
    }
    case "unbounded":
      return { why: b.why };
    case "all": {
      const parts = b.parts.map((p) => resolveBound(p, eventLookback));
      const bounded = parts.filter((p): p is { ms: number } => "ms" in p);
      if (bounded.length > 0) return { ms: Math.min(...bounded.map((p) => p.ms)) };
      return parts.find((p) => "why" in p && p.why !== "none") ?? { why: "none" };
    }
    case "any": {
      const parts = b.parts.map((p) => resolveBound(p, eventLookback));
      const open = parts.find((p) => "why" in p);
      if (open) return open;
      return { ms: Math.max(...parts.map((p) => (p as { ms: number }).ms)) };
    }
  }
}

/** "7 days", "24 hours", "90 minutes": a lookback as a person reads it (rounded up to minutes). */
export function describeDuration(ms: number): string {
  const minutes = Math.ceil(ms / 60_000);
  if (minutes >= 3 * 1440) return plural(Math.ceil(minutes / 1440), "day");
  if (minutes % 60 === 0) return plural(minutes / 60, "hour");
  return plural(minutes, "minute");
}

function plural(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}
