/**
 * When each (profile, definition) membership should be looked at again without
 * a new event: the moment an event of the profile leaves the definition's
 * window, or the next UTC midnight for calendar windows (`today`). A binary
 * min-heap keyed by due time; stale entries are tolerated (re-checking a
 * membership that is still valid only reschedules it).
 */
export interface SweepEntry {
  due: number;
  tenantKey: string;
  profileId: string;
  definitionId: string;
}

/** Re-checks scheduled together (scheduleMany): one definition's memberships, by due time. */
interface Run {
  tenantKey: string;
  definitionId: string;
  profileIds: readonly string[];
  dues: Float64Array;
  next: number;
}

export class SweepSchedule {
  private readonly heap: SweepEntry[] = [];
  private readonly latest = new Map<string, number>();
  private runs: Run[] = [];

  /** Memberships awaiting a re-check (a run's count those rescheduled one by one since, too). */
  get size(): number {
    let n = this.latest.size;
    for (const r of this.runs) n += r.dues.length - r.next;
    return n;
  }

  add(entry: SweepEntry): void {
    this.schedule(entry.due, entry.tenantKey, entry.profileId, entry.definitionId);
  }

  /**
   * Schedules a re-check of one membership at `due`. Only the newest due time of
   * a membership counts (older heap entries are skipped when popped); scheduling
   * the time already scheduled is a no-op, so re-checking memberships on every
   * event does not grow the heap.
   */
  schedule(due: number, tenantKey: string, profileId: string, definitionId: string): void {
    const k = `${tenantKey}\u0000${profileId}\u0000${definitionId}`;
    if (this.latest.get(k) === due) return;
    this.latest.set(k, due);
    this.heap.push({ due, tenantKey, profileId, definitionId });
    this.up(this.heap.length - 1);
  }

  /**
   * Schedules the re-checks of many memberships of one definition (a backfill's): kept as one run
   * sorted by due time instead of an entry and a key each, which the heap and the GC would carry
   * for every member. A membership scheduled one by one already is rescheduled that way; one
   * scheduled one by one later supersedes its place in the run.
   */
  scheduleMany(tenantKey: string, definitionId: string, profileIds: readonly string[], dues: ArrayLike<number>): void {
    const order: number[] = [];
    for (let i = 0; i < profileIds.length; i++) {
      if (this.latest.size > 0 && this.latest.has(`${tenantKey}\u0000${profileIds[i]!}\u0000${definitionId}`)) this.schedule(dues[i]!, tenantKey, profileIds[i]!, definitionId);
      else order.push(i);
    }
    if (order.length === 0) return;
    order.sort((a, b) => dues[a]! - dues[b]!);
    this.runs.push({ tenantKey, definitionId, profileIds: order.map((i) => profileIds[i]!), dues: Float64Array.from(order, (i) => dues[i]!), next: 0 });
  }

  /** Entries in the heap, current or superseded (for tests and metrics). */
  get heapSize(): number {
    return this.heap.length;
  }

  /** Removes and returns every current entry due at or before `now`. */
  popDue(now: number): SweepEntry[] {
    const out: SweepEntry[] = [];
    while (this.heap.length > 0 && this.heap[0]!.due <= now) {
      const top = this.pop();
      const k = `${top.tenantKey}\u0000${top.profileId}\u0000${top.definitionId}`;
      if (this.latest.get(k) !== top.due) continue;
      this.latest.delete(k);
      out.push(top);
    }
    for (const r of this.runs) {
      for (; r.next < r.dues.length && r.dues[r.next]! <= now; r.next++) {
        const profileId = r.profileIds[r.next]!;
        // Scheduled one by one since: that entry is the membership's.
        if (this.latest.size > 0 && this.latest.has(`${r.tenantKey}\u0000${profileId}\u0000${r.definitionId}`)) continue;
        out.push({ due: r.dues[r.next]!, tenantKey: r.tenantKey, profileId, definitionId: r.definitionId });
      }
    }
    if (this.runs.some((r) => r.next === r.dues.length)) this.runs = this.runs.filter((r) => r.next < r.dues.length);
    return out;
  }

  private pop(): SweepEntry {
    const top = this.heap[0]!;
    const last = this.heap.pop()!;
    if (this.heap.length > 0) {
      this.heap[0] = last;
      this.down(0);
    }
    return top;
  }

  private up(i: number): void {
    const h = this.heap;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.due <= h[i]!.due) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  private down(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l]!.due < h[m]!.due) m = l;
      if (r < h.length && h[r]!.due < h[m]!.due) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i]!, h[m]!];
      i = m;
    }
  }
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** The next instant after `now` at which an event (of these timestamps) leaves a window of `windowMs` (or of any of several windows), or the next UTC midnight. */
export function nextWindowChange(now: number, eventTimes: readonly number[], windowMs: number | readonly number[]): number {
  return nextWindowChangeOf(now, eventTimes, [], "any", typeof windowMs === "number" ? [windowMs] : windowMs);
}

/**
 * `nextWindowChange` over the events of a profile state (its time and type
 * columns) whose (lower-cased) type is in `types` ("any": every event). Only
 * those events can change the definition's result (the reverse index's
 * guarantee), so only their leaving a window needs a re-check.
 */
export function nextWindowChangeOf(
  now: number,
  eventTimes: readonly number[],
  eventTypes: readonly string[],
  types: ReadonlySet<string> | "any",
  windows: readonly number[],
): number {
  let due = (Math.floor(now / DAY_MS) + 1) * DAY_MS;
  for (let i = 0; i < eventTimes.length; i++) {
    if (types !== "any" && !types.has(eventTypes[i]!)) continue;
    const t = eventTimes[i]!;
    for (let j = 0; j < windows.length; j++) {
      // +1 ms: a window written with `<=` still holds the event at exactly t + window.
      const leaves = t + windows[j]! + 1;
      if (leaves > now && leaves < due) due = leaves;
    }
  }
  return due;
}
