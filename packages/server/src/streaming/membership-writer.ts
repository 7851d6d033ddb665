/**
 * Group commit for membership changes. Every durable write of the hub store
 * pays a commit (and an fsync in the embedded store); writing each event's
 * transitions alone would cap streaming at a few hundred events per second.
 * Changes that arrive while a write is in flight are written together by the
 * next one, so latency stays at about one commit and throughput grows with load.
 * Each drain sends everything pending for a sandbox as ONE array (the profile
 * store writes large arrays with multi-row statements), and hands each caller
 * back its own transitions by key, in one pass.
 */
import type { MembershipChange, ProfileStore } from "../profiles/store.js";
import type { MembershipTransition, TenantScope } from "../profiles/types.js";

interface Pending {
  changes: MembershipChange[];
  waiters: Array<{ resolve: (t: MembershipTransition[]) => void; reject: (e: unknown) => void; from: number; to: number }>;
}

export class MembershipWriter {
  private readonly pending = new Map<string, { scope: TenantScope; batch: Pending }>();
  private writing: Promise<void> | null = null;

  constructor(private readonly hub: ProfileStore) {}

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
    batch.changes.push(...changes);
    const done = new Promise<MembershipTransition[]>((resolve, reject) => {
      batch.waiters.push({ resolve, reject, from, to: batch.changes.length });
    });
    // The first write waits one macrotask turn, so that every change produced by the
    // records being evaluated right now joins the same transaction (one fsync).
    this.writing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.drain());
    return done;
  }

  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.size > 0) {
        const entries = [...this.pending.values()];
        this.pending.clear();
        for (const { scope, batch } of entries) {
          try {
            const transitions = await this.hub.applyMembershipChanges(scope, batch.changes);
            settle(batch, transitions);
          } catch (err) {
            for (const w of batch.waiters) w.reject(err);
          }
        }
      }
    } finally {
      this.writing = null;
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
