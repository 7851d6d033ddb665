/**
 * Group commit for membership changes. Every durable write of the hub store
 * pays a commit (and an fsync in the embedded store); writing each event's
 * transitions alone would cap streaming at a few hundred events per second.
 * Changes that arrive while a write is in flight are written together by the
 * next one, so latency stays at about one commit and throughput grows with load.
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
            for (const w of batch.waiters) {
              const mine = new Set(batch.changes.slice(w.from, w.to).map((c) => `${c.profileId}\u0000${c.definitionId}`));
              w.resolve(transitions.filter((t) => mine.has(`${t.profileId}\u0000${t.definitionId}`)));
            }
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
