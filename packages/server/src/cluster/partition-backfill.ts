/**
 * A backfill on a hub whose streaming workers evaluate (issue #40; the in-process fencing is
 * batch/backfill/backfill-runner.ts). First a `v` message to every partition, and the hub waits
 * until each partition applied it: every owner's catalog then holds the version, so no membership
 * of the definition is written with the previous one afterwards (a worker behind the stream would
 * otherwise move statuses the evaluation has read). Then the hub computes the net change from the snapshot as in
 * process, fenced by its change feed's version F, but does not write it. Each partition's part
 * goes to the partition's owner in band — `b` messages on the partition's own subjects of
 * SEGMENTD_PEV, in order with its events — and the worker writes it in the batch that moves the
 * partition's position (partition-backfill-apply.ts): a profile unchanged since F as the snapshot
 * decided, one changed after F on the worker's live verdict, then the partition's other profiles
 * changed after F. The hub learns a partition is done when its stored position (PostgreSQL)
 * passes the partition's last chunk: the same position a worker killed with -9 resumes from, so a
 * chunk is applied exactly once whoever applies it.
 */
import { randomUUID } from "node:crypto";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { Clock } from "../platform/clock.js";
import type { MembershipReads, PartitionWrites, ProfileChanges, ProfileReads } from "../profiles/store.js";
import { scopeOf } from "../services/tenancy.js";
import type { PartitionedBackfillWriter } from "../streaming/plugin.js";
import { encodePartitionMessage, PARTITION_WIDE, partitionName, type PartitionMessage } from "./partition-wire.js";
import { partitionOf, partitionSubject } from "./partitions.js";

/** Profiles per `b` message (≈ 15 bytes each: well under NATS's 1 MB payload). */
const DEFAULT_CHUNK = 2_000;
/** How often the partitions' positions are read while the workers apply the chunks (ms). */
const DEFAULT_POLL_MS = 200;

export type BackfillHubStore = Pick<PartitionWrites, "partitionPositions"> & Pick<MembershipReads, "listTransitions"> & Pick<ProfileChanges, "changesSince"> & Pick<ProfileReads, "eventsStoredThrough">;

export interface PartitionBackfillOptions {
  js: JetStreamClient;
  partitions: number;
  store: BackfillHubStore;
  clock: Clock;
  chunkSize?: number;
  pollMs?: number;
  /** Attempts per publish (default 4, 250 ms apart); the run fails after them. */
  attempts?: number;
}

type Run = Parameters<PartitionedBackfillWriter["write"]>[0];

export class PartitionBackfill implements PartitionedBackfillWriter {
  readonly stats = { runs: 0, chunks: 0 };

  constructor(private readonly o: PartitionBackfillOptions) {}

  /** A `v` message to every partition; resolves once every partition's stored position passed it. */
  async switchTo(run: Parameters<PartitionedBackfillWriter["switchTo"]>[0]): Promise<void> {
    const at = this.o.clock.now();
    const w = await this.o.store.eventsStoredThrough();
    const id = randomUUID();
    const seqs = await Promise.all(Array.from({ length: this.o.partitions }, (_, p) => {
      const msg: PartitionMessage = { k: "v", o: run.tenant.orgId, n: run.tenant.sandbox.sandboxName, at, w, def: run.definitionId, v: run.version };
      return this.publish(partitionSubject(p, PARTITION_WIDE), msg, `v:${id}:${p}`);
    }));
    await this.applied(seqs.map((seq) => [{ seq, size: 0 }]), run.isCancelled, async () => {});
  }

  async write(run: Run): Promise<{ entered: number; exited: number; fenced: number }> {
    const { partitions } = this.o;
    const scope = scopeOf(run.tenant);
    const id = randomUUID();
    const at = this.o.clock.now();
    const w = await this.o.store.eventsStoredThrough();
    const byPartition: Array<Array<[string, 0 | 1]>> = Array.from({ length: partitions }, () => []);
    for (const [pid, status] of run.desired) byPartition[partitionOf(run.tenant.sandbox.sandboxId, pid, partitions)]!.push([pid, status === "realized" ? 1 : 0]);
    const chunk = this.o.chunkSize ?? DEFAULT_CHUNK;
    // Every partition gets at least its last chunk (the profiles changed after the fence are decided after it).
    const published: Array<Array<{ seq: number; size: number }>> = await Promise.all(byPartition.map(async (entries, p) => {
      const out: Array<{ seq: number; size: number }> = [];
      const count = Math.max(1, Math.ceil(entries.length / chunk));
      for (let i = 0; i < count; i++) {
        if (run.isCancelled()) throw new BackfillCancelled();
        const ch = entries.slice(i * chunk, (i + 1) * chunk);
        const msg: PartitionMessage = { k: "b", o: run.tenant.orgId, n: run.tenant.sandbox.sandboxName, at, w, run: id, def: run.definitionId, v: run.version, f: run.fence, i, ch, last: i === count - 1 };
        out.push({ seq: await this.publish(partitionSubject(p, PARTITION_WIDE), msg, `b:${id}:${p}:${i}`), size: ch.length });
      }
      return out;
    }));
    this.stats.runs++;
    this.stats.chunks += published.reduce((n, x) => n + x.length, 0);
    await this.applied(published, run.isCancelled, run.onProgress);
    // What the workers wrote: transitions with source backfill stamped with this run's time.
    let entered = 0;
    let exited = 0;
    for (const t of await this.o.store.listTransitions(scope, { definitionId: run.definitionId, sources: ["backfill"], since: at })) {
      if (t.to === "realized") entered++;
      else exited++;
    }
    // The workers decided the profiles changed after the fence on their live verdict: all data is written here, at the hub.
    const changed = this.o.store.changesSince(scope, run.fence).profileIds;
    return { entered, exited, fenced: changed?.size ?? 0 };
  }

  /** Resolves when every partition's stored position passed its last message (`published[p]`: its messages' sequences and profiles). */
  private async applied(published: ReadonlyArray<ReadonlyArray<{ seq: number; size: number }>>, isCancelled: () => boolean, onProgress: (processed: number) => Promise<void>): Promise<void> {
    for (;;) {
      const positions = await this.o.store.partitionPositions();
      let processed = 0;
      let done = true;
      published.forEach((messages, p) => {
        const position = positions.get(partitionName(p)) ?? 0;
        for (const m of messages) {
          if (m.seq <= position) processed += m.size;
          else done = false;
        }
      });
      await onProgress(processed);
      if (done) return;
      if (isCancelled()) throw new BackfillCancelled();
      await new Promise((r) => setTimeout(r, this.o.pollMs ?? DEFAULT_POLL_MS));
    }
  }

  /** Published once JetStream stored it; its sequence (a duplicate's: the original's). */
  private async publish(subject: string, msg: PartitionMessage, msgID: string): Promise<number> {
    const data = encodePartitionMessage(msg);
    const attempts = this.o.attempts ?? 4;
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.o.js.publish(subject, data, { msgID })).seq;
      } catch (err) {
        if (attempt >= attempts) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }
}

/** The run was superseded or the hub is stopping (the runner decides what follows). */
export class BackfillCancelled extends Error {
  constructor() {
    super("backfill cancelled");
  }
}
