/**
 * Export jobs API (segmentation-api.md §6): /export/jobs. Handlers only
 * translate HTTP to ExportService calls and back.
 *
 * The create body's schema documents CreateExportJobRequest for the OpenAPI
 * document; it is not enforced by Fastify (attachValidation): ExportService
 * checks every field and answers SEGMENTD-BATCH-EXPORT-400 with a message
 * naming it, as for the other batch resources.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { limitParam } from "../../http/routes/paging-params.js";
import { authHeaders, commonErrorResponses, idParam } from "../../http/schemas.js";
import { EXPORT_STATUSES, type ExportService } from "../exports/export-service.js";

export interface ExportRoutesOptions extends AuthDeps {
  exports: ExportService;
}

const tags = ["Export jobs"];
const MAX_LIMIT = 100;
const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };

const rfc3339 = (description: string) => ({ type: "string", format: "date-time", description: `${description} (RFC 3339, e.g. 2026-01-31T00:00:00Z)` }) as const;
const statusList = {
  type: "array",
  description: 'Default ["realized", "existing"] (both select stored realized memberships); "exited" selects exited ones',
  items: { type: "string", enum: ["realized", "existing", "exited"] },
} as const;
const segmentRef = {
  type: "object",
  properties: {
    segmentId: { type: "string" },
    segmentNs: { type: "string", description: 'Default "ups"' },
    status: statusList,
  },
  required: ["segmentId"],
} as const;
const timeMetric = {
  type: "object",
  properties: { startTimeInMs: { type: "number" }, endTimeInMs: { type: "number" }, totalTimeInMs: { type: "number" } },
} as const;

const filterSchema = {
  type: "object",
  properties: {
    segments: { type: "array", items: segmentRef, description: "The audiences to export; absent or empty: every profile of the sandbox" },
    segmentQualificationTime: {
      type: "object",
      description: "Only memberships whose lastQualificationTime is in [startTime, endTime]",
      properties: { startTime: rfc3339("Inclusive"), endTime: rfc3339("Inclusive") },
      additionalProperties: false,
    },
    fromIngestTimestamp: rfc3339("Only profiles updated after this time: a profile fragment ingested, or an event timestamped, after it"),
    emptyProfiles: { type: "boolean", default: false, description: "Also export profiles that have events but no profile fragment" },
  },
  additionalProperties: false,
} as const;

const eventListSchema = {
  type: "object",
  description: "Adds `eventList` to every exported record: the profile's events, oldest first",
  properties: {
    fields: { type: "string", description: "Comma-separated dot paths of the event fields to keep (_id and timestamp are always kept); omit for all" },
    filter: {
      type: "object",
      description: "Compared with the event's timestamp (segmentd does not record when an event was ingested)",
      properties: { fromIngestTimestamp: rfc3339("Exclusive"), toIngestTimestamp: rfc3339("Inclusive") },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

const createBodySchema = {
  type: "object",
  description: "CreateExportJobRequest",
  properties: {
    fields: { type: "string", description: "Comma-separated dot paths of the profile attributes to export (identityMap and segmentMembership are always written); omit for all" },
    mergePolicy: { type: "object", properties: { id: { type: "string" }, version: { type: "number" } }, description: "Default: the merge policy of the first segment" },
    filter: filterSchema,
    additionalFields: { type: "object", properties: { eventList: eventListSchema }, required: ["eventList"], additionalProperties: false },
    destination: {
      type: "object",
      properties: {
        datasetId: { type: "string", description: "A dataset of class profile that is not enabled for Profile" },
        segmentPerBatch: { type: "boolean", default: false, description: "true: one ingestion batch per filter.segments entry (destination.batches)" },
      },
      required: ["datasetId"],
    },
    schema: { type: "object", properties: { name: { type: "string", enum: ["_xdm.context.profile"] } }, required: ["name"] },
    evaluationInfo: {
      type: "object",
      properties: { segmentation: { type: "boolean", description: "true: run a segment job over the selected definitions first; the export fails unless it SUCCEEDED" } },
      required: ["segmentation"],
      additionalProperties: false,
    },
  },
  required: ["destination", "schema"],
} as const;

/** ExportJobResponse; additionalProperties so that the serializer keeps every field. */
export const exportJobSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "number" },
    jobType: { type: "string", enum: ["BATCH", "STREAMING"] },
    destination: {
      type: "object",
      additionalProperties: true,
      properties: {
        datasetId: { type: "string" },
        segmentPerBatch: { type: "boolean" },
        batchId: { type: "string", description: "The batch (segmentPerBatch false), set once it is opened" },
        batches: {
          type: "array",
          description: "One batch per filter.segments entry (segmentPerBatch true)",
          items: { type: "object", additionalProperties: true, properties: { segmentId: { type: "string" }, segmentNs: { type: "string" }, status: statusList, batchId: { type: "string" } } },
        },
      },
    },
    fields: { type: "string" },
    schema: { type: "object", additionalProperties: true, properties: { name: { type: "string" } } },
    imsOrgId: { type: "string" },
    status: { type: "string", enum: [...EXPORT_STATUSES], description: "CANCELLING and CANCELLED: segmentd additions (DELETE)" },
    filter: {
      type: "object",
      additionalProperties: true,
      properties: {
        segments: { type: "array", items: { type: "object", additionalProperties: true, properties: { segmentId: { type: "string" }, segmentNs: { type: "string" }, status: statusList } } },
        segmentQualificationTime: { type: "object", additionalProperties: true, properties: { startTime: { type: "string" }, endTime: { type: "string" } } },
        fromIngestTimestamp: { type: "string" },
        emptyProfiles: { type: "boolean" },
      },
    },
    additionalFields: { type: "object", additionalProperties: true },
    evaluationInfo: {
      type: "object",
      additionalProperties: true,
      properties: { segmentation: { type: "boolean" }, segmentJobId: { type: "string", description: "segmentd extension: the segment job run before the export" } },
    },
    mergePolicy: { type: "object", additionalProperties: true, properties: { id: { type: "string" }, version: { type: "number" } } },
    profileInstanceId: { type: "string" },
    errors: { type: "array", items: { type: "object", additionalProperties: true, properties: { code: { type: "string" }, msg: { type: "string" } } } },
    metrics: {
      type: "object",
      additionalProperties: true,
      properties: {
        totalTime: timeMetric,
        profileExportTime: timeMetric,
        aCPDatasetWriteTime: timeMetric,
        totalExportedProfileCounter: { type: "integer", description: "Records written (with segmentPerBatch, a profile counts once per batch)" },
        exportedProfileByNamespaceCounter: { type: "object", additionalProperties: { type: "integer" } },
      },
    },
    creationTime: { type: "integer", description: "epoch milliseconds" },
    updateTime: { type: "integer", description: "epoch milliseconds" },
    requestId: { type: "string" },
  },
} as const;

const cancelResponseSchema = {
  type: "object",
  description: "CancelExportJobResponse",
  properties: { status: { type: "boolean" }, message: { type: "string" } },
  required: ["status", "message"],
} as const;

export async function exportRoutes(app: FastifyInstance, opts: ExportRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.exports;

  app.get<{ Querystring: { limit?: number; offset?: string; status?: string } }>("/export/jobs", {
    schema: {
      tags,
      summary: "List export jobs (newest first)",
      headers: authHeaders,
      querystring: { type: "object", properties: { limit: limitParam(), offset: { type: "string" }, status: { type: "string", enum: [...EXPORT_STATUSES] } } },
      response: {
        200: {
          type: "object",
          properties: {
            records: { type: "array", items: exportJobSchema },
            page: { type: "object", additionalProperties: true, properties: { sortField: { type: "string" }, sort: { type: "string" }, pageOffset: { type: "string" }, pageSize: { type: "integer" } } },
            link: { type: "object", additionalProperties: true, properties: { next: { type: "string" } } },
          },
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const limit = Math.min(request.query.limit ?? MAX_LIMIT, MAX_LIMIT);
    const page = await svc.list(tenantOf(request), { limit, ...(request.query.offset === undefined ? {} : { offset: request.query.offset }), ...(request.query.status === undefined ? {} : { status: request.query.status }) });
    return {
      records: page.items,
      page: { sortField: "createdTime", sort: "desc", pageOffset: page.next ?? "", pageSize: page.items.length },
      link: { next: page.next === null ? "" : `/export/jobs/?limit=${limit}&offset=${page.next}` },
    };
  });

  app.post<{ Body: unknown }>("/export/jobs", {
    attachValidation: true,
    schema: {
      tags,
      summary: "Create an export job",
      description: "Validated by the service (SEGMENTD-BATCH-EXPORT-400 naming the field), not by this schema.",
      headers: authHeaders,
      body: createBodySchema,
      response: { 200: exportJobSchema, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    // Body errors are the service's to report (BatchErrorCodes); anything else is a real 400.
    const invalid = request.validationError;
    if (invalid !== undefined && invalid.validationContext !== "body") throw invalid;
    const h = request.headers["x-profile-instance-id"];
    const instance = typeof h === "string" && h.trim() !== "" ? h.trim() : undefined;
    const job = await svc.create(tenantOf(request), request.body, request.id, instance);
    reply.header("X-Location", `/data/core/ups/export/jobs/${job.id}`);
    return job;
  });

  app.get<{ Params: { EXPORT_JOB_ID: string } }>("/export/jobs/:EXPORT_JOB_ID", {
    schema: { tags, summary: "Retrieve an export job", headers: authHeaders, params: idParam("EXPORT_JOB_ID"), response: { 200: exportJobSchema, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.get(tenantOf(request), request.params.EXPORT_JOB_ID));

  app.delete<{ Params: { EXPORT_JOB_ID: string } }>("/export/jobs/:EXPORT_JOB_ID", {
    schema: {
      tags,
      summary: "Cancel or delete an export job",
      description:
        "NEW or PROCESSING → CANCELLING, then CANCELLED when the job stops (its batches aborted, nothing visible in the dataset). " +
        "A finished job is deleted (200; what it exported stays in its dataset).",
      headers: authHeaders,
      params: idParam("EXPORT_JOB_ID"),
      response: { 200: cancelResponseSchema, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request) => svc.cancel(tenantOf(request), request.params.EXPORT_JOB_ID));
}
