// Batch ingestion (/data/foundation/import): create a batch for a dataset,
// upload JSON or NDJSON files into it, complete or abort it. Each file is
// validated record by record and its good records are staged durably with the
// batch before the upload is answered; bad records are listed in the batch
// status, never blocking the good ones (AEP's "partial ingestion", always on).
// As in AEP, a batch's data is not visible before the batch succeeded: COMPLETE
// applies the staged records in one transaction, ABORT drops them.
//
// A file is never held in memory: the body is received into a spool file (a
// client that goes away mid-upload stages nothing), then read back record by
// record and staged in chunks (upload-spool.ts, record-stream.ts).
import type { FastifyInstance, FastifyReply } from "fastify";
import type { Readable } from "node:stream";
import { registerTenantHooks } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { ApiError, badRequest, ErrorCodes, notFound } from "../../services/errors.js";
import { isRecordDataError } from "../batch-staging.js";
import { stageRecordStream, type StagingStore, type StreamStageResult } from "../ingest.js";
import type { StreamItem } from "../record-stream.js";
import type { IngestBatches } from "../store.js";
import type { RecordError, TenantScope } from "../types.js";
import { spoolBody, spooledRecords, UploadAbortedError, UploadTooLargeError, withSpoolDir } from "../upload-spool.js";
import { DEFAULT_LIMITS, type ValidationLimits } from "../validate.js";
import { renderBatch } from "./catalog-routes.js";
import { mapStoreErrors, profileScope, type ProfileRoutesOptions } from "./context.js";

export const IMPORT_PREFIX = "/data/foundation/import";
/** Upload size limit per file; larger data goes in several files of one batch. */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;

const FILE_TYPES = ["application/octet-stream", "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "text/plain"];

/** A record's text longer than this is reported too large without being read (records are at most 100 KB by default). */
export function maxRecordChars(limits: Partial<ValidationLimits> | undefined): number {
  const l = { ...DEFAULT_LIMITS, ...limits };
  return Math.max(1024 * 1024, 4 * Math.max(l.maxProfileBytes, l.maxEventBytes));
}

/** Error code of a batch whose staged records could not be applied (never left loading). */
export const BATCH_APPLY_FAILED = "BATCH_APPLY_FAILED";

export interface BatchRouteOptions extends ProfileRoutesOptions<StagingStore> {
  /** Where uploads are spooled while they arrive (default: the OS's temporary directory). */
  uploadSpoolDir?: string;
}

export async function batchRoutes(app: FastifyInstance, opts: BatchRouteOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Batch ingestion"];
  // Files are not parsed by the JSON body parser (which would reject a whole NDJSON file
  // for one bad line) nor read into memory: the handler gets the body as a stream.
  app.addContentTypeParser(FILE_TYPES, (_request, payload, done) => done(null, payload));

  app.post<{ Body: { datasetId: string; inputFormat?: { format?: string } } }>("/batches", {
    schema: {
      tags, summary: "Create a batch",
      body: { type: "object", required: ["datasetId"], properties: { datasetId: { type: "string", minLength: 1 }, inputFormat: { type: "object", properties: { format: { type: "string", enum: ["json", "JSON"] } } } } },
    },
  }, async (request, reply) => {
    const scope = profileScope(request);
    const b = await mapStoreErrors(() => opts.profiles.createBatch(scope, request.body.datasetId, opts.clock.now()));
    reply.code(201);
    return { ...renderBatch(b, scope.orgId), inputFormat: { format: "json" } };
  });

  app.put<{ Params: { batchId: string; datasetId: string; "*": string }; Body: unknown }>("/batches/:batchId/datasets/:datasetId/files/*", {
    schema: { tags, summary: "Upload a JSON or NDJSON file into a batch" },
  }, async (request, reply) => {
    const declared = Number(request.headers["content-length"] ?? 0);
    if (declared > MAX_FILE_BYTES) throw uploadError(new UploadTooLargeError(MAX_FILE_BYTES), reply);
    const scope = profileScope(request);
    const { batchId, datasetId } = request.params;
    const file = request.params["*"];
    if (file === "") throw badRequest("The file name is missing from the path");
    const batch = await opts.profiles.getBatch(scope, batchId);
    if (batch === null) throw notFound("Batch", batchId);
    if (batch.datasetId !== datasetId) throw badRequest(`Batch ${batchId} belongs to dataset ${batch.datasetId}, not ${datasetId}`);
    const now = opts.clock.now();
    const streamOpts = { now, ...(opts.limits === undefined ? {} : { limits: opts.limits }) };
    let r: StreamStageResult;
    if (isStream(request.body)) {
      const body = request.body;
      r = await withSpoolDir(opts.uploadSpoolDir, async (dir) => {
        const spooled = await spoolBody(body, `${dir}/body`, MAX_FILE_BYTES).catch((e: unknown) => { throw uploadError(e, reply); });
        const read = await spooledRecords(spooled, { maxRecordChars: maxRecordChars(opts.limits) });
        const items: Iterable<StreamItem> | AsyncIterable<StreamItem> = "fileError" in read ? [{ index: -1, error: read.fileError }] : read.items;
        // The good records are staged with the batch: they reach profiles on COMPLETE, never if the batch is aborted.
        return mapStoreErrors(() => stageRecordStream(opts.profiles, scope, datasetId, { id: batchId, file }, items, streamOpts));
      });
    } else {
      // A client that sent Content-Type: application/json got its body parsed already (within the JSON body limit).
      const list: unknown[] = request.body === undefined ? [] : Array.isArray(request.body) ? request.body : [request.body];
      r = await mapStoreErrors(() => stageRecordStream(opts.profiles, scope, datasetId, { id: batchId, file }, list.map((value, index) => ({ index, value })), streamOpts));
    }
    return { file, recordsRead: r.received, recordsStaged: r.staged, failedRecordCount: r.failedRecords,
      errors: r.failed.map((e) => ({ code: e.code, description: e.message, recordIndex: e.index, ...(e.path === undefined ? {} : { path: e.path }) })) };
  });

  app.post<{ Params: { batchId: string }; Querystring: { action?: string } }>("/batches/:batchId", {
    schema: { tags, summary: "Complete (?action=COMPLETE) or abort (?action=ABORT) a batch", querystring: { type: "object", properties: { action: { type: "string" } } } },
  }, async (request) => {
    const scope = profileScope(request);
    const action = (request.query.action ?? "").toUpperCase();
    if (action !== "COMPLETE" && action !== "ABORT") {
      throw badRequest(`Unsupported batch action ${JSON.stringify(request.query.action ?? "")}: use action=COMPLETE or action=ABORT`);
    }
    const b = await opts.profiles.getBatch(scope, request.params.batchId);
    if (b === null) throw notFound("Batch", request.params.batchId);
    if (b.status !== "loading") throw badRequest(`Batch ${b.id} is already ${b.status}`);
    if (action === "ABORT") {
      // The staged records are dropped: nothing of the batch reaches profiles.
      const aborted = await mapStoreErrors(() => opts.profiles.abortBatch(scope, b.id, opts.clock.now()));
      return renderBatch(aborted, scope.orgId);
    }
    // Applies the staged records in one transaction; partial ingestion: success when any
    // record was written or none failed.
    try {
      const done = await mapStoreErrors(() => opts.profiles.completeBatch(scope, b.id, {
        ingestedAt: opts.clock.now(), maxIdentitiesPerGraph: opts.limits?.maxIdentitiesPerGraph ?? DEFAULT_LIMITS.maxIdentitiesPerGraph,
      }));
      if (opts.onBatchCompleted && done.profileIds.length > 0) {
        await opts.onBatchCompleted(tenantOf(request), done.profileIds).catch((err: unknown) => request.log.error({ err, batchId: b.id }, "streaming evaluation after a batch failed"));
      }
      return { ...renderBatch(done.batch, scope.orgId), refusedIdentityLinks: done.refusedLinks };
    } catch (err) {
      if (err instanceof ApiError || !isRecordDataError(err)) throw err;
      // The same records would fail on every retry: the batch must not stay loading.
      request.log.warn({ err, batchId: b.id }, "a batch's staged records could not be applied; the batch is failed");
      const failed = await mapStoreErrors(() => failBatch(opts, scope, b.id, err));
      return { ...renderBatch(failed, scope.orgId), refusedIdentityLinks: [] };
    }
  });

  app.get<{ Params: { batchId: string } }>("/batches/:batchId", { schema: { tags, summary: "Batch status" } }, async (request) => {
    const scope = profileScope(request);
    const b = await opts.profiles.getBatch(scope, request.params.batchId);
    if (b === null) throw notFound("Batch", request.params.batchId);
    return renderBatch(b, scope.orgId);
  });
}

function isStream(body: unknown): body is Readable {
  return typeof body === "object" && body !== null && typeof (body as Readable).pipe === "function" && typeof (body as Readable).on === "function";
}

/** The HTTP error for a body that could not be received; a too-large one also closes the connection (its rest is never read). */
function uploadError(e: unknown, reply: FastifyReply): unknown {
  if (e instanceof UploadTooLargeError) {
    reply.header("connection", "close");
    return new ApiError(413, ErrorCodes.bodyTooLarge, e.message);
  }
  if (e instanceof UploadAbortedError) return badRequest(e.message);
  return e;
}

/**
 * Closes a batch whose staged records cannot be applied as failed, with the reason in its
 * errors: the reason is accounted (the batch is still loading), the staged records are
 * dropped (abort), then the status is set. Each step leaves the batch closed or retryable.
 */
async function failBatch(opts: ProfileRoutesOptions<IngestBatches>, scope: TenantScope, batchId: string, err: unknown) {
  const now = opts.clock.now();
  const reason: RecordError = { index: -1, code: BATCH_APPLY_FAILED,
    message: `the batch's staged records could not be applied (${err instanceof Error ? err.message : String(err)}); none of them was written` };
  await opts.profiles.stageBatchRecords(scope, batchId, [], { read: 0, failed: [reason], now });
  await opts.profiles.abortBatch(scope, batchId, now);
  return opts.profiles.setBatchStatus(scope, batchId, "failed", now);
}
