/**
 * Previews and estimates API (segmentation-api.md §7): POST /preview (201 +
 * X-Location), GET/DELETE /preview/{id}, GET /estimate/{id}. Handlers only
 * translate HTTP to PreviewService calls and back.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { limitParam, offsetParam } from "../../http/routes/paging-params.js";
import { authHeaders, commonErrorResponses, idParam } from "../../http/schemas.js";
import type { PreviewInput, PreviewService } from "../previews/preview-service.js";

export interface PreviewRoutesOptions extends AuthDeps {
  previews: PreviewService;
}

const tags = ["Previews and estimates"];
const DEFAULT_LIMIT = 1000;
const anyObject = { type: "object", additionalProperties: true } as const;
const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };

export async function previewRoutes(app: FastifyInstance, opts: PreviewRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.previews;

  app.post<{ Body: PreviewInput }>("/preview", {
    schema: {
      tags,
      summary: "Create a preview (and its estimate, with the same id)",
      headers: authHeaders,
      body: { type: "object" },
      response: { 201: anyObject, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    const created = await svc.create(tenantOf(request), request.body);
    reply.code(201);
    reply.header("X-Location", `/data/core/ups/preview/${created.previewId}`);
    return created;
  });

  app.get<{ Params: { PREVIEW_ID: string }; Querystring: { offset?: number; limit?: number } }>("/preview/:PREVIEW_ID", {
    schema: {
      tags,
      summary: "Sample members of a preview",
      headers: authHeaders,
      params: idParam("PREVIEW_ID"),
      querystring: { type: "object", properties: { offset: offsetParam(), limit: limitParam(DEFAULT_LIMIT) } },
      response: { 200: anyObject, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request) => {
    const id = request.params.PREVIEW_ID;
    const offset = request.query.offset ?? 0;
    const limit = request.query.limit ?? DEFAULT_LIMIT;
    const r = await svc.results(tenantOf(request), id, offset, limit);
    const self = `/data/core/ups/preview/${id}`;
    return {
      results: r.results,
      state: r.state,
      links: {
        _self: `${self}?offset=${offset}&limit=${limit}`,
        ...(offset + r.results.length < r.total ? { next: `${self}?offset=${offset + r.results.length}&limit=${limit}` } : {}),
        ...(offset > 0 ? { prev: `${self}?offset=${Math.max(0, offset - limit)}&limit=${limit}` } : {}),
      },
      page: { offset, size: r.results.length },
    };
  });

  app.delete<{ Params: { PREVIEW_ID: string } }>("/preview/:PREVIEW_ID", {
    schema: { tags, summary: "Delete a preview", headers: authHeaders, params: idParam("PREVIEW_ID"), response: { 200: anyObject, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => {
    await svc.delete(tenantOf(request), request.params.PREVIEW_ID);
    return { status: true, message: `Preview ${request.params.PREVIEW_ID} deleted` };
  });

  app.get<{ Params: { ESTIMATE_ID: string } }>("/estimate/:ESTIMATE_ID", {
    schema: { tags, summary: "Estimate of a preview's audience size", headers: authHeaders, params: idParam("ESTIMATE_ID"), response: { 200: anyObject, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.estimate(tenantOf(request), request.params.ESTIMATE_ID));
}
