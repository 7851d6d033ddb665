// Batch ingestion (/data/foundation/import): create a batch for a dataset,
// upload JSON or NDJSON files into it, complete or abort it. Each file is
// validated record by record and its good records are staged durably with the
// batch before the upload is answered; bad records are listed in the batch
// status, never blocking the good ones (AEP's "partial ingestion", always on).
// As in AEP, a batch's data is not visible before the batch succeeded: COMPLETE
// applies the staged records in one transaction, ABORT drops them.
import type { FastifyInstance } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import { badRequest, notFound } from "../../services/errors.js";
import { stageRecords } from "../ingest.js";
import { detectRecordFileFormat, parseRecordFile } from "../record-files.js";
import { DEFAULT_LIMITS } from "../validate.js";
import { renderBatch } from "./catalog-routes.js";
import { mapStoreErrors, profileScope, type ProfileRoutesOptions } from "./context.js";

export const IMPORT_PREFIX = "/data/foundation/import";
/** Upload size limit per file; larger data goes in several files of one batch. */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;

const FILE_TYPES = ["application/octet-stream", "application/x-ndjson", "application/jsonl", "application/x-jsonlines", "text/plain"];

export async function batchRoutes(app: FastifyInstance, opts: ProfileRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Batch ingestion"];
  // Files are read as text and parsed record by record (not by the JSON body parser,
  // which would reject a whole NDJSON file for one bad line).
  app.addContentTypeParser(FILE_TYPES, { parseAs: "string", bodyLimit: MAX_FILE_BYTES }, (_request, body, done) => done(null, body));

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
    bodyLimit: MAX_FILE_BYTES,
  }, async (request) => {
    const scope = profileScope(request);
    const { batchId, datasetId } = request.params;
    const file = request.params["*"];
    if (file === "") throw badRequest("The file name is missing from the path");
    const batch = await opts.profiles.getBatch(scope, batchId);
    if (batch === null) throw notFound("Batch", batchId);
    if (batch.datasetId !== datasetId) throw badRequest(`Batch ${batchId} belongs to dataset ${batch.datasetId}, not ${datasetId}`);
    // A client that sent Content-Type: application/json got its body parsed already.
    const text = typeof request.body === "string" ? request.body : request.body === undefined ? "" : JSON.stringify(request.body);
    const parsed = parseRecordFile(text, detectRecordFileFormat(text));
    // The good records are staged with the batch: they reach profiles on COMPLETE, never if the batch is aborted.
    const r = await mapStoreErrors(() => stageRecords(opts.profiles, scope, datasetId, { id: batchId, file }, parsed.records, {
      now: opts.clock.now(), priorErrors: parsed.errors,
      extraRead: parsed.errors.filter((e) => e.index >= 0).length,
      ...(opts.limits === undefined ? {} : { limits: opts.limits }),
    }));
    return { file, recordsRead: r.received, recordsStaged: r.staged, failedRecordCount: new Set(r.failed.map((e) => e.index)).size,
      errors: r.failed.slice(0, 100).map((e) => ({ code: e.code, description: e.message, recordIndex: e.index, ...(e.path === undefined ? {} : { path: e.path }) })) };
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
    const done = await mapStoreErrors(() => opts.profiles.completeBatch(scope, b.id, {
      ingestedAt: opts.clock.now(), maxIdentitiesPerGraph: opts.limits?.maxIdentitiesPerGraph ?? DEFAULT_LIMITS.maxIdentitiesPerGraph,
    }));
    return { ...renderBatch(done.batch, scope.orgId), refusedIdentityLinks: done.refusedLinks };
  });

  app.get<{ Params: { batchId: string } }>("/batches/:batchId", { schema: { tags, summary: "Batch status" } }, async (request) => {
    const scope = profileScope(request);
    const b = await opts.profiles.getBatch(scope, request.params.batchId);
    if (b === null) throw notFound("Batch", request.params.batchId);
    return renderBatch(b, scope.orgId);
  });
}
