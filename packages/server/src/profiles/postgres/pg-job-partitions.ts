// The batch fan-out's fenced write (#44): one partition's part of a segment job — its membership
// sets and its report — in one transaction with the row naming (job, partition). A second writer
// of the same part (the partition's next owner after a crash, a slow former owner) finds the row
// and writes nothing, so a job's memberships are written once per partition whoever evaluates it.
import { lockForTransaction, withTransaction } from "../../storage-kit/postgres.js";
import { planMembershipSets, transitionCounts } from "../membership-sets.js";
import type { JobPartitionReport, JobPartitionWrite } from "../store.js";
import type { TenantScope } from "../types.js";
import { TENANT_LOCK_CLASS, type PgStoreContext } from "./pg-context.js";
import { writePlannedSet } from "./pg-memberships.js";

/** A job id as the API makes them; refused otherwise before anything is written. */
const JOB_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

export async function applyJobPartition(ctx: PgStoreContext, w: JobPartitionWrite): Promise<boolean> {
  if (!JOB_ID.test(w.jobId)) throw new RangeError(`job partition: job id ${JSON.stringify(w.jobId)} is not one`);
  if (!Number.isSafeInteger(w.partition) || w.partition < 0 || w.partition > 0x7fffffff) throw new RangeError(`job partition: partition ${w.partition} is not one`);
  const opts = { source: "batch" as const, at: w.at };
  // Before the transaction: an invalid set is refused with nothing written.
  const planned = planMembershipSets(w.sets, opts);
  const counts = transitionCounts(planned);
  const report = JSON.stringify(w.report ?? null);
  // The tenant row first, committed on its own (as every write does).
  const tid = await ctx.tid(ctx.pool, w.scope, true);
  const lqt = new Date(w.at).toISOString();
  return withTransaction(ctx.pool, async (c) => {
    // The tenant's write lock, as the group commit takes it: the part's upserts queue with the other writes of the tenant.
    await lockForTransaction(c, [TENANT_LOCK_CLASS, tid]);
    const claimed = await c.query(`INSERT INTO job_partitions (tid, job, part, worker, transitions, report, at) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)
      ON CONFLICT (tid, job, part) DO NOTHING`, [tid, w.jobId, w.partition, w.worker, counts.realized + counts.exited, report, w.at]);
    if (claimed.rowCount === 0) return false;
    for (const p of planned) await writePlannedSet(c, tid, p, lqt, opts);
    return true;
  });
}

export async function jobPartitionReports(ctx: PgStoreContext, scope: TenantScope, jobId: string): Promise<JobPartitionReport[]> {
  // A scope without a tenant row reads NO_TENANT's: none.
  const tid = await ctx.tid(ctx.pool, scope, false);
  const r = await ctx.pool.query<{ part: number; worker: string; transitions: string; report: unknown }>(
    "SELECT part, worker, transitions, report FROM job_partitions WHERE tid = $1 AND job = $2 ORDER BY part", [tid, jobId]);
  return r.rows.map((x) => ({ partition: x.part, worker: x.worker, transitions: Number(x.transitions), report: x.report }));
}

/**
 * The rows of the sandbox's jobs whose instant is before `before`: they fence a second write of a
 * part only while a worker may still be evaluating the job, which a week outlasts.
 */
export async function pruneJobPartitions(ctx: PgStoreContext, scope: TenantScope, before: number): Promise<number> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const r = await ctx.pool.query("DELETE FROM job_partitions WHERE tid = $1 AND at < $2", [tid, before]);
  return r.rowCount ?? 0;
}

/**
 * A job given up (cancelled, or failed by a restarted hub): every partition not yet written is
 * claimed with a row of no worker, under the tenant's write lock, so that a worker still
 * evaluating it writes nothing more once this returns. How many were claimed.
 */
export async function closeJobPartitions(ctx: PgStoreContext, scope: TenantScope, jobId: string, partitions: number, at: number): Promise<number> {
  if (!JOB_ID.test(jobId)) throw new RangeError(`job partition: job id ${JSON.stringify(jobId)} is not one`);
  if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > 0x10000) throw new RangeError(`job partition: ${partitions} partitions is not a count`);
  const tid = await ctx.tid(ctx.pool, scope, true);
  return withTransaction(ctx.pool, async (c) => {
    await lockForTransaction(c, [TENANT_LOCK_CLASS, tid]);
    const r = await c.query(`INSERT INTO job_partitions (tid, job, part, worker, transitions, report, at)
      SELECT $1, $2, p, '', 0, '{"withdrawn": true}'::jsonb, $4 FROM generate_series(0, $3 - 1) AS p
      ON CONFLICT (tid, job, part) DO NOTHING`, [tid, jobId, partitions, at]);
    return r.rowCount ?? 0;
  });
}
