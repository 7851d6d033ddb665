// How far the transition log is settled: every sequence at or below `through` is committed or
// will never appear. Embedded SQLite has one writer (what is visible is final, in order). On
// PostgreSQL a bigserial is taken before commit, so a later sequence can commit before an earlier
// one. A missing sequence (a gap) is waited out until every writing transaction in progress when
// it was first seen, or GAP_GRACE_MS later, has ended (the store's tokens: pid and start of each
// backend holding a transaction id): the gap is then visible or was rolled back. Only those
// transactions are waited for, so a long transaction elsewhere in the cluster holds a gap only
// if it was writing when the gap was seen (docs/activation.md "Delivery").
import type { TransitionLog } from "../../profiles/store.js";

const SCAN = 10_000;
/** A sequence is taken microseconds before its transaction's first write assigns the xid: a gap is never passed sooner. */
const GAP_GRACE_MS = 250;

interface Wait {
  /** The first missing sequence (or, at start, the log's end). */
  seq: number;
  /** The first sequence seen after the gap. */
  upTo?: number;
  xids: string[];
  seenAt: number;
  /** The in-progress transactions of a snapshot taken after the grace were added. */
  widened?: boolean;
}

export class LogHorizon {
  private through: number | null = null;
  private gap: Wait | null = null;
  private start: Wait | null = null;
  /** The store has no snapshots (embedded: one writer, what is visible is final): its end is settled. */
  private flat = false;

  constructor(private readonly log: TransitionLog, private readonly now: () => number = Date.now) {}

  /** Settled through this sequence; null until the first advance settled anything. */
  get settled(): number | null {
    return this.through;
  }

  /** Start at `from` (a position some flow already settled), or — none — at the log's current end once it is settled. */
  async init(from: number | null): Promise<void> {
    const r = await this.log.transitionLogSeqs(Number.MAX_SAFE_INTEGER, 1);
    this.flat = r.snapshot === null;
    if (from !== null) {
      this.through = from;
      return;
    }
    if (r.snapshot === null) this.through = r.max;
    else this.start = { seq: r.max, xids: r.snapshot.xip, seenAt: this.now() };
  }

  private async ended(w: Wait): Promise<boolean> {
    if (this.now() - w.seenAt < GAP_GRACE_MS) return false;
    if (w.widened !== true) {
      // A transaction whose first write took the missing sequence may have had no xid yet when the
      // gap was seen (nextval assigns none): after the grace it has one, in this snapshot's list.
      const { snapshot } = await this.log.transitionLogSeqs(Number.MAX_SAFE_INTEGER, 1);
      w.xids = [...new Set([...w.xids, ...(snapshot?.xip ?? [])])];
      w.widened = true;
    }
    if (w.xids.length === 0) return true;
    w.xids = await this.log.transactionsInProgress(w.xids);
    return w.xids.length === 0;
  }

  /** Moves `through` as far as the log is settled; returns it. */
  async advance(): Promise<number | null> {
    if (this.through === null) {
      if (this.start === null || !(await this.ended(this.start))) return null;
      this.through = this.start.seq;
    }
    // Missing sequences below this one are final (their transactions have all ended).
    let passBelow = 0;
    if (this.flat) {
      // Only the end matters (not every sequence up to it): one position read, not 10,000.
      const r = await this.log.transitionLogSeqs(this.through, 1);
      if (r.snapshot === null) {
        this.through = Math.max(this.through, r.max);
        return this.through;
      }
      this.flat = false;
    }
    for (;;) {
      const { seqs, snapshot } = await this.log.transitionLogSeqs(this.through, SCAN);
      if (seqs.length === 0) return this.through;
      this.flat = snapshot === null;
      if (snapshot === null) {
        this.through = seqs[seqs.length - 1]!;
        if (seqs.length < SCAN) return this.through;
        continue;
      }
      let expect: number = this.through + 1;
      let reread = false;
      for (const seq of seqs) {
        if (seq !== expect && expect >= passBelow) {
          const g = this.gap;
          if (g === null || g.seq !== expect) {
            this.gap = { seq: expect, xids: snapshot.xip, seenAt: this.now(), upTo: seq };
            return this.through;
          }
          if (!(await this.ended(g))) return this.through;
          // Read again: what those transactions committed is visible now, the rest never will be.
          this.gap = null;
          passBelow = g.upTo ?? 0;
          reread = true;
          break;
        }
        this.through = seq;
        expect = seq + 1;
      }
      if (!reread && seqs.length < SCAN) return this.through;
    }
  }
}
