/**
 * Batch shards (issue #44, acceptance 3 measured on the shards' evaluation), one command:
 *
 *   npm run bench:shards -- [--db bench/.data/batch.db] [--workers 3] [--partitions 64] [--dir DIR] [--cache-mib 16]
 *   npm run bench:shards -- --database-url postgres://127.0.0.1:5432/test [--load] [--profiles 1000000 --events 10000000]
 *
 * Over bench:batch's data (1M profiles / 10M events; load it first with `npm run bench:batch --
 * --load-only`), or over the same data in PostgreSQL (`--database-url`: as deployed, the store is
 * a process of its own and no side holds a store in its RSS; `--load` loads it first into the
 * schema `--schema`, default segmentd_bench_shards, and a later run without it reuses it), each
 * in a process of its own, one after the other (the machine has two cores):
 * the all-in-one — the whole snapshot built, then bench:batch's 100 definitions evaluated over it —
 * and each of `--workers` workers — its shard over its partitions (partition p is worker p mod N's)
 * built, then the same definitions evaluated over it. Each prints its build and evaluation
 * times, the CPU of every thread of its process, its peak RSS and its members per definition.
 * Then: the workers' members per definition summed must equal the all-in-one's; #44's targets —
 * peak RSS per worker ≤ 45 % of the all-in-one's, CPU of a job summed over the workers ≤ 1.2× the
 * all-in-one's — printed against the figures of this run. Nothing is written to the store.
 *
 * `--dir DIR` keeps each worker's shard files (a second run loads them instead of building).
 * Internal: `--role all-in-one | worker --worker K [--cpu-profile FILE]` runs one side and prints a
 * JSON line.
 */
import { spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parse } from "@segmentd/pql";
import { SnapshotCache } from "../packages/server/src/batch/columnar/cache.js";
import { evaluateJob, type EvaluationOutcome, type JobDefinition } from "../packages/server/src/batch/engine/evaluate-job.js";
import { WorkerShard } from "../packages/server/src/batch/shards/worker-shard.js";
import { partitionFunction } from "../packages/server/src/cluster/partitions.js";
import { defaultConfig } from "../packages/server/src/platform/config.js";
import { WorkerProfileStore } from "../packages/server/src/profiles/embedded/worker-store.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import type { ProfileStore } from "../packages/server/src/profiles/store.js";
import pg from "pg";
import { loadDemo } from "./lib/demo-load.js";
import { TenantDirectory } from "../packages/server/src/services/tenancy.js";
import { NOW, definitions } from "./lib/batch-definitions.js";
import { startCpuProfile } from "./lib/cpu-profile.js";

const { values: args } = parseArgs({
  options: {
    db: { type: "string", default: "bench/.data/batch.db" },
    workers: { type: "string", default: "3" },
    partitions: { type: "string", default: "64" },
    role: { type: "string", default: "" },
    worker: { type: "string", default: "0" },
    /** Keep the shards' files here (a second run loads them: #44 acceptance 4); none: in memory. */
    dir: { type: "string", default: "" },
    "cpu-profile": { type: "string", default: "" },
    /**
     * SQLite's page cache per process (MiB). Small by default: deployed, the store is PostgreSQL in
     * a process of its own, so a cache in the bench's processes would count against every side's RSS.
     */
    "cache-mib": { type: "string", default: "16" },
    "database-url": { type: "string", default: "" },
    schema: { type: "string", default: "segmentd_bench_shards" },
    load: { type: "boolean", default: false },
    profiles: { type: "string", default: "1000000" },
    events: { type: "string", default: "10000000" },
  },
});
const ORG = "BENCH@AdobeOrg";
const POLICY = { id: "bench-pdg", identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const WORKERS = Number(args.workers);
const PARTITIONS = Number(args.partitions);

interface Side {
  role: string;
  partitions: number;
  profiles: number;
  buildMs: number;
  buildCpuMs: number;
  evalMs: number;
  evalCpuMs: number;
  peakRssBytes: number;
  /** RSS, and the V8 heap + array buffers, with the snapshot held (after the build). */
  rssBuiltBytes: number;
  heapBuiltBytes: number;
  members: Record<string, number>;
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const gb = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(2)} GB`;
const held = () => {
  const m = process.memoryUsage();
  if (process.env.BENCH_SHARDS_MEMORY === "1") console.error(JSON.stringify(m));
  return { rssBuiltBytes: m.rss, heapBuiltBytes: m.heapUsed + m.arrayBuffers };
};
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

function jobDefinitions(): JobDefinition[] {
  return definitions().defs.map((d) => {
    const refs = [...d.pql.matchAll(/inSegment\("([^"]+)"\)/g)].map((m) => m[1]!);
    return { id: d.id, query: parse(d.pql), references: [...new Set(refs)], excludeOptOut: true, policy: POLICY };
  });
}

function members(outcomes: Iterable<EvaluationOutcome>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const o of outcomes) for (const [id, c] of o.counters) out[id] = (out[id] ?? 0) + c.qualified;
  return out;
}

/** One side, in this process: the build, then the evaluation (nothing written). */
async function side(role: "all-in-one" | "worker", worker: number): Promise<Side> {
  const store = openStore();
  const config = defaultConfig();
  config.organizations = [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }];
  const tenant = new TenantDirectory(config).resolve(ORG, "prod")!;
  const scope = { orgId: ORG, sandboxName: "prod" };
  const defs = jobDefinitions();
  try {
    let t0 = performance.now();
    let c0 = cpuMs();
    if (role === "all-in-one") {
      const cache = new SnapshotCache(args.dir === "" ? {} : { dir: path.resolve(args.dir!, "all-in-one") });
      const snap = await cache.get(store, scope, POLICY, { events: true });
      const buildMs = performance.now() - t0;
      const buildCpuMs = cpuMs() - c0;
      const mem = held();
      t0 = performance.now();
      c0 = cpuMs();
      const stop = await startCpuProfile(args["cpu-profile"]!);
      const o = await evaluateJob(store, scope, defs, { now: NOW, snapshots: cache });
      await stop();
      const r: Side = { ...mem, role, partitions: PARTITIONS, profiles: snap.profileCount, buildMs, buildCpuMs, evalMs: performance.now() - t0, evalCpuMs: cpuMs() - c0, peakRssBytes: process.resourceUsage().maxRSS * 1024, members: members([o]) };
      await cache.close();
      return r;
    }
    const mine = Array.from({ length: PARTITIONS }, (_, p) => p).filter((p) => p % WORKERS === worker);
    const shard = new WorkerShard({
      store, partitions: PARTITIONS, held: mine, partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, PARTITIONS),
      ...(args.dir === "" ? {} : { dir: path.resolve(args.dir!, `worker-${worker}`), storeIdentity: storeName() }),
    });
    const profiles = (await shard.snapshot(tenant, POLICY, { events: true })).profileCount;
    const buildMs = performance.now() - t0;
    const buildCpuMs = cpuMs() - c0;
    const mem = held();
    t0 = performance.now();
    c0 = cpuMs();
    const stop = await startCpuProfile(args["cpu-profile"]!);
    const out = await shard.evaluate(tenant, defs, { now: NOW });
    await stop();
    const r: Side = { ...mem, role: `worker ${worker}`, partitions: mine.length, profiles, buildMs, buildCpuMs, evalMs: performance.now() - t0, evalCpuMs: cpuMs() - c0, peakRssBytes: process.resourceUsage().maxRSS * 1024, members: members([out]) };
    await shard.close();
    return r;
  } finally {
    await store.close();
  }
}

/** The store every side reads: PostgreSQL with --database-url, else the embedded file. */
function openStore(): ProfileStore {
  const url = args["database-url"]!;
  if (url !== "") return new PostgresProfileStore({ connectionString: url, schema: args.schema! });
  return new WorkerProfileStore({ path: path.resolve(args.db!), synchronous: "normal", cacheMiB: Number(args["cache-mib"]) });
}

const storeName = () => (args["database-url"] === "" ? path.resolve(args.db!) : `${args["database-url"]}#${args.schema}`);

/** --load: the schema dropped, then bench:batch's data loaded into it. */
async function loadPostgres(): Promise<void> {
  const url = args["database-url"]!;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${args.schema!.replace(/"/g, '""')}" CASCADE`);
  await c.end();
  const store = new PostgresProfileStore({ connectionString: url, schema: args.schema! });
  try {
    const r = await loadDemo(store, { orgId: ORG, sandboxName: "prod" }, { profiles: Number(args.profiles), events: Number(args.events), now: NOW, log: (line) => console.log(line) });
    console.log(`load into PostgreSQL (${args.schema}): ${args.profiles} profiles + ${args.events} events in ${s(r.ms)}`);
  } finally {
    await store.close();
  }
}

function runChild(extra: string[]): Side {
  const script = fileURLToPath(import.meta.url);
  const r = spawnSync(process.execPath, [...process.execArgv, script, "--db", args.db!, "--workers", String(WORKERS), "--partitions", String(PARTITIONS), "--dir", args.dir!, "--cache-mib", args["cache-mib"]!, "--database-url", args["database-url"]!, "--schema", args.schema!, ...extra], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const line = r.stdout.split("\n").find((l) => l.startsWith("{"));
  if (r.status !== 0 || line === undefined) throw new Error(`bench:shards ${extra.join(" ")} failed (${r.status}): ${r.stderr.slice(-2000)}`);
  return JSON.parse(line) as Side;
}

function print(x: Side): void {
  console.log(`${x.role.padEnd(10)} ${String(x.partitions).padStart(3)} partitions, ${x.profiles} profile entries: build ${s(x.buildMs)} (CPU ${s(x.buildCpuMs)}), evaluation of 100 definitions ${s(x.evalMs)} (CPU ${s(x.evalCpuMs)}); peak RSS ${gb(x.peakRssBytes)} (holding the snapshot: RSS ${gb(x.rssBuiltBytes)}, heap + buffers ${gb(x.heapBuiltBytes)})`);
}

function target(name: string, value: string, met: boolean): void {
  console.log(`target ${name}: ${value} ${met ? "MET" : "MISSED"}`);
}

async function main(): Promise<void> {
  if (args.role === "all-in-one" || args.role === "worker") {
    console.log(JSON.stringify(await side(args.role, Number(args.worker))));
    return;
  }
  if (args.load && args["database-url"] === "") throw new Error("--load loads PostgreSQL: give --database-url (the embedded data is bench:batch --load-only's)");
  if (args.load) await loadPostgres();
  console.log(`bench:shards — ${args["database-url"] === "" ? args.db : `PostgreSQL ${args.schema}`}, ${WORKERS} workers over ${PARTITIONS} partitions; ${os.cpus()[0]?.model ?? "cpu"} × ${os.availableParallelism()}, node ${process.version}, load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  const all = runChild(["--role", "all-in-one"]);
  print(all);
  const workers: Side[] = [];
  for (let k = 0; k < WORKERS; k++) {
    const w = runChild(["--role", "worker", "--worker", String(k)]);
    print(w);
    workers.push(w);
  }
  const summed: Record<string, number> = {};
  for (const w of workers) for (const [id, n] of Object.entries(w.members)) summed[id] = (summed[id] ?? 0) + n;
  const differ = Object.keys(all.members).filter((id) => summed[id] !== all.members[id]);
  console.log(`members per definition, the workers' summed against the all-in-one's: ${differ.length === 0 ? "equal for all 100" : `DIFFERENT for ${differ.join(", ")}`}`);
  const rss = Math.max(...workers.map((w) => w.peakRssBytes));
  const sum = (f: (x: Side) => number) => workers.reduce((a, w) => a + f(w), 0);
  target("peak RSS per worker ≤ 45 % of the all-in-one's", `${gb(rss)} against ${gb(all.peakRssBytes)} (${((100 * rss) / all.peakRssBytes).toFixed(0)} %)`, rss <= 0.45 * all.peakRssBytes);
  target("CPU of a job summed over the workers ≤ 1.2× the all-in-one's (evaluation)", `${s(sum((w) => w.evalCpuMs))} against ${s(all.evalCpuMs)} (${(sum((w) => w.evalCpuMs) / all.evalCpuMs).toFixed(2)}×)`, sum((w) => w.evalCpuMs) <= 1.2 * all.evalCpuMs);
  console.log(`  the builds, summed: ${s(sum((w) => w.buildCpuMs))} CPU against ${s(all.buildCpuMs)} (${(sum((w) => w.buildCpuMs) / all.buildCpuMs).toFixed(2)}×); wall ${s(Math.max(...workers.map((w) => w.buildMs)))} on the slowest worker against ${s(all.buildMs)}`);
  if (differ.length > 0) process.exitCode = 1;
}

await main();
