/**
 * An edge node as deployed, for bench:edge: the hub's nats-server (domain `hub`), one site's leaf
 * nats-server, and `segmentd edge` in a process of its own. The bench process is the hub: its app
 * registers the cluster hub plugin (definitions and the datastream are published to the site,
 * the site's events ingested through the app's hub forwarder), and the location is warmed with
 * the projection of every profile, as the all-in-one's location is.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { startListeningChild, type ListeningChild } from "./listening-child.js";
import { startNatsServer, type RunningNatsServer } from "../../packages/server/src/cluster/nats-server.js";

export const SITE = "site-1";
const CLI = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../packages/server/src/cli/main.ts");

/** CPU seconds (user + system) a process has used, from /proc. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the line (11 and 12 after the command), in clock ticks.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

export interface NatsPair {
  hub: RunningNatsServer;
  site: RunningNatsServer;
  close(): Promise<void>;
}

export async function startNatsPair(dir: string): Promise<NatsPair> {
  const hub = await startNatsServer({ dir: path.join(dir, "nats-hub"), domain: "hub" });
  const site = await startNatsServer({ dir: path.join(dir, "nats-site"), domain: SITE, hubLeafUrl: hub.leafUrl! });
  return {
    hub,
    site,
    async close() {
      await site.stop();
      await hub.stop();
    },
  };
}

export type DeployedEdgeNode = ListeningChild;

/** Starts `segmentd edge` for SITE against the site's server; resolves once it listens. */
export async function startEdgeNodeProcess(o: { dir: string; org: string; natsUrl: string; nodeArgs?: string[]; env?: Record<string, string> }): Promise<DeployedEdgeNode> {
  const config = path.join(o.dir, "edge-node.config.json");
  writeFileSync(config, JSON.stringify({ logLevel: "warn", organizations: [{ id: o.org, sandboxes: [{ name: "prod", type: "production", default: true }] }] }));
  const args = ["--conditions=source", "--import", "tsx", ...(o.nodeArgs ?? []), CLI, "edge", "-c", config, "-d", path.join(o.dir, "edge-node"), "-p", "0", "--location", SITE, "--nats", o.natsUrl];
  return startListeningChild(args, o.env ?? {}, "edge node");
}

/** Waits until the node has applied both feeds up to what the hub held, with at least `projections` applied. */
export async function waitCaughtUp(url: string, projections: number, timeoutMs = 600_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const r = (await (await fetch(`${url}/readyz`)).json()) as { caughtUp: boolean; feeds: { projections: { seq: number; behind: number | null } } };
    if (r.caughtUp && r.feeds.projections.seq >= projections) return;
    if (Date.now() - t0 > timeoutMs) throw new Error(`the edge node did not catch up: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** The hub's side: the cluster hub plugin on the bench's app (before it listens). */
export async function registerHub(app: FastifyInstance, o: Parameters<typeof import("../../packages/server/src/cluster/hub-plugin.js")["clusterHubPlugin"]>[1]): Promise<void> {
  const { clusterHubPlugin } = await import("../../packages/server/src/cluster/hub-plugin.js");
  await app.register(clusterHubPlugin, o);
}
