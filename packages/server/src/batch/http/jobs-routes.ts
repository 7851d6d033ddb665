/**
 * Segment jobs API (segmentation-api.md §4.2): /segment/jobs. Handlers only
 * translate HTTP to JobService calls and back.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { bulkItemError } from "../../http/errors.js";
import { tenantOf } from "../../http/request-context.js";
import { limitParam, offsetParam } from "../../http/routes/paging-params.js";
import { authHeaders, bulkGetBodySchema, commonErrorResponses, idParam } from "../../http/schemas.js";
import { ApiError, ErrorCodes, badRequest } from "../../services/errors.js";
import { BatchErrorCodes } from "../errors.js";
import { JOB_STATUSES, JOBS_PATH } from "../jobs/segment-job.js";
import { isJobStatus, type JobService } from "../jobs/job-service.js";

export interface JobRoutesOptions extends AuthDeps {
  jobs: JobService;
}

const MAX_LIMIT = 100;
const MAX_BULK_IDS = 100;
const tags = ["Segment jobs"];

/** The job as stored; documented loosely so that the serializer keeps every field. */
export const segmentJobSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    status: { type: "string", enum: [...JOB_STATUSES] },
    segments: { type: "array", items: { type: "object", additionalProperties: true } },
    metrics: { type: "object", additionalProperties: true },
  },
} as const;

const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };

const createBodySchema = {
  description: 'An array [{"segmentId": "..."}], or {"schema": {"name": "_xdm.context.profile"}, "segments": [{"segmentId": "*"}]}',
  anyOf: [
    { type: "array", items: { type: "object", properties: { segmentId: { type: "string", minLength: 1, maxLength: 256 } }, required: ["segmentId"] } },
    {
      type: "object",
      properties: {
        schema: { type: "object", properties: { name: { type: "string" } } },
        segments: { type: "array", items: { type: "object", properties: { segmentId: { type: "string", minLength: 1, maxLength: 256 } }, required: ["segmentId"] } },
      },
      required: ["segments"],
    },
  ],
} as const;

type CreateBody = Array<{ segmentId: string }> | { schema?: { name?: string }; segments: Array<{ segmentId: string }> };

interface ListQuery {
  start?: number;
  limit?: number;
  status?: string;
  sort?: string;
  property?: string | string[];
  "snapshot.name"?: string;
}

function header(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s.trim() === "" ? undefined : s.trim();
}

export async function jobRoutes(app: FastifyInstance, opts: JobRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.jobs;

  app.get<{ Querystring: ListQuery }>("/segment/jobs", {
    schema: {
      tags,
      summary: "List segment jobs",
      headers: authHeaders,
      querystring: {
        type: "object",
        properties: {
          start: offsetParam(),
          limit: limitParam(),
          status: { type: "string" },
          sort: { type: "string", maxLength: 100 },
          property: { anyOf: [{ type: "string" }, { type: "array", items: { type: "string" } }] },
          "snapshot.name": { type: "string" },
        },
      },
      response: {
        200: {
          type: "object",
          properties: {
            _page: { type: "object", properties: { totalCount: { type: "integer" }, pageSize: { type: "integer" } } },
            children: { type: "array", items: segmentJobSchema },
            _links: { type: "object", additionalProperties: true },
          },
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const q = request.query;
    const limit = Math.min(q.limit ?? MAX_LIMIT, MAX_LIMIT);
    const start = q.start ?? 0;
    if (q.status !== undefined && !isJobStatus(q.status)) {
      throw badRequest(`Invalid status "${q.status.slice(0, 50)}": use one of ${JOB_STATUSES.join(", ")}`, BatchErrorCodes.badFilter);
    }
    let direction: "asc" | "desc" = "desc";
    if (q.sort !== undefined) {
      const m = /^creationTime(?::(asc|desc))?$/.exec(q.sort.trim());
      if (m === null) throw badRequest(`Invalid sort "${q.sort}": use creationTime:asc or creationTime:desc`, BatchErrorCodes.badFilter);
      direction = (m[1] ?? "asc") as "asc" | "desc";
    }
    const properties = q.property === undefined ? [] : Array.isArray(q.property) ? q.property : [q.property];
    const page = await svc.list(tenantOf(request), { start, limit, direction, properties, ...(q.status === undefined ? {} : { status: q.status as (typeof JOB_STATUSES)[number] }) });
    const links: { next: { href?: string } } = { next: {} };
    if (start + page.items.length < page.total) {
      const params = new URLSearchParams();
      params.set("start", String(start + page.items.length));
      params.set("limit", String(limit));
      if (q.status !== undefined) params.set("status", q.status);
      if (q.sort !== undefined) params.set("sort", q.sort);
      for (const p of properties) params.append("property", p);
      links.next = { href: `${JOBS_PATH}?${params.toString()}` };
    }
    return { _page: { totalCount: page.total, pageSize: page.items.length }, children: page.items, _links: links };
  });

  app.post<{ Body: CreateBody }>("/segment/jobs", {
    schema: {
      tags,
      summary: "Create a segment job",
      description: "Evaluates the listed definitions (or every batch-enabled one for \"*\") in one job; inSegment dependencies are evaluated first. Cycles are refused.",
      headers: authHeaders,
      body: createBodySchema,
      response: { 200: segmentJobSchema, ...commonErrorResponses },
    },
  }, async (request) => {
    const body = request.body;
    const list = Array.isArray(body) ? body : body.segments;
    if (!Array.isArray(body) && body.schema?.name !== undefined && body.schema.name !== "_xdm.context.profile") {
      throw badRequest(`Unsupported schema "${body.schema.name}": segment jobs evaluate _xdm.context.profile`, BatchErrorCodes.badJob);
    }
    const profileInstanceId = header(request.headers["x-profile-instance-id"]);
    return svc.create(tenantOf(request), {
      segmentIds: list.map((s) => s.segmentId),
      source: "api",
      requestId: request.id,
      ...(profileInstanceId === undefined ? {} : { profileInstanceId }),
    });
  });

  app.get<{ Params: { SEGMENT_JOB_ID: string } }>("/segment/jobs/:SEGMENT_JOB_ID", {
    schema: { tags, summary: "Retrieve a segment job", headers: authHeaders, params: idParam("SEGMENT_JOB_ID"), response: { 200: segmentJobSchema, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.get(tenantOf(request), request.params.SEGMENT_JOB_ID));

  app.delete<{ Params: { SEGMENT_JOB_ID: string } }>("/segment/jobs/:SEGMENT_JOB_ID", {
    schema: {
      tags,
      summary: "Cancel or delete a segment job",
      description: "204: a queued job is CANCELLED at once; a processing job becomes CANCELLING, then CANCELLED without writing any membership. A finished job is deleted (its memberships stay).",
      headers: authHeaders,
      params: idParam("SEGMENT_JOB_ID"),
      response: { 204: { type: "null", description: "Cancelled, marked for cancellation, or deleted" }, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    await svc.cancel(tenantOf(request), request.params.SEGMENT_JOB_ID);
    reply.code(204);
    return null;
  });

  app.post<{ Body: { ids: { id: string }[] } }>("/segment/jobs/bulk-get", {
    config: { jsonWhateverType: true },
    schema: {
      tags,
      summary: "Retrieve several segment jobs",
      headers: authHeaders,
      body: bulkGetBodySchema,
      response: {
        207: { type: "object", properties: { results: { type: "object", additionalProperties: true } }, required: ["results"] },
        ...commonErrorResponses,
      },
    },
  }, async (request, reply) => {
    const ids = request.body.ids.map((x) => x.id);
    if (ids.length < 1 || ids.length > MAX_BULK_IDS) {
      throw new ApiError(400, ErrorCodes.bulkIdCount, `The number of ids must be between 1 and ${MAX_BULK_IDS} (got ${ids.length})`);
    }
    const found = await svc.bulkGet(tenantOf(request), ids);
    const results: Record<string, unknown> = {};
    for (const id of ids) results[id] = found.get(id) ?? bulkItemError(request.id);
    reply.code(207);
    return { results };
  });
}
