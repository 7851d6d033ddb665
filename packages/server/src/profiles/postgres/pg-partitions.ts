// The streaming workers' fenced write (#25): a partition's membership changes, over any number of
// tenants, and the partition's new position, in one transaction, applied only if the position is
// still the one the worker read — a redelivered batch, or a worker whose lease another took,
// writes nothing.
import { lockForTransaction, withTransaction } from "../../storage-kit/postgres.js";
import type { PartitionBatchResult, PartitionBatchWrite, PartitionFence } from "../store.js";
import { membershipChanges } from "./pg-memberships.js";
import { TENANT_LOCK_CLASS, type PgStoreContext } from "./pg-context.js";

export async function applyPartitionBatch(ctx: PgStoreContext, fence: PartitionFence, writes: readonly PartitionBatchWrite[]): Promise<PartitionBatchResult> {
  if (!Number.isSafeInteger(fence.after) || !Number.isSafeInteger(fence.through) || fence.through <= fence.after) {
    throw new RangeError(`a partition fence moves forward: after ${fence.after}, through ${fence.through}`);
  }
  // Tenant rows first, committed on their own (as every write does).
  const tids: number[] = [];
  for (const w of writes) tids.push(await ctx.tid(ctx.pool, w.scope, true));
  return withTransaction(ctx.pool, async (c) => {
    // The tenants' write locks in id order, as the group commit takes them: no deadlock with it.
    for (const tid of [...new Set(tids)].sort((a, b) => a - b)) await lockForTransaction(c, [TENANT_LOCK_CLASS, tid]);
    await c.query("INSERT INTO partition_positions (part, seq) VALUES ($1, 0) ON CONFLICT (part) DO NOTHING", [fence.partition]);
    const row = await c.query<{ seq: string }>("SELECT seq FROM partition_positions WHERE part = $1 FOR UPDATE", [fence.partition]);
    const position = Number(row.rows[0]!.seq);
    if (position !== fence.after) return { applied: false, position, transitions: [] };
    const transitions: PartitionBatchResult["transitions"] = [];
    for (let i = 0; i < writes.length; i++) transitions.push({ scope: writes[i]!.scope, transitions: await membershipChanges(ctx, c, tids[i]!, writes[i]!.changes) });
    await c.query("UPDATE partition_positions SET seq = $2 WHERE part = $1", [fence.partition, fence.through]);
    return { applied: true, position: fence.through, transitions };
  });
}

/** A partition's position (0 before its first batch). */
export async function partitionPosition(ctx: PgStoreContext, partition: string): Promise<number> {
  const r = await ctx.pool.query<{ seq: string }>("SELECT seq FROM partition_positions WHERE part = $1", [partition]);
  return r.rows.length === 0 ? 0 : Number(r.rows[0]!.seq);
}

/** Every partition's position, in one read. */
export async function partitionPositions(ctx: PgStoreContext): Promise<Map<string, number>> {
  const r = await ctx.pool.query<{ part: string; seq: string }>("SELECT part, seq FROM partition_positions");
  return new Map(r.rows.map((x) => [x.part, Number(x.seq)]));
}
