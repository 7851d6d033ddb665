/**
 * `npm run bench:ingest -- --hubs 3` (issue #43, acceptance 4): streaming ingestion spread over
 * several hubs on one PostgreSQL schema and one nats-server, as deployed (`segmentd serve --nats
 * --database-url --workers`, each a process; the ingested events are published to the partitions
 * as a hub with workers does, no worker draining them). Two deployments' phases alternate in one
 * run — one hub alone, then the N hubs together — each hub offered the same fixed load below
 * capacity (an open loop of requests of 10 events). Printed per phase: each hub's CPU per
 * ingested event (/proc/<pid>/stat, user + system, every thread), the request latency, and the
 * PostgreSQL change log's lock wait per commit (`segmentd_profile_change_log_lock_wait_seconds_total`
 * over `…_commits_total` from each hub's /metrics: the one lock every writing process's commits
 * take in turn). Target: CPU per event per hub with N hubs ≤ 1.2 × one hub's.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { startNatsServer } from "../../packages/server/src/cluster/nats-server.js";
import { withDefaultUser } from "../../packages/server/src/platform/pg-url.js";
import { REPO_ROOT, killAll, spawnTs, waitFor, type Spawned } from "../../packages/server/test/helpers/spawn.js";
import { target } from "./cost.js";
import { percentile } from "./load-client.js";

const ORG = "HUBSBENCH0000000000000000@AdobeOrg";
const TOKEN = "hubs-bench-token";
const KEY = "hubs-bench-key";
const CLI = path.join(REPO_ROOT, "packages/server/src/cli/main.ts");
const BATCH = 10;

function cpuMsOf(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface Hub { url: string; proc: Spawned }

const headers = { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };

async function changeLog(hub: Hub): Promise<{ commits: number; waitS: number }> {
  const text = await (await fetch(`${hub.url}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  return { commits: read("segmentd_profile_change_log_commits_total"), waitS: read("segmentd_profile_change_log_lock_wait_seconds_total") };
}

/** An open loop at `rate` requests/s to one hub for `seconds`: each request due at start + i / rate, timed from then. */
async function paced(hub: Hub, datasetId: string, rate: number, seconds: number, tag: string): Promise<{ latencies: number[]; failed: number; events: number }> {
  const latencies: number[] = [];
  let failed = 0;
  let events = 0;
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; ; i++) {
    const due = start + (i * 1000) / rate;
    if (due >= start + seconds * 1000) break;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const messages = Array.from({ length: BATCH }, (_, k) => ({
      header: { datasetId },
      body: { xdmEntity: { _id: `${tag}-${i}-${k}`, identityMap: { ECID: [{ id: `p${(i * BATCH + k) % 20_000}`, primary: true }] }, eventType: "web.webpagedetails.pageViews", timestamp: new Date().toISOString() } },
    }));
    inFlight.push(fetch(`${hub.url}/collection/batch/bench`, { method: "POST", headers, body: JSON.stringify({ messages }) }).then(async (r) => {
      const text = await r.text();
      latencies.push(performance.now() - due);
      // The batch route answers 207 with a response per message; one with a status was refused.
      const accepted = r.status === 200 || r.status === 207 ? ((JSON.parse(text) as { responses?: Array<{ status?: number }> }).responses ?? []).filter((x) => x.status === undefined).length : 0;
      events += accepted;
      if (accepted === BATCH) return;
      if (failed++ === 0) console.error(`a failed request: ${r.status} ${text.slice(0, 300)}`);
    }, (err: unknown) => {
      if (failed++ === 0) console.error(`a failed request: ${String(err)}`);
    }));
  }
  await Promise.all(inFlight);
  return { latencies, failed, events };
}

interface PhaseResult { cpuUsPerEvent: number[]; p50: number; p99: number; failed: number; lockWaitMsPerCommit: number; commits: number }

async function phase(hubs: Hub[], datasetId: string, rate: number, seconds: number, tag: string): Promise<PhaseResult> {
  // A short warm-up at the same rate (JIT, connections), not measured.
  await Promise.all(hubs.map((h, k) => paced(h, datasetId, rate, 2, `${tag}-warm-${k}`)));
  const cpu0 = hubs.map((h) => cpuMsOf(h.proc.child.pid!));
  const log0 = await Promise.all(hubs.map(changeLog));
  const runs = await Promise.all(hubs.map((h, k) => paced(h, datasetId, rate, seconds, `${tag}-${k}`)));
  const cpu1 = hubs.map((h) => cpuMsOf(h.proc.child.pid!));
  const log1 = await Promise.all(hubs.map(changeLog));
  const all = Float64Array.from(runs.flatMap((r) => r.latencies)).sort();
  const commits = log1.reduce((n, l, k) => n + l.commits - log0[k]!.commits, 0);
  const waitS = log1.reduce((n, l, k) => n + l.waitS - log0[k]!.waitS, 0);
  return {
    cpuUsPerEvent: hubs.map((_, k) => ((cpu1[k]! - cpu0[k]!) * 1000) / Math.max(1, runs[k]!.events)),
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    failed: runs.reduce((n, r) => n + r.failed, 0),
    lockWaitMsPerCommit: (waitS * 1000) / Math.max(1, commits),
    commits,
  };
}

export async function runIngestHubsBench(o: { hubs: number; eventsPerSecondPerHub: number; seconds: number; rounds: number; databaseUrl: string }): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-hubs-"));
  const schema = `bench_hubs_${process.pid}`;
  const admin = new pg.Client({ connectionString: withDefaultUser(o.databaseUrl) });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const u = new URL(o.databaseUrl);
  u.searchParams.set("options", `-c search_path=${schema}`);
  const config = path.join(dir, "segmentd.config.json");
  writeFileSync(config, JSON.stringify({
    host: "127.0.0.1", port: 0, logLevel: "warn",
    auth: { staticTokens: [{ token: TOKEN, orgs: [ORG] }], apiKeys: [KEY] },
    organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }],
    batch: { defaultSchedule: false },
  }));
  const nats = await startNatsServer({ dir: path.join(dir, "nats"), domain: "hub" });
  const startHub = async (i: number): Promise<Hub> => {
    mkdirSync(path.join(dir, `hub-${i}`), { recursive: true });
    const proc = spawnTs(CLI, ["serve", "-c", config, "-d", path.join(dir, `hub-${i}`), "--nats", nats.url, "--database-url", u.toString(), "--workers", "--no-demo"]);
    return { url: (await waitFor(proc, /listening on (http:\/\/\S+)/, 120_000))[1]!, proc };
  };
  try {
    const hubs = [await startHub(1)];
    for (let i = 2; i <= o.hubs; i++) hubs.push(await startHub(i));
    const ds = await fetch(`${hubs[0]!.url}/data/foundation/catalog/dataSets`, { method: "POST", headers, body: JSON.stringify({ name: "web", schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent", contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] } }) });
    if (ds.status !== 201) throw new Error(`dataset: ${ds.status} ${await ds.text()}`);
    const datasetId = String(((await ds.json()) as string[])[0]).split("/").pop()!;
    const rate = o.eventsPerSecondPerHub / BATCH;
    console.log(`\ningestion over ${o.hubs} hubs (#43): each hub offered ${o.eventsPerSecondPerHub} events/s (requests of ${BATCH}) for ${o.seconds} s a phase; PostgreSQL, one nats-server, --workers (published to 64 partitions, no worker); ${o.rounds} rounds of [one hub, ${o.hubs} hubs]`);
    console.log(`| phase | hub CPU per event | request p50 / p99 | change-log lock wait per commit (commits) | failed requests |\n|---|---|---|---|---|`);
    const one: number[] = [];
    const many: number[] = [];
    const waits: number[] = [];
    for (let r = 1; r <= o.rounds; r++) {
      const a = await phase(hubs.slice(0, 1), datasetId, rate, o.seconds, `r${r}a`);
      one.push(a.cpuUsPerEvent[0]!);
      console.log(`| round ${r}: one hub | ${a.cpuUsPerEvent[0]!.toFixed(0)} µs | ${a.p50.toFixed(1)} / ${a.p99.toFixed(1)} ms | ${a.lockWaitMsPerCommit.toFixed(3)} ms (${a.commits}) | ${a.failed} |`);
      const b = await phase(hubs, datasetId, rate, o.seconds, `r${r}b`);
      const mean = b.cpuUsPerEvent.reduce((s, x) => s + x, 0) / b.cpuUsPerEvent.length;
      many.push(mean);
      waits.push(b.lockWaitMsPerCommit);
      console.log(`| round ${r}: ${o.hubs} hubs | ${b.cpuUsPerEvent.map((x) => x.toFixed(0)).join(" / ")} µs (mean ${mean.toFixed(0)}) | ${b.p50.toFixed(1)} / ${b.p99.toFixed(1)} ms | ${b.lockWaitMsPerCommit.toFixed(3)} ms (${b.commits}) | ${b.failed} |`);
    }
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    const ratio = median(many) / median(one);
    console.log(target(`CPU per ingested event per hub with ${o.hubs} hubs ≤ 1.2 × one hub's`, `${median(many).toFixed(0)} µs vs ${median(one).toFixed(0)} µs = ${ratio.toFixed(2)}×`, ratio <= 1.2, `medians of ${o.rounds} rounds, same run`));
    console.log(`change-log lock wait per commit with ${o.hubs} hubs: median ${median(waits).toFixed(3)} ms`);
  } finally {
    killAll();
    await nats.kill();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    for (const s of ["_profiles", "_metadata", "_batch", "_hygiene", "_delivery"]) await admin.query(`DROP SCHEMA IF EXISTS ${schema}${s} CASCADE`);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
