/**
 * Parsing of timestamp strings (pql.md §4.4): ISO 8601 date-times with or
 * without an offset (no offset means UTC) and XDM dates `YYYY-MM-DD`, which
 * denote their whole UTC day. Everything is UTC: no local time zone is ever
 * consulted (Date.parse would read offset-less strings as local time).
 */

export const DAY_MS = 86_400_000;

/** A parsed timestamp: an instant (start = end) or, for a date, its UTC day [start, end). */
export interface ParsedTime {
  start: number;
  end: number;
  /** true for a date-only string (an interval of one day). */
  day: boolean;
}

// No nested or adjacent unbounded quantifiers: linear on any input.
const ISO =
  /^([+-]?\d{4,6})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/** Epoch ms of a UTC calendar date; works for years 0-99 too (Date.UTC maps those to 19xx). */
export function utcDate(year: number, monthIndex: number, day: number): number {
  if (year >= 100) return Date.UTC(year, monthIndex, day);
  const d = new Date(0);
  d.setUTCFullYear(year, monthIndex, day);
  return d.getTime();
}

export function isLeapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}

const DAYS_IN_MONTH: readonly number[] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Days in a month (monthIndex 0-11). A shared table: this runs for every event timestamp parsed, and a literal would allocate an array each time. */
export function daysInMonth(y: number, monthIndex: number): number {
  return monthIndex === 1 && isLeapYear(y) ? 29 : DAYS_IN_MONTH[monthIndex]!;
}

function digits2(s: string, i: number): number {
  const a = s.charCodeAt(i) - 48;
  const b = s.charCodeAt(i + 1) - 48;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * The instant of the most common shape, `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`,
 * read by hand without a regex or an allocation (events carry millions of
 * these). Undefined when the string has another shape: the caller then uses
 * the general parser, which gives the same result for this shape.
 */
function fastInstant(s: string): number | null | undefined {
  const n = s.length;
  if (n < 20 || s.charCodeAt(10) !== 84 /* T */ || s.charCodeAt(4) !== 45 || s.charCodeAt(7) !== 45) return undefined;
  if (s.charCodeAt(13) !== 58 || s.charCodeAt(16) !== 58) return undefined;
  const y = digits2(s, 0) * 100 + digits2(s, 2);
  const mo = digits2(s, 5);
  const d = digits2(s, 8);
  const h = digits2(s, 11);
  const mi = digits2(s, 14);
  const sec = digits2(s, 17);
  if (y < 100 || mo < 1 || d < 1 || h < 0 || mi < 0 || sec < 0 || digits2(s, 0) < 0 || digits2(s, 2) < 0) return undefined;
  let i = 19;
  let ms = 0;
  if (s.charCodeAt(i) === 46 /* . */) {
    let scale = 100;
    i++;
    const start = i;
    while (i < n && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) {
      ms += (s.charCodeAt(i) - 48) * scale;
      scale /= 10;
      i++;
    }
    if (i === start || i - start > 9) return undefined;
    ms = Math.floor(ms + 1e-6);
  }
  let offset = 0;
  const z = s.charCodeAt(i);
  if (z === 90 /* Z */ && i === n - 1) offset = 0;
  else if ((z === 43 || z === 45) && i === n - 6 && s.charCodeAt(i + 3) === 58) {
    const oh = digits2(s, i + 1);
    const om = digits2(s, i + 4);
    if (oh < 0 || om < 0) return undefined;
    if (oh > 18 || om > 59) return null;
    offset = (z === 45 ? -1 : 1) * (oh * 60 + om) * 60_000;
  } else return undefined;
  if (mo > 12 || d > daysInMonth(y, mo - 1) || h > 23 || mi > 59 || sec > 59) return null;
  return Date.UTC(y, mo - 1, d, h, mi, sec, ms) - offset;
}

/** The instant of a timestamp string (a date's midnight), or null. */
export function parseInstant(s: string): number | null {
  const fast = fastInstant(s);
  if (fast !== undefined) return fast;
  const p = parseTimestamp(s);
  return p === null ? null : p.start;
}

/** Parse an ISO 8601 timestamp or XDM date; null if it is not one (or not a real date). */
export function parseTimestamp(s: string): ParsedTime | null {
  if (s.length < 10 || s.length > 40) return null;
  const c = s.charCodeAt(0);
  // Cheap reject before running the regex: most strings compared are not dates.
  if (!((c >= 48 && c <= 57) || c === 43 || c === 45)) return null;
  const m = ISO.exec(s);
  if (m === null) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month - 1)) return null;
  const date = utcDate(year, month - 1, day);
  if (m[4] === undefined) return { start: date, end: date + DAY_MS, day: true };
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (hour > 23 || minute > 59 || second > 59) return null;
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000 + 1e-6);
  let offset = 0;
  const z = m[8];
  if (z !== undefined && z !== "Z" && z !== "z") {
    const sign = z[0] === "-" ? -1 : 1;
    const digits = z.slice(1).replace(":", "");
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 18 || om > 59) return null;
    offset = sign * (oh * 60 + om) * 60_000;
  }
  const t = date + ((hour * 60 + minute) * 60 + second) * 1000 + ms - offset;
  return { start: t, end: t, day: false };
}
