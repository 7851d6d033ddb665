/**
 * The realtime capabilities registered together on an app that has nothing else (test harnesses,
 * benches): the streaming, edge and audience-metrics plugins in their order, answering one object
 * with the engines. The server registers the same plugins one by one (app.ts).
 */
import type { FastifyInstance } from "fastify";
import type { AuthDeps } from "../http/auth.js";
import type { EventBus } from "../platform/bus.js";
import { StreamingEngine } from "../streaming/engine.js";
import type { DefinitionCatalog } from "../streaming/definition-catalog.js";
import { streamingPlugin } from "../streaming/plugin.js";
import { audienceMetricsPlugin } from "../metrics/routes.js";
import { edgePlugin, type Edge, type EdgeDeps } from "./plugin.js";

export { registerEdgeMetrics } from "./edge-metrics.js";

export interface RealtimeDeps extends EdgeDeps {
  bus?: EventBus;
  /** Streaming sweep period (default 30 s). */
  sweepIntervalMs?: number;
}

export interface Realtime extends Omit<Edge, "start" | "close"> {
  catalog: DefinitionCatalog;
  streaming: StreamingEngine;
}

export async function registerRealtime(app: FastifyInstance, deps: RealtimeDeps & AuthDeps): Promise<Realtime> {
  const maxCachedProfiles = deps.edge?.streamingMaxProfiles;
  await app.register(streamingPlugin, {
    meta: deps.meta,
    hub: deps.hub,
    clock: deps.clock,
    ...(deps.bus ? { bus: deps.bus } : {}),
    ...(deps.sweepIntervalMs !== undefined ? { sweepIntervalMs: deps.sweepIntervalMs } : {}),
    ...(maxCachedProfiles !== undefined ? { maxCachedProfiles } : {}),
    ...(deps.onError ? { onError: deps.onError } : {}),
  });
  await app.register(edgePlugin, deps);
  await app.register(audienceMetricsPlugin, { prefix: "/data/core/ups", authenticator: deps.authenticator, tenants: deps.tenants, meta: deps.meta, hub: deps.hub, clock: deps.clock });
  const streaming = app.streaming!;
  const edge = app.edge!;
  // The plugin registered above evaluates in process (never the workers' feed).
  if (!(streaming.engine instanceof StreamingEngine)) throw new Error("registerRealtime: the streaming plugin did not evaluate in process");
  return { ...edge, catalog: streaming.catalog, streaming: streaming.engine };
}
