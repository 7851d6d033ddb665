/**
 * Quota periods are UTC calendar periods (decisions §3): the day resets at
 * 00:00 UTC and the month on the 1st at 00:00 UTC. Keys are derived from the
 * injected clock's epoch milliseconds only, never from the host's time zone.
 */
import type { PeriodicQuota } from "./quotas.js";

/** "YYYY-MM-DD" of the UTC day containing `ms`. */
export function utcDayKey(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** "YYYY-MM" of the UTC month containing `ms`. */
export function utcMonthKey(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/** The counter period a periodic quota uses at time `ms`. */
export function periodKey(quota: PeriodicQuota, ms: number): string {
  return quota === "dailyConsumerDeleteIdentitiesQuota" ? utcDayKey(ms) : utcMonthKey(ms);
}
