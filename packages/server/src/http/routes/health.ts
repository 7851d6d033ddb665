/** Liveness, readiness (the store answers) and Prometheus metrics. No auth: they reveal no tenant data. */
import type { FastifyInstance } from "fastify";
import type { HttpMetrics } from "../../platform/metrics.js";
import type { MetadataStore } from "../../stores/types.js";

export interface HealthRoutesOptions {
  store: MetadataStore;
  metrics: HttpMetrics;
}

const statusSchema = { type: "object", properties: { status: { type: "string" }, store: { type: "string" }, error: { type: "string" } }, required: ["status"] } as const;

export async function healthRoutes(app: FastifyInstance, opts: HealthRoutesOptions): Promise<void> {
  const tags = ["Operations"];
  app.get("/healthz", { schema: { tags, summary: "Liveness: the process serves requests", response: { 200: statusSchema } } }, async () => ({ status: "ok" }));

  app.get("/readyz", {
    schema: { tags, summary: "Readiness: the metadata store is reachable", response: { 200: statusSchema, 503: statusSchema } },
  }, async (request, reply) => {
    try {
      await opts.store.ping();
      return { status: "ready", store: opts.store.kind };
    } catch (err) {
      request.log.warn({ err }, "readiness check failed");
      reply.code(503);
      return { status: "unavailable", store: opts.store.kind, error: "metadata store unreachable" };
    }
  });

  app.get("/metrics", {
    schema: { tags, summary: "Prometheus metrics (text exposition format)", response: { 200: { type: "string" } } },
  }, async (_request, reply) => {
    reply.type(opts.metrics.registry.contentType);
    return opts.metrics.registry.metrics();
  });
}
