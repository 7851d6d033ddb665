/**
 * The realtime capability as one Fastify plugin: streaming evaluation, edge evaluation
 * (locations, datastreams, interact) and audience metrics. It builds the engines, serves
 * their routes, starts their timers, decorates the app with `realtime` and closes the
 * engines on close (the hub forwarder drains first):
 *
 *   await app.register(realtimePlugin, { ...auth, meta, hub, clock, bus, dataDir, edge: config.edge });
 *   // after every durable append of the ingestion path (the profiles plugin does this):
 *   await app.realtime.streaming.onRecordsStored(tenant, storedRecords);
 *
 * `registerRealtime` does the same on an app without decorating it (test harnesses).
 *
 * `createRealtime` builds the same engines without HTTP (tests, benches, CLI).
 * Both first load the datastreams from the metadata store (after importing a
 * `datastreams.json` an earlier version left in the data directory).
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { Counter, Gauge, type Registry } from "prom-client";
import type { AuthDeps } from "../http/auth.js";
import type { EventBus } from "../platform/bus.js";
import type { Clock } from "../platform/clock.js";
import type { ProfileStore } from "../profiles/store.js";
import { derivedSandboxId, type TenantDirectory } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { DefinitionCatalog } from "../streaming/definition-catalog.js";
import { StreamingEngine } from "../streaming/engine.js";
import { AudienceMetricsService } from "../metrics/audience-metrics.js";
import { audienceMetricsPlugin } from "../metrics/routes.js";
import { DatastreamService, importDatastreamsFile } from "./datastreams.js";
import { SegmentOfSegmentsPass } from "./disqualification.js";
import { HubForwarder, type HubForwarderOptions } from "./hub-forwarder.js";
import { EdgeInteractService } from "./interact.js";
import { InMemoryLocationStore } from "./location-store.js";
import { EdgeLocations, type EdgeLocationsConfig } from "./locations.js";
import { EdgeProjector } from "./projector.js";
import { DATASTREAMS_PREFIX, datastreamRoutes, edgeAdminRoutes, interactRoutes } from "./routes.js";

declare module "fastify" {
  interface FastifyInstance {
    /** Streaming, edge and audience-metrics engines; present when the realtime plugin is registered. */
    realtime?: Realtime;
  }
}

/** The plugin's name: what plugins that use `app.realtime` list in their `dependencies`. */
export const REALTIME_PLUGIN = "segmentd-realtime";

export interface RealtimeDeps {
  tenants: TenantDirectory;
  meta: MetadataStore;
  hub: ProfileStore;
  clock: Clock;
  bus?: EventBus;
  /**
   * The data directory: a `datastreams.json` an earlier version kept there is imported into the
   * metadata store once, at start-up (then renamed `datastreams.json.imported`). Omitted = no import.
   * Datastreams themselves live in the metadata store (`meta.datastreams`).
   */
  dataDir?: string;
  /**
   * How often every datastream is reloaded from the metadata store (ms), so that replaces and
   * deletes by other processes sharing the store reach this one's interact path. Default 30 s
   * on PostgreSQL, 0 (never) on the embedded store (this process is its only writer).
   */
  datastreamRefreshMs?: number;
  /** Start-up notices (the datastreams.json import); registerRealtime defaults to the app's logger. */
  log?: { info(msg: string): void; warn(msg: string): void };
  edge?: EdgeLocationsConfig;
  /** Streaming sweep period (default 30 s: exits land within 30 s of a window closing). */
  sweepIntervalMs?: number;
  /** Hub forwarding queue: batch size and interval, queue limit (backpressure), retries. */
  forwarder?: HubForwarderOptions;
  onError?: (err: unknown) => void;
  /** The app's Prometheus registry: the edge's figures are registered there (registerEdgeMetrics). */
  metrics?: Registry;
}

export interface Realtime {
  catalog: DefinitionCatalog;
  streaming: StreamingEngine;
  locations: EdgeLocations;
  projector: EdgeProjector;
  forwarder: HubForwarder;
  datastreams: DatastreamService;
  interact: EdgeInteractService;
  disqualification: SegmentOfSegmentsPass;
  metrics: AudienceMetricsService;
  /** Sizes of what requests grow (locations, forwarder queue, streaming caches): the soak's figures. */
  memoryStats(): Record<string, number>;
  /** Start the streaming sweep, the 24-hourly disqualification and the datastream reload timers. */
  start(): void;
  /** Write the queued hub forwards now and wait for them and for the streaming writes. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export async function createRealtime(deps: RealtimeDeps): Promise<Realtime> {
  const onError = deps.onError ?? ((err: unknown) => console.error("segmentd realtime:", err));
  // Datastreams first: nothing else is started yet if the import or the load fails.
  const datastreams = new DatastreamService(deps.meta.datastreams, deps.hub, deps.clock, {
    refreshIntervalMs: deps.datastreamRefreshMs ?? (deps.meta.kind === "postgres" ? 30_000 : 0),
    onError,
  });
  const log = deps.log ?? { info: () => {}, warn: (msg: string) => console.warn(msg) };
  if (deps.dataDir) {
    const sandboxIdOf = (orgId: string, sandboxName: string) => deps.tenants.resolve(orgId, sandboxName)?.sandbox.sandboxId ?? derivedSandboxId(orgId, sandboxName);
    const imported = await importDatastreamsFile(deps.meta.datastreams, deps.dataDir, sandboxIdOf);
    if (imported?.outcome === "kept") {
      log.warn(`segmentd: ${imported.file} (${imported.count} datastreams) was not imported: the metadata store already holds other datastreams; the file is left in place and not used`);
    } else if (imported) {
      log.info(`segmentd: ${imported.count} datastreams of ${imported.file} are in the metadata store (file renamed to ${imported.file}.imported)`);
    }
  }
  await datastreams.load();
  const catalog = new DefinitionCatalog(deps.meta, deps.bus);
  const maxCachedProfiles = deps.edge?.streamingMaxProfiles;
  const streaming = new StreamingEngine({ catalog, hub: deps.hub, clock: deps.clock, sweepIntervalMs: deps.sweepIntervalMs, onError, ...(maxCachedProfiles !== undefined ? { maxCachedProfiles } : {}) });
  const locations = new EdgeLocations(deps.edge);
  const projector = new EdgeProjector(deps.hub, deps.meta, locations, deps.clock);
  const forwarder = new HubForwarder({
    ...deps.forwarder,
    hub: deps.hub,
    projector,
    streaming,
    now: () => deps.clock.now(),
    onError,
    // One line per event the hub refused (the rest of its batch was delivered).
    onDeadLetter: (l) => log.warn(`edge event ${l.eventId ?? "(no _id)"} of ${l.orgId}/${l.sandboxName} (dataset ${l.datasetId}, location ${l.location}) is dead-lettered: the hub refused it: ${l.reason}`),
  });
  const interact = new EdgeInteractService({ datastreams, tenants: deps.tenants, catalog, definitions: deps.meta.definitions, locations, forwarder, hub: deps.hub, clock: deps.clock });
  const disqualification = new SegmentOfSegmentsPass({ tenants: deps.tenants, catalog, locations, hub: deps.hub, clock: deps.clock, onError });
  const metrics = new AudienceMetricsService(deps.meta, deps.hub, deps.clock);
  if (deps.metrics) registerEdgeMetrics(deps.metrics, { forwarder, locations, streaming });
  return {
    catalog,
    streaming,
    locations,
    projector,
    forwarder,
    datastreams,
    interact,
    disqualification,
    metrics,
    memoryStats: () => memoryStatsOf(locations, forwarder, streaming),
    start() {
      streaming.start();
      disqualification.start();
      datastreams.start();
    },
    async flush() {
      await forwarder.idle();
      await streaming.idle();
    },
    async close() {
      disqualification.stop();
      await datastreams.stop();
      try {
        // Drains the queue: every event collected so far reaches the hub.
        await forwarder.close();
      } finally {
        await streaming.stop();
        catalog.close();
      }
    },
  };
}

/** Registers the edge, datastream and metrics routes on `app` and starts the timers; stops them on close. */
export async function registerRealtime(app: FastifyInstance, deps: RealtimeDeps & AuthDeps): Promise<Realtime> {
  const rt = await createRealtime({ ...deps, log: deps.log ?? app.log });
  const auth: AuthDeps = { authenticator: deps.authenticator, tenants: deps.tenants };
  await app.register(interactRoutes, { interact: rt.interact });
  await app.register(datastreamRoutes, { prefix: DATASTREAMS_PREFIX, ...auth, datastreams: rt.datastreams });
  await app.register(audienceMetricsPlugin, { prefix: "/data/core/ups", ...auth, metrics: rt.metrics });
  await app.register(edgeAdminRoutes, { prefix: "/admin/edge", ...auth, deadLetters: () => rt.forwarder.deadLetters() });
  rt.start();
  app.addHook("onClose", async () => {
    await rt.close();
  });
  return rt;
}

/**
 * The realtime capability (not encapsulated: it decorates the app with `realtime` and closes the
 * engines on the app's close). Its routes are registered in their own contexts, with their prefixes.
 */
export const realtimePlugin = fp(
  async (app: FastifyInstance, deps: RealtimeDeps & AuthDeps) => {
    const rt = await registerRealtime(app, deps);
    app.decorate("realtime", rt);
  },
  { name: REALTIME_PLUGIN, fastify: "5.x" },
);

function memoryStatsOf(locations: EdgeLocations, forwarder: HubForwarder, streaming: StreamingEngine): Record<string, number> {
  const out: Record<string, number> = {};
  for (const loc of locations.all()) {
    if (!(loc instanceof InMemoryLocationStore)) continue;
    const s = loc.sizes();
    out[`location ${loc.location} profiles`] = s.profiles;
    out[`location ${loc.location} events`] = s.events;
    out[`location ${loc.location} evicted`] = s.evicted;
  }
  out["forwarder pending"] = forwarder.pending;
  out["forwarder dead letters"] = forwarder.stats.deadLettered;
  out["forwarder dropped"] = forwarder.stats.dropped;
  out["streaming states"] = streaming.cachedStates;
  out["streaming scheduled"] = streaming.scheduled;
  return out;
}

/**
 * The edge's figures on a Prometheus registry (the app's): dead letters and drops of the hub
 * forwarder, its queue, each location's profiles and evictions, the streaming engine's states.
 * Read when scraped; registered once per registry.
 */
export function registerEdgeMetrics(registry: Registry, rt: Pick<Realtime, "forwarder" | "locations" | "streaming">): void {
  if (registry.getSingleMetric("segmentd_edge_dead_letters_total") !== undefined) return;
  const { forwarder, locations, streaming } = rt;
  const counterOf = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  counterOf("segmentd_edge_dead_letters_total", "Edge events the hub refused when written alone: dead-lettered, the rest of their batch delivered", () => forwarder.stats.deadLettered);
  counterOf("segmentd_edge_forward_dropped_total", "Edge events dropped after the hub failed every attempt to write them (transient failures)", () => forwarder.stats.dropped);
  counterOf("segmentd_edge_forwarded_total", "Edge events written to the hub", () => forwarder.stats.forwarded);
  new Gauge({
    name: "segmentd_edge_forward_pending",
    help: "Edge events waiting to be written to the hub (queued + in flight)",
    registers: [registry],
    collect() {
      this.set(forwarder.pending);
    },
  });
  const stores = () => locations.all().filter((l): l is InMemoryLocationStore => l instanceof InMemoryLocationStore);
  new Gauge({
    name: "segmentd_edge_location_profiles",
    help: "Profiles an edge location holds in memory",
    labelNames: ["location"] as const,
    registers: [registry],
    collect() {
      for (const l of stores()) this.set({ location: l.location }, l.size);
    },
  });
  counterOf("segmentd_edge_location_evictions_total", "Profiles edge locations dropped (memory bound or idle), over every location", () => stores().reduce((n, l) => n + l.evicted, 0));
  new Gauge({
    name: "segmentd_streaming_cached_profiles",
    help: "Profile states the streaming engine holds in memory",
    registers: [registry],
    collect() {
      this.set(streaming.cachedStates);
    },
  });
}
