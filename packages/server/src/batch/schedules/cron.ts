/**
 * Quartz cron expressions, evaluated in UTC (segmentation-api.md §5):
 *   seconds minutes hours day-of-month month day-of-week [year]
 * Specials: `*` `?` `-` `,` `/`; day-of-month `L`, `L-n`, `nW`, `LW`;
 * day-of-week `nL` (last such weekday of the month), `n#k` (k-th such weekday);
 * months JAN–DEC, weekdays SUN–SAT (1 = Sunday … 7 = Saturday), names
 * case-insensitive. As in Quartz, exactly one of day-of-month and day-of-week
 * must be `?`.
 */

export class CronError extends Error {}

interface DaySpec {
  /** Plain day-of-month or weekday values (empty when only specials are used). */
  values: Set<number>;
  any: boolean;
  /** Day-of-month: `L` / `L-n` (offset n from the last day). */
  lastOffset?: number;
  /** Day-of-month: nearest weekday to day n (`nW`), or `LW`. */
  nearestWeekday?: number | "L";
  /** Day-of-week: `nL`. */
  lastWeekday?: number;
  /** Day-of-week: `n#k`. */
  nth?: { weekday: number; k: number };
}

export interface CronSchedule {
  readonly text: string;
  /** The first firing instant strictly after `after` (epoch ms), or null if none within 10 years. */
  next(after: number): number | null;
}

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

function value(token: string, min: number, max: number, names: readonly string[] | null, field: string): number {
  const upper = token.toUpperCase();
  const named = names?.indexOf(upper) ?? -1;
  const n = named >= 0 ? named + min : /^\d+$/.test(token) ? Number(token) : NaN;
  if (!Number.isInteger(n) || n < min || n > max) throw new CronError(`Invalid ${field} value "${token}" (allowed ${min}-${max}${names ? ` or ${names[0]}-${names[names.length - 1]}` : ""})`);
  return n;
}

/** `*`, `a`, `a-b`, `*\/s`, `a/s`, `a-b/s`, comma lists. */
function parseSet(text: string, min: number, max: number, names: readonly string[] | null, field: string): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(",")) {
    if (part === "") throw new CronError(`Empty item in ${field} "${text}"`);
    const [range, stepText] = part.split("/") as [string, string | undefined];
    const step = stepText === undefined ? 1 : value(stepText, 1, max, null, `${field} step`);
    let lo: number, hi: number;
    if (range === "*") {
      lo = min;
      hi = max;
    } else if (range.includes("-")) {
      const [a, b] = range.split("-") as [string, string];
      lo = value(a, min, max, names, field);
      hi = value(b, min, max, names, field);
      if (hi < lo) throw new CronError(`Invalid ${field} range "${range}"`);
    } else {
      lo = value(range, min, max, names, field);
      hi = stepText === undefined ? lo : max;
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return out;
}

function parseDayOfMonth(text: string): DaySpec {
  const u = text.toUpperCase();
  if (u === "?") return { values: new Set(), any: true };
  if (u === "L") return { values: new Set(), any: false, lastOffset: 0 };
  const lm = /^L-(\d+)$/.exec(u);
  if (lm) return { values: new Set(), any: false, lastOffset: value(lm[1]!, 0, 30, null, "day-of-month offset") };
  if (u === "LW") return { values: new Set(), any: false, nearestWeekday: "L" };
  const wm = /^(\d+)W$/.exec(u);
  if (wm) return { values: new Set(), any: false, nearestWeekday: value(wm[1]!, 1, 31, null, "day-of-month") };
  return { values: parseSet(u, 1, 31, null, "day-of-month"), any: u === "*" };
}

function parseDayOfWeek(text: string): DaySpec {
  const u = text.toUpperCase();
  if (u === "?") return { values: new Set(), any: true };
  const lm = /^([A-Z0-9]+)L$/.exec(u);
  if (lm && u !== "L") return { values: new Set(), any: false, lastWeekday: value(lm[1]!, 1, 7, DAYS, "day-of-week") };
  if (u === "L") return { values: new Set([7]), any: false };
  const nm = /^([A-Z0-9]+)#(\d)$/.exec(u);
  if (nm) return { values: new Set(), any: false, nth: { weekday: value(nm[1]!, 1, 7, DAYS, "day-of-week"), k: value(nm[2]!, 1, 5, null, "day-of-week occurrence") } };
  return { values: parseSet(u, 1, 7, DAYS, "day-of-week"), any: u === "*" };
}

function daysIn(y: number, m0: number): number {
  return new Date(Date.UTC(y, m0 + 1, 0)).getUTCDate();
}

function dayMatches(y: number, m0: number, d: number, dom: DaySpec, dow: DaySpec): boolean {
  const last = daysIn(y, m0);
  const weekday = new Date(Date.UTC(y, m0, d)).getUTCDay() + 1; // 1 = Sunday
  if (!dom.any) {
    if (dom.lastOffset !== undefined) return d === last - dom.lastOffset;
    if (dom.nearestWeekday !== undefined) {
      const target = dom.nearestWeekday === "L" ? last : Math.min(dom.nearestWeekday, last);
      const tw = new Date(Date.UTC(y, m0, target)).getUTCDay();
      // Nearest weekday, never crossing into another month (Quartz rule).
      let day = target;
      if (tw === 6) day = target === 1 ? 3 : target - 1;
      else if (tw === 0) day = target === last ? target - 2 : target + 1;
      return d === day;
    }
    return dom.values.has(d);
  }
  if (dow.any) return true;
  if (dow.lastWeekday !== undefined) return weekday === dow.lastWeekday && d + 7 > last;
  if (dow.nth !== undefined) return weekday === dow.nth.weekday && Math.ceil(d / 7) === dow.nth.k;
  return dow.values.has(weekday);
}

export function parseCron(text: string): CronSchedule {
  const fields = text.trim().split(/\s+/);
  if (fields.length < 6 || fields.length > 7) throw new CronError(`A Quartz cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]); got ${fields.length}`);
  const [s, mi, h, domText, mo, dowText, yearText] = fields as [string, string, string, string, string, string, string | undefined];
  const seconds = parseSet(s, 0, 59, null, "seconds");
  const minutes = parseSet(mi, 0, 59, null, "minutes");
  const hours = parseSet(h, 0, 23, null, "hours");
  const months = parseSet(mo, 1, 12, MONTHS, "month");
  const dom = parseDayOfMonth(domText);
  const dow = parseDayOfWeek(dowText);
  if ((domText === "?") === (dowText === "?")) throw new CronError("Exactly one of day-of-month and day-of-week must be '?'");
  const years = yearText === undefined || yearText === "*" ? null : parseSet(yearText, 1970, 2099, null, "year");
  const secs = [...seconds].sort((a, b) => a - b);
  const mins = [...minutes].sort((a, b) => a - b);
  const hrs = [...hours].sort((a, b) => a - b);
  return {
    text,
    next(after: number): number | null {
      const DAY = 86_400_000;
      const startDay = Math.floor(after / DAY) * DAY;
      // Ten years of days at most: enough for any expression that ever fires again.
      for (let day = startDay, i = 0; i < 3660; day += DAY, i++) {
        const dt = new Date(day);
        const y = dt.getUTCFullYear(), m0 = dt.getUTCMonth(), d = dt.getUTCDate();
        if (years !== null && !years.has(y)) continue;
        if (!months.has(m0 + 1) || !dayMatches(y, m0, d, dom, dow)) continue;
        for (const hh of hrs) {
          if (day + (hh + 1) * 3_600_000 <= after) continue;
          for (const mm of mins) {
            for (const ss of secs) {
              const t = day + ((hh * 60 + mm) * 60 + ss) * 1000;
              if (t > after) return t;
            }
          }
        }
      }
      return null;
    },
  };
}
