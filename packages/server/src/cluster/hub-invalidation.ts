/**
 * Several hubs on one PostgreSQL database (issue #43): what a hub keeps in memory of the shared
 * configuration — the live definition catalog (compiled definitions and their merge policies,
 * what streaming and the edge plans read) and the interact path's datastream map — must follow
 * the changes made on any hub. After a change commits, the hub that made it publishes
 * `{kind, tenant, sandbox, id}` on a core NATS subject; every other hub drops its copy (the next
 * use reads the store). Core NATS is at most once: a hub whose connection drops, reconnects or
 * falls behind (slow consumer) drops every copy, and on (re)connecting says so to the others
 * (kind `all`), whose messages may have been lost the other way.
 *
 * Only changes this hub's services made are published (the bus's `*.changed` topics); received
 * ones touch the caches only, never the bus: the bus's other subscribers (the configuration feed
 * to the edge, the partitions' `d` messages, backfills) act once, on the hub that made the change.
 */
import { randomUUID } from "node:crypto";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { connect, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { Gauge, type Registry } from "prom-client";
import { EDGE_PLUGIN } from "../edge/plugin.js";
import type { EventBus } from "../platform/bus.js";
import type { TenantDirectory } from "../services/tenancy.js";
import { STREAMING_PLUGIN } from "../streaming/plugin.js";
import { linkDeliveryCommands } from "./delivery-command-link.js";
import { linkExportFiles } from "./export-file-link.js";
import { HUB_INVALIDATION_SUBJECT } from "./subjects.js";

export type InvalidationKind = "definition" | "mergePolicy" | "datastream" | "dataflow" | "all";

/** On the wire (JSON). `all`: every copy (tenant, sandbox and id are empty). */
export interface InvalidationMessage {
  v: 1;
  /** The hub that made the change (a hub ignores its own). */
  hub: string;
  kind: InvalidationKind;
  /** Organization id. */
  tenant: string;
  /** Sandbox id. */
  sandbox: string;
  id: string;
  /** The sender's clock when it published (ms): the receiver's lag. */
  at: number;
}

/** The caches a received message drops. */
export interface InvalidationTargets {
  catalog: { invalidate(scope: { orgId: string; sandboxId: string }): void; invalidateAll(): void };
  datastreams?: { forget(id: string): void; forgetAll(): Promise<void> };
  /** Dataflows (activation): this hub's changes are told; another hub's make the deliverer look at the flow now (else its 5 s reconcile). */
  dataflows?: {
    onLocalChange(listener: (scope: { orgId: string; sandboxName: string }, flowId: string) => void): () => void;
    changedElsewhere(scope: { orgId: string; sandboxName: string }, flowId: string): void;
  };
}

export interface HubInvalidationOptions {
  nc: NatsConnection;
  bus: EventBus;
  targets: InvalidationTargets;
  /** Messages of tenants not configured here are ignored. */
  tenants: Pick<TenantDirectory, "bySandboxId" | "resolve">;
  hubId?: string;
  onError: (err: unknown) => void;
}

const KINDS: ReadonlySet<string> = new Set(["definition", "mergePolicy", "datastream", "dataflow", "all"]);

/** A received message, or null when it is not one of ours (malformed, another version). */
export function decodeInvalidation(data: Uint8Array): InvalidationMessage | null {
  let m: unknown;
  try {
    m = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return null;
  }
  if (typeof m !== "object" || m === null) return null;
  const o = m as Record<string, unknown>;
  if (o["v"] !== 1 || typeof o["kind"] !== "string" || !KINDS.has(o["kind"])) return null;
  for (const f of ["hub", "tenant", "sandbox", "id"]) if (typeof o[f] !== "string") return null;
  if (typeof o["at"] !== "number") return null;
  return o as unknown as InvalidationMessage;
}

export class HubInvalidation {
  readonly hubId: string;
  readonly stats = { published: 0, received: 0, applied: 0, ignored: 0, droppedAll: 0, publishFailed: 0, lastLagMs: 0 };
  private readonly unsubscribe: Array<() => void> = [];
  private sub: Subscription | null = null;
  private stopped = false;

  constructor(private readonly o: HubInvalidationOptions) {
    this.hubId = o.hubId ?? randomUUID();
  }

  start(): void {
    const { bus, nc } = this.o;
    this.sub = nc.subscribe(HUB_INVALIDATION_SUBJECT, { callback: (err, msg) => (err ? this.o.onError(err) : this.receive(msg.data)) });
    this.unsubscribe.push(
      bus.subscribe("definition.changed", (e) => this.publish("definition", e.tenant, e.definitionId)),
      bus.subscribe("mergePolicy.changed", (e) => this.publish("mergePolicy", e.tenant, e.mergePolicyId)),
      bus.subscribe("datastream.changed", (e) => this.publish("datastream", e.tenant, e.datastreamId)),
    );
    const flows = this.o.targets.dataflows;
    if (flows !== undefined) {
      this.unsubscribe.push(flows.onLocalChange((scope, flowId) => {
        const t = this.o.tenants.resolve(scope.orgId, scope.sandboxName);
        if (t !== undefined) this.publish("dataflow", { orgId: t.orgId, sandboxId: t.sandbox.sandboxId }, flowId);
      }));
    }
    this.watch().catch(this.o.onError);
    // A hub that stopped (or was cut off) right after a change may have lost its message: the others drop theirs.
    this.publish("all", { orgId: "", sandboxId: "" }, "");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const u of this.unsubscribe.splice(0)) u();
    this.sub?.unsubscribe();
    this.sub = null;
  }

  private publish(kind: InvalidationKind, scope: { orgId: string; sandboxId: string }, id: string): void {
    if (this.stopped) return;
    const msg: InvalidationMessage = { v: 1, hub: this.hubId, kind, tenant: scope.orgId, sandbox: scope.sandboxId, id, at: Date.now() };
    try {
      // Buffered by the client while it reconnects; a loss is covered by the `all` sent on reconnecting.
      this.o.nc.publish(HUB_INVALIDATION_SUBJECT, JSON.stringify(msg));
      this.stats.published++;
    } catch (err) {
      this.stats.publishFailed++;
      if (this.stats.publishFailed === 1 || this.stats.publishFailed % 100 === 0) this.o.onError(err);
    }
  }

  /** Applies another hub's message (exposed for tests). */
  receive(data: Uint8Array): void {
    this.stats.received++;
    const m = decodeInvalidation(data);
    if (m === null || m.hub === this.hubId) {
      this.stats.ignored++;
      return;
    }
    this.stats.lastLagMs = Math.max(0, Date.now() - m.at);
    if (m.kind === "all") {
      this.dropAll();
      return;
    }
    const t = this.o.tenants.bySandboxId(m.sandbox);
    if (t === undefined || t.orgId !== m.tenant) {
      this.stats.ignored++;
      return;
    }
    const scope = { orgId: m.tenant, sandboxId: m.sandbox };
    // A merge policy is compiled into the catalog's definitions; datastreams and dataflows are in no catalog.
    if (m.kind === "datastream") this.o.targets.datastreams?.forget(m.id);
    else if (m.kind === "dataflow") this.o.targets.dataflows?.changedElsewhere({ orgId: t.orgId, sandboxName: t.sandbox.sandboxName }, m.id);
    else this.o.targets.catalog.invalidate(scope);
    this.stats.applied++;
  }

  private dropAll(): void {
    this.stats.droppedAll++;
    this.o.targets.catalog.invalidateAll();
    this.o.targets.datastreams?.forgetAll().catch(this.o.onError);
  }

  /** Lost messages: a disconnect, a reconnect or a slow consumer drops every copy; a reconnect tells the others too. */
  private async watch(): Promise<void> {
    for await (const s of this.o.nc.status()) {
      if (this.stopped) return;
      if (s.type === "disconnect" || s.type === "slowConsumer") this.dropAll();
      else if (s.type === "reconnect") {
        this.dropAll();
        this.publish("all", { orgId: "", sandboxId: "" }, "");
      }
    }
  }
}

export const HUB_INVALIDATION_PLUGIN = "segmentd-hub-invalidation";

export interface HubInvalidationPluginOptions {
  natsUrl: string;
  bus: EventBus;
  tenants: TenantDirectory;
  metrics?: Registry;
  onError: (err: unknown) => void;
}

/**
 * Registered on a hub with `--nats` and a PostgreSQL store (app.ts), after the streaming and edge
 * plugins whose caches it drops. Its own connection: reconnects forever, pings every 2 s.
 */
export const hubInvalidationPlugin = fp(
  async (app: FastifyInstance, o: HubInvalidationPluginOptions) => {
    const streaming = app.streaming;
    if (!streaming) throw new Error(`${HUB_INVALIDATION_PLUGIN}: app.streaming is missing (register the ${STREAMING_PLUGIN} plugin first)`);
    const nc = await connect({
      servers: o.natsUrl.split(",").map((s) => s.trim()),
      name: "segmentd-hub-invalidation",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      waitOnFirstConnect: true,
      pingInterval: 2_000,
      maxPingOut: 2,
    });
    const inval = new HubInvalidation({
      nc,
      bus: o.bus,
      tenants: o.tenants,
      targets: {
        catalog: streaming.catalog,
        ...(app.edge ? { datastreams: app.edge.datastreams } : {}),
        ...(app.activation ? { dataflows: app.activation.service } : {}),
      },
      onError: o.onError,
    });
    inval.start();
    // The same connection carries the dataflows' commands to the hub that delivers each.
    // and the export runs' files to the hubs that do not have them on their disks.
    const unlinks = app.activation ? [linkDeliveryCommands(nc, app.activation.commands, o.onError), linkExportFiles(nc, app.activation.exportFiles, o.onError)] : [];
    if (o.metrics && o.metrics.getSingleMetric("segmentd_hub_invalidations") === undefined) {
      new Gauge({
        name: "segmentd_hub_invalidations",
        help: "Cache invalidations between hubs since start: published, received, applied, ignored (own or unknown), dropped_all",
        labelNames: ["what"],
        registers: [o.metrics],
        collect() {
          const s = inval.stats;
          this.set({ what: "published" }, s.published);
          this.set({ what: "received" }, s.received);
          this.set({ what: "applied" }, s.applied);
          this.set({ what: "ignored" }, s.ignored);
          this.set({ what: "dropped_all" }, s.droppedAll);
        },
      });
    }
    if (o.metrics && o.metrics.getSingleMetric("segmentd_hub_invalidation_last_lag_seconds") === undefined) {
      new Gauge({
        name: "segmentd_hub_invalidation_last_lag_seconds",
        help: "From another hub's publish of the last invalidation received to its arrival here (the hubs' clocks)",
        registers: [o.metrics],
        collect() {
          this.set(inval.stats.lastLagMs / 1000);
        },
      });
    }
    app.addHook("onClose", async () => {
      for (const u of unlinks) u();
      await inval.stop();
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)));
      await Promise.race([nc.drain().catch(() => {}), gaveUp]);
      clearTimeout(timer);
      if (!nc.isClosed()) await nc.close().catch(() => {});
    });
  },
  { name: HUB_INVALIDATION_PLUGIN, fastify: "5.x", dependencies: [STREAMING_PLUGIN, EDGE_PLUGIN] },
);
