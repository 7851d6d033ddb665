/**
 * Group commit for membership changes. Every durable write of the hub store
 * pays a commit (and an fsync in the embedded store); writing each event's
 * transitions alone would cap streaming at a few hundred events per second.
 * Changes that arrive in the same event-loop turn are written together: the
 * first one waits one macrotask turn, then everything pending for a sandbox
 * goes out as ONE array (the profile store writes large arrays with multi-row
 * statements), and each caller gets back its own transitions by key, in one pass.
 *
 * Writes are pipelined: a batch goes out as soon as its turn ends, even while
 * earlier batches are still being committed (at most MAX_IN_FLIGHT at once;
 * beyond that, changes wait and go out together when one finishes). Waiting for
 * the write in flight before sending the next one, as this writer first did,
 * put up to a whole extra commit round trip on the changes that just missed
 * it — the tail of the event-to-transition latency. Pipelining cannot reorder
 * one profile's changes: the engine runs a profile's evaluations one at a
 * time (keyed-queue.ts) and each awaits its own write before the next starts,
 * so two writes in flight never hold changes of the same profile.
 */
import type { MembershipChange, MembershipWrites } from "../profiles/store.js";
import type { MembershipTransition, TenantScope } from "../profiles/types.js";

interface Pending {
  changes: MembershipChange[];
  waiters: Array<{ resolve: (t: MembershipTransition[]) => void; reject: (e: unknown) => void; from: number; to: number }>;
}

/**
 * Writes committing at once, beyond which no drain starts: enough to keep the store busy
 * while the main thread evaluates, few enough not to take every connection of a PostgreSQL
 * pool. (A drain writes each sandbox's pending changes, so with several sandboxes a drain
 * started under the limit may take it a little over.)
 */
export const MAX_IN_FLIGHT = 4;

export class MembershipWriter {
  private readonly pending = new Map<string, { scope: TenantScope; batch: Pending }>();
  /** The drain waiting for the end of the current turn, if any. */
  private scheduled: Promise<void> | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  /** `maxInFlight` 1 is the unpipelined writer (one write at a time), for comparisons. */
  constructor(
    private readonly hub: MembershipWrites,
    private readonly maxInFlight: number = MAX_IN_FLIGHT,
  ) {}

  /** Resolves with the transitions these changes produced, once they are durable. */
  write(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    if (changes.length === 0) return Promise.resolve([]);
    const k = `${scope.orgId}\u0000${scope.sandboxName}`;
    let entry = this.pending.get(k);
    if (!entry) {
      entry = { scope, batch: { changes: [], waiters: [] } };
      this.pending.set(k, entry);
    }
    const batch = entry.batch;
    const from = batch.changes.length;
    for (const c of changes) batch.changes.push(c);
    const done = new Promise<MembershipTransition[]>((resolve, reject) => {
      batch.waiters.push({ resolve, reject, from, to: batch.changes.length });
    });
    this.schedule();
    return done;
  }

  /** Resolves when nothing is pending, scheduled or in flight. */
  async idle(): Promise<void> {
    while (this.scheduled !== null || this.inFlight.size > 0) {
      if (this.scheduled !== null) await this.scheduled;
      if (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
    }
  }

  /** Writes in flight (for tests). */
  get writing(): number {
    return this.inFlight.size;
  }

  private schedule(): void {
    if (this.scheduled !== null || this.pending.size === 0) return;
    // At the limit, the next write to finish schedules the drain.
    if (this.inFlight.size >= this.maxInFlight) return;
    // One macrotask turn, so that every change produced by the records being evaluated
    // right now joins the same write (one transaction, one fsync).
    this.scheduled = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.scheduled = null;
      this.drain();
    });
  }

  private drain(): void {
    const entries = [...this.pending.values()];
    this.pending.clear();
    for (const { scope, batch } of entries) {
      let call: Promise<MembershipTransition[]>;
      try {
        call = this.hub.applyMembershipChanges(scope, batch.changes);
      } catch (err) {
        // A store that throws instead of rejecting fails only these callers too.
        call = Promise.reject(err);
      }
      const written: Promise<void> = call
        .then(
          (transitions) => settle(batch, transitions),
          (err: unknown) => {
            for (const w of batch.waiters) w.reject(err);
          },
        )
        .finally(() => {
          this.inFlight.delete(written);
          this.schedule();
        });
      this.inFlight.add(written);
    }
  }
}

/** Resolve each waiter with the transitions of its own changes (a change without a transition was a no-op). */
function settle(batch: Pending, transitions: readonly MembershipTransition[]): void {
  const results: MembershipTransition[][] = batch.waiters.map(() => []);
  if (transitions.length > 0) {
    if (batch.waiters.length === 1) {
      results[0] = transitions.slice();
    } else {
      // Which waiter wrote each (profile, definition); a key written twice in one batch goes to its waiters in order.
      const owner = new Map<string, number | number[]>();
      batch.waiters.forEach((w, i) => {
        for (let j = w.from; j < w.to; j++) {
          const c = batch.changes[j]!;
          const k = `${c.profileId}\u0000${c.definitionId}`;
          const o = owner.get(k);
          if (o === undefined) owner.set(k, i);
          else if (typeof o === "number") owner.set(k, [o, i]);
          else o.push(i);
        }
      });
      for (const t of transitions) {
        const k = `${t.profileId}\u0000${t.definitionId}`;
        const o = owner.get(k);
        if (o === undefined) continue;
        if (typeof o === "number") results[o]!.push(t);
        else results[(o.length > 1 ? o.shift() : o[0])!]!.push(t);
      }
    }
  }
  batch.waiters.forEach((w, i) => w.resolve(results[i]!));
}
