// Shared by the delivery suites: webhook receivers as child processes, a dataflow directory the
// test controls, and reading back what the receivers got (signatures checked).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { randomBytes } from "node:crypto";
import type { Dataflow, DataflowDirectory, DeliveryPolicy } from "../../src/activation/types.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { verify } from "../../src/activation/delivery/signing.js";
import { spawnTs, waitFor, type Spawned } from "../helpers/spawn.js";
import os from "node:os";
import pg from "pg";
import { DATABASE_URL, STORE_KIND, type TestStore } from "../profiles/test-store.js";
import path from "node:path";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import { obj, testConfig, type Client } from "../helpers/server-harness.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const RECEIVER = "packages/server/test/helpers/webhook-receiver.ts";

export interface Receiver {
  url: string;
  port: number;
  log: string;
  proc: Spawned;
}

/** `downForMs`: the receiver does not listen (connections refused) for that long after READY. */
export async function startReceiver(log: string, o: { port?: number; failRate?: number; hangRate?: number; hangMs?: number; delayMs?: number; status?: number; retryAfter?: string; downForMs?: number } = {}): Promise<Receiver> {
  const proc = spawnTs(RECEIVER, [JSON.stringify({ log, ...o })]);
  const m = await waitFor(proc, /READY (\d+)/);
  const port = Number(m[1]);
  return { url: `http://127.0.0.1:${port}/hook`, port, log, proc };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const a = s.address() as net.AddressInfo;
      s.close(() => resolve(a.port));
    });
  });
}

export class TestDirectory implements DataflowDirectory {
  private readonly flows = new Map<string, Dataflow>();
  private readonly listeners = new Set<(scope: TenantScope, flowId: string) => void>();
  set(f: Dataflow): void {
    this.flows.set(f.flowId, f);
    for (const l of this.listeners) l(f.scope, f.flowId);
  }
  remove(f: Dataflow): void {
    this.flows.delete(f.flowId);
    for (const l of this.listeners) l(f.scope, f.flowId);
  }
  async listEnabled(): Promise<Dataflow[]> {
    return [...this.flows.values()].filter((f) => f.state === "enabled");
  }
  async get(scope: TenantScope, flowId: string): Promise<Dataflow | null> {
    const f = this.flows.get(flowId);
    return f !== undefined && f.scope.orgId === scope.orgId && f.scope.sandboxName === scope.sandboxName ? f : null;
  }
  onChange(listener: (scope: TenantScope, flowId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export function newSecret(): string {
  return `whsec_${randomBytes(24).toString("base64")}`;
}

export function webhookFlow(scope: TenantScope, flowId: string, url: string, audiences: string[], secret: string, delivery: Partial<DeliveryPolicy> = {}): Dataflow {
  return {
    scope, flowId, name: flowId, state: "enabled",
    target: { kind: "webhook", url, auth: { type: "none" }, headers: { "x-test": flowId }, signingSecret: secret },
    delivery: { maxBatchSize: 50, maxWaitMs: 100, concurrency: 4, ratePerSecond: 0, retryPeriodMs: 60_000, timeoutMs: 2000, ...delivery },
    segmentSelectors: audiences.map((a) => ({ audienceId: a, startTime: 0, addedAt: 0 })),
    profileSelectors: { attributes: [], identityNamespaces: [] },
    createdAt: 0, updatedAt: 0, version: 1,
  };
}

export interface Received {
  t: number;
  webhookId: string;
  signed: boolean;
  outcome: number | "hang";
  flow: string;
  profiles: Array<{ profileId: string; seqs: number[]; ups: Record<string, { status: string; lastQualificationTime: string }>; identityMap: Record<string, Array<{ id: string }>>; [k: string]: unknown }>;
}

/** Every request a receiver logged, its signature checked against `secret` (timestamps within 10 minutes). */
export function received(log: string, secret: string): Received[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8").split("\n").filter((l) => l !== "").map((line) => {
    const r = JSON.parse(line) as { t: number; headers: Record<string, string>; body: string; outcome: number | "hang" };
    const signed = verify(secret, { id: r.headers["webhook-id"] ?? "", timestamp: r.headers["webhook-timestamp"] ?? "", signature: r.headers["webhook-signature"] ?? "" }, r.body, Math.floor(r.t / 1000), 600);
    const body = JSON.parse(r.body) as Array<{ _segmentd: { profileId: string; seqs: number[] }; segmentMembership: { ups: Record<string, { status: string; lastQualificationTime: string }> }; identityMap: Record<string, Array<{ id: string }>> }>;
    return { t: r.t, webhookId: r.headers["webhook-id"] ?? "", signed, outcome: r.outcome, flow: r.headers["x-test"] ?? "",
      profiles: body.map((p) => ({ ...p, profileId: p._segmentd.profileId, seqs: p._segmentd.seqs, ups: p.segmentMembership.ups })) };
  });
}

/** Log positions a receiver got (any attempt), and per profile the order of their first arrival. */
export function seqsOf(rs: Received[]): { all: Set<number>; firstOrder: Map<string, number[]> } {
  const all = new Set<number>();
  const firstOrder = new Map<string, number[]>();
  for (const r of rs) {
    for (const p of r.profiles) {
      for (const s of p.seqs) {
        if (all.has(s)) continue;
        all.add(s);
        const list = firstOrder.get(p.profileId) ?? [];
        list.push(s);
        firstOrder.set(p.profileId, list);
      }
    }
  }
  return { all, firstOrder };
}

export async function until(cond: () => boolean | Promise<boolean>, what: string, ms: number): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Drops the deliverer's state schema beside a PostgreSQL test store (`<schema>_delivery`). */
export async function dropDeliverySchema(ts: TestStore): Promise<void> {
  if (STORE_KIND !== "postgres") return;
  const u = new URL(DATABASE_URL);
  if (u.username === "") u.username = process.env["PGUSER"] || process.env["USER"] || os.userInfo().username;
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${ts.location}_delivery" CASCADE`);
  await c.end();
}

export const FLOWSERVICE = "/data/foundation/flowservice";

/**
 * A webhook destination and a flow over `audienceIds` created through the Flow Service API, the way
 * a user does it; the flow's id and the signing secret the API returns once.
 */
export async function createWebhookFlow(c: Client, name: string, url: string, audienceIds: string[], delivery: Partial<DeliveryPolicy> = {}): Promise<{ flowId: string; secret: string }> {
  const spec = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };
  const conn = await c.post(`${FLOWSERVICE}/connections`, { name: `${name} auth`, connectionSpec: spec });
  if (conn.status !== 201) throw new Error(`connection: ${conn.status} ${conn.text}`);
  const tgt = await c.post(`${FLOWSERVICE}/targetConnections`, { name: `${name} target`, baseConnectionId: obj(conn.json).id, connectionSpec: spec, params: { httpEndpoint: url, headers: { "x-test": name } } });
  if (tgt.status !== 201) throw new Error(`target connection: ${tgt.status} ${tgt.text}`);
  const f = await c.post(`${FLOWSERVICE}/flows`, {
    name, targetConnectionIds: [obj(tgt.json).id],
    transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: audienceIds.map((id) => ({ type: "PLATFORM_SEGMENT", value: { id } })) } } }],
    delivery,
  });
  if (f.status !== 201) throw new Error(`flow: ${f.status} ${f.text}`);
  return { flowId: String(obj(f.json).id), secret: String(obj(f.json).signingSecret) };
}

/**
 * The whole server in its own process (test/helpers/child-server.ts) on the store `handle` holds,
 * with destinations on private addresses allowed (the receivers listen on 127.0.0.1); its URL.
 */
export async function startServerProcess(handle: TestStoreHandle, env: NodeJS.ProcessEnv = {}): Promise<{ proc: Spawned; url: string }> {
  const c = testConfig(handle);
  const configFile = path.join(handle.dataDir, "segmentd.config.json");
  writeFileSync(configFile, JSON.stringify({
    host: c.host, port: 0, dataDir: c.dataDir, ...(c.databaseUrl ? { databaseUrl: c.databaseUrl } : {}), logLevel: "warn",
    auth: c.auth, organizations: c.organizations, batch: { defaultSchedule: false }, activation: { allowPrivateNetworks: true },
  }));
  const proc = spawnTs("packages/server/test/helpers/child-server.ts", [configFile], env);
  const m = await waitFor(proc, /READY (\S+)/);
  return { proc, url: m[1]! };
}

/**
 * Waits until each live (continuous or edge) definition's backfill over the existing profiles has
 * succeeded: one that ran late would write `backfill` transitions among those a test drives.
 */
export async function backfillsDone(c: Client, definitionIds: string[], ms = 30_000): Promise<void> {
  for (const id of definitionIds) {
    await until(async () => {
      const r = await c.get(`/data/core/ups/segment/definitions/${id}/backfill`);
      if (r.status !== 200) throw new Error(`backfill of ${id}: ${r.status} ${r.text}`);
      if (obj(r.json).state === "failed") throw new Error(`backfill of ${id} failed: ${r.text}`);
      return obj(r.json).state === "succeeded";
    }, `the backfill of ${id}`, ms);
  }
}
