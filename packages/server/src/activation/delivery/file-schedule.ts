// When a file destination exports (AEP's scheduled file exports): daily at the flow's start time,
// or every 3, 6, 8 or 12 hours from it. The instants are anchor + k·period (k ≥ 0), the anchor
// being the earliest selected audience's start (`schedule.startDate`/`startTime`, or when it was
// added). A server that was down over several instants runs once when it is back, not once per
// missed instant.
import type { Dataflow, FileFrequency } from "../types.js";

const HOUR = 3_600_000;

export const FREQUENCY_MS: Readonly<Record<FileFrequency, number>> = {
  DAILY: 24 * HOUR,
  EVERY_3_HOURS: 3 * HOUR,
  EVERY_6_HOURS: 6 * HOUR,
  EVERY_8_HOURS: 8 * HOUR,
  EVERY_12_HOURS: 12 * HOUR,
};

/** The flow's schedule anchor: its earliest audience start (null: no audience selected). */
export function anchorOf(flow: Dataflow): number | null {
  if (flow.segmentSelectors.length === 0) return null;
  return Math.min(...flow.segmentSelectors.map((s) => s.startTime));
}

/** The first instant to export at for a schedule seen for the first time at `now`: the current slot (due at once), or the anchor when it is ahead. */
export function firstDue(anchor: number, periodMs: number, now: number): number {
  if (anchor >= now) return anchor;
  return anchor + Math.floor((now - anchor) / periodMs) * periodMs;
}

/** The first instant strictly after `t`. */
export function dueAfter(anchor: number, periodMs: number, t: number): number {
  if (t < anchor) return anchor;
  return anchor + (Math.floor((t - anchor) / periodMs) + 1) * periodMs;
}

/**
 * The next instant after a run for `due` finished at `now`: the first one after both (missed
 * instants are skipped — one run catches them all up).
 */
export function nextAfterRun(anchor: number, periodMs: number, due: number, now: number): number {
  return dueAfter(anchor, periodMs, Math.max(due, now));
}
