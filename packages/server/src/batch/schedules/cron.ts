/**
 * Quartz cron expressions, evaluated in UTC (segmentation-api.md §5):
 *   seconds minutes hours day-of-month month day-of-week [year]
 * Specials: `*` `?` `-` `,` `/`; day-of-month `L`, `L-n`, `nW`, `LW`;
 * day-of-week `nL` (last such weekday of the month), `n#k` (k-th such weekday);
 * months JAN–DEC, weekdays SUN–SAT (1 = Sunday … 7 = Saturday), names
 * case-insensitive. As in Quartz, exactly one of day-of-month and day-of-week
 * must be `?`.
 *
 * croner computes the firing times (Quartz weekday numbering, seconds and year
 * fields, L/W/#). What stays here is Quartz's grammar, checked field by field
 * so that a refused schedule names the field and the allowed range (croner is
 * more lenient: `?` anywhere, weekday 0, lists mixing `L` with plain days), and
 * `L-n`, which croner lacks: it runs as `L` shifted back n days.
 */
import { Cron } from "croner";

export class CronError extends Error {}

export interface CronSchedule {
  readonly text: string;
  /** The first firing instant strictly after `after` (epoch ms), or null if it never fires again. */
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

/** Checks `*`, `a`, `a-b`, `*\/s`, `a/s`, `a-b/s` and comma lists; returns the field with names as numbers. */
function checkSet(text: string, min: number, max: number, names: readonly string[] | null, field: string): string {
  return text
    .split(",")
    .map((part) => {
      if (part === "") throw new CronError(`Empty item in ${field} "${text}"`);
      const [range, stepText] = part.split("/") as [string, string | undefined];
      const step = stepText === undefined ? "" : `/${value(stepText, 1, max, null, `${field} step`)}`;
      if (range === "*") return `*${step}`;
      if (range.includes("-")) {
        const [a, b] = range.split("-") as [string, string];
        const lo = value(a, min, max, names, field);
        const hi = value(b, min, max, names, field);
        if (hi < lo) throw new CronError(`Invalid ${field} range "${range}"`);
        return `${lo}-${hi}${step}`;
      }
      const lo = value(range, min, max, names, field);
      // Quartz's `a/s` runs from a to the field's end; croner reads it so with sloppyRanges.
      return `${lo}${step}`;
    })
    .join(",");
}

/** The day-of-month field in croner's syntax, and the `L-n` offset (0 otherwise). */
function checkDayOfMonth(text: string): { field: string; lastOffset: number } {
  const u = text.toUpperCase();
  if (u === "?" || u === "L" || u === "LW") return { field: u, lastOffset: 0 };
  const lm = /^L-(\d+)$/.exec(u);
  if (lm) return { field: "L", lastOffset: value(lm[1]!, 0, 30, null, "day-of-month offset") };
  const wm = /^(\d+)W$/.exec(u);
  if (wm) return { field: `${value(wm[1]!, 1, 31, null, "day-of-month")}W`, lastOffset: 0 };
  return { field: checkSet(u, 1, 31, null, "day-of-month"), lastOffset: 0 };
}

function checkDayOfWeek(text: string): string {
  const u = text.toUpperCase();
  if (u === "?") return u;
  // A lone `L` is Saturday, the week's last day.
  if (u === "L") return "7";
  const lm = /^([A-Z0-9]+)L$/.exec(u);
  if (lm) return `${value(lm[1]!, 1, 7, DAYS, "day-of-week")}#L`;
  const nm = /^([A-Z0-9]+)#(\d)$/.exec(u);
  if (nm) return `${value(nm[1]!, 1, 7, DAYS, "day-of-week")}#${value(nm[2]!, 1, 5, null, "day-of-week occurrence")}`;
  return checkSet(u, 1, 7, DAYS, "day-of-week");
}

const DAY_MS = 86_400_000;

export function parseCron(text: string): CronSchedule {
  const fields = text.trim().split(/\s+/);
  if (fields.length < 6 || fields.length > 7) throw new CronError(`A Quartz cron expression has 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]); got ${fields.length}`);
  const [s, mi, h, domText, mo, dowText, yearText] = fields as [string, string, string, string, string, string, string | undefined];
  const parts = [checkSet(s, 0, 59, null, "seconds"), checkSet(mi, 0, 59, null, "minutes"), checkSet(h, 0, 23, null, "hours")];
  const months = checkSet(mo, 1, 12, MONTHS, "month");
  const dom = checkDayOfMonth(domText);
  const dow = checkDayOfWeek(dowText);
  if ((domText === "?") === (dowText === "?")) throw new CronError("Exactly one of day-of-month and day-of-week must be '?'");
  parts.push(dom.field, months, dow);
  if (yearText !== undefined && yearText !== "*") parts.push(checkSet(yearText, 1970, 2099, null, "year"));
  let cron: Cron;
  try {
    cron = new Cron(parts.join(" "), {
      timezone: "UTC",
      mode: "6-or-7-parts",
      alternativeWeekdays: true,
      sloppyRanges: true,
      // One of the two is `?` (any), so AND is Quartz's meaning.
      domAndDow: true,
      dayOffset: -dom.lastOffset,
    });
  } catch (err) {
    throw new CronError((err as Error).message.replace(/^CronPattern: /, ""));
  }
  const inItsMonth = (at: Date) => dom.lastOffset === 0 || new Date(at.getTime() + dom.lastOffset * DAY_MS).getUTCMonth() === at.getUTCMonth();
  return {
    text,
    next(after: number): number | null {
      let at = cron.nextRun(new Date(after));
      // `L-n` shifted out of its month (n ≥ that month's length) is no day of it, as in Quartz: the next month's, at most a year on.
      for (let i = 0; at !== null && !inItsMonth(at); i++) at = i < 12 ? cron.nextRun(at) : null;
      return at === null ? null : at.getTime();
    },
  };
}
