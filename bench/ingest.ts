// Ingestion benchmark (issue #5, acceptance 4): batch ingestion of demo profiles
// and events, streaming ingestion with concurrent clients, and profile lookup
// latency on the loaded data. Runs against the service layer (validation +
// stitching + durable append), not over HTTP.
//
//   node --conditions=source --import tsx bench/ingest.ts \
//     [--profiles 1000000] [--events 10000000] [--stream 50000] [--clients 32] \
//     [--store embedded|postgres] [--db bench/.data/ingest.db] [--sync full|normal] \
//     [--url postgres://127.0.0.1:5432/test] [--lookups 20000] [--http-lookups 5000] [--scan] [--reuse] \
//     [--mode direct|staged] [--chunk 50000] [--depth 2] [--batch-records 200000] [--cache 1024]
//     [--checkpoints background|inline] [--checkpoint-interval ms] [--wal-limit-mib 64]
//     [--hubs 3 [--hub-rate 500] [--hub-seconds 15] [--hub-rounds 3]]   (#43: bench/lib/ingest-hubs.ts)
//
// --mode direct (default) validates and appends each chunk of --chunk records in
// one durable transaction, pipelined (ingest-pipeline.ts): up to --depth chunks are
// handed to the store before the oldest is awaited, so this thread generates and
// validates chunk n+1 while the store's worker writes chunk n (--depth 1: no overlap). --mode staged loads like the batch API: files of --chunk
// records are validated and staged into an ingestion batch, and every
// --batch-records records the batch is completed (one transaction applies it).
// --scan also times a full scan (every merged profile with its events, pdg policy).
// --reuse skips loading and measures lookups (and the scan) on an existing store.
// Prints the acceptance figures (batch events/s, lookup p50/p99) on stderr at the end,
// then a JSON summary on stdout that includes each batch phase's CPU seconds per thread.
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { DEMO_DATASETS, demoCrmId, demoEcid, demoEvents, demoProfiles } from "../packages/server/src/profiles/demo.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { WorkerProfileStore } from "../packages/server/src/profiles/embedded/worker-store.js";
import { ingestRecords, stageRecords } from "../packages/server/src/profiles/ingest.js";
import { ingestChunks } from "../packages/server/src/profiles/ingest-pipeline.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import type { ProfileStore } from "../packages/server/src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../packages/server/src/profiles/types.js";
import { registerProfileRoutes } from "../packages/server/src/profiles/http/index.js";
import { installBodyParsing } from "../packages/server/src/http/body-parsing.js";
import { installErrorHandling } from "../packages/server/src/http/errors.js";
import { SystemClock } from "../packages/server/src/platform/clock.js";
import { defaultConfig } from "../packages/server/src/platform/config.js";
import { Authenticator } from "../packages/server/src/services/auth/authenticator.js";
import { TenantDirectory } from "../packages/server/src/services/tenancy.js";
import Fastify from "fastify";

const { values: args } = parseArgs({
  options: {
    profiles: { type: "string", default: "1000000" },
    events: { type: "string", default: "10000000" },
    stream: { type: "string", default: "50000" },
    clients: { type: "string", default: "32" },
    lookups: { type: "string", default: "20000" },
    "http-lookups": { type: "string", default: "5000" },
    store: { type: "string", default: "embedded" },
    db: { type: "string", default: "bench/.data/ingest.db" },
    sync: { type: "string", default: "full" },
    url: { type: "string", default: "postgres://127.0.0.1:5432/test" },
    chunk: { type: "string", default: "50000" },
    depth: { type: "string", default: "2" },
    mode: { type: "string", default: "direct" },
    "batch-records": { type: "string", default: "200000" },
    cache: { type: "string", default: "1024" },
    /** Embedded store: WAL checkpoints on their own thread (default) or inside commits. */
    checkpoints: { type: "string", default: "background" },
    /** Embedded store, background checkpoints: milliseconds between rounds (default: the store's). */
    "checkpoint-interval": { type: "string" },
    /** Embedded store, background checkpoints: WAL size (MiB) past which the writer catches up (default: the store's, 64). */
    "wal-limit-mib": { type: "string" },
    scan: { type: "boolean", default: false },
    reuse: { type: "boolean", default: false },
    /** The embedded store on the main thread instead of its worker thread (the server's default). */
    "direct-store": { type: "boolean", default: false },
    /** Issue #43: streaming ingestion over this many hub processes (bench/lib/ingest-hubs.ts) instead of the store benchmark. */
    hubs: { type: "string" },
    "hub-rate": { type: "string", default: "500" },
    "hub-seconds": { type: "string", default: "15" },
    "hub-rounds": { type: "string", default: "3" },
  },
});

const NOW = Date.UTC(2026, 10, 21);
const BENCH_TOKEN = "bench-token";
const BENCH_KEY = "bench-key";
const SEED = 7;
const scope: TenantScope = { orgId: "bench@AdobeOrg", sandboxName: "bench" };
const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const nProfiles = Number(args.profiles);
const nEvents = Number(args.events);
const nStream = Number(args.stream);
const clients = Number(args.clients);
const chunk = Number(args.chunk);
const batchRecords = Number(args["batch-records"]);
const depth = Number(args.depth);
const staged = args.mode === "staged";

function openStore(): ProfileStore {
  if (args.store === "postgres") return new PostgresProfileStore({ connectionString: args.url!, schema: "bench_ingest", poolSize: Math.min(clients, 16) });
  mkdirSync(path.dirname(args.db!), { recursive: true });
  if (!args.reuse) for (const suffix of ["", "-wal", "-shm"]) rmSync(args.db! + suffix, { force: true });
  const o = {
    path: args.db!, synchronous: args.sync === "normal" ? "normal" as const : "full" as const, cacheMiB: Number(args.cache),
    checkpoints: args.checkpoints === "inline" ? "inline" as const : "background" as const,
    ...(args["checkpoint-interval"] === undefined ? {} : { checkpointIntervalMs: Number(args["checkpoint-interval"]) }),
    ...(args["wal-limit-mib"] === undefined ? {} : { walLimitBytes: Number(args["wal-limit-mib"]) * 2 ** 20 }),
  };
  return args["direct-store"] === true ? new EmbeddedProfileStore(o) : new WorkerProfileStore(o);
}

/** CPU seconds per thread of this process (Linux /proc; empty elsewhere), by thread id. */
function threadCpu(): Map<number, number> {
  const out = new Map<number, number>();
  try {
    for (const t of readdirSync("/proc/self/task")) {
      const stat = readFileSync(`/proc/self/task/${t}/stat`, "utf8");
      // Fields after the ")" that closes the thread name: utime and stime are the 12th and 13th.
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(Number(t), (Number(f[11]) + Number(f[12])) / 100);
    }
  } catch {
    // No /proc: the phase reports no per-thread figures.
  }
  return out;
}

interface PhaseCpu { mainThreadCpuS: number; busiestOtherThreadCpuS: number; allThreadsCpuS: number }

/** CPU used since `before` by the main thread, the busiest other thread (the store worker) and the whole process. */
function cpuSince(before: Map<number, number>): PhaseCpu | null {
  const after = threadCpu();
  if (after.size === 0) return null;
  let main = 0, busiest = 0, all = 0;
  for (const [t, s] of after) {
    const d = s - (before.get(t) ?? 0);
    all += d;
    if (t === process.pid) main = d;
    else busiest = Math.max(busiest, d);
  }
  const r = (x: number) => Math.round(x * 10) / 10;
  return { mainThreadCpuS: r(main), busiestOtherThreadCpuS: r(busiest), allThreadsCpuS: r(all) };
}

interface PhaseResult { perSec: number; seconds: number; cpu: PhaseCpu | null }

/** The records in chunks of `size`, each record with its index in the chunk. */
function* chunksOf(records: Iterable<JsonObject>, size: number): Generator<Array<{ index: number; value: unknown }>> {
  let buf: Array<{ index: number; value: unknown }> = [];
  for (const value of records) {
    buf.push({ index: buf.length, value });
    if (buf.length === size) {
      yield buf;
      buf = [];
    }
  }
  if (buf.length > 0) yield buf;
}

async function batchLoad(store: ProfileStore, datasetId: string, records: Iterable<JsonObject>, total: number, label: string): Promise<PhaseResult> {
  const cpuBefore = threadCpu();
  const started = performance.now();
  let done = 0;
  let batchId: string | null = null;
  let inBatch = 0;
  let files = 0;
  let reported = 0;
  let lastAt = started;
  let lastDone = 0;
  const progress = () => {
    const mb = Math.round(process.memoryUsage().rss / 2 ** 20);
    const now = performance.now();
    // Overall rate, then the rate since the previous line (shows how the rate changes as the store grows).
    const recent = Math.round((done - lastDone) / ((now - lastAt) / 1000));
    lastAt = now;
    lastDone = done;
    process.stderr.write(`${label}: ${done}/${total} (${Math.round(done / ((now - started) / 1000))}/s, last ${recent}/s, rss ${mb} MiB)\n`);
  };
  const complete = async () => {
    if (batchId === null) return;
    const r = await store.completeBatch(scope, batchId, { ingestedAt: NOW, maxIdentitiesPerGraph: 50 });
    if (r.batch.status !== "success" || r.batch.recordsWritten !== inBatch) throw new Error(`${label}: batch ${JSON.stringify(r.batch).slice(0, 300)}`);
    batchId = null;
    inBatch = 0;
    progress();
  };
  if (staged) {
    for (const buf of chunksOf(records, chunk)) {
      batchId ??= (await store.createBatch(scope, datasetId, NOW)).id;
      const r = await stageRecords(store, scope, datasetId, { id: batchId, file: `part-${files++}.ndjson` }, buf, { now: NOW });
      if (r.failed.length > 0) throw new Error(`${label}: ${JSON.stringify(r.failed.slice(0, 3))}`);
      inBatch += buf.length;
      done += buf.length;
      if (inBatch >= batchRecords) await complete();
    }
    await complete();
  } else {
    // Chunk n+1 is generated and validated on this thread while the store writes chunk n.
    for await (const r of ingestChunks(store, scope, datasetId, chunksOf(records, chunk), { now: NOW, depth })) {
      if (r.failed.length > 0) throw new Error(`${label}: ${JSON.stringify(r.failed.slice(0, 3))}`);
      done += r.received;
      if (done - reported >= total / 10 || done === total) {
        reported = done;
        progress();
      }
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return { perSec: done / seconds, seconds: Math.round(seconds * 10) / 10, cpu: cpuSince(cpuBefore) };
}

async function streamLoad(store: ProfileStore, datasetId: string): Promise<number> {
  // Streaming clients send one event per request and wait for the acknowledgement.
  const opts = { profiles: nProfiles, events: nStream, now: NOW, seed: SEED + 1 };
  const gen = demoEvents(opts);
  const started = performance.now();
  const client = async () => {
    for (let n = gen.next(); !n.done; n = gen.next()) {
      const r = await ingestRecords(store, scope, datasetId, [{ index: 0, value: n.value }], { now: Date.now() });
      if (r.failed.length > 0) throw new Error(JSON.stringify(r.failed));
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return nStream / ((performance.now() - started) / 1000);
}

interface Latency { n: number; p50: number; p99: number; max: number }

/** Pseudo-random demo identities (half CRM ids, half ECIDs) of loaded profiles. */
function* lookupIdentities(n: number, seed: number): Generator<{ namespace: string; id: string }> {
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const k = x % nProfiles;
    yield i % 2 === 0 ? { namespace: "crmid", id: demoCrmId(SEED, k) } : { namespace: "ecid", id: demoEcid(SEED, k) };
  }
}

function quantiles(lat: number[]): Latency {
  lat.sort((a, b) => a - b);
  const q = (f: number) => Math.round(lat[Math.min(lat.length - 1, Math.floor(lat.length * f))]! * 1000) / 1000;
  return { n: lat.length, p50: q(0.5), p99: q(0.99), max: q(1) };
}

/** The store call behind GET /data/core/ups/access/entities: the merged profile with its memberships. */
async function lookups(store: ProfileStore): Promise<Latency> {
  const lat: number[] = [];
  for (const identity of lookupIdentities(Number(args.lookups), 12345)) {
    const t = performance.now();
    const p = await store.getProfile(scope, identity, pdg);
    lat.push(performance.now() - t);
    if (p === null) throw new Error(`profile ${identity.namespace}:${identity.id} missing`);
  }
  return quantiles(lat);
}

/**
 * The same lookups over real HTTP: the profile routes (auth, tenancy, merge policy,
 * rendering) on 127.0.0.1, one request at a time from this process (the client's
 * own cost is included).
 */
async function httpLookups(store: ProfileStore): Promise<Latency | null> {
  const n = Number(args["http-lookups"]);
  if (n <= 0) return null;
  const config = defaultConfig();
  config.auth.staticTokens = [{ token: BENCH_TOKEN, orgs: [scope.orgId] }];
  config.auth.apiKeys = [BENCH_KEY];
  config.organizations = [{ id: scope.orgId, sandboxes: [{ name: scope.sandboxName, type: "production", default: true }] }];
  const clock = new SystemClock();
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  installBodyParsing(app);
  await registerProfileRoutes(app, {
    authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config), profiles: store, clock,
    policies: { async resolve() { return pdg; } },
  });
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  const headers = { authorization: `Bearer ${BENCH_TOKEN}`, "x-api-key": BENCH_KEY, "x-gw-ims-org-id": scope.orgId, "x-sandbox-name": scope.sandboxName };
  try {
    const lat: number[] = [];
    for (const identity of lookupIdentities(n, 54321)) {
      const url = `${base}/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityIdNS=${identity.namespace}&entityId=${encodeURIComponent(identity.id)}`;
      const t = performance.now();
      const r = await fetch(url, { headers });
      const text = await r.text();
      lat.push(performance.now() - t);
      if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${text.slice(0, 200)}`);
    }
    return quantiles(lat);
  } finally {
    await app.close();
  }
}

async function scan(store: ProfileStore): Promise<{ seconds: number; profiles: number; events: number }> {
  const started = performance.now();
  let profiles = 0;
  let events = 0;
  for await (const chunk of store.scanProfiles(scope, pdg, { chunkSize: 2000 })) {
    profiles += chunk.length;
    for (const p of chunk) events += p.events.length;
  }
  return { seconds: Math.round((performance.now() - started) / 100) / 10, profiles, events };
}

if (args.hubs !== undefined) {
  const { runIngestHubsBench } = await import("./lib/ingest-hubs.js");
  await runIngestHubsBench({ hubs: Number(args.hubs), eventsPerSecondPerHub: Number(args["hub-rate"]), seconds: Number(args["hub-seconds"]), rounds: Number(args["hub-rounds"]), databaseUrl: args.url! });
  process.exit(0);
}

const store = openStore();
if (args.reuse) {
  try {
    const lookup = await lookups(store);
    const httpLookup = await httpLookups(store);
    console.log(JSON.stringify({ store: args.store, lookupMs: lookup, httpLookupMs: httpLookup, ...(args.scan ? { scan: await scan(store) } : {}) }, null, 2));
  } finally {
    await store.close();
  }
  process.exit(0);
}
try {
  const p = await store.createDataset(scope, DEMO_DATASETS.profiles, NOW);
  const e = await store.createDataset(scope, DEMO_DATASETS.events, NOW);
  const profilesPhase = await batchLoad(store, p.id, demoProfiles({ profiles: nProfiles, events: 0, now: NOW, seed: SEED }), nProfiles, "profiles");
  const eventsPhase = await batchLoad(store, e.id, demoEvents({ profiles: nProfiles, events: nEvents, now: NOW, seed: SEED }), nEvents, "events");
  const streamPerSec = await streamLoad(store, e.id);
  const lookup = await lookups(store);
  const httpLookup = await httpLookups(store);
  const result = {
    store: args.store, sync: args.store === "embedded" ? args.sync : "n/a", checkpoints: args.store === "embedded" ? args.checkpoints : "n/a", mode: staged ? "staged" : "direct", chunk, depth: staged ? null : depth,
    batchRecords: staged ? batchRecords : null, profiles: nProfiles, events: nEvents, streamed: nStream, clients,
    batchProfilesPerSec: Math.round(profilesPhase.perSec), batchEventsPerSec: Math.round(eventsPhase.perSec), streamingRecordsPerSec: Math.round(streamPerSec),
    lookupMs: lookup, httpLookupMs: httpLookup, profileCount: await store.countProfiles(scope),
    phases: { profiles: profilesPhase, events: eventsPhase },
    ...(args.scan ? { scan: await scan(store) } : {}),
  };
  // The acceptance figures (issue #5): batch events/s (target >= 50,000) and the lookup p99 (<= 5 ms).
  process.stderr.write(`\nbatch events: ${result.batchEventsPerSec} events/s over ${nEvents} events (${eventsPhase.seconds} s)\n` +
    `lookup: p50 ${lookup.p50} ms, p99 ${lookup.p99} ms (${lookup.n} store lookups)\n\n`);
  console.log(JSON.stringify(result, null, 2));
} finally {
  await store.close();
}
