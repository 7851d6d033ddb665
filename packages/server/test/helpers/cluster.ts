/**
 * A hub and edge sites as separate processes, the way `segmentd cluster up` runs them: the hub's
 * nats-server (JetStream domain `hub`), one leaf nats-server per site (its own domain), the hub
 * (`segmentd serve --nats`) and one edge node per site (`segmentd edge --location`), each with
 * its own data directory, over real sockets on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { REPO_ROOT, spawnTs, waitFor, type Spawned } from "./spawn.js";

export const ORG = "CLUSTER0000000000000000000@AdobeOrg";
const TOKEN = "cluster-token";
const KEY = "cluster-key";
const CLI = path.join(REPO_ROOT, "packages/server/src/cli/main.ts");

export interface Proc {
  url: string;
  proc: Spawned;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** Starts it again with the same data directory (after kill or stop); a new URL. */
  restart(): Promise<void>;
}

export interface Cluster {
  dir: string;
  hubNats: RunningNatsServer;
  siteNats: Record<string, RunningNatsServer>;
  hub: Proc;
  edges: Record<string, Proc>;
  /** A call to the hub's API with the organization's credentials. */
  call(method: string, url: string, body?: unknown): Promise<{ status: number; json: unknown }>;
  /** A Catalog dataset of that class on the hub; its id. */
  dataset(name: string, schema: "profile" | "experienceevent"): Promise<string>;
  /** An event dataset and a datastream sending to it, created at the hub; the datastream's id. */
  datastream(): Promise<string>;
  close(): Promise<void>;
}

function writeConfig(dir: string): string {
  const file = path.join(dir, "segmentd.config.json");
  writeFileSync(file, JSON.stringify({
    host: "127.0.0.1",
    port: 0,
    logLevel: "warn",
    auth: { staticTokens: [{ token: TOKEN, orgs: [ORG] }], apiKeys: [KEY] },
    organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }],
  }));
  return file;
}

async function startProc(args: () => string[], label: string, env: NodeJS.ProcessEnv = {}): Promise<Proc> {
  let proc = spawnTs(CLI, args(), env);
  const launched = async () => (await waitFor(proc, /listening on (http:\/\/\S+)/, 90_000))[1]!;
  const p: Proc = {
    url: await launched(),
    get proc() {
      return proc;
    },
    async kill() {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGKILL");
      await proc.exited;
    },
    async stop() {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
      const r = await proc.exited;
      assert.equal(r.code, 0, `${label} exited ${r.code}/${r.signal}:\n${proc.stderr()}`);
    },
    async restart() {
      proc = spawnTs(CLI, args(), env);
      p.url = await launched();
    },
  };
  return p;
}

/**
 * `sites`: each with its own leaf nats-server, except those in `opts.outbox`, whose edge node
 * connects to the hub's server and keeps its events in an outbox (`segmentd edge --outbox`).
 */
export async function startCluster(sites: readonly string[], opts: { hubNats?: { host: string; wrap: string[] }; outbox?: readonly string[]; edgeEnv?: NodeJS.ProcessEnv; /** More arguments of the hub's `serve` (e.g. `--database-url`). */ hubArgs?: readonly string[] } = {}): Promise<Cluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-cluster-"));
  const config = writeConfig(dir);
  const hubNats = await startNatsServer({ dir: path.join(dir, "nats-hub"), domain: "hub", ...(opts.hubNats ?? {}) });
  const siteNats: Record<string, RunningNatsServer> = {};
  const outbox = new Set(opts.outbox ?? []);
  for (const s of sites) if (!outbox.has(s)) siteNats[s] = await startNatsServer({ dir: path.join(dir, `nats-${s}`), domain: s, hubLeafUrl: hubNats.leafUrl! });
  mkdirSync(path.join(dir, "hub"), { recursive: true });
  const hub = await startProc(() => ["serve", "-c", config, "-d", path.join(dir, "hub"), "--nats", hubNats.url, "--no-demo", ...(opts.hubArgs ?? [])], "hub");
  const edges: Record<string, Proc> = {};
  for (const s of sites) {
    const nats = outbox.has(s) ? [hubNats.url, "--outbox"] : [siteNats[s]!.url];
    edges[s] = await startProc(() => ["edge", "-c", config, "-d", path.join(dir, `edge-${s}`), "--location", s, "--nats", ...nats], `edge ${s}`, opts.edgeEnv);
  }
  const headers = { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };
  const call = async (method: string, url: string, body?: unknown) => {
    const r = await fetch(hub.url + url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) };
  };
  const cluster: Cluster = {
    dir,
    hubNats,
    siteNats,
    hub,
    edges,
    call,
    async dataset(name, schema) {
      const r = await call("POST", "/data/foundation/catalog/dataSets", {
        name,
        schemaRef: { id: `https://ns.adobe.com/xdm/context/${schema}`, contentType: "application/vnd.adobe.xed+json;version=1" },
        tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
      });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      return (r.json as string[])[0]!.replace("@/dataSets/", "");
    },
    async datastream() {
      const web = await cluster.dataset("Web", "experienceevent");
      const ds = await call("POST", "/data/core/edge/datastreams", { name: "site", eventDatasetId: web });
      assert.equal(ds.status, 201, JSON.stringify(ds.json));
      return (ds.json as { id: string }).id;
    },
    async close() {
      for (const e of Object.values(edges)) await e.kill();
      await hub.kill();
      for (const n of Object.values(siteNats)) await n.kill();
      await hubNats.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** An interact request at an edge node: status, the audiences returned, the body. */
export async function interact(edgeUrl: string, dataStreamId: string, event: Record<string, unknown>): Promise<{ status: number; segments: string[]; json: unknown }> {
  const r = await fetch(`${edgeUrl}/ee/v2/interact?dataStreamId=${dataStreamId}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: { xdm: event } }) });
  const text = await r.text();
  const json = text === "" ? undefined : (JSON.parse(text) as unknown);
  if (r.status !== 200) return { status: r.status, segments: [], json };
  const handles = (json as { handle: Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }> }).handle;
  return { status: 200, segments: handles.find((h) => h.type === "activation:pull")!.payload.flatMap((p) => p.segments ?? []).map((s) => s.id), json };
}

/** Polls until `f` answers something other than undefined, or fails after `ms`. */
export async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const t0 = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
