/**
 * The hub's side of segment jobs across the worker fleet (#44; the protocol is batch-fanout.ts):
 * announce the job, wait until every partition has reported (a partition whose owner died is
 * written by its next owner), then sum the reports into the job's counters and withdraw the
 * announcement. A worker's failure fails the job; so does a cancel, which withdraws it at once.
 */
import type { KV } from "@nats-io/kv";
import { emptyCounters, JobCancelledError, type DefinitionCounters } from "../batch/engine/evaluation-types.js";
import type { FanOutJob, FanOutOutcome, JobFanOut } from "../batch/jobs/job-runner.js";
import type { JobPartitionWrites } from "../profiles/store.js";
import type { TenantScope } from "../profiles/types.js";
import { announcement, failKey, type PartitionReportBody } from "./batch-fanout.js";

/** How long a job's partition rows are kept after its instant. */
export const JOB_PARTITIONS_KEPT_MS = 7 * 24 * 3_600_000;

export interface FleetJobsOptions {
  kv: KV;
  store: Pick<JobPartitionWrites, "jobPartitionReports" | "pruneJobPartitions" | "closeJobPartitions">;
  partitions: number;
  /** How often the reports are read (default 250 ms). */
  pollMs?: number;
  /** The workers alive (their lease heartbeats); with none for `idleMs`, a job fails instead of waiting for ever. */
  liveWorkers?: () => Promise<number>;
  /** How long a job waits for a worker without any partition written (default 60 s). */
  idleMs?: number;
}

export class FleetJobs implements JobFanOut {
  constructor(private readonly o: FleetJobsOptions) {}

  async run(job: FanOutJob): Promise<FanOutOutcome> {
    const { kv, store, partitions } = this.o;
    const key = job.jobId;
    await kv.put(key, JSON.stringify(announcement({ jobId: job.jobId, orgId: job.scope.orgId, sandboxName: job.scope.sandboxName, at: job.at, partitions, definitions: job.definitions })));
    let lastProgress = Date.now();
    let written = 0;
    let completed = false;
    try {
      for (;;) {
        const reports = await store.jobPartitionReports(job.scope, job.jobId);
        if (reports.length > written) {
          written = reports.length;
          lastProgress = Date.now();
        } else if (this.o.liveWorkers !== undefined && Date.now() - lastProgress > (this.o.idleMs ?? 60_000) && (await this.o.liveWorkers()) === 0) {
          throw new Error(`no worker is running: with batch.onWorkers, segment jobs are evaluated by \`segmentd worker\` processes (${partitions - written} of ${partitions} partitions not written)`);
        }
        let profiles = 0;
        for (const r of reports) profiles += (r.report as PartitionReportBody).profiles;
        job.onProgress(profiles);
        if (reports.length >= partitions) {
          // The rows of the sandbox's jobs of more than a week ago go (they fence nothing any more).
          await store.pruneJobPartitions(job.scope, job.at - JOB_PARTITIONS_KEPT_MS);
          completed = true;
          return sum(job, reports.map((r) => ({ body: r.report as PartitionReportBody, transitions: r.transitions })));
        }
        const failed = await kv.get(failKey(key));
        if (failed !== null && failed.operation === "PUT") {
          const f = JSON.parse(failed.string()) as { worker: string; message: string };
          throw new Error(`worker ${f.worker}: ${f.message}`);
        }
        if (job.isCancelled()) throw new JobCancelledError();
        await new Promise((r) => setTimeout(r, this.o.pollMs ?? 250));
      }
    } finally {
      await kv.delete(key).catch(() => undefined);
      await kv.delete(failKey(key)).catch(() => undefined);
      // Failed or cancelled: the partitions not written are closed, so no worker still evaluating writes one.
      if (!completed) await store.closeJobPartitions(job.scope, job.jobId, partitions, job.at).catch(() => undefined);
    }
  }

  /**
   * A job whose hub died: its announcement removed (the workers stop reading it) and its partitions
   * not written closed in the store (a worker still evaluating it writes none of them afterwards).
   */
  async withdraw(scope: TenantScope, jobId: string): Promise<void> {
    await this.o.kv.delete(jobId);
    await this.o.kv.delete(failKey(jobId));
    await this.o.store.closeJobPartitions(scope, jobId, this.o.partitions, Date.now());
  }
}

function sum(job: FanOutJob, parts: Array<{ body: PartitionReportBody; transitions: number }>): FanOutOutcome {
  const counters = new Map<string, DefinitionCounters>(job.definitions.map((d) => [d.id, emptyCounters()]));
  let totalProfiles = 0;
  let writes = 0;
  const profilesByPolicy: Record<string, number> = {};
  for (const { body, transitions } of parts) {
    totalProfiles += body.profiles;
    writes += transitions;
    for (const [policy, n] of Object.entries(body.profilesByPolicy ?? {})) profilesByPolicy[policy] = (profilesByPolicy[policy] ?? 0) + n;
    for (const [id, c] of Object.entries(body.counters)) {
      const t = counters.get(id);
      if (t === undefined) continue;
      t.qualified += c.qualified;
      t.realized += c.realized;
      t.existing += c.existing;
      t.exited += c.exited;
      for (const [ns, n] of Object.entries(c.byNamespace)) t.byNamespace[ns] = (t.byNamespace[ns] ?? 0) + n;
    }
  }
  return { counters, totalProfiles, writes, profilesByPolicy };
}
