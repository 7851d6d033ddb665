// How far the transition log is settled: every sequence at or below `through` is committed or
// will never appear. Embedded SQLite has one writer (what is visible is final, in order). On
// PostgreSQL a bigserial is taken before commit, so a later sequence can commit before an earlier
// one. A missing sequence (a gap) is waited out until every transaction that was in progress in
// the snapshot that first saw it has ended (pg_xact_status): the gap is then visible or was
// rolled back. Sequences and in-progress transactions come from one snapshot. Only those
// transactions are waited for, so a long transaction elsewhere in the cluster holds a gap only
// if it was running when the gap was seen (docs/activation.md "Delivery").
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
}

export class LogHorizon {
  private through: number | null = null;
  private gap: Wait | null = null;
  private start: Wait | null = null;

  constructor(private readonly log: TransitionLog, private readonly now: () => number = Date.now) {}

  /** Settled through this sequence; null until the first advance settled anything. */
  get settled(): number | null {
    return this.through;
  }

  /** Start at `from` (a position some flow already settled), or — none — at the log's current end once it is settled. */
  async init(from: number | null): Promise<void> {
    if (from !== null) {
      this.through = from;
      return;
    }
    const r = await this.log.transitionLogSeqs(Number.MAX_SAFE_INTEGER, 1);
    if (r.snapshot === null) this.through = r.max;
    else this.start = { seq: r.max, xids: r.snapshot.xip, seenAt: this.now() };
  }

  private async ended(w: Wait): Promise<boolean> {
    if (this.now() - w.seenAt < GAP_GRACE_MS) return false;
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
    for (;;) {
      const { seqs, snapshot } = await this.log.transitionLogSeqs(this.through, SCAN);
      if (seqs.length === 0) return this.through;
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
