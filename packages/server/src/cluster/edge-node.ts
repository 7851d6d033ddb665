/**
 * An edge node (`segmentd edge --location NAME --nats URL`): one location served by a process of
 * its own, beside its site's NATS leaf server. It answers interact from its own data — the
 * projections the hub sent, the events collected here, and a replica of the hub's definitions,
 * merge policies and datastreams in its own metadata store — and keeps doing so while the hub
 * or the link is away. Each collected event is stored in the site's JetStream before the 200;
 * the hub's stream sources the site's, so it reaches the hub when the link is up, exactly once.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { DeliverPolicy } from "@nats-io/jetstream";
import { Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { InProcessBus } from "../platform/bus.js";
import { tenantKey } from "../platform/tenant.js";
import { SystemClock, type Clock } from "../platform/clock.js";
import type { Config } from "../platform/config.js";
import { createLogger, type Logger } from "../platform/logger.js";
import { openMetadataStore } from "../stores/open-store.js";
import type { MetadataStore } from "../stores/types.js";
import { TenantDirectory } from "../services/tenancy.js";
import { DefinitionCatalog } from "../streaming/definition-catalog.js";
import type { MembershipChange, MembershipWrites } from "../profiles/store.js";
import { DatastreamService } from "../edge/datastreams.js";
import { SegmentOfSegmentsPass } from "../edge/disqualification.js";
import { EdgeInteractService } from "../edge/interact.js";
import { InMemoryLocationStore } from "../edge/location-store.js";
import { EdgeLocations } from "../edge/locations.js";
import { interactRoutes } from "../edge/routes.js";
import { installBodyParsing } from "../http/body-parsing.js";
import { installErrorHandling } from "../http/errors.js";
import { requestIdOf } from "../http/request-id.js";
import { applyConfig, type ConfigMessage } from "./config-feed.js";
import { EdgeDb, type ProjectionChange } from "./edge-db.js";
import { EdgeOutbox } from "./edge-outbox.js";
import { EdgePublisher } from "./edge-publisher.js";
import { FeedReader } from "./feed-reader.js";
import { connectNats, ensureSiteEventsStream, ensureSiteSource, fetchBatch, EDGE_RETENTION_MS, type NatsLink } from "./nats.js";
import { CONFIG_STREAM, HUB_DOMAIN, PROJECTION_STREAM, SITE_NAME, siteEventsStream, siteEventsSubject, siteProjectionFilter } from "./subjects.js";
import { decodeEdgeMessage, decodeJson, recordOf, type ProjectionMessage } from "./wire.js";

export interface EdgeNodeOptions {
  config: Config;
  /** The location this node serves: also its site's JetStream domain. */
  location: string;
  /** The site's NATS server (its leaf node). */
  natsUrl: string;
  hubDomain?: string;
  /**
   * No JetStream at the site: `natsUrl` is the hub's server, and each event is kept in a durable
   * outbox in `edge.db` before the 200, then sent to the hub's stream (edge-outbox.ts).
   */
  outbox?: boolean;
  /** The segment-of-segments disqualification period (default 24 h, the specification's). */
  disqualifyIntervalMs?: number;
  clock?: Clock;
  logger?: Logger;
}

export interface RunningEdgeNode {
  url: string;
  app: FastifyInstance;
  location: string;
  store: InMemoryLocationStore;
  feeds: { config: FeedReader; projections: FeedReader };
  publisher: EventSender;
  close(): Promise<void>;
}

/** Where the node's events go: its site's JetStream, or its outbox. */
export type EventSender = Pick<EdgePublisher, "admit" | "enqueue" | "sendMemberships" | "pending" | "close">;

const SOURCE_CHECK_MS = 30_000;

export async function startEdgeNode(o: EdgeNodeOptions): Promise<RunningEdgeNode> {
  const { config, location } = o;
  if (!SITE_NAME.test(location)) throw new Error(`edge: location name '${location}' must be 1-32 lower-case letters, digits or '-'`);
  const logger = o.logger ?? createLogger(config.logLevel);
  const clock = o.clock ?? new SystemClock();
  mkdirSync(config.dataDir, { recursive: true });
  const closers: Array<() => Promise<void> | void> = [];
  const closeAll = async () => {
    for (const c of closers.splice(0).reverse()) await Promise.resolve(c()).catch((err: unknown) => logger.error({ err }, "edge node: close failed"));
  };
  try {
    const meta: MetadataStore = await openMetadataStore({ dataDir: config.dataDir });
    closers.push(() => meta.close());
    const db = new EdgeDb(path.join(config.dataDir, "edge.db"));
    closers.push(() => db.close());
    const bus = new InProcessBus((topic, err) => logger.error({ err, topic }, "bus subscriber failed"));
    const tenants = new TenantDirectory(config);
    const hubDomain = o.hubDomain ?? HUB_DOMAIN;
    const link = await connectNats({ url: o.natsUrl, name: `segmentd-edge-${location}`, localDomain: o.outbox === true ? hubDomain : location, hubDomain });
    closers.push(() => link.close());
    if (o.outbox !== true) await ensureSiteEventsStream(link.local.jsm, location);
    const outbox = o.outbox === true ? new EdgeOutbox(db.db, link.hub.js, { site: location, location, now: () => clock.now(), onError: errorReporter(logger)("sending the outbox to the hub") }) : null;

    const locations = new EdgeLocations({ names: [location], ...(config.edge?.maxProfiles !== undefined ? { maxProfiles: config.edge.maxProfiles } : {}), ...(config.edge?.profileIdleMs !== undefined ? { profileIdleMs: config.edge.profileIdleMs } : {}) });
    const store = locations.get(location) as InMemoryLocationStore;
    const now = clock.now();
    const restored = await restoreLocation(store, db, tenants, outbox ? outbox.recent(now) : siteEvents(link, location, now), now);
    logger.info({ location, ...restored }, "edge node: location restored from its database and its site's events");

    const catalog = new DefinitionCatalog(meta, bus);
    closers.push(() => catalog.close());
    const datastreams = new DatastreamService(meta.datastreams, db, clock, { onError: (err) => logger.error({ err }, "edge node: datastreams") });
    await datastreams.load();
    const publisher: EventSender = outbox ?? new EdgePublisher(link.nc, { site: location, location });
    closers.push(() => publisher.close());
    outbox?.start();
    const interact = new EdgeInteractService({ datastreams, tenants, catalog, definitions: meta.definitions, locations, forwarder: publisher, hub: db, clock });
    // The 24-hourly pass runs here, on this location's profiles; its exits go to the hub as events do.
    const disqualification = new SegmentOfSegmentsPass({ tenants, catalog, locations, hub: membershipsViaSite(publisher, tenants), clock, onError: (err) => logger.error({ err }, "edge node: disqualification pass") });
    disqualification.start(o.disqualifyIntervalMs);
    closers.push(() => disqualification.stop());

    const quiet = errorReporter(logger);
    const configFeed = new FeedReader({
      js: link.hub.js,
      stream: CONFIG_STREAM,
      filter: "segmentd.cfg.>",
      startAfter: db.position("config"),
      onError: quiet("configuration feed"),
      apply: async (batch) => {
        let streams = false;
        for (const m of batch) {
          const msg = decodeJson(m.data) as ConfigMessage;
          if (msg.kind === "datastream") streams = true;
          await applyConfig(msg, { meta, bus, tenants, datasets: db });
        }
        db.setPosition("config", batch[batch.length - 1]!.seq);
        if (streams) await datastreams.reload();
      },
    });
    const projectionFeed = new FeedReader({
      js: link.hub.js,
      stream: PROJECTION_STREAM,
      filter: siteProjectionFilter(location),
      startAfter: db.position("projections"),
      onError: quiet("projection feed"),
      apply: async (batch) => {
        const changes: ProjectionChange[] = [];
        for (const m of batch) {
          const msg = decodeJson(m.data) as ProjectionMessage;
          if ("forget" in msg) {
            await store.forget(msg.tenantKey, new Set([msg.forget]));
            changes.push({ tenantKey: msg.tenantKey, forget: msg.forget });
          } else {
            await store.project(msg.tenantKey, msg.projection, { adopt: msg.adopt });
            changes.push({ tenantKey: msg.tenantKey, projection: msg.projection });
          }
        }
        db.applyProjections(changes, "projections", batch[batch.length - 1]!.seq);
      },
    });
    configFeed.start();
    projectionFeed.start();
    closers.push(() => configFeed.stop(), () => projectionFeed.stop());

    // The hub's stream sources this site's: registered now and checked again every 30 s.
    let sourceTimer: NodeJS.Timeout | null = null;
    const checkSource = () => {
      ensureSiteSource(link.hub.jsm, location).then(
        (added) => added && logger.info({ location }, "edge node: the hub's event stream now sources this site"),
        quiet("hub source registration"),
      );
    };
    if (outbox === null) {
      checkSource();
      sourceTimer = setInterval(checkSource, SOURCE_CHECK_MS);
      sourceTimer.unref();
    }
    closers.push(() => {
      if (sourceTimer) clearInterval(sourceTimer);
    });

    const app = await buildEdgeNodeApp({ config, logger, interact, location, feeds: { config: configFeed, projections: projectionFeed }, publisher, store, link });
    closers.push(() => app.close());
    await app.listen({ host: config.host, port: config.port });
    const addr = app.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.port;
    const host = config.host.includes(":") ? `[${config.host}]` : config.host;
    let closing: Promise<void> | undefined;
    return {
      url: `http://${host}:${port}`,
      app,
      location,
      store,
      feeds: { config: configFeed, projections: projectionFeed },
      publisher,
      close: () => (closing ??= closeAll()),
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** Logs a feed's first failure and its recovery, not one line a second while the hub is away. */
function errorReporter(logger: Logger): (what: string) => (err: unknown) => void {
  const failing = new Set<string>();
  return (what) => (err) => {
    if (failing.has(what)) return;
    failing.add(what);
    logger.warn({ err: String((err as Error)?.message ?? err) }, `edge node: ${what} unavailable; retrying every second`);
    setTimeout(() => failing.delete(what), 60_000).unref();
  };
}

/** The pass's membership writes, sent to the hub through the site's stream. */
function membershipsViaSite(publisher: EventSender, tenants: TenantDirectory): MembershipWrites {
  const send = async (scope: { orgId: string; sandboxName?: string }, changes: readonly MembershipChange[]) => {
    const tenant = tenants.resolve(scope.orgId, scope.sandboxName ?? "");
    if (!tenant || changes.length === 0) return;
    await publisher.sendMemberships(tenant.orgId, tenant.sandbox.sandboxName, changes, randomUUID());
  };
  return {
    async applyMembershipChanges(scope, changes) {
      await send(scope, changes);
      return [];
    },
    async writeMembershipChanges(scope, changes) {
      await send(scope, changes);
      return changes.length;
    },
    async applyMembershipSets() {
      throw new Error("an edge node writes no batch memberships");
    },
    async applyMembershipTargets() {
      throw new Error("an edge node runs no backfill");
    },
  };
}

/** The events collected at this site in the last 25 h, from its stream (local: no hub needed). */
async function* siteEvents(link: NatsLink, location: string, now: number): AsyncGenerator<Uint8Array> {
  const info = await link.local.jsm.streams.info(siteEventsStream(location));
  if (info.state.messages === 0) return;
  const consumer = await link.local.js.consumers.get(siteEventsStream(location), {
    filter_subjects: siteEventsSubject(location),
    deliver_policy: DeliverPolicy.StartTime,
    opt_start_time: new Date(now - EDGE_RETENTION_MS).toISOString(),
  });
  const last = info.state.last_seq;
  for (;;) {
    const { batch } = await fetchBatch(consumer, 1000);
    for (const m of batch) yield m.data;
    if (batch.length === 0 || batch[batch.length - 1]!.seq >= last) return;
  }
}

/**
 * Fills the location from the node's database (the hub's projections, as last applied) and from
 * the events collected here in the last 25 h with their edge memberships (its site's stream, or
 * its outbox): both are local, so a node restarts without the hub.
 */
async function restoreLocation(store: InMemoryLocationStore, db: EdgeDb, tenants: TenantDirectory, collected: Iterable<Uint8Array> | AsyncIterable<Uint8Array>, now: number): Promise<{ projections: number; events: number }> {
  let projections = 0;
  for (const p of db.projections()) {
    await store.project(p.tenantKey, p.projection, { adopt: true });
    projections++;
  }
  let events = 0;
  for await (const data of collected) {
    const msg = decodeEdgeMessage(data);
    if ("error" in msg || msg.kind !== "event") continue;
    const tenant = tenants.resolve(msg.orgId, msg.sandboxName);
    if (!tenant) continue;
    const tk = tenantKey(tenant);
    const record = recordOf(msg);
    const ts = record.timestamp ?? now;
    await store.collect(tk, msg.identity, { id: record.eventId ?? String(events), ts, body: record.body }, ts);
    if (msg.edgeChanges.length > 0) {
      await store.setEdgeMemberships(tk, msg.identity, msg.edgeChanges.map((c) => ({ definitionId: c.definitionId, entry: { status: c.status, lastQualificationTime: new Date(c.at).toISOString() } })));
    }
    events++;
  }
  return { projections, events };
}

interface EdgeNodeAppDeps {
  config: Config;
  logger: Logger;
  interact: EdgeInteractService;
  location: string;
  feeds: { config: FeedReader; projections: FeedReader };
  publisher: EventSender;
  store: InMemoryLocationStore;
  link: NatsLink;
}

/** Interact for this location, and the node's health: nothing else of the API. */
async function buildEdgeNodeApp(d: EdgeNodeAppDeps): Promise<FastifyInstance> {
  const app = Fastify({ loggerInstance: d.logger as FastifyBaseLogger, bodyLimit: d.config.bodyLimitBytes, return503OnClosing: true, forceCloseConnections: "idle", genReqId: requestIdOf });
  // A callback hook, not an async one: no promise per request on the interact path.
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    done();
  });
  installErrorHandling(app);
  installBodyParsing(app);
  await app.register(interactRoutes, { interact: d.interact });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const feedGauge = (name: string, help: string, read: (f: FeedReader) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["feed"] as const,
      registers: [registry],
      collect() {
        this.set({ feed: "config" }, read(d.feeds.config));
        this.set({ feed: "projections" }, read(d.feeds.projections));
      },
    });
  feedGauge("segmentd_edge_feed_behind", "Messages of the hub's feed not yet applied here, as last known (-1: never connected)", (f) => f.state.behind ?? -1);
  feedGauge("segmentd_edge_feed_caught_up", "1 when the node has applied everything the hub's feed held", (f) => (f.state.caughtUp ? 1 : 0));
  new Gauge({ name: "segmentd_edge_publish_pending", help: "Events waiting for the site's JetStream to store them, or in the outbox not yet sent to the hub", registers: [registry], collect() { this.set(d.publisher.pending); } });
  new Gauge({ name: "segmentd_edge_location_profiles", help: "Profiles this node holds", labelNames: ["location"] as const, registers: [registry], collect() { this.set({ location: d.location }, d.store.size); } });
  const status = () => {
    const feeds = { config: { ...d.feeds.config.state }, projections: { ...d.feeds.projections.state } };
    const caughtUp = feeds.config.caughtUp && feeds.projections.caughtUp;
    return { status: "ready", role: "edge", location: d.location, caughtUp, hubConnected: feeds.config.connected && feeds.projections.connected, natsConnected: !d.link.nc.isClosed() && d.link.nc.status !== undefined, feeds };
  };
  app.get("/healthz", async () => ({ status: "ok" }));
  // Ready while it can serve from its own data: catching up or cut off from the hub is reported, not refused.
  app.get("/readyz", async () => status());
  app.get("/metrics", async (_req, reply) => {
    reply.header("content-type", registry.contentType);
    return registry.metrics();
  });
  await app.ready();
  return app;
}

