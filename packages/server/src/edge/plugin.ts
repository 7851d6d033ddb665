/**
 * Edge evaluation as a capability: locations, the hub projector and forwarder, datastreams,
 * interact and the 24-hourly segment-of-segments pass. It uses the streaming capability (events
 * forwarded to the hub are evaluated there), serves the edge's routes, starts its timers,
 * decorates the app with `edge` and, on close, drains the hub forwarder before the streaming
 * plugin (registered earlier, so closed later) stops.
 *
 *   await app.register(streamingPlugin, { meta, hub, clock, bus });
 *   await app.register(edgePlugin, { ...auth, meta, hub, clock, dataDir, edge: config.edge });
 *
 * `createEdge` first loads the datastreams from the metadata store (after importing a
 * `datastreams.json` an earlier version left in the data directory).
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { Registry } from "prom-client";
import type { AuthDeps } from "../http/auth.js";
import type { EventBus } from "../platform/bus.js";
import type { Clock } from "../platform/clock.js";
import type { DatasetCatalog, IdentityGraph, MembershipReads, MembershipWrites, ProfileReads, RecordAppends } from "../profiles/store.js";
import { derivedSandboxId, type TenantDirectory } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { STREAMING_PLUGIN, type Streaming } from "../streaming/plugin.js";
import { durableForwarding } from "./acknowledged-forwarding.js";
import { DatastreamService, importDatastreamsFile } from "./datastreams.js";
import { SegmentOfSegmentsPass } from "./disqualification.js";
import { memoryStatsOf, registerEdgeMetrics } from "./edge-metrics.js";
import { HubForwarder, type HubForwarderOptions } from "./hub-forwarder.js";
import { EdgeInteractService } from "./interact.js";
import { EdgeLocations, type EdgeLocationsConfig } from "./locations.js";
import { EdgeProjector } from "./projector.js";
import { DATASTREAMS_PREFIX, datastreamRoutes, edgeAdminRoutes, interactRoutes } from "./routes.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The edge capability; present when the edge plugin is registered. */
    edge?: Edge;
  }
}

/** The plugin's name: what plugins that use `app.edge` list in their `dependencies`. */
export const EDGE_PLUGIN = "segmentd-edge";

/**
 * What the edge reads and writes of the hub's profile store: the forwarder appends events,
 * looks identities up and writes edge memberships; the projector reads profiles and their
 * memberships; datastreams and interact read datasets.
 */
export type EdgeHub = RecordAppends & IdentityGraph & MembershipWrites & ProfileReads & MembershipReads & Pick<DatasetCatalog, "getDataset">;

export interface EdgeDeps {
  tenants: TenantDirectory;
  meta: MetadataStore;
  hub: EdgeHub;
  clock: Clock;
  /** Datastream changes are published here (the hub's feed to edge nodes). */
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
  /** Start-up notices (the datastreams.json import); the plugin defaults to the app's logger. */
  log?: { info(msg: string): void; warn(msg: string): void };
  edge?: EdgeLocationsConfig;
  /** Hub forwarding queue: batch size and interval, queue limit (backpressure), retries. */
  forwarder?: HubForwarderOptions;
  onError?: (err: unknown) => void;
  /** The app's Prometheus registry: the edge's figures are registered there (registerEdgeMetrics). */
  metrics?: Registry;
}

export interface Edge {
  locations: EdgeLocations;
  projector: EdgeProjector;
  forwarder: HubForwarder;
  datastreams: DatastreamService;
  interact: EdgeInteractService;
  disqualification: SegmentOfSegmentsPass;
  /** Sizes of what requests grow (locations, forwarder queue, streaming caches): the soak's figures. */
  memoryStats(): Record<string, number>;
  /** Starts the 24-hourly disqualification and the datastream reload timers. */
  start(): void;
  /** Writes the queued hub forwards now and waits for them and for the streaming writes. */
  flush(): Promise<void>;
  /** Stops the timers and drains the forwarder: every event collected so far reaches the hub. */
  close(): Promise<void>;
}

export async function createEdge(deps: EdgeDeps, streaming: Streaming): Promise<Edge> {
  const onError = deps.onError ?? ((err: unknown) => console.error("segmentd edge:", err));
  // Datastreams first: nothing else is started yet if the import or the load fails.
  const datastreams = new DatastreamService(deps.meta.datastreams, deps.hub, deps.clock, {
    refreshIntervalMs: deps.datastreamRefreshMs ?? (deps.meta.kind === "postgres" ? 30_000 : 0),
    onError,
    ...(deps.bus ? { bus: deps.bus } : {}),
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
  const { catalog, engine } = streaming;
  const locations = new EdgeLocations(deps.edge);
  const projector = new EdgeProjector(deps.hub, deps.meta, locations, deps.clock);
  const forwarder = new HubForwarder({
    ...deps.forwarder,
    hub: deps.hub,
    projector,
    streaming: engine,
    now: () => deps.clock.now(),
    onError,
    // One line per event the hub refused (the rest of its batch was delivered).
    onDeadLetter: (l) => log.warn(`edge event ${l.eventId ?? "(no _id)"} of ${l.orgId}/${l.sandboxName} (dataset ${l.datasetId}, location ${l.location}) is dead-lettered: the hub refused it: ${l.reason}`),
  });
  // A request is answered once its event is committed at the hub (kill -9 loses no acknowledged event).
  const forwarding = durableForwarding(forwarder, deps.forwarder?.ackTimeoutMs);
  const interact = new EdgeInteractService({ datastreams, tenants: deps.tenants, catalog, definitions: deps.meta.definitions, locations, forwarder: forwarding, hub: deps.hub, clock: deps.clock });
  const disqualification = new SegmentOfSegmentsPass({ tenants: deps.tenants, catalog, locations, hub: deps.hub, clock: deps.clock, onError });
  if (deps.metrics) registerEdgeMetrics(deps.metrics, { forwarder, locations, streaming: engine });
  return {
    locations,
    projector,
    forwarder,
    datastreams,
    interact,
    disqualification,
    memoryStats: () => memoryStatsOf(locations, forwarder, engine),
    start() {
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
      // Drains the queue: every event collected so far reaches the hub.
      await forwarder.close();
    },
  };
}

/**
 * The edge capability (not encapsulated: it decorates the app with `edge`). Its routes are
 * registered in their own contexts, with their prefixes.
 */
export const edgePlugin = fp(
  async (app: FastifyInstance, deps: EdgeDeps & AuthDeps) => {
    const streaming = app.streaming;
    if (!streaming) throw new Error(`${EDGE_PLUGIN}: app.streaming is missing (register the ${STREAMING_PLUGIN} plugin first)`);
    const edge = await createEdge({ ...deps, log: deps.log ?? app.log }, streaming);
    const auth: AuthDeps = { authenticator: deps.authenticator, tenants: deps.tenants };
    await app.register(interactRoutes, { interact: edge.interact });
    await app.register(datastreamRoutes, { prefix: DATASTREAMS_PREFIX, ...auth, datastreams: edge.datastreams });
    await app.register(edgeAdminRoutes, { prefix: "/admin/edge", ...auth, deadLetters: () => edge.forwarder.deadLetters() });
    app.decorate("edge", edge);
    edge.start();
    app.addHook("onClose", async () => {
      await edge.close();
    });
  },
  { name: EDGE_PLUGIN, fastify: "5.x", dependencies: [STREAMING_PLUGIN] },
);
