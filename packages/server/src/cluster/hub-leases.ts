/**
 * Work done once per deployment with several hubs (issue #43): each such task (a role) runs on the
 * hub holding its lease. The leases are the workers' partition leases (cluster/partition-leases.ts)
 * in a bucket of their own, one "partition" per role: a hub renews what it holds every third of the
 * TTL, the roles are spread over the live hubs (fair share), and a hub killed without releasing
 * stops renewing, so its roles are free once the TTL has passed and taken at another hub's next
 * round (4–8 s with the 6 s TTL). A graceful stop releases at once.
 *
 * A lease does not make work exactly once on its own (a paused holder may run on past its TTL):
 * each role's work is also idempotent in the database (schedules: a firing's job id derived from
 * the schedule and due time; expirations and work orders: compare-and-set claims).
 * The hubs' heartbeats in the same bucket say which hubs are alive (`liveHubs`): segment jobs
 * record the hub that runs them, and recovery leaves a live hub's running jobs alone.
 * The all-in-one hub (no NATS or no database) holds every role: `ALL_ROLES`.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { randomUUID } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Gauge, type Registry } from "prom-client";
import { PartitionLeases } from "./partition-leases.js";
import { HUB_ROLES, type HubRole, type HubRoleLeases } from "../platform/roles.js";

export { HUB_ROLES, ALL_ROLES, type HubRole, type RoleGate } from "../platform/roles.js";

export const HUB_LEASE_BUCKET = "segmentd_hub_leases";
/** A dead holder's roles are free after this (and taken at the next round, a third of it later). */
export const HUB_LEASE_TTL_MS = 6_000;

/** A busy JetStream may time out a request at start: a few attempts before the hub gives up starting. */
async function withRetries<T>(f: () => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await f();
    } catch (err) {
      if (i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, 500 * i));
    }
  }
}

export interface HubLeasesOptions {
  nc: NatsConnection;
  hubId?: string;
  ttlMs?: number;
  onError: (err: unknown) => void;
}

export class HubLeases implements HubRoleLeases {
  readonly hubId: string;
  /** Per role: when this hub last gained it (epoch ms), and how many times. */
  readonly stats = { gained: new Map<HubRole, number>(), gains: 0, losses: 0 };
  private leases: PartitionLeases | null = null;
  private readonly listeners = new Map<HubRole, Array<() => void | Promise<void>>>();

  constructor(private readonly o: HubLeasesOptions) {
    this.hubId = o.hubId ?? `hub-${process.pid}-${randomUUID().slice(0, 8)}`;
  }

  holds(role: HubRole): boolean {
    return this.leases?.owned().has(HUB_ROLES.indexOf(role)) ?? false;
  }

  onGained(role: HubRole, f: () => void | Promise<void>): void {
    const l = this.listeners.get(role) ?? [];
    l.push(f);
    this.listeners.set(role, l);
  }

  /** Creates the bucket (first hub) and claims this hub's share before resolving. */
  async start(): Promise<void> {
    const ttlMs = this.o.ttlMs ?? HUB_LEASE_TTL_MS;
    const kv = await withRetries(() => new Kvm(jetstream(this.o.nc)).create(HUB_LEASE_BUCKET, { ttl: ttlMs, history: 1 }));
    this.leases = new PartitionLeases({
      kv,
      workerId: this.hubId,
      partitions: HUB_ROLES.length,
      ttlMs,
      onError: this.o.onError,
      onChange: async (_owned, gained, lost) => {
        this.stats.losses += lost.length;
        for (const p of gained) {
          const role = HUB_ROLES[p]!;
          this.stats.gains++;
          this.stats.gained.set(role, Date.now());
          // Catch-up work (missed firings, orders left by a dead holder) starts without holding up the renewals.
          for (const f of this.listeners.get(role) ?? []) void Promise.resolve().then(f).catch(this.o.onError);
        }
      },
    });
    await this.leases.start();
  }

  /** The hubs alive (their heartbeats, as the last lease round saw them): whose running work is not to be recovered. */
  liveHubs(): Set<string> {
    return new Set([this.hubId, ...(this.leases?.liveWorkers() ?? [])]);
  }

  /** Releases every role at once (a graceful stop: another hub takes them at its next round). */
  async stop(): Promise<void> {
    await this.leases?.stop(true);
  }
}

export interface HubLeasesPluginOptions {
  natsUrl: string;
  metrics?: Registry;
  onError: (err: unknown) => void;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Which once-only roles this hub holds (issue #43); present with `--nats` and a database. */
    hubLeases?: HubRoleLeases;
  }
}

export const HUB_LEASES_PLUGIN = "segmentd-hub-leases";

/** Connects, claims this hub's share of the roles before the app is ready, releases them on close. */
export const hubLeasesPlugin = fp(
  async (app: FastifyInstance, o: HubLeasesPluginOptions) => {
    const nc = await connect({
      servers: o.natsUrl.split(",").map((s) => s.trim()),
      name: "segmentd-hub-leases",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      waitOnFirstConnect: true,
    });
    const leases = new HubLeases({ nc, onError: o.onError });
    await leases.start();
    app.decorate("hubLeases", leases);
    if (o.metrics && o.metrics.getSingleMetric("segmentd_hub_lease_held") === undefined) {
      new Gauge({
        name: "segmentd_hub_lease_held",
        help: "Once-per-deployment roles this hub holds the lease of (1) or not (0)",
        labelNames: ["role"],
        registers: [o.metrics],
        collect() {
          for (const r of HUB_ROLES) this.set({ role: r }, leases.holds(r) ? 1 : 0);
        },
      });
    }
    app.addHook("onClose", async () => {
      await leases.stop();
      await nc.close().catch(() => {});
    });
  },
  { name: HUB_LEASES_PLUGIN, fastify: "5.x" },
);
