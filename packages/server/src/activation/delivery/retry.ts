// When a failed delivery unit is tried again. Svix's schedule (immediately, 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h, 10 h…) with ±20 % jitter, each delay capped at an eighth of the flow's retry
// period so that a short period (tests, impatient receivers) still gets several attempts; after
// the period the unit is a dead letter. A receiver's Retry-After (429/503) is honoured when longer.
export const SVIX_SCHEDULE_MS = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000];

export interface RetryDecision {
  dead: boolean;
  nextAt: number;
}

/**
 * `attempts`: failed attempts so far including this one (≥ 1); `firstAttemptAt`: when the unit was
 * first sent. `random` in [0, 1).
 */
export function nextRetry(attempts: number, firstAttemptAt: number, now: number, retryPeriodMs: number, retryAfterMs: number | null, random: number = Math.random()): RetryDecision {
  const base = SVIX_SCHEDULE_MS[Math.min(attempts, SVIX_SCHEDULE_MS.length - 1)]!;
  const capped = Math.min(base, retryPeriodMs / 8);
  // The first retry is immediate only once: later zero delays still wait a little.
  const jittered = Math.max(attempts > 1 ? 200 : 0, Math.round(capped * (0.8 + 0.4 * random)));
  const delay = Math.max(jittered, retryAfterMs ?? 0);
  const nextAt = now + delay;
  return { dead: nextAt - firstAttemptAt > retryPeriodMs, nextAt };
}

/** Retry-After as seconds or an HTTP date, in ms from now; null when absent or unreadable. Capped at an hour. */
export function retryAfterMs(header: string | undefined, now: number): number | null {
  if (header === undefined || header.trim() === "") return null;
  const s = Number(header);
  const ms = Number.isFinite(s) ? s * 1000 : Date.parse(header) - now;
  return Number.isFinite(ms) && ms >= 0 ? Math.min(ms, 3_600_000) : null;
}
