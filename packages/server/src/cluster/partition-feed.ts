/**
 * A hub's side of the streaming workers (#25): instead of evaluating in process, every stored
 * change streaming evaluation must see is published to the profile-keyed partitions of
 * SEGMENTD_PEV (partition-wire.ts), and the workers evaluate it. The feed takes the engine's place
 * (StreamingFeed): the ingestion routes, the edge sites' forwarder and the data lifecycle call it
 * as they call the engine.
 *
 * A record is answered only after JetStream stored its message: a publish that fails after its
 * retries fails the request (503), and the client's retry is stored once (events by their id at
 * the store, every message by its id within JetStream's duplicate window). Messages of one call
 * are published pipelined on one connection: each partition gets them in the call's order.
 */
import { randomUUID } from "node:crypto";
import { DiscardPolicy, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { Clock } from "../platform/clock.js";
import type { AheadDecision } from "../profiles/ingest.js";
import type { IdentityGraph, ProfileReads } from "../profiles/store.js";
import type { MembershipTransition } from "../profiles/types.js";
import { ApiError } from "../services/errors.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { StoredRecord, StreamingFeed } from "../streaming/engine.js";
import { ensureStream, nanos } from "./nats.js";
import { encodePartitionMessage, PARTITION_STREAM, PARTITION_SUBJECTS, PARTITION_WIDE, PARTITIONS_DESCRIPTION, type PartitionMessage } from "./partition-wire.js";
import { partitionOfToken, partitionSubject, profileToken } from "./partitions.js";

/** How long a partition keeps what no worker has read (with no worker running, events queue). */
export const PARTITION_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * Creates SEGMENTD_PEV with this partition count, or checks that the existing one has it: the
 * count is fixed for a deployment (a different one would move profiles between partitions).
 */
export async function ensurePartitionStream(jsm: JetStreamManager, partitions: number): Promise<void> {
  await ensureStream(jsm, {
    name: PARTITION_STREAM,
    subjects: [PARTITION_SUBJECTS],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_age: nanos(PARTITION_RETENTION_MS),
    duplicate_window: nanos(2 * 60 * 1000),
    discard: DiscardPolicy.Old,
    // The count in the description (nats-server 2.9 keeps no stream metadata).
    description: `${PARTITIONS_DESCRIPTION}=${partitions}`,
  });
  const existing = await partitionCountOf(jsm);
  if (existing !== partitions) {
    throw new Error(`the stream ${PARTITION_STREAM} has ${existing} partitions, this hub is configured with ${partitions}: the count is fixed for a deployment (see docs/deployment.md)`);
  }
}

/** The partition count the stream was created with (what workers read). */
export async function partitionCountOf(jsm: JetStreamManager): Promise<number> {
  const info = await jsm.streams.info(PARTITION_STREAM);
  const m = new RegExp(`${PARTITIONS_DESCRIPTION}=(\\d+)`).exec(info.config.description ?? "");
  const n = m ? Number(m[1]) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`the stream ${PARTITION_STREAM} does not record its partition count (description '${PARTITIONS_DESCRIPTION}=N')`);
  return n;
}

export interface PartitionFeedOptions {
  js: JetStreamClient;
  partitions: number;
  /** Profile ids of records whose caller did not give them (the edge forwarder); the mark of the events stored. */
  hub: Pick<IdentityGraph, "findProfileIds"> & Pick<ProfileReads, "eventsStoredThrough">;
  clock: Clock;
  /** Tick period (default 30 s): how soon after a window closes the workers write the exit. */
  tickIntervalMs?: number;
  /** Whether this hub's timer ticks now (several hubs: it holds the partition-tick lease); default always. */
  gate?: () => boolean;
  /** Attempts per publish before the call fails (default 4, 250 ms apart). */
  attempts?: number;
  onError(err: unknown): void;
}

export class PartitionFeed implements StreamingFeed {
  /** Changes JetStream stored, and publishes that failed (each retried until the attempts run out). */
  readonly stats = { published: 0, failed: 0 };
  readonly scheduled = 0;
  readonly cachedStates = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(private readonly o: PartitionFeedOptions) {}

  start(): void {
    if (this.timer) return;
    // Several hubs: one ticks (the partition-tick lease), not every hub every partition.
    this.timer = setInterval(() => (this.o.gate?.() ?? true) && void this.tick().catch((err: unknown) => this.o.onError(err)), this.o.tickIntervalMs ?? 30_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** Nothing is decided before the append: the workers evaluate after it. */
  decideAhead(): Promise<AheadDecision | null> {
    return Promise.resolve(null);
  }

  /** Publishes the records (already durable at the hub); resolves when JetStream stored them all. The transitions are the workers' to write: none here. */
  async onRecordsStored(tenant: TenantContext, records: readonly StoredRecord[], pids?: Float64Array): Promise<MembershipTransition[]> {
    if (records.length === 0) return [];
    const known = pids !== undefined && pids.length === records.length;
    const ids: ReadonlyArray<string | null> = known ? Array.from(pids, String) : await this.o.hub.findProfileIds(scopeOf(tenant), records.map((r) => r.primary));
    const at = this.o.clock.now();
    const w = await this.o.hub.eventsStoredThrough();
    const call = randomUUID();
    const out: Array<{ subject: string; msg: PartitionMessage; id: string }> = [];
    records.forEach((r, i) => {
      const p = ids[i];
      if (p === null || p === undefined) return;
      const msg: PartitionMessage = { k: "r", o: tenant.orgId, n: tenant.sandbox.sandboxName, at, w, p, kind: r.kind, ns: r.primary.namespace, id: r.primary.id, ts: r.timestamp, eid: r.eventId, body: r.json ?? JSON.stringify(r.body) };
      // An event by its id (a client's retry of it is published once); anything else once per call.
      out.push({ subject: this.subjectOf(tenant, p), msg, id: r.eventId !== null ? `e:${tenant.sandbox.sandboxId}:${r.eventId}` : `r:${call}:${i}` });
    });
    await this.publishAll(out);
    return [];
  }

  async onProfilesChanged(tenant: TenantContext, profileIds: readonly string[]): Promise<MembershipTransition[]> {
    const at = this.o.clock.now();
    const w = await this.o.hub.eventsStoredThrough();
    const call = randomUUID();
    await this.publishAll(profileIds.map((p, i) => ({ subject: this.subjectOf(tenant, p), msg: { k: "c", o: tenant.orgId, n: tenant.sandbox.sandboxName, at, w, p }, id: `c:${call}:${i}` })));
    return [];
  }

  /** The sandbox's definitions changed: every partition's reader reloads them at this point of its stream. */
  async definitionsChanged(tenant: { orgId: string; sandboxName: string }): Promise<void> {
    const at = this.o.clock.now();
    const call = randomUUID();
    await this.publishAll(this.everyPartition((p) => ({ subject: partitionSubject(p, PARTITION_WIDE), msg: { k: "d", o: tenant.orgId, n: tenant.sandboxName, at }, id: `d:${call}:${p}` })));
  }

  /** The hub's time to every partition: the workers close the windows due by then. Two ticks at one time count once. */
  async tick(at: number = this.o.clock.now()): Promise<void> {
    const w = await this.o.hub.eventsStoredThrough();
    await this.publishAll(this.everyPartition((p) => ({ subject: partitionSubject(p, PARTITION_WIDE), msg: { k: "t", at, w }, id: `t:${p}:${at}` })));
  }

  private everyPartition<T>(f: (p: number) => T): T[] {
    return Array.from({ length: this.o.partitions }, (_, p) => f(p));
  }

  private subjectOf(tenant: TenantContext, profileId: string): string {
    const t = profileToken(tenant.sandbox.sandboxId, profileId);
    return partitionSubject(partitionOfToken(t, this.o.partitions), t);
  }

  /** Publishes in order, pipelined; the ones that failed are published again (in order) until the attempts run out. */
  private async publishAll(items: ReadonlyArray<{ subject: string; msg: PartitionMessage; id: string }>): Promise<void> {
    if (items.length === 0) return;
    const work = (async () => {
      let pending = items.map((it) => ({ subject: it.subject, data: encodePartitionMessage(it.msg), id: it.id }));
      const attempts = this.o.attempts ?? 4;
      for (let attempt = 1; ; attempt++) {
        const results = await Promise.allSettled(pending.map((m) => this.o.js.publish(m.subject, m.data, { msgID: m.id })));
        const failed = pending.filter((_, i) => results[i]!.status === "rejected");
        this.stats.published += pending.length - failed.length;
        if (failed.length === 0) return;
        this.stats.failed += failed.length;
        if (attempt >= attempts) {
          const reason = (results.find((r) => r.status === "rejected") as PromiseRejectedResult).reason as Error;
          throw new ApiError(503, "SEGMENTD-STREAMING-503", `the streaming workers' feed did not take ${failed.length} of ${items.length} changes (${reason.message}); the records are stored: send them again`);
        }
        pending = failed;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    this.inFlight.add(work);
    try {
      await work;
    } finally {
      this.inFlight.delete(work);
    }
  }
}
