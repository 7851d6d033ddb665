/** Liveness, readiness (the stores answer) and Prometheus metrics. No auth: they reveal no tenant data. */
import type { FastifyInstance } from "fastify";
import { registerProfileStoreMetrics, type HttpMetrics } from "../../platform/metrics.js";
import type { StoreHealth } from "../../profiles/store.js";
import type { MetadataStore } from "../../stores/types.js";

export interface HealthRoutesOptions {
  store: MetadataStore;
  metrics: HttpMetrics;
  /**
   * The profile store, when the profile plane runs: /readyz asks it too (a worker restarting is a
   * 503 with the reason), its status feeds segmentd_profile_store_up and the restart and
   * quarantine counters, and each quarantined record is logged (warn).
   */
  profiles?: StoreHealth;
}

const statusSchema = {
  type: "object",
  properties: { status: { type: "string" }, store: { type: "string" }, profileStore: { type: "string" }, error: { type: "string" } },
  required: ["status"],
} as const;

export async function healthRoutes(app: FastifyInstance, opts: HealthRoutesOptions): Promise<void> {
  const tags = ["Operations"];
  const profiles = opts.profiles;
  if (profiles !== undefined) {
    registerProfileStoreMetrics(opts.metrics.registry, profiles);
    const stop = profiles.observe({
      quarantined: (r) => app.log.warn({ quarantine: { orgId: r.scope.orgId, sandboxName: r.scope.sandboxName, datasetId: r.datasetId, kind: r.kind, recordId: r.recordId, profileId: r.profileId, reason: r.reason } },
        "profile store: a stored record cannot be served and is quarantined (skipped)"),
      availability: (up, error) => {
        if (up) app.log.info("profile store: serving again");
        else app.log.error({ reason: error }, "profile store: cannot serve");
      },
    });
    app.addHook("onClose", async () => { stop(); });
  }

  // Probes (HAProxy checks every hub each second) log only their failures.
  app.get("/healthz", { logLevel: "warn", schema: { tags, summary: "Liveness: the process serves requests", response: { 200: statusSchema } } }, async () => ({ status: "ok" }));

  app.get("/readyz", {
    logLevel: "warn",
    schema: { tags, summary: "Readiness: the metadata store is reachable and the profile store can serve", response: { 200: statusSchema, 503: statusSchema } },
  }, async (request, reply) => {
    try {
      await opts.store.ping();
    } catch (err) {
      request.log.warn({ err }, "readiness check failed");
      reply.code(503);
      return { status: "unavailable", store: opts.store.kind, error: "metadata store unreachable" };
    }
    if (profiles === undefined) return { status: "ready", store: opts.store.kind };
    const st = await profiles.status().catch((err: unknown) => ({ up: false, error: err instanceof Error ? err.message : String(err) }));
    if (!st.up) {
      request.log.warn({ reason: st.error }, "readiness check failed: profile store");
      reply.code(503);
      return { status: "unavailable", store: opts.store.kind, profileStore: profiles.kind, error: st.error ?? "profile store unavailable" };
    }
    return { status: "ready", store: opts.store.kind, profileStore: profiles.kind };
  });

  app.get("/metrics", {
    schema: { tags, summary: "Prometheus metrics (text exposition format)", response: { 200: { type: "string" } } },
  }, async (_request, reply) => {
    reply.type(opts.metrics.registry.contentType);
    return opts.metrics.registry.metrics();
  });
}
