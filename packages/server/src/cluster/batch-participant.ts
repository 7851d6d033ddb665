/**
 * A worker's part in segment jobs across the fleet (#44; the protocol is batch-fanout.ts): it
 * reads the job bucket every `pollMs`, and for each job with partitions it holds that no one has
 * written, evaluates its shard once (every held partition) and writes each such partition with
 * its report. Jobs run one at a time. A partition taken over from a dead worker is evaluated by
 * the next pass after the shard holds it; one written meanwhile by someone else is left alone
 * (applyJobPartition refuses a second write).
 */
import type { KV } from "@nats-io/kv";
import { JobCancelledError, type DefinitionCounters } from "../batch/engine/evaluation-types.js";
import type { WorkerShard } from "../batch/shards/worker-shard.js";
import type { JobPartitionWrites } from "../profiles/store.js";
import type { TenantDirectory } from "../services/tenancy.js";
import { decodeAnnouncement, failKey, type PartitionReportBody } from "./batch-fanout.js";

export interface BatchParticipantOptions {
  kv: KV;
  shard: WorkerShard;
  store: JobPartitionWrites;
  tenants: TenantDirectory;
  workerId: string;
  /** The partition count of the workers' stream (a job announced for another count is refused). */
  partitions: number;
  /** How often the bucket is read (default 500 ms). */
  pollMs?: number;
  onError(err: unknown): void;
}

export class BatchParticipant {
  readonly stats = { evaluations: 0, partitionsWritten: 0, partitionsSkipped: 0, failures: 0 };
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** Jobs that failed here: not tried again (the hub fails the job). */
  private readonly failed = new Set<string>();

  constructor(private readonly o: BatchParticipantOptions) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.kick();
      this.timer = setTimeout(tick, this.o.pollMs ?? 500);
    };
    tick();
  }

  /** The partitions held changed (the leases' round): the shard follows, then a pass looks for their jobs. */
  async held(owned: Iterable<number>): Promise<void> {
    await this.o.shard.hold(owned);
    this.kick();
  }

  /** Stops reading the bucket; resolves once the pass in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.pass;
  }

  /** A pass now, or right after the one running. */
  kick(): void {
    if (this.pass !== null) {
      this.again = true;
      return;
    }
    this.pass = (async () => {
      do {
        this.again = false;
        try {
          await this.runPass();
        } catch (err) {
          this.o.onError(err);
        }
      } while (this.again && !this.stopped);
    })().finally(() => (this.pass = null));
  }

  private async runPass(): Promise<void> {
    const keys: string[] = [];
    for await (const k of await this.o.kv.keys()) if (!k.startsWith("fail.")) keys.push(k);
    for (const k of keys.sort()) {
      if (this.stopped) return;
      const e = await this.o.kv.get(k);
      if (e === null || e.operation !== "PUT") continue;
      const job = decodeAnnouncement(e.value);
      if (job === null || job.jobId !== k || this.failed.has(k)) continue;
      try {
        await this.runJob(job, k);
      } catch (err) {
        // Withdrawn (cancelled) or this worker stopping: nothing to report.
        if (err instanceof JobCancelledError) continue;
        this.failed.add(k);
        this.stats.failures++;
        await this.o.kv.put(failKey(k), JSON.stringify({ worker: this.o.workerId, message: err instanceof Error ? err.message : String(err) })).catch(this.o.onError);
      }
    }
  }

  private async runJob(job: NonNullable<ReturnType<typeof decodeAnnouncement>>, key: string): Promise<void> {
    const tenant = this.o.tenants.resolve(job.orgId, job.sandboxName);
    if (tenant === undefined) throw new Error(`sandbox ${job.sandboxName} of ${job.orgId} is not configured on worker ${this.o.workerId}`);
    const scope = { orgId: job.orgId, sandboxName: job.sandboxName };
    if (job.partitions !== this.o.partitions) throw new Error(`job ${job.jobId} is for ${job.partitions} partitions; worker ${this.o.workerId} reads ${this.o.partitions}`);
    const mine = this.o.shard.heldPartitions();
    const written = new Set((await this.o.store.jobPartitionReports(scope, job.jobId)).map((r) => r.partition));
    if (!mine.some((p) => !written.has(p))) return;
    // Still announced? A cancelled job is not evaluated (and stops between definitions).
    let withdrawn = false;
    const isCancelled = () => withdrawn || this.stopped;
    const check = setInterval(() => {
      this.o.kv.get(key).then((e) => (withdrawn = e === null || e.operation !== "PUT"), this.o.onError);
    }, this.o.pollMs ?? 500);
    try {
      const out = await this.o.shard.evaluate(tenant, job.jobs, { now: job.at, isCancelled });
      this.stats.evaluations++;
      for (const [p, part] of out.byPartition) {
        if (written.has(p) || isCancelled()) continue;
        // Read again right before each write: a job withdrawn since (cancelled, or failed by a restarted hub) writes nothing more.
        const still = await this.o.kv.get(key);
        if (still === null || still.operation !== "PUT") break;
        const report: PartitionReportBody = { profiles: part.profiles, counters: Object.fromEntries(part.counters) as Record<string, DefinitionCounters>, profilesByPolicy: part.profilesByPolicy };
        const applied = await this.o.store.applyJobPartition({ scope, jobId: job.jobId, partition: p, worker: this.o.workerId, sets: part.memberships, at: job.at, report });
        if (applied) this.stats.partitionsWritten++;
        else this.stats.partitionsSkipped++;
      }
    } finally {
      clearInterval(check);
    }
  }
}
