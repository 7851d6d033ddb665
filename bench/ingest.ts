// Ingestion benchmark (issue #5, acceptance 4): batch ingestion of demo profiles
// and events, streaming ingestion with concurrent clients, and profile lookup
// latency on the loaded data. Runs against the service layer (validation +
// stitching + durable append), not over HTTP.
//
//   node --conditions=source --import tsx bench/ingest.ts \
//     [--profiles 1000000] [--events 10000000] [--stream 50000] [--clients 32] \
//     [--store embedded|postgres] [--db bench/.data/ingest.db] [--sync full|normal] \
//     [--url postgres://127.0.0.1:5432/test] [--lookups 20000] [--scan] [--reuse]
//
// --scan also times a full scan (every merged profile with its events, pdg policy).
// --reuse skips loading and measures lookups (and the scan) on an existing store.
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { DEMO_DATASETS, demoCrmId, demoEcid, demoEvents, demoProfiles } from "../packages/server/src/profiles/demo.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../packages/server/src/profiles/ingest.js";
import { PostgresProfileStore } from "../packages/server/src/profiles/postgres/pg-store.js";
import type { ProfileStore } from "../packages/server/src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../packages/server/src/profiles/types.js";

const { values: args } = parseArgs({
  options: {
    profiles: { type: "string", default: "1000000" },
    events: { type: "string", default: "10000000" },
    stream: { type: "string", default: "50000" },
    clients: { type: "string", default: "32" },
    lookups: { type: "string", default: "20000" },
    store: { type: "string", default: "embedded" },
    db: { type: "string", default: "bench/.data/ingest.db" },
    sync: { type: "string", default: "full" },
    url: { type: "string", default: "postgres://127.0.0.1:5432/test" },
    chunk: { type: "string", default: "5000" },
    scan: { type: "boolean", default: false },
    reuse: { type: "boolean", default: false },
  },
});

const NOW = Date.UTC(2026, 10, 21);
const SEED = 7;
const scope: TenantScope = { orgId: "bench@AdobeOrg", sandboxName: "bench" };
const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const nProfiles = Number(args.profiles);
const nEvents = Number(args.events);
const nStream = Number(args.stream);
const clients = Number(args.clients);
const chunk = Number(args.chunk);

function openStore(): ProfileStore {
  if (args.store === "postgres") return new PostgresProfileStore({ connectionString: args.url!, schema: "bench_ingest", poolSize: Math.min(clients, 16) });
  mkdirSync(path.dirname(args.db!), { recursive: true });
  if (!args.reuse) for (const suffix of ["", "-wal", "-shm"]) rmSync(args.db! + suffix, { force: true });
  return new EmbeddedProfileStore({ path: args.db!, synchronous: args.sync === "normal" ? "normal" : "full" });
}

async function batchLoad(store: ProfileStore, datasetId: string, records: Iterable<JsonObject>, total: number, label: string): Promise<number> {
  const started = performance.now();
  let buf: Array<{ index: number; value: unknown }> = [];
  let done = 0;
  const flush = async () => {
    const r = await ingestRecords(store, scope, datasetId, buf, { now: NOW });
    if (r.failed.length > 0) throw new Error(`${label}: ${JSON.stringify(r.failed.slice(0, 3))}`);
    done += buf.length;
    buf = [];
    if (done % (chunk * 40) === 0) process.stderr.write(`${label}: ${done}/${total} (${Math.round(done / ((performance.now() - started) / 1000))}/s)\n`);
  };
  for (const value of records) {
    buf.push({ index: buf.length, value });
    if (buf.length === chunk) await flush();
  }
  if (buf.length > 0) await flush();
  return done / ((performance.now() - started) / 1000);
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

async function lookups(store: ProfileStore): Promise<{ p50: number; p99: number; max: number }> {
  const n = Number(args.lookups);
  const lat: number[] = [];
  let x = 12345;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const k = x % nProfiles;
    const identity = i % 2 === 0 ? { namespace: "crmid", id: demoCrmId(SEED, k) } : { namespace: "ecid", id: demoEcid(SEED, k) };
    const t = performance.now();
    const p = await store.getProfile(scope, identity, pdg);
    lat.push(performance.now() - t);
    if (p === null) throw new Error(`profile ${identity.namespace}:${identity.id} missing`);
  }
  lat.sort((a, b) => a - b);
  const q = (f: number) => Math.round(lat[Math.min(lat.length - 1, Math.floor(lat.length * f))]! * 1000) / 1000;
  return { p50: q(0.5), p99: q(0.99), max: q(1) };
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

const store = openStore();
if (args.reuse) {
  try {
    const lookup = await lookups(store);
    console.log(JSON.stringify({ store: args.store, lookupMs: lookup, ...(args.scan ? { scan: await scan(store) } : {}) }, null, 2));
  } finally {
    await store.close();
  }
  process.exit(0);
}
try {
  const p = await store.createDataset(scope, DEMO_DATASETS.profiles, NOW);
  const e = await store.createDataset(scope, DEMO_DATASETS.events, NOW);
  const profilesPerSec = await batchLoad(store, p.id, demoProfiles({ profiles: nProfiles, events: 0, now: NOW, seed: SEED }), nProfiles, "profiles");
  const eventsPerSec = await batchLoad(store, e.id, demoEvents({ profiles: nProfiles, events: nEvents, now: NOW, seed: SEED }), nEvents, "events");
  const streamPerSec = await streamLoad(store, e.id);
  const lookup = await lookups(store);
  const result = {
    store: args.store, sync: args.store === "embedded" ? args.sync : "n/a", profiles: nProfiles, events: nEvents, streamed: nStream, clients,
    batchProfilesPerSec: Math.round(profilesPerSec), batchEventsPerSec: Math.round(eventsPerSec), streamingRecordsPerSec: Math.round(streamPerSec),
    lookupMs: lookup, profileCount: await store.countProfiles(scope),
    ...(args.scan ? { scan: await scan(store) } : {}),
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  await store.close();
}
