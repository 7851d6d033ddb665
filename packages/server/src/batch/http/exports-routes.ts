/**
 * Export jobs API (segmentation-api.md §6): /export/jobs. Handlers only
 * translate HTTP to ExportService calls and back.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam } from "../../http/schemas.js";
import type { ExportInput, ExportService } from "../exports/export-service.js";

export interface ExportRoutesOptions extends AuthDeps {
  exports: ExportService;
}

const tags = ["Export jobs"];
const MAX_LIMIT = 100;
const anyObject = { type: "object", additionalProperties: true } as const;
const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };

export async function exportRoutes(app: FastifyInstance, opts: ExportRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.exports;

  app.get<{ Querystring: { limit?: number; offset?: string; status?: string } }>("/export/jobs", {
    schema: {
      tags,
      summary: "List export jobs (newest first)",
      headers: authHeaders,
      querystring: { type: "object", properties: { limit: { type: "integer", minimum: 1 }, offset: { type: "string" }, status: { type: "string", enum: ["NEW", "PROCESSING", "SUCCEEDED", "FAILED"] } } },
      response: { 200: anyObject, ...commonErrorResponses },
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

  app.post<{ Body: ExportInput }>("/export/jobs", {
    schema: { tags, summary: "Create an export job", headers: authHeaders, body: { type: "object" }, response: { 200: anyObject, ...commonErrorResponses } },
  }, async (request, reply) => {
    const h = request.headers["x-profile-instance-id"];
    const instance = typeof h === "string" && h.trim() !== "" ? h.trim() : undefined;
    const job = await svc.create(tenantOf(request), request.body, request.id, instance);
    reply.header("X-Location", `/data/core/ups/export/jobs/${job.id}`);
    return job;
  });

  app.get<{ Params: { EXPORT_JOB_ID: string } }>("/export/jobs/:EXPORT_JOB_ID", {
    schema: { tags, summary: "Retrieve an export job", headers: authHeaders, params: idParam("EXPORT_JOB_ID"), response: { 200: anyObject, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.get(tenantOf(request), request.params.EXPORT_JOB_ID));
}
