/**
 * The hub's side of the edge sites, as a capability (`segmentd serve --nats URL`): it connects to
 * the hub's NATS, ingests every site's events through the edge plugin's hub forwarder, publishes
 * configuration changes and the projections of the profiles each site holds. Closed before the
 * edge plugin (registered after it), so the forwarder drains what was fetched.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { Gauge, type Registry } from "prom-client";
import { EDGE_PLUGIN } from "../edge/plugin.js";
import type { EventBus } from "../platform/bus.js";
import type { DatasetCatalog, MembershipWrites } from "../profiles/store.js";
import type { TenantDirectory } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { ConfigPublisher } from "./config-feed.js";
import { HubIngest } from "./hub-ingest.js";
import { connectNats } from "./nats.js";
import { HUB_DOMAIN } from "./subjects.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The hub's link to the edge sites; present when the server runs with NATS. */
    clusterHub?: ClusterHub;
  }
}

export const CLUSTER_HUB_PLUGIN = "segmentd-cluster-hub";

export interface ClusterHub {
  ingest: HubIngest;
  config: ConfigPublisher;
}

export interface ClusterHubOptions {
  natsUrl: string;
  hubDomain?: string;
  tenants: TenantDirectory;
  meta: MetadataStore;
  hub: MembershipWrites & Pick<DatasetCatalog, "getDataset">;
  bus: EventBus;
  metrics?: Registry;
  onError: (err: unknown) => void;
}

export const clusterHubPlugin = fp(
  async (app: FastifyInstance, o: ClusterHubOptions) => {
    const edge = app.edge;
    if (!edge) throw new Error(`${CLUSTER_HUB_PLUGIN}: app.edge is missing (register the ${EDGE_PLUGIN} plugin first)`);
    const domain = o.hubDomain ?? HUB_DOMAIN;
    const link = await connectNats({ url: o.natsUrl, name: "segmentd-hub", localDomain: domain, hubDomain: domain });
    const ingest = new HubIngest({
      link,
      tenants: o.tenants,
      forwarder: edge.forwarder,
      hub: o.hub,
      locations: edge.locations,
      onError: o.onError,
      log: { warn: (msg) => app.log.warn(msg) },
    });
    const config = new ConfigPublisher({ js: link.hub.js, jsm: link.hub.jsm, meta: o.meta, datasets: o.hub, bus: o.bus, tenants: o.tenants, onError: o.onError });
    app.addHook("onClose", async () => {
      config.stop();
      await ingest.stop();
      await link.close();
    });
    await ingest.start();
    await config.start();
    if (o.metrics && o.metrics.getSingleMetric("segmentd_hub_edge_events_ingested") === undefined) {
      new Gauge({ name: "segmentd_hub_edge_events_ingested", help: "Edge-site messages the hub ingested since it started", registers: [o.metrics], collect() { this.set(ingest.stats.ingested); } });
    }
    app.decorate("clusterHub", { ingest, config });
  },
  { name: CLUSTER_HUB_PLUGIN, fastify: "5.x", dependencies: [EDGE_PLUGIN] },
);
