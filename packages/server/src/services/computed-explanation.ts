/**
 * What explain shows of a computed attribute the expression reads (issue #41): shared by the explain
 * engine (metrics/explain.ts), which shows it, and computed/explain-values.ts, which computes it.
 */

/** An event contributing to a computed attribute's value. */
export interface ContributingEvent {
  _id: unknown;
  eventType: unknown;
  timestamp: string;
  /** The field the function reads (null for COUNT, or when the event has none). */
  value: unknown;
  /** The first instant at which the event is outside the lookback. */
  leavesAt: string;
}

export interface ComputedAttributeExplanation {
  name: string;
  path: string;
  status: string;
  function: string;
  duration: { count: number; unit: string };
  value: unknown;
  /** How many events contribute; `events` lists the latest of them. */
  contributing: number;
  events: ContributingEvent[];
  /** When the oldest contributing event leaves the lookback; null when none contributes. */
  oldestLeavesAt: string | null;
}
