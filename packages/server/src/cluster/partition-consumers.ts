/**
 * A streaming worker's consumers (#25): for each partition it owns, an ordered consumer of the
 * partition's subjects starting right after the partition's stored position (the fenced write's,
 * in PostgreSQL: the one source of truth for what was applied). Each fetched batch goes to
 * `apply` with its fence — that position, and the batch's last stream sequence. Nothing is
 * acknowledged: a worker that stops, crashes or loses the lease leaves the position where its last
 * commit put it, and the next owner starts reading right after it, in order. A stale fence (two
 * owners for a moment during a handover) restarts the reading from the position now stored.
 */
import { DeliverPolicy, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";
import { fetchBatch } from "./nats.js";

export interface PartitionConsumersOptions {
  js: JetStreamClient;
  stream: string;
  /** The subject filter of a partition (e.g. `segmentd.pev.<p>.>`). */
  filterOf(partition: number): string;
  /** The partition's stored position (the fenced write's; 0 before its first batch). */
  position(partition: number): Promise<number>;
  /** Applies a batch after `after` through its last sequence; resolves with the stored position then (or rejects). */
  apply(partition: number, msgs: readonly JsMsg[], fence: { after: number; through: number }): Promise<number>;
  onError(err: unknown): void;
  /** A fetch found nothing after the position: the partition is caught up. */
  onCaughtUp?(partition: number, position: number): void;
  /** Messages per fetch (default 500). */
  batch?: number;
}

interface Loop {
  stopped: boolean;
  done: Promise<void>;
}

export class PartitionConsumers {
  private readonly loops = new Map<number, Loop>();
  readonly stats = { applied: 0, skipped: 0, batches: 0 };

  constructor(private readonly o: PartitionConsumersOptions) {}

  /** Runs a loop for each partition owned, stops the loops of partitions no longer owned. */
  async own(partitions: ReadonlySet<number>): Promise<void> {
    const stopping: Promise<void>[] = [];
    for (const [p, loop] of this.loops) {
      if (partitions.has(p)) continue;
      loop.stopped = true;
      stopping.push(loop.done);
      this.loops.delete(p);
    }
    await Promise.all(stopping);
    for (const p of partitions) {
      if (this.loops.has(p)) continue;
      const loop: Loop = { stopped: false, done: Promise.resolve() };
      loop.done = this.run(p, loop);
      this.loops.set(p, loop);
    }
  }

  /** Stops the loops of these partitions and waits for their batches in flight. */
  async release(partitions: readonly number[]): Promise<void> {
    const stopping: Promise<void>[] = [];
    for (const p of partitions) {
      const loop = this.loops.get(p);
      if (!loop) continue;
      loop.stopped = true;
      stopping.push(loop.done);
      this.loops.delete(p);
    }
    await Promise.all(stopping);
  }

  async close(): Promise<void> {
    await this.own(new Set());
  }

  private async run(p: number, loop: Loop): Promise<void> {
    while (!loop.stopped) {
      try {
        let position = await this.o.position(p);
        const consumer = await this.o.js.consumers.get(this.o.stream, { filter_subjects: this.o.filterOf(p), deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: position + 1 });
        for (;;) {
          if (loop.stopped) return;
          const { batch, error } = await fetchBatch(consumer, this.o.batch ?? 500);
          if (error !== undefined) this.o.onError(error);
          if (batch.length === 0 && error === undefined) this.o.onCaughtUp?.(p, position);
          if (batch.length === 0 || loop.stopped) continue;
          const fresh = batch.filter((m) => m.seq > position);
          this.stats.skipped += batch.length - fresh.length;
          if (fresh.length === 0) continue;
          const through = fresh[fresh.length - 1]!.seq;
          const stored = await this.o.apply(p, fresh, { after: position, through });
          if (stored !== through) break;
          position = stored;
          this.stats.applied += fresh.length;
          this.stats.batches++;
        }
      } catch (err) {
        if (loop.stopped) return;
        this.o.onError(err);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
}
