/**
 * The all-in-one's edge capacity with durable acknowledgements (issue #37, item 4): interact is
 * answered once the hub committed the event, so its latency holds a group commit.
 *
 *   node --conditions=source --import tsx bench/edge-acks.ts [--database-url postgres://127.0.0.1:5432/test]
 *   options: --rates 500,1000 --open-seconds 8 --connections 32 --closed-seconds 8 --profiles 1000
 *
 * The bench process runs the whole server (startServer: embedded stores in a temporary data
 * directory, or every store on PostgreSQL in a throw-away schema), with one experience-event
 * dataset, a datastream and an edge audience every event qualifies for. The load comes from a
 * separate process (this file with --client): first an open loop at each fixed rate (latency
 * counted from when a request was due), then a closed loop of `--connections` connections, as
 * fast as the server answers (its capacity). Printed: responses/s, p50/p99 (ms), non-2xx
 * (503s when the queue is full or the hub does not commit within the acknowledgement timeout).
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import pg from "pg";
import { pacedLoad, postLoad, runLoadClient, type ClientResult } from "./lib/load-client.js";
import { createLogger, defaultConfig, startServer } from "../packages/server/src/index.js";

const { values: args } = parseArgs({
  options: {
    client: { type: "boolean", default: false },
    mode: { type: "string", default: "paced" },
    url: { type: "string", default: "" },
    rate: { type: "string", default: "0" },
    seconds: { type: "string", default: "8" },
    connections: { type: "string", default: "32" },
    profiles: { type: "string", default: "1000" },
    rates: { type: "string", default: "500,1000" },
    "open-seconds": { type: "string", default: "8" },
    "closed-seconds": { type: "string", default: "8" },
    "database-url": { type: "string", default: "" },
  },
});

const profiles = Number(args.profiles);
const body = () => ({
  event: { xdm: { identityMap: { CRMID: [{ id: `p-${Math.floor(Math.random() * profiles)}`, primary: true }] }, eventType: "web.pageview", timestamp: new Date(Date.now() - 1000).toISOString() } },
});

if (args.client) {
  const o = { url: args.url, connections: Number(args.connections), seconds: Number(args.seconds), body };
  await (args.mode === "paced" ? pacedLoad({ ...o, rate: Number(args.rate) }) : postLoad(o));
  process.exit(0);
}

const ORG = "BENCHACKS000000000000000@AdobeOrg";
const TOKEN = "bench-acks-token";
const KEY = "bench-acks-key";
const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-acks-"));
const c = defaultConfig();
c.port = 0;
c.dataDir = dir;
c.auth.staticTokens = [{ token: TOKEN, orgs: [ORG] }];
c.auth.apiKeys = [KEY];
c.organizations = [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }];
let schema = "";
const dbUrl = args["database-url"];
if (dbUrl !== "") {
  schema = `bench_acks_${process.pid}`;
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const u = new URL(dbUrl);
  u.searchParams.set("options", `-c search_path=${schema}`);
  c.databaseUrl = u.toString();
}
const server = await startServer(c, { logger: createLogger("silent") });
const headers = { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };
async function call(p: string, b: unknown): Promise<Record<string, unknown> | string[]> {
  const r = await fetch(server.url + p, { method: "POST", headers, body: JSON.stringify(b) });
  if (r.status >= 300) throw new Error(`${p}: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, unknown> | string[];
}
const created = (await call("/data/foundation/catalog/dataSets", {
  name: "web", schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent", contentType: "application/vnd.adobe.xed+json;version=1" },
  tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
})) as string[];
const dataset = created[0]!.replace("@/dataSets/", "");
await call("/data/core/ups/segment/definitions", {
  name: "visited", schema: { name: "_xdm.context.profile" },
  expression: { type: "PQL", format: "pql/text", value: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 1 hours before now)])' },
  evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
});
const ds = (await call("/data/core/edge/datastreams", { name: "site", eventDatasetId: dataset })) as Record<string, unknown>;
const url = `${server.url}/ee/v2/interact?dataStreamId=${ds.id as string}`;
// Every profile once (created at the hub), so the measured requests are of known profiles.
for (let p = 0; p < profiles; p += 50) {
  await Promise.all(Array.from({ length: Math.min(50, profiles - p) }, (_, k) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: { xdm: { identityMap: { CRMID: [{ id: `p-${p + k}`, primary: true }] }, eventType: "web.pageview" } } }) }).then((r) => r.arrayBuffer())));
}

const bench = fileURLToPath(import.meta.url);
const row = (what: string, r: ClientResult) => console.log(`${what.padEnd(34)} ${String(Math.round(r.rps)).padStart(6)} resp/s  p50 ${String(r.p50).padStart(7)} ms  p99 ${String(r.p99).padStart(7)} ms  non-2xx ${r.non2xx}  errors ${r.errors}`);
console.log(`store: ${dbUrl === "" ? "embedded" : "postgres"}; ${profiles} profiles; load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}; ${os.cpus().length} cores`);
for (const rate of args.rates.split(",").map(Number)) {
  row(`open loop ${rate} req/s`, await runLoadClient<ClientResult>(bench, ["--mode", "paced", "--url", url, "--rate", String(rate), "--seconds", args["open-seconds"], "--connections", "256", "--profiles", args.profiles]));
}
row(`closed loop ${args.connections} connections`, await runLoadClient<ClientResult>(bench, ["--mode", "closed", "--url", url, "--seconds", args["closed-seconds"], "--connections", args.connections, "--profiles", args.profiles]));
const fw = server.app.edge!.forwarder;
console.log(`forwarder: ${fw.stats.forwarded} forwarded in ${fw.stats.batches} batches (${(fw.stats.forwarded / Math.max(1, fw.stats.batches)).toFixed(1)} per batch), ${fw.stats.refused} refused, ${fw.stats.dropped} dropped; load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`);
await server.close();
rmSync(dir, { recursive: true, force: true });
if (schema !== "") {
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();
}
