/**
 * Until when a snapshot's verdict of a windowed definition holds (backfill-runner.ts, issue #40):
 * the next instant after `from` at which one of the profile's events leaves one of the
 * definition's windows, or the next UTC midnight. Those are the instants at which the streaming
 * engine's sweep re-checks a realized membership (streaming/sweep-schedule.ts nextWindowChangeOf;
 * batch/ imports nothing of streaming/, docs/architecture.md). Here every event of the profile
 * counts, not only those of the definition's event types: never later than the sweep's instant.
 */
import type { Snapshot } from "../columnar/snapshot.js";

const DAY_MS = 86_400_000;

export class SnapshotEventTimes {
  constructor(private readonly snap: Snapshot) {}

  /** The instant; `from` itself for a profile the snapshot does not hold (its verdict is the engine's to give). */
  nextChange(pid: number, from: number, windows: readonly number[]): number {
    const g = this.snap.locatePid(pid);
    if (g < 0) return from;
    const base = this.snap.base;
    const part = g < base.ordinals ? base : this.snap.overlay;
    const o = g < base.ordinals ? g : g - base.ordinals;
    const { ordinalStart, eventStart, eventTime } = part;
    let due = (Math.floor(from / DAY_MS) + 1) * DAY_MS;
    for (let r = ordinalStart[o]!; r < ordinalStart[o + 1]!; r++) {
      for (let e = eventStart[r]!; e < eventStart[r + 1]!; e++) {
        const t = eventTime[e]!;
        for (const w of windows) {
          // +1 ms: a window written with `<=` still holds the event at exactly t + window (as the sweep counts it).
          const leaves = t + w + 1;
          if (leaves > from && leaves < due) due = leaves;
        }
      }
    }
    return due;
  }
}
