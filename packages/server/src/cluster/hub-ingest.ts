/**
 * The hub's side of edge → hub: a durable pull consumer of the hub's event stream (which
 * sources every edge site's) hands each fetched batch to the hub forwarder — the all-in-one's
 * path: append to the hub's profile store, edge memberships, streaming evaluation, projection
 * to the locations holding the profile — and acknowledges the messages only once the forwarder
 * has written them. A hub killed in between gets them again; the store keeps one copy of an
 * event id per dataset, and writing the same membership status again records no transition,
 * so each event lands exactly once.
 */
import { AckPolicy, DeliverPolicy, type JsMsg } from "@nats-io/jetstream";
import type { HubForwarder } from "../edge/hub-forwarder.js";
import type { EdgeLocations } from "../edge/locations.js";
import { tenantKey } from "../platform/tenant.js";
import type { MembershipWrites } from "../profiles/store.js";
import { scopeOf, type TenantDirectory } from "../services/tenancy.js";
import { ensureHubEventsStream, ensureHubFeedStreams, fetchBatch, isNotFound, nanos, type NatsLink } from "./nats.js";
import { ProjectionFollower, projectionHeaders } from "./projection-follower.js";
import { RemoteLocationStore } from "./remote-location.js";
import { HUB_EVENTS_STREAM, HUB_INGEST_CONSUMER } from "./subjects.js";
import { decodeEdgeMessage, encode, recordOf } from "./wire.js";

export interface HubIngestDeps {
  link: NatsLink;
  tenants: TenantDirectory;
  forwarder: HubForwarder;
  hub: MembershipWrites;
  locations: EdgeLocations;
  /** Messages per fetch (default 1,000). */
  batch?: number;
  onError: (err: unknown) => void;
  log: { warn(msg: string): void };
}

export class HubIngest {
  private stopped = false;
  private loop: Promise<void> | null = null;
  readonly stats = { ingested: 0, batches: 0, refused: 0, lastBatchAt: 0 };
  /** Which profiles each site holds, as every hub projects them (several hubs share it). */
  readonly follower: ProjectionFollower;

  constructor(private readonly deps: HubIngestDeps) {
    this.follower = new ProjectionFollower({
      js: deps.link.hub.js,
      jsm: deps.link.hub.jsm,
      site: (location) => (deps.locations.get(location) ? undefined : this.remote(location)),
      onError: deps.onError,
    });
  }

  /** The remote location of a site, attached on its first message. */
  remote(location: string): RemoteLocationStore {
    const known = this.deps.locations.remoteStore(location);
    if (known instanceof RemoteLocationStore) return known;
    const store = new RemoteLocationStore(
      location,
      async (subject, message) => {
        await this.deps.link.hub.js.publish(subject, encode(message), { headers: projectionHeaders("forget" in message) });
      },
      this.deps.onError,
    );
    this.deps.locations.attachRemote(store);
    return store;
  }

  /** Starts ingesting (again, after `stop`: the durable consumer resumes where it was acknowledged). */
  async start(): Promise<void> {
    this.stopped = false;
    const { jsm } = this.deps.link.hub;
    await ensureHubEventsStream(jsm);
    await ensureHubFeedStreams(jsm);
    try {
      await jsm.consumers.info(HUB_EVENTS_STREAM, HUB_INGEST_CONSUMER);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await jsm.consumers.add(HUB_EVENTS_STREAM, {
        durable_name: HUB_INGEST_CONSUMER,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(30_000),
        max_ack_pending: 20_000,
      });
    }
    // The sites and the profiles each was sent a projection of (after a restart the hub keeps
    // projecting their changes without waiting for each site's next event of them), then what
    // every hub projects from now on.
    await this.follower.start();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.follower.stop();
    await this.loop;
  }

  private async run(): Promise<void> {
    const max = this.deps.batch ?? 1000;
    while (!this.stopped) {
      try {
        const consumer = await this.deps.link.hub.js.consumers.get(HUB_EVENTS_STREAM, HUB_INGEST_CONSUMER);
        while (!this.stopped) {
          // What arrived is applied and acknowledged now, even from a pull that ended early.
          const { batch, error } = await fetchBatch(consumer, max);
          if (error !== undefined) this.deps.onError(error);
          if (batch.length > 0) await this.apply(batch);
        }
      } catch (err) {
        if (this.stopped) return;
        this.deps.onError(err);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  private async apply(batch: JsMsg[]): Promise<void> {
    const { forwarder, tenants } = this.deps;
    for (const m of batch) {
      const msg = decodeEdgeMessage(m.data);
      if ("error" in msg) {
        this.refuse(m, msg.error);
        continue;
      }
      const tenant = tenants.resolve(msg.orgId, msg.sandboxName);
      if (!tenant) {
        this.refuse(m, `unknown tenant ${msg.orgId}/${msg.sandboxName}`);
        continue;
      }
      if (msg.kind === "memberships") {
        // After the events before it (their memberships first), in the order the site decided.
        await forwarder.idle();
        await this.deps.hub.writeMembershipChanges(scopeOf(tenant), msg.changes);
        continue;
      }
      this.remote(msg.location).note(tenantKey(tenant), msg.identity);
      forwarder.enqueue({ tenant, datasetId: msg.datasetId, record: recordOf(msg), identity: msg.identity, location: msg.location, newAtLocation: msg.newAtLocation, edgeChanges: msg.edgeChanges });
    }
    await forwarder.idle();
    // Acknowledged once written: a hub killed before this gets the batch again (written once).
    await Promise.all(batch.map((m) => m.ackAck().catch(() => false)));
    this.stats.ingested += batch.length;
    this.stats.batches++;
    this.stats.lastBatchAt = Date.now();
  }

  private refuse(m: JsMsg, reason: string): void {
    this.stats.refused++;
    this.deps.log.warn(`edge message ${m.seq} of ${HUB_EVENTS_STREAM} is refused and dropped: ${reason}`);
  }
}
