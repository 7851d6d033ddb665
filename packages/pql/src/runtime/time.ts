/**
 * Time rules of pql.md §8: resolving time references to UTC intervals,
 * calendar arithmetic and the bounds of every `occurs` form. Used by the
 * evaluators and reused by the server's SQL compiler, which turns the bounds
 * into `ts >= lower AND ts < upper` predicates.
 *
 * An interval is half-open [start, end) in epoch milliseconds. An instant is an
 * interval with start = end and `instant: true`.
 *
 * Units: millisecond … week are fixed lengths (day = 24 h, week = 7 days);
 * month, year, decade, century and millennium are calendar arithmetic: add
 * months and clamp the day to the length of the target month (31 Jan + 1 month
 * = 28/29 Feb), keeping the time of day.
 */
import type { OccursTail, RelPeriod, TimeUnit, TimeWord } from "../ast.js";
import { DAY_MS, daysInMonth, utcDate } from "./timestamp.js";
import { DateInterval, toInstant } from "./values.js";
import { parseTimestamp } from "./timestamp.js";

export interface TimeSpan {
  start: number;
  end: number;
  /** true when the reference is an instant (`now`, a timestamp value) rather than a period. */
  instant: boolean;
}

const FIXED: Partial<Record<TimeUnit, number>> = {
  millisecond: 1,
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: DAY_MS,
  week: 7 * DAY_MS,
};

const MONTHS: Partial<Record<TimeUnit, number>> = { month: 1, year: 12, decade: 120, century: 1200, millennium: 12000 };

/** `t + n·unit` with calendar arithmetic for month and longer units (day clamped). */
export function addUnits(t: number, n: number, unit: TimeUnit): number {
  const fixed = FIXED[unit];
  if (fixed !== undefined) return t + n * fixed;
  const months = MONTHS[unit]! * n;
  const d = new Date(t);
  const total = d.getUTCFullYear() * 12 + d.getUTCMonth() + months;
  const year = Math.floor(total / 12);
  const monthIndex = total - year * 12;
  const day = Math.min(d.getUTCDate(), daysInMonth(year, monthIndex));
  const timeOfDay = t - utcDate(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  const r = utcDate(year, monthIndex, day) + timeOfDay;
  // Beyond the Date range (±275,760 years) the calendar arithmetic yields NaN, and a NaN
  // bound compares false both ways, so evaluators testing `t >= lower` and `!(t < lower)`
  // would disagree. The instant lies past every representable one in the direction counted.
  return Number.isNaN(r) ? (months < 0 ? -Infinity : Infinity) : r;
}

/** Start of the calendar period of `unit` containing t. Weeks start on Monday 00:00 UTC (ISO). */
export function periodStart(t: number, unit: TimeUnit): number {
  const fixed = FIXED[unit];
  if (unit === "week") {
    const day = Math.floor(t / DAY_MS) * DAY_MS;
    const dow = new Date(day).getUTCDay(); // 0 = Sunday
    return day - ((dow + 6) % 7) * DAY_MS;
  }
  if (fixed !== undefined) return Math.floor(t / fixed) * fixed;
  const d = new Date(t);
  const y = d.getUTCFullYear();
  switch (unit) {
    case "month":
      return utcDate(y, d.getUTCMonth(), 1);
    case "year":
      return utcDate(y, 0, 1);
    case "decade":
      return utcDate(Math.floor(y / 10) * 10, 0, 1);
    case "century":
      return utcDate(Math.floor(y / 100) * 100, 0, 1);
    default:
      return utcDate(Math.floor(y / 1000) * 1000, 0, 1);
  }
}

/** The calendar period `this|last|next unit` relative to now. */
export function relativePeriod(which: "this" | "last" | "next", unit: TimeUnit, now: number): TimeSpan {
  const s = periodStart(now, unit);
  const k = which === "this" ? 0 : which === "last" ? -1 : 1;
  return { start: addUnits(s, k, unit), end: addUnits(s, k + 1, unit), instant: false };
}

/**
 * Resolve a time keyword (`now`, `today`, `yesterday`, `tomorrow`, `this/last/next
 * UNIT`) to its UTC interval for the given `now` (epoch ms). `now` is an instant.
 */
export function resolveTimeRef(ref: TimeWord | RelPeriod, now: number): TimeSpan {
  if (ref.type === "RelPeriod") return relativePeriod(ref.which, ref.unit, now);
  const d = Math.floor(now / DAY_MS) * DAY_MS;
  switch (ref.word) {
    case "now":
      return { start: now, end: now, instant: true };
    case "today":
      return { start: d, end: d + DAY_MS, instant: false };
    case "yesterday":
      return { start: d - DAY_MS, end: d, instant: false };
    case "tomorrow":
      return { start: d + DAY_MS, end: d + 2 * DAY_MS, instant: false };
  }
}

/** The runtime value of a time keyword: `now` is a Date, the others DateIntervals. */
export function timeRefValue(ref: TimeWord | RelPeriod, now: number): Date | DateInterval {
  const s = resolveTimeRef(ref, now);
  return s.instant ? new Date(s.start) : new DateInterval(s.start, s.end);
}

/**
 * The span a value denotes as a time reference: a DateInterval its interval, a
 * `YYYY-MM-DD` string its UTC day, any other timestamp (ISO string, epoch-ms
 * number, Date) an instant. Null when the value is not a time.
 */
export function spanOfValue(v: unknown): TimeSpan | null {
  if (v instanceof DateInterval) return { start: v.start, end: v.end, instant: false };
  if (typeof v === "string") {
    const p = parseTimestamp(v);
    return p === null ? null : { start: p.start, end: p.end, instant: !p.day };
  }
  const t = toInstant(v);
  return t === null ? null : { start: t, end: t, instant: true };
}

/** `date(y, m, d)`: the UTC day, or null if the arguments are not a real calendar date. */
export function dateValue(y: unknown, m: unknown, d: unknown): DateInterval | null {
  if (!Number.isInteger(y) || !Number.isInteger(m) || !Number.isInteger(d)) return null;
  const yy = y as number;
  const mm = m as number;
  const dd = d as number;
  if (mm < 1 || mm > 12 || dd < 1 || dd > daysInMonth(yy, mm - 1)) return null;
  const s = utcDate(yy, mm - 1, dd);
  return new DateInterval(s, s + DAY_MS);
}

/**
 * The set of instants an occurs tail accepts: `lower`/`upper` bounds (absent =
 * unbounded), an optional excluded window [exclude.start, exclude.end) for the
 * `!=` forms, and `empty` when nothing can match (`< 0 days before X`).
 */
export interface OccursBounds {
  lower?: number;
  lowerInclusive: boolean;
  upper?: number;
  upperInclusive: boolean;
  exclude?: { start: number; end: number };
  empty?: boolean;
}

/** Does instant t satisfy the bounds? */
export function inBounds(t: number, b: OccursBounds): boolean {
  if (b.empty) return false;
  if (b.lower !== undefined && (b.lowerInclusive ? t < b.lower : t <= b.lower)) return false;
  if (b.upper !== undefined && (b.upperInclusive ? t > b.upper : t >= b.upper)) return false;
  if (b.exclude !== undefined && t >= b.exclude.start && t < b.exclude.end) return false;
  return true;
}

function range(lower: number | undefined, li: boolean, upper: number | undefined, ui: boolean): OccursBounds {
  const b: OccursBounds = { lowerInclusive: li, upperInclusive: ui };
  if (lower !== undefined) b.lower = lower;
  if (upper !== undefined) b.upper = upper;
  if (lower !== undefined && upper !== undefined && (lower > upper || (lower === upper && !(li && ui)))) b.empty = true;
  return b;
}

/**
 * The bounds of an occurs tail given the spans its references resolved to
 * (`spans[0]`, and `spans[1]` for the end of `between`). See pql.md §8.2:
 * - on X: s ≤ T < e (instant: T = X); before X: T < s; after/from X: T ≥ e (instant: T > X);
 * - between X and Y: s_X ≤ T < e_Y (instant Y: T ≤ Y);
 * - OP n U before X: anchor A = s, windows counted back from A;
 * - OP n U after X: anchor A = e, counted forward; for an instant X the bound at A is strict.
 */
export function boundsFromSpans(tail: OccursTail, spans: readonly TimeSpan[]): OccursBounds {
  const x = spans[0]!;
  switch (tail.kind) {
    case "on":
      return x.instant ? range(x.start, true, x.start, true) : range(x.start, true, x.end, false);
    case "direction":
      if (tail.direction === "before") return range(undefined, false, x.start, false);
      return range(x.end, !x.instant, undefined, false);
    case "between": {
      const y = spans[1]!;
      return range(x.start, true, y.end, y.instant);
    }
    case "relative": {
      const { op, amount: n, unit } = tail;
      if (tail.direction === "before") {
        const a = x.start;
        switch (op) {
          case "<":
            return range(addUnits(a, -n, unit), false, a, false);
          case "<=":
            return range(addUnits(a, -n, unit), true, a, false);
          case ">":
            return range(undefined, false, addUnits(a, -n, unit), false);
          case ">=":
            return range(undefined, false, addUnits(a, -n, unit), true);
          case "=":
            return range(addUnits(a, -n, unit), true, addUnits(a, -(n - 1), unit), false);
          case "!=": {
            const b = range(undefined, false, a, false);
            b.exclude = { start: addUnits(a, -n, unit), end: addUnits(a, -(n - 1), unit) };
            return b;
          }
        }
      }
      const a = x.end;
      const strictAtA = x.instant;
      switch (op) {
        case "<":
          return range(a, !strictAtA, addUnits(a, n, unit), false);
        case "<=":
          return range(a, !strictAtA, addUnits(a, n, unit), true);
        case ">":
          return range(addUnits(a, n, unit), false, undefined, false);
        case ">=":
          return range(addUnits(a, n, unit), true, undefined, false);
        case "=":
          return range(addUnits(a, n - 1, unit), !(strictAtA && n === 1), addUnits(a, n, unit), false);
        case "!=": {
          const b = range(a, !strictAtA, undefined, false);
          b.exclude = { start: addUnits(a, n - 1, unit), end: addUnits(a, n, unit) };
          return b;
        }
      }
    }
  }
}

/** The time references of a tail, in the order `boundsFromSpans` expects their spans. */
export function tailRefs(tail: OccursTail) {
  return tail.kind === "between" ? [tail.from, tail.to] : [tail.ref];
}

/**
 * Concrete bounds of an occurs tail for a given `now` (epoch ms, Date or ISO
 * string) when every reference is a time keyword or a `date(y, m, d)` call with
 * integer literal arguments; null when a reference depends on data.
 */
export function occursBounds(tail: OccursTail, now: number | Date | string): OccursBounds | null {
  const n = toInstant(now);
  if (n === null) throw new TypeError(`occursBounds: invalid now ${String(now)}`);
  const spans: TimeSpan[] = [];
  for (const ref of tailRefs(tail)) {
    if (ref.type === "TimeWord" || ref.type === "RelPeriod") {
      spans.push(resolveTimeRef(ref, n));
      continue;
    }
    if (ref.type === "Call" && ref.name === "date" && ref.args.length === 3) {
      const vals = ref.args.map((a) => (a.type === "Literal" && a.kind === "integer" ? a.value : null));
      const d = dateValue(vals[0], vals[1], vals[2]);
      if (d === null) return { lowerInclusive: false, upperInclusive: false, empty: true };
      spans.push({ start: d.start, end: d.end, instant: false });
      continue;
    }
    return null;
  }
  return boundsFromSpans(tail, spans);
}
