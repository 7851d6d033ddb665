/**
 * Concrete [lower, upper] bounds of an `occurs` tail at a job's `now`, for the
 * SQL compiler (pql.md §8.2). Only the tails whose bounds do not depend on the
 * calendar are covered here: references `now`, `today`, `yesterday`,
 * `tomorrow`, and fixed-length units (millisecond … week). Everything else
 * (`this month`, `date(...)`, month/year arithmetic) returns null and the
 * definition is evaluated by the in-memory compiled evaluator instead.
 *
 * WHY a second copy of these rules: @segmentd/pql computes the same bounds in
 * runtime/time.ts (`occursBounds`) but does not export it from its package
 * entry point; once it does, this file should become a call to it (and the
 * SQL back end then covers calendar units too). The differential tests
 * (test/batch/sql-differential.test.ts) pin this copy to `evaluate`.
 */
import type { OccursTail, TimeRef, TimeUnit } from "@segmentd/pql";

export interface Bounds {
  lower?: number;
  lowerInclusive: boolean;
  upper?: number;
  upperInclusive: boolean;
  exclude?: { start: number; end: number };
  empty?: boolean;
}

interface Span {
  start: number;
  end: number;
  instant: boolean;
}

const DAY = 86_400_000;
const FIXED_UNITS: Partial<Record<TimeUnit, number>> = {
  millisecond: 1,
  second: 1000,
  minute: 60_000,
  hour: 3_600_000,
  day: DAY,
  week: 7 * DAY,
};

function spanOf(ref: TimeRef, now: number): Span | null {
  if (ref.type !== "TimeWord") return null;
  const d = Math.floor(now / DAY) * DAY;
  switch (ref.word) {
    case "now":
      return { start: now, end: now, instant: true };
    case "today":
      return { start: d, end: d + DAY, instant: false };
    case "yesterday":
      return { start: d - DAY, end: d, instant: false };
    case "tomorrow":
      return { start: d + DAY, end: d + 2 * DAY, instant: false };
  }
}

function range(lower: number | undefined, li: boolean, upper: number | undefined, ui: boolean): Bounds {
  const b: Bounds = { lowerInclusive: li, upperInclusive: ui };
  if (lower !== undefined) b.lower = lower;
  if (upper !== undefined) b.upper = upper;
  if (lower !== undefined && upper !== undefined && (lower > upper || (lower === upper && !(li && ui)))) b.empty = true;
  return b;
}

/** The bounds, or null when this tail is outside what the SQL back end covers. */
export function tailBounds(tail: OccursTail, now: number): Bounds | null {
  switch (tail.kind) {
    case "on": {
      const x = spanOf(tail.ref, now);
      if (x === null) return null;
      return x.instant ? range(x.start, true, x.start, true) : range(x.start, true, x.end, false);
    }
    case "direction": {
      const x = spanOf(tail.ref, now);
      if (x === null) return null;
      if (tail.direction === "before") return range(undefined, false, x.start, false);
      return range(x.end, !x.instant, undefined, false);
    }
    case "between": {
      const x = spanOf(tail.from, now);
      const y = spanOf(tail.to, now);
      if (x === null || y === null) return null;
      return range(x.start, true, y.end, y.instant);
    }
    case "relative": {
      const x = spanOf(tail.ref, now);
      const size = FIXED_UNITS[tail.unit];
      if (x === null || size === undefined) return null;
      const n = tail.amount;
      if (tail.direction === "before") {
        const a = x.start;
        const back = (k: number) => a - k * size;
        switch (tail.op) {
          case "<":
            return range(back(n), false, a, false);
          case "<=":
            return range(back(n), true, a, false);
          case ">":
            return range(undefined, false, back(n), false);
          case ">=":
            return range(undefined, false, back(n), true);
          case "=":
            return range(back(n), true, back(n - 1), false);
          case "!=": {
            const b = range(undefined, false, a, false);
            b.exclude = { start: back(n), end: back(n - 1) };
            return b;
          }
        }
      }
      const a = x.end;
      const strictAtA = x.instant;
      const fwd = (k: number) => a + k * size;
      switch (tail.op) {
        case "<":
          return range(a, !strictAtA, fwd(n), false);
        case "<=":
          return range(a, !strictAtA, fwd(n), true);
        case ">":
          return range(fwd(n), false, undefined, false);
        case ">=":
          return range(fwd(n), true, undefined, false);
        case "=":
          return range(fwd(n - 1), !(strictAtA && n === 1), fwd(n), false);
        case "!=": {
          const b = range(a, !strictAtA, undefined, false);
          b.exclude = { start: fwd(n - 1), end: fwd(n) };
          return b;
        }
      }
    }
  }
}
