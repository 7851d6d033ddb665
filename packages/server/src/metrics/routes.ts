/**
 * GET /data/core/ups/segment/definitions/{id}/metrics?window=24h|7d|30d —
 * the "Profiles over time" card of the audience tool (total qualified, new
 * audience updated and its chart buckets). See docs/streaming-and-edge.md.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { registerTenantHooks, type AuthDeps } from "../http/auth.js";
import { tenantOf } from "../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam } from "../http/schemas.js";
import type { AudienceMetricsService, MetricWindow } from "./audience-metrics.js";

export interface MetricsRoutesOptions extends AuthDeps {
  metrics: AudienceMetricsService;
}

const bucketSchema = {
  type: "object",
  properties: {
    start: { type: "string" },
    end: { type: "string" },
    qualified: { type: "integer" },
    disqualified: { type: "integer" },
    net: { type: "integer" },
  },
  required: ["start", "end", "qualified", "disqualified", "net"],
} as const;

export async function metricsRoutes(app: FastifyInstance, opts: MetricsRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  app.get<{ Params: { id: string }; Querystring: { window: MetricWindow } }>("/segment/definitions/:id/metrics", {
    schema: {
      tags: ["Audience metrics"],
      summary: "Total qualified and new audience updated (streaming + edge) over the last 24 hours, 7 days or 30 days",
      headers: authHeaders,
      params: idParam("id"),
      querystring: {
        type: "object",
        properties: { window: { type: "string", enum: ["24h", "7d", "30d"], default: "24h" } },
      },
      response: {
        200: {
          type: "object",
          properties: {
            segmentId: { type: "string" },
            window: { type: "string" },
            from: { type: "string" },
            to: { type: "string" },
            totalQualified: { type: "integer" },
            newAudienceUpdated: { type: "integer" },
            qualified: { type: "integer" },
            disqualified: { type: "integer" },
            bucketSizeMs: { type: "integer" },
            buckets: { type: "array", items: bucketSchema },
          },
          required: ["segmentId", "window", "from", "to", "totalQualified", "newAudienceUpdated", "qualified", "disqualified", "bucketSizeMs", "buckets"],
        },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "No such definition in this sandbox" },
      },
    },
  }, async (request) => opts.metrics.metrics(tenantOf(request), request.params.id, request.query.window));
}

/**
 * `metricsRoutes` as a named, encapsulated plugin (the app's `metrics` capability). The realtime
 * plugin registers it with the engines' AudienceMetricsService, so it comes up and goes down with them.
 */
export const audienceMetricsPlugin = fp(async (app: FastifyInstance, opts: MetricsRoutesOptions) => metricsRoutes(app, opts), {
  name: "segmentd-audience-metrics",
  fastify: "5.x",
  encapsulate: true,
});
