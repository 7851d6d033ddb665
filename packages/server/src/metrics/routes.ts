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
import type { Clock } from "../platform/clock.js";
import type { MetadataStore } from "../stores/types.js";
import { AudienceMetricsService, type MetricWindow } from "./audience-metrics.js";

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

export interface AudienceMetricsPluginOptions extends AuthDeps {
  meta: MetadataStore;
  /** The membership transitions the streaming and edge engines recorded. */
  hub: ConstructorParameters<typeof AudienceMetricsService>[1];
  clock: Clock;
}

/**
 * The audience-metrics capability: owns its AudienceMetricsService (it reads the transitions the
 * streaming and edge engines record, nothing of theirs in memory) and serves `metricsRoutes` in
 * an encapsulated context under the prefix it is registered with.
 */
export const audienceMetricsPlugin = fp(
  async (app: FastifyInstance, opts: AudienceMetricsPluginOptions) => {
    const metrics = new AudienceMetricsService(opts.meta, opts.hub, opts.clock);
    await metricsRoutes(app, { authenticator: opts.authenticator, tenants: opts.tenants, metrics });
  },
  { name: "segmentd-audience-metrics", fastify: "5.x", encapsulate: true },
);
