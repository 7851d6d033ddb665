/**
 * The budget of one segment search (#37): units of work (characters compared, regex steps,
 * postings merged) and a deadline. Work runs in slices: past `sliceMs` of one slice the caller
 * yields the event loop, so that a search never holds the server for longer than a slice.
 */
import { setImmediate as nextTurn } from "node:timers/promises";

export interface SearchLimits {
  /** Units of work one search may spend; past them it is refused (422, SearchTooCostlyError). */
  maxUnits: number;
  /** Milliseconds one search may take, waits for other searches of its sandbox included (503, SearchDeadlineError). */
  deadlineMs: number;
  /** Longest stretch of work between two yields of the event loop. */
  sliceMs: number;
}

export const SEARCH_LIMITS: Readonly<SearchLimits> = { maxUnits: 10_000_000, deadlineMs: 10_000, sliceMs: 5 };

/** How many units are spent between two looks at the clock. */
const CLOCK_EVERY = 5_000;

export class SearchTooCostlyError extends Error {}
export class SearchDeadlineError extends Error {}

export class SearchBudget {
  units = 0;
  /** The term being matched, as the query wrote it: named in a refusal. */
  term = "";
  private readonly deadline: number;
  private nextClock = CLOCK_EVERY;
  private sliceStart = performance.now();

  constructor(readonly limits: Readonly<SearchLimits> = SEARCH_LIMITS, start = performance.now()) {
    this.deadline = start + limits.deadlineMs;
  }

  /** Count `n` units; true when the slice is over and the caller should `pause()`. Throws past the budget. */
  spend(n: number): boolean {
    this.units += n;
    if (this.units > this.limits.maxUnits) throw this.tooCostly();
    if (this.units < this.nextClock) return false;
    this.nextClock = this.units + CLOCK_EVERY;
    const now = performance.now();
    if (now > this.deadline) throw this.pastDeadline();
    return now - this.sliceStart >= this.limits.sliceMs;
  }

  /** Is the slice over (work not counted in units, such as indexing)? */
  due(): boolean {
    return performance.now() - this.sliceStart >= this.limits.sliceMs;
  }

  async pause(): Promise<void> {
    await nextTurn();
    if (performance.now() > this.deadline) throw this.pastDeadline();
    this.sliceStart = performance.now();
  }

  /** Checks the deadline (after a wait) and starts a new slice. */
  startSlice(): void {
    if (performance.now() > this.deadline) throw this.pastDeadline();
    this.sliceStart = performance.now();
  }

  tooCostly(detail = `more than ${this.limits.maxUnits} units of work, the limit of one search`): SearchTooCostlyError {
    return new SearchTooCostlyError(`The search term '${this.term}' is too costly: matching it needs ${detail}. Use a more specific term`);
  }

  pastDeadline(): SearchDeadlineError {
    const at = this.term === "" ? "" : ` (at the term '${this.term}')`;
    return new SearchDeadlineError(`The search did not finish within its deadline of ${this.limits.deadlineMs} ms${at}. Retry later, or use a more specific query`);
  }
}
