// Webhook delivery benchmark (issue #38, acceptance 5): the delivery engine against a bare HTTP
// client posting the same payloads to the same receiver (a child process) in the same run, and
// what a delivering flow adds to the membership write paths.
//
//   node --conditions=source --import tsx bench/activation.ts [--transitions 20000] [--profiles 2000]
//     [--audiences 20] [--batch 100] [--rounds 3] [--write-rounds 4] [--attributes a.b,c.d | ""] [--marks]
//
// The store is the embedded one on its worker thread (as the server runs it); the profiles have
// identities (ECID, Email) and attributes, and the flow selects both, so every request reads them.
// CPU is process.cpuUsage(): every thread of this process (the store's worker included); the
// receiver's process is not counted. The machine is shared (2 cores, other suites running):
// figures are medians over alternating rounds, each printed with the load average.
//
// 1. Delivery, `--rounds` times: the deliverer stopped, N transitions written, the deliverer
//    started again and timed until it is idle (the receiver has acknowledged every transition):
//    CPU per transition and per request, transitions per second.
//    Bare client, right after in the same round: the bodies the receiver got in that round
//    (signed headers as sent), posted again with node's http (keep-alive, the same concurrency):
//    CPU per request. Target: the deliverer ≤ 2× the bare client per request.
// 2. Write paths, `--write-rounds` pairs in alternating order (ABBA…): streaming-sized writes
//    (20 × 500 changes) and one batch-sized write (20,000 changes), with no flow and with a flow
//    delivering (its backlog: the rounds before) in the same process. Wall of the write calls (a
//    job's persisting time) and the process's CPU while they run. The transition row a write
//    commits is the outbox record, so the write itself does no extra work; what is measured is a
//    running deliverer's competition for the cores and the store thread. Target: ≤ 10 %.
//
// --marks prints `MARK <label> <µs>` (process.hrtime, the clock of --cpu-prof profiles) around each
// delivery, to cut a profile to it.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { spawn } from "node:child_process";
import { startDeliverer, type Deliverer } from "../packages/server/src/activation/delivery/deliverer.js";
import type { Dataflow, DataflowDirectory } from "../packages/server/src/activation/types.js";
import { WorkerProfileStore } from "../packages/server/src/profiles/embedded/worker-store.js";
import type { MembershipChange } from "../packages/server/src/profiles/store.js";
import type { ValidRecord } from "../packages/server/src/profiles/types.js";

const { values: args } = parseArgs({ options: {
  transitions: { type: "string", default: "20000" }, profiles: { type: "string", default: "2000" },
  audiences: { type: "string", default: "20" }, batch: { type: "string", default: "100" },
  rounds: { type: "string", default: "3" }, "write-rounds": { type: "string", default: "4" },
  attributes: { type: "string", default: "person.name.firstName,person.name.lastName,homeAddress.countryCode,personalEmail.address" },
  marks: { type: "boolean", default: false },
} });
const N = Number(args.transitions);
const PROFILES = Number(args.profiles);
const AUDIENCES = Array.from({ length: Number(args.audiences) }, (_, i) => `bench-aud-${i}`);
const BATCH = Number(args.batch);
const ROUNDS = Number(args.rounds);
const WRITE_ROUNDS = Number(args["write-rounds"]);
const ATTRIBUTES = args.attributes === "" ? [] : args.attributes.split(",");
const CONCURRENCY = 4;
const scope = { orgId: "bench@AdobeOrg", sandboxName: "prod" };

const load = () => os.loadavg()[0]!.toFixed(1);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mark = (label: string) => {
  if (args.marks) console.log(`MARK ${label} ${process.hrtime.bigint() / 1000n}`);
};

console.log(`bench:activation — ${N} transitions per round over ${PROFILES} profiles, ${AUDIENCES.length} audiences, ${BATCH} profiles per request, ` +
  `concurrency ${CONCURRENCY}, attributes [${ATTRIBUTES.join(", ")}]; ${os.cpus().length} cores, node ${process.version}, load average at start ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`);

const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-activation-"));
const log = path.join(dir, "receiver.ndjson");
const receiver = spawn(process.execPath, ["--conditions=source", "--import", "tsx", "packages/server/test/helpers/webhook-receiver.ts", JSON.stringify({ log })], { stdio: ["ignore", "pipe", "inherit"] });
const port = await new Promise<number>((resolve) => {
  let out = "";
  receiver.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    const m = /READY (\d+)/.exec(out);
    if (m) resolve(Number(m[1]));
  });
});
const url = `http://127.0.0.1:${port}/hook`;
const store = new WorkerProfileStore({ path: path.join(dir, "profiles.db") });

// Profiles with two identities and a few attributes: what a payload carries.
await store.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, Date.now());
const records: ValidRecord[] = [];
for (let i = 1; i <= PROFILES; i++) {
  const ecid = `ecid-${String(i).padStart(12, "0")}`;
  const email = `user${i}@example.com`;
  const body = { identityMap: { ECID: [{ id: ecid, primary: true }], Email: [{ id: email }] }, person: { name: { firstName: `First${i}`, lastName: `Last${i}` } },
    homeAddress: { countryCode: i % 3 === 0 ? "DE" : "US", city: "Springfield" }, personalEmail: { address: email }, loyalty: { tier: "gold", points: i * 7 } };
  const json = JSON.stringify(body);
  records.push({ index: i - 1, kind: "profile", body, primary: { namespace: "ECID", id: ecid }, identities: [{ namespace: "ECID", id: ecid }, { namespace: "Email", id: email }],
    timestamp: null, eventId: null, size: Buffer.byteLength(json), json });
}
await store.append(scope, "crm", records, { ingestedAt: Date.now(), maxIdentitiesPerGraph: 50 });
const pids = (await store.findProfileIds(scope, records.map((r) => r.primary))).map((p) => p!);

const flow: Dataflow = {
  scope, flowId: "bench", name: "bench", state: "enabled",
  target: { kind: "webhook", url, auth: { type: "none" }, headers: {}, signingSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
  delivery: { maxBatchSize: BATCH, maxWaitMs: 50, concurrency: CONCURRENCY, ratePerSecond: 0, retryPeriodMs: 86_400_000, timeoutMs: 10_000 },
  segmentSelectors: AUDIENCES.map((a) => ({ audienceId: a, startTime: 0, addedAt: 0 })), profileSelectors: { attributes: ATTRIBUTES, identityNamespaces: ["ECID", "Email"] },
  createdAt: 0, updatedAt: 0, version: 1,
};
const directory: DataflowDirectory = { listEnabled: async () => [flow], get: async () => flow, onChange: () => () => {} };
const storage = { dataDir: path.join(dir, "state") };
const start = async (): Promise<Deliverer> => {
  const d = startDeliverer({ directory, profiles: store, storage, allowPrivateNetworks: true, onError: (err, what) => console.error(`deliverer: ${what}:`, err) });
  await d.ready;
  return d;
};
const untilIdle = async (d: Deliverer, ms: number) => {
  while (!d.idle(scope, "bench")) await sleep(ms);
};

let seed = 1;
// Park–Miller: the products stay exact in a double.
const rand = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
const status = new Map<string, "realized" | "exited">();
function changes(n: number, source: MembershipChange["source"]): MembershipChange[] {
  const out: MembershipChange[] = [];
  const seen = new Set<string>();
  while (out.length < n) {
    const pid = pids[Math.floor(rand() * PROFILES)]!;
    const def = AUDIENCES[Math.floor(rand() * AUDIENCES.length)]!;
    const k = `${pid}/${def}`;
    if (seen.has(k)) continue;
    seen.add(k);
    const next = status.get(k) === "realized" ? "exited" : "realized";
    status.set(k, next);
    out.push({ profileId: pid, definitionId: def, status: next, source, at: Date.now() });
  }
  return out;
}

/** The receiver's log lines from byte `from` on (each: the request's headers and body). */
interface Received { body: string; headers: Record<string, string> }
function receivedFrom(from: number): Received[] {
  if (!existsSync(log)) return [];
  return readFileSync(log).subarray(from).toString("utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Received);
}
const logSize = () => (existsSync(log) ? statSync(log).size : 0);

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const post = (b: Received) => new Promise<void>((resolve, reject) => {
  const h = b.headers;
  const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", "user-agent": h["user-agent"]!, "webhook-id": h["webhook-id"]!,
    "webhook-timestamp": h["webhook-timestamp"]!, "webhook-signature": h["webhook-signature"]!, "content-length": String(Buffer.byteLength(b.body)) } }, (res) => {
    res.resume();
    res.on("end", () => resolve());
  });
  req.on("error", reject);
  req.end(b.body);
});

// A deliverer started once, so that the flow's state exists and its log starts before the first round.
let d = await start();
await untilIdle(d, 20);
await d.stop();
// One untimed round warms the code paths (JIT) and the store's caches.
for (let i = 0; i < 2000; i += 1000) await store.applyMembershipChanges(scope, changes(1000, "streaming"));
d = await start();
await untilIdle(d, 10);
await d.stop();

// 1. Delivery against the bare client, round by round.
interface Round { perTransitionUs: number; perRequestMs: number; rate: number; bareMs: number; ratio: number }
const rounds: Round[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  for (let i = 0; i < N; i += 1000) await store.applyMembershipChanges(scope, changes(Math.min(1000, N - i), "streaming"));
  const from = logSize();
  const l0 = load();
  mark(`delivery-${r}-start`);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  d = await start();
  await untilIdle(d, 10);
  const wall = performance.now() - t0;
  const cpu = cpuMs(process.cpuUsage(c0));
  mark(`delivery-${r}-end`);
  await d.stop();
  const got = receivedFrom(from);
  const delivered = got.reduce((n, b) => n + (JSON.parse(b.body) as Array<{ _segmentd: { seqs: number[] } }>).reduce((k, p) => k + p._segmentd.seqs.length, 0), 0);
  if (delivered !== N) throw new Error(`round ${r}: the receiver got ${delivered} transitions, not ${N}`);
  const bc0 = process.cpuUsage();
  const bt0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < got.length) await post(got[next++]!);
  }));
  const bwall = performance.now() - bt0;
  const bcpu = cpuMs(process.cpuUsage(bc0));
  const round = { perTransitionUs: cpu * 1000 / delivered, perRequestMs: cpu / got.length, rate: delivered / (wall / 1000), bareMs: bcpu / got.length, ratio: (cpu / got.length) / (bcpu / got.length) };
  rounds.push(round);
  console.log(`round ${r} (load ${l0}): deliverer ${delivered} transitions in ${got.length} requests, ${(wall / 1000).toFixed(2)} s, ${Math.round(round.rate)} transitions/s, ` +
    `CPU ${round.perTransitionUs.toFixed(1)} µs/transition, ${round.perRequestMs.toFixed(3)} ms/request | bare client ${(bwall / 1000).toFixed(2)} s, ` +
    `CPU ${round.bareMs.toFixed(3)} ms/request | ratio ${round.ratio.toFixed(2)}×`);
}
const med = (k: keyof Round) => median(rounds.map((x) => x[k]));
console.log(`delivery (median of ${ROUNDS}): ${Math.round(med("rate"))} transitions/s; deliverer CPU ${med("perTransitionUs").toFixed(1)} µs/transition, ` +
  `${med("perRequestMs").toFixed(3)} ms/request; bare client ${med("bareMs").toFixed(3)} ms/request; ratio ${med("ratio").toFixed(2)}× (target ≤ 2×)`);
agent.destroy();

// 2. Write paths, with no flow and with a flow delivering, in alternating order.
interface WriteRound { streamingMs: number; streamingCpu: number; batchMs: number; batchCpu: number }
async function writes(): Promise<WriteRound> {
  let streamingMs = 0;
  let streamingCpu = 0;
  for (let k = 0; k < 20; k++) {
    const cs = changes(500, "streaming");
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await store.applyMembershipChanges(scope, cs);
    streamingMs += performance.now() - t0;
    streamingCpu += cpuMs(process.cpuUsage(c0));
  }
  const cs = changes(20_000, "batch");
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await store.applyMembershipChanges(scope, cs);
  return { streamingMs, streamingCpu, batchMs: performance.now() - t0, batchCpu: cpuMs(process.cpuUsage(c0)) };
}
await writes(); // warm-up
const without: WriteRound[] = [];
const withFlow: WriteRound[] = [];
const show = (w: WriteRound) => `streaming 20 × 500 changes ${w.streamingMs.toFixed(0)} ms (CPU ${w.streamingCpu.toFixed(0)} ms), batch 20,000 changes ${w.batchMs.toFixed(0)} ms (CPU ${w.batchCpu.toFixed(0)} ms)`;
for (let r = 0; r < 2 * WRITE_ROUNDS; r++) {
  // ABBA: no flow, flow, flow, no flow, …
  const delivering = r % 4 === 1 || r % 4 === 2;
  const l0 = load();
  if (delivering) {
    d = await start(); // its backlog: every write since the last delivering round
    const w = await writes();
    withFlow.push(w);
    console.log(`write round ${r + 1} (load ${l0}), flow delivering: ${show(w)}`);
    await untilIdle(d, 20);
    await d.stop();
  } else {
    const w = await writes();
    without.push(w);
    console.log(`write round ${r + 1} (load ${l0}), no flow:         ${show(w)}`);
  }
}
const pct = (k: keyof WriteRound) => ((median(withFlow.map((w) => w[k])) / median(without.map((w) => w[k])) - 1) * 100).toFixed(1);
const perTransitionUs = (k: "streamingMs" | "batchMs", n: number) => ((median(withFlow.map((w) => w[k])) - median(without.map((w) => w[k]))) * 1000 / n).toFixed(1);
console.log(`write paths, medians of ${WRITE_ROUNDS}: no flow ${show({ streamingMs: median(without.map((w) => w.streamingMs)), streamingCpu: median(without.map((w) => w.streamingCpu)), batchMs: median(without.map((w) => w.batchMs)), batchCpu: median(without.map((w) => w.batchCpu)) })}`);
console.log(`write paths, medians of ${WRITE_ROUNDS}: flow     ${show({ streamingMs: median(withFlow.map((w) => w.streamingMs)), streamingCpu: median(withFlow.map((w) => w.streamingCpu)), batchMs: median(withFlow.map((w) => w.batchMs)), batchCpu: median(withFlow.map((w) => w.batchCpu)) })}`);
console.log(`a delivering flow adds to the write paths (wall, a job's persisting time): streaming ${pct("streamingMs")} % (${perTransitionUs("streamingMs", 10_000)} µs/transition), ` +
  `batch ${pct("batchMs")} % (${perTransitionUs("batchMs", 20_000)} µs/transition) (target ≤ 10 %); process CPU during the writes (the deliverer's own work included): ` +
  `streaming ${pct("streamingCpu")} %, batch ${pct("batchCpu")} %; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`);

await store.close();
receiver.kill("SIGKILL");
rmSync(dir, { recursive: true, force: true });
