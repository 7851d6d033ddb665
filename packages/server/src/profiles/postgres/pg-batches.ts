// Ingest batches of the PostgreSQL profile store: batch rows, records staged with
// a loading batch, and completing (applying the staged records) or aborting it.
import type pg from "pg";
import { applyIsolated, decodeStaged, encodeStaged, STAGED_CHUNK } from "../batch-staging.js";
import { newCatalogId } from "../ids.js";
import { MAX_BATCH_ERRORS, StoreError, type AppendOptions, type AppendResult, type CompletedBatch, type CompleteOptions, type IngestBatch, type IngestBatchStatus, type StageOptions } from "../store.js";
import type { RecordError, TenantScope, ValidRecord } from "../types.js";
import * as appends from "./pg-append.js";
import { queryRows, type BatchRow, type PgStoreContext } from "./pg-context.js";

function batchFromRow(r: BatchRow): IngestBatch {
  return {
    id: r.id, datasetId: r.ds, status: r.status as IngestBatchStatus, created: r.created, updated: r.updated, completed: r.completed,
    recordsRead: r.records_read, recordsWritten: r.records_written, recordsFailed: r.records_failed, files: r.files, errors: r.errors,
  };
}

export function createBatch(ctx: PgStoreContext, scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
  return ctx.write(scope, async (c, tid) => {
    await ctx.requireDataset(c, tid, scope, datasetId);
    const rows = await queryRows<BatchRow>(c, "INSERT INTO batches (tid, id, ds, status, created, updated) VALUES ($1, $2, $3, 'loading', $4, $4) RETURNING *",
      [tid, newCatalogId(), datasetId, now]);
    return batchFromRow(rows[0]!);
  });
}

export async function getBatch(ctx: PgStoreContext, scope: TenantScope, id: string): Promise<IngestBatch | null> {
  const rows = await queryRows<BatchRow>(ctx.pool, "SELECT * FROM batches WHERE tid = $1 AND id = $2", [await ctx.tid(ctx.pool, scope, false), id]);
  return rows.length === 0 ? null : batchFromRow(rows[0]!);
}

export async function listBatches(ctx: PgStoreContext, scope: TenantScope, opts: { datasetId?: string; limit?: number } = {}): Promise<IngestBatch[]> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const rows = await queryRows<BatchRow>(ctx.pool, "SELECT * FROM batches WHERE tid = $1 AND ($2::text IS NULL OR ds = $2) ORDER BY created DESC, id LIMIT $3",
    [tid, opts.datasetId ?? null, opts.limit ?? 100]);
  return rows.map((r) => batchFromRow(r));
}

export function setBatchStatus(ctx: PgStoreContext, scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
  return ctx.write(scope, async (c, tid) => {
    const done = status === "success" || status === "failed" || status === "aborted";
    const rows = await queryRows<BatchRow>(c, "UPDATE batches SET status = $1, updated = $2, completed = CASE WHEN $3 THEN $2 ELSE completed END WHERE tid = $4 AND id = $5 RETURNING *",
      [status, now, done, tid, id]);
    if (rows.length === 0) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
    return batchFromRow(rows[0]!);
  });
}

/** The batch row, locked, which must exist and be loading (inside a write). */
async function openBatch(c: pg.PoolClient, tid: number, scope: TenantScope, id: string, action: string): Promise<BatchRow> {
  const row = (await queryRows<BatchRow>(c, "SELECT * FROM batches WHERE tid = $1 AND id = $2 FOR UPDATE", [tid, id]))[0];
  if (row === undefined) throw new StoreError("BATCH_NOT_FOUND", `batch ${id} does not exist in sandbox ${scope.sandboxName}`);
  if (row.status !== "loading") throw new StoreError("BATCH_NOT_OPEN", `batch ${id} is ${row.status}; only a loading batch can be ${action}`);
  return row;
}

export function stageBatchRecords(ctx: PgStoreContext, scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
  return ctx.write(scope, async (c, tid) => {
    const row = await openBatch(c, tid, scope, batchId, "added to");
    const dataset = await ctx.requireDataset(c, tid, scope, row.ds);
    for (const r of records) {
      if (r.kind !== dataset.schemaClass) throw new Error(`record ${r.index} is ${r.kind} but dataset ${row.ds} holds ${dataset.schemaClass}`);
    }
    for (let i = 0; i < records.length; i += STAGED_CHUNK) {
      const part = records.slice(i, i + STAGED_CHUNK).map(encodeStaged);
      await c.query(`INSERT INTO batch_records (tid, batch, meta, body)
        SELECT $1, $2, u.meta, u.body FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(meta, body, ord) ORDER BY u.ord`,
      [tid, batchId, part.map((e) => e.meta), part.map((e) => e.body)]);
    }
    await appends.accountBatch(ctx, c, tid, scope, { id: batchId, read: opts.read, failed: opts.failed, ...(opts.file === undefined ? {} : { file: opts.file }) }, 0, opts.now);
    return { staged: records.length };
  });
}

export function completeBatch(ctx: PgStoreContext, scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
  return ctx.write(scope, async (c, tid) => {
    const row = await openBatch(c, tid, scope, batchId, "completed");
    const dataset = await ctx.requireDataset(c, tid, scope, row.ds);
    const appendOpts: AppendOptions = { ingestedAt: opts.ingestedAt, maxIdentitiesPerGraph: opts.maxIdentitiesPerGraph };
    const refusedLinks: CompletedBatch["refusedLinks"] = [];
    const profileIds = new Set<string>();
    let written = 0;
    let after = 0;
    const refused: RecordError[] = [];
    const savepoints = { begin: () => c.query("SAVEPOINT staged"), release: () => c.query("RELEASE SAVEPOINT staged"), rollback: () => c.query("ROLLBACK TO SAVEPOINT staged") };
    // One transaction for the whole batch, applied chunk by chunk; a record the database
    // refuses is rolled back alone and reported (applyIsolated), the others are applied.
    for (;;) {
      const rows = await queryRows<{ seq: number; meta: string; body: string }>(c,
        "SELECT seq, meta, body FROM batch_records WHERE tid = $1 AND batch = $2 AND seq > $3 ORDER BY seq LIMIT $4", [tid, batchId, after, STAGED_CHUNK]);
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.seq;
      const applied = await applyIsolated(rows, savepoints, async (part) => {
        const records = part.map((r) => decodeStaged(r.meta, r.body, dataset.schemaClass));
        const result: AppendResult = { fragments: 0, events: 0, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] };
        if (!dataset.profileEnabled) await appends.appendLake(ctx, c, tid, row.ds, records, appendOpts, result);
        else await appends.appendProfile(ctx, c, scope, tid, row.ds, records, appendOpts, result);
        return result;
      });
      for (const result of applied.results) {
        written += result.fragments + result.events + result.lakeOnly + result.duplicates;
        for (const l of result.refusedLinks) if (refusedLinks.length < MAX_BATCH_ERRORS) refusedLinks.push(l);
        for (const p of result.profileIds) profileIds.add(p);
      }
      refused.push(...applied.refused);
    }
    await c.query("DELETE FROM batch_records WHERE tid = $1 AND batch = $2", [tid, batchId]);
    const errors = row.errors;
    for (const e of refused) if (errors.length < MAX_BATCH_ERRORS) errors.push(e);
    const failed = row.records_failed + new Set(refused.map((e) => e.index)).size;
    // Partial ingestion: the batch succeeds when any record was written or none failed.
    const status: IngestBatchStatus = row.records_written + written > 0 || failed === 0 ? "success" : "failed";
    const done = await queryRows<BatchRow>(c, `UPDATE batches SET status = $1, records_written = records_written + $2, records_failed = $6, errors = $7,
      updated = $3, completed = $3 WHERE tid = $4 AND id = $5 RETURNING *`, [status, written, opts.ingestedAt, tid, batchId, failed, JSON.stringify(errors)]);
    return { batch: batchFromRow(done[0]!), refusedLinks, profileIds: [...profileIds] };
  });
}

export function abortBatch(ctx: PgStoreContext, scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
  return ctx.write(scope, async (c, tid) => {
    await openBatch(c, tid, scope, batchId, "aborted");
    await c.query("DELETE FROM batch_records WHERE tid = $1 AND batch = $2", [tid, batchId]);
    const done = await queryRows<BatchRow>(c, "UPDATE batches SET status = 'aborted', updated = $1, completed = $1 WHERE tid = $2 AND id = $3 RETURNING *", [now, tid, batchId]);
    return batchFromRow(done[0]!);
  });
}
