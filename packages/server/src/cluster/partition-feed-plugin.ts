/**
 * Streaming evaluation on a hub whose workers evaluate (`segmentd serve --nats URL --workers`):
 * registered in the streaming plugin's place and under its name, it decorates the app with
 * `streaming` whose engine is the partitioned feed (partition-feed.ts). The other plugins feed it
 * as they feed the in-process engine; the definition catalog stays here for the edge plugin.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { KV } from "@nats-io/kv";
import type { Registry } from "prom-client";
import type { EventBus } from "../platform/bus.js";
import type { Clock } from "../platform/clock.js";
import type { IdentityGraph, JobPartitionWrites, MembershipReads, PartitionWrites, ProfileChanges, ProfileReads } from "../profiles/store.js";
import { batchJobBucket } from "./batch-fanout.js";
import { FleetJobs } from "./fleet-jobs.js";
import { FleetReadsClient } from "./fleet-reads.js";
import type { TenantDirectory } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";
import { DefinitionCatalog } from "../streaming/definition-catalog.js";
import { STREAMING_PLUGIN } from "../streaming/plugin.js";
import { connectNats } from "./nats.js";
import { PartitionBackfill } from "./partition-backfill.js";
import { ensurePartitionStream, PartitionFeed } from "./partition-feed.js";
import { registerPartitionMetrics } from "./partition-reports.js";
import { HUB_DOMAIN } from "./subjects.js";
import { leaseBucket, liveWorkerIds } from "./partition-leases.js";

export interface PartitionFeedPluginOptions {
  natsUrl: string;
  hubDomain?: string;
  partitions: number;
  meta: MetadataStore;
  /** The hub's profile store; with partitionPositions (PostgreSQL, as workers need) backfills are handed to the workers. */
  hub: Pick<IdentityGraph, "findProfileIds"> & Pick<ProfileReads, "eventsStoredThrough"> & Pick<MembershipReads, "listTransitions"> & Pick<ProfileChanges, "changesSince"> & Partial<Pick<PartitionWrites, "partitionPositions">> & Partial<Pick<JobPartitionWrites, "jobPartitionReports" | "pruneJobPartitions" | "closeJobPartitions">>;
  /** Segment jobs evaluated and written by the workers (config `batch.onWorkers`; #44): decorates `app.batchFanOut`, and `app.batchFleetReads` for previews, estimates and edit impact. */
  batchOnWorkers?: boolean;
  tenants: TenantDirectory;
  clock: Clock;
  bus: EventBus;
  /** The hub's /metrics: the partitions' owners and lag (partition-reports.ts). */
  metrics?: Registry;
  /** Tick period (default 30 s). */
  tickIntervalMs?: number;
  onError(err: unknown): void;
}

export const partitionFeedPlugin = fp(
  async (app: FastifyInstance, o: PartitionFeedPluginOptions) => {
    const domain = o.hubDomain ?? HUB_DOMAIN;
    const link = await connectNats({ url: o.natsUrl, name: "segmentd-hub-partitions", localDomain: domain, hubDomain: domain });
    try {
      await ensurePartitionStream(link.local.jsm, o.partitions);
    } catch (err) {
      await link.close();
      throw err;
    }
    const catalog = new DefinitionCatalog(o.meta, o.bus);
    const feed = new PartitionFeed({ js: link.local.js, partitions: o.partitions, hub: o.hub, clock: o.clock, onError: o.onError, ...(o.tickIntervalMs === undefined ? {} : { tickIntervalMs: o.tickIntervalMs }), gate: () => app.hubLeases?.holds("partition-tick") ?? true });
    // Definition and merge-policy changes reach every partition in stream order.
    const changed = (e: { tenant: { orgId: string; sandboxId: string } }) => {
      const t = o.tenants.bySandboxId(e.tenant.sandboxId);
      if (t) feed.definitionsChanged({ orgId: t.orgId, sandboxName: t.sandbox.sandboxName }).catch(o.onError);
    };
    const unsubscribe = [o.bus.subscribe("definition.changed", changed), o.bus.subscribe("mergePolicy.changed", changed)];
    // Backfills (issue #40) go to the partitions' owners in band: the hub waits on the positions they store.
    const hub = o.hub;
    const positions = hub.partitionPositions?.bind(hub);
    const backfill = positions === undefined ? undefined : new PartitionBackfill({
      js: link.local.js,
      partitions: o.partitions,
      clock: o.clock,
      store: { partitionPositions: positions, listTransitions: hub.listTransitions.bind(hub), changesSince: hub.changesSince.bind(hub), eventsStoredThrough: hub.eventsStoredThrough.bind(hub) },
    });
    // Segment jobs (issue #44) go to the workers: each evaluates its shard and writes its partitions.
    if (o.batchOnWorkers === true) {
      const reports = hub.jobPartitionReports?.bind(hub);
      const prune = hub.pruneJobPartitions?.bind(hub);
      const close = hub.closeJobPartitions?.bind(hub);
      if (reports === undefined || prune === undefined || close === undefined) throw new Error("batch.onWorkers needs the hub's PostgreSQL profile store (--database-url)");
      const leases = await leaseBucket(link.local.js);
      const liveWorkers = async () => (await liveWorkerIds(leases)).size;
      app.decorate("batchFanOut", new FleetJobs({ kv: await batchJobBucket(link.local.js), store: { jobPartitionReports: reports, pruneJobPartitions: prune, closeJobPartitions: close }, partitions: o.partitions, liveWorkers }));
      // Previews, builder estimates and edit impact: answered by the workers' shards.
      app.decorate("batchFleetReads", new FleetReadsClient({ nc: link.nc, partitions: o.partitions, liveWorkers: () => liveWorkerIds(leases) }));
    }
    app.decorate("streaming", {
      catalog,
      engine: feed,
      start: () => feed.start(),
      sweep: () => feed.tick(),
      idle: () => feed.idle(),
      ...(backfill === undefined ? {} : { backfill }),
      async close() {
        feed.stop();
        for (const u of unsubscribe) u();
        await feed.idle();
        catalog.close();
        await link.close();
      },
    });
    feed.start();
    if (o.metrics) {
      let bucket: Promise<KV> | null = null;
      const kv = () => {
        bucket ??= leaseBucket(link.local.js);
        bucket.catch(() => (bucket = null));
        return bucket;
      };
      registerPartitionMetrics(o.metrics, kv, o.partitions, feed);
    }
    app.addHook("onClose", async () => {
      await app.streaming!.close();
    });
  },
  { name: STREAMING_PLUGIN, fastify: "5.x" },
);
