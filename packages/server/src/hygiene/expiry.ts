/**
 * Expiry values of dataset expirations (hygiene-api.md §5.4): an ISO-8601 date
 * (`YYYY-MM-DD` = 00:00:00Z that day) or date-time; without an offset the time
 * is UTC. Must be at least 24 hours after now.
 */
import { ttlInvalid } from "./errors.js";

export const MIN_EXPIRY_LEAD_MS = 24 * 60 * 60 * 1000;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/;

function validDate(y: number, m: number, d: number): boolean {
  const t = new Date(Date.UTC(y, m - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d;
}

/** Epoch ms, or a 400 naming the accepted formats. */
export function parseExpiry(raw: unknown): number {
  if (typeof raw !== "string") throw ttlInvalid("'expiry' is required: an ISO-8601 date (YYYY-MM-DD) or date-time.");
  const s = raw.trim();
  let m = DATE.exec(s);
  if (m) {
    const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (!validDate(y, mo, d)) throw ttlInvalid(`'expiry' ${JSON.stringify(raw)} is not a valid date.`);
    return Date.UTC(y, mo - 1, d);
  }
  m = DATE_TIME.exec(s);
  if (!m) throw ttlInvalid(`'expiry' ${JSON.stringify(raw)} is not an ISO-8601 date (YYYY-MM-DD) or date-time.`);
  const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m![i] ?? 0)) as [number, number, number, number, number, number];
  if (!validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59) throw ttlInvalid(`'expiry' ${JSON.stringify(raw)} is not a valid date-time.`);
  const ms = m[7] ? Math.floor(Number(`0${m[7]}`) * 1000) : 0;
  let t = Date.UTC(y, mo - 1, d, h, mi, sec, ms);
  const offset = m[8];
  if (offset && offset !== "Z") {
    const sign = offset.startsWith("-") ? -1 : 1;
    const [oh, om] = offset.slice(1).split(":").map(Number) as [number, number];
    t -= sign * (oh * 60 + om) * 60_000;
  }
  return t;
}

export function checkLeadTime(expiry: number, now: number): void {
  if (expiry < now + MIN_EXPIRY_LEAD_MS) {
    throw ttlInvalid(
      `'expiry' must be at least 24 hours in the future: ${new Date(expiry).toISOString()} is before ${new Date(now + MIN_EXPIRY_LEAD_MS).toISOString()}.`,
    );
  }
}
