// Webhook delivery benchmark (issue #38): the delivery engine against a bare HTTP client posting
// the same payloads to the same receiver (a child process) in the same run, and what a running
// deliverer adds to the membership write paths.
//
//   node --conditions=source --import tsx bench/activation.ts [--transitions 20000] [--profiles 2000] [--audiences 20] [--batch 100]
//
// 1. Delivery: a flow is created (its log position taken), the deliverer stopped, the transitions
//    written, the deliverer started again: this process's CPU time (every thread) and wall time
//    until the receiver has every transition — per transition and per request.
// 2. Bare client: the bodies the deliverer sent (first attempts), posted again with node's http
//    (keep-alive, the same concurrency): CPU per request. Target: the deliverer ≤ 2× per request.
// 3. Write paths: 20 rounds of streaming-sized writes (500 changes) and one batch-sized write
//    (the rest in one call), each with no flow and with a flow delivering to the receiver.
//    The transition row is the outbox record, so the writes do no extra work; what a running
//    deliverer costs them is the reader's competition for the store. Target: ≤ 10 %.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { spawn } from "node:child_process";
import { startDeliverer } from "../packages/server/src/activation/delivery/deliverer.js";
import type { Dataflow, DataflowDirectory } from "../packages/server/src/activation/types.js";
import { WorkerProfileStore } from "../packages/server/src/profiles/embedded/worker-store.js";
import type { MembershipChange } from "../packages/server/src/profiles/store.js";

const { values: args } = parseArgs({ options: {
  transitions: { type: "string", default: "20000" }, profiles: { type: "string", default: "2000" },
  audiences: { type: "string", default: "20" }, batch: { type: "string", default: "100" },
} });
const N = Number(args.transitions);
const PROFILES = Number(args.profiles);
const AUDIENCES = Array.from({ length: Number(args.audiences) }, (_, i) => `bench-aud-${i}`);
const BATCH = Number(args.batch);
const CONCURRENCY = 4;
const scope = { orgId: "bench@AdobeOrg", sandboxName: "prod" };

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
const flow: Dataflow = {
  scope, flowId: "bench", name: "bench", state: "enabled",
  target: { kind: "webhook", url, auth: { type: "none" }, headers: {}, signingSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
  delivery: { maxBatchSize: BATCH, maxWaitMs: 50, concurrency: CONCURRENCY, ratePerSecond: 0, retryPeriodMs: 86_400_000, timeoutMs: 10_000 },
  segmentSelectors: AUDIENCES.map((a) => ({ audienceId: a, startTime: 0, addedAt: 0 })), profileSelectors: { attributes: [], identityNamespaces: [] },
  createdAt: 0, updatedAt: 0, version: 1,
};
const directory = (flows: Dataflow[]): DataflowDirectory => ({ listEnabled: async () => flows, get: async () => flows[0] ?? null, onChange: () => () => {} });
const storage = { dataDir: path.join(dir, "state") };
const receivedCount = (): number => existsSync(log) ? readFileSync(log, "utf8").split("\n").filter((l) => l !== "").reduce((n, l) => n + (JSON.parse(JSON.parse(l).body as string) as Array<{ _segmentd: { seqs: number[] } }>).reduce((k, p) => k + p._segmentd.seqs.length, 0), 0) : 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let seed = 1;
// Park–Miller: the products stay exact in a double.
const rand = () => ((seed = (seed * 48271) % 2147483647) / 2147483647);
const status = new Map<string, "realized" | "exited">();
function changes(n: number, source: MembershipChange["source"]): MembershipChange[] {
  const out: MembershipChange[] = [];
  const seen = new Set<string>();
  while (out.length < n) {
    const k = `${1 + Math.floor(rand() * PROFILES)}/${AUDIENCES[Math.floor(rand() * AUDIENCES.length)]}`;
    if (seen.has(k)) continue;
    seen.add(k);
    const next = status.get(k) === "realized" ? "exited" : "realized";
    status.set(k, next);
    const [pid, def] = k.split("/") as [string, string];
    out.push({ profileId: pid, definitionId: def, status: next, source, at: Date.now() });
  }
  return out;
}

// 1. Delivery.
let d = startDeliverer({ directory: directory([flow]), profiles: store, storage, allowPrivateNetworks: true });
await d.ready;
while (!d.idle(scope, "bench")) await sleep(20);
await d.stop();
for (let i = 0; i < N; i += 1000) await store.applyMembershipChanges(scope, changes(Math.min(1000, N - i), "streaming"));
const cpu0 = process.cpuUsage();
const t0 = performance.now();
d = startDeliverer({ directory: directory([flow]), profiles: store, storage, allowPrivateNetworks: true });
await d.ready;
while (!d.idle(scope, "bench")) await sleep(10);
const wall = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
await d.stop();
const delivered = receivedCount();
const bodies = readFileSync(log, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { body: string; headers: Record<string, string> });
const requests = bodies.length;
const cpuMs = (cpu.user + cpu.system) / 1000;
console.log(`delivery: ${delivered} transitions in ${requests} requests, ${(wall / 1000).toFixed(2)} s wall, ${Math.round(delivered / (wall / 1000))} transitions/s, ` +
  `CPU ${(cpuMs * 1000 / delivered).toFixed(1)} µs/transition, ${(cpuMs / requests).toFixed(3)} ms/request`);

// 2. The same bodies with a bare client.
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const post = (body: string, h: Record<string, string>) => new Promise<void>((resolve, reject) => {
  const req = http.request(url, { method: "POST", agent, headers: { "content-type": "application/json", "webhook-id": h["webhook-id"]!, "webhook-timestamp": h["webhook-timestamp"]!, "webhook-signature": h["webhook-signature"]!, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
    res.resume();
    res.on("end", () => resolve());
  });
  req.on("error", reject);
  req.end(body);
});
const bcpu0 = process.cpuUsage();
const bt0 = performance.now();
let next = 0;
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (next < bodies.length) {
    const b = bodies[next++]!;
    await post(b.body, b.headers);
  }
}));
const bwall = performance.now() - bt0;
const bcpu = process.cpuUsage(bcpu0);
const bcpuMs = (bcpu.user + bcpu.system) / 1000;
agent.destroy();
console.log(`bare client: ${requests} requests, ${(bwall / 1000).toFixed(2)} s wall, CPU ${(bcpuMs / requests).toFixed(3)} ms/request`);
console.log(`deliverer / bare client CPU per request: ${((cpuMs / requests) / (bcpuMs / requests)).toFixed(2)}× (target ≤ 2×)`);

// 3. Write paths, without and with a delivering flow.
async function writes(label: string): Promise<{ streaming: number; batch: number }> {
  const s0 = performance.now();
  for (let r = 0; r < 20; r++) await store.applyMembershipChanges(scope, changes(500, "streaming"));
  const streaming = performance.now() - s0;
  const b0 = performance.now();
  await store.applyMembershipChanges(scope, changes(20_000, "batch"));
  const batch = performance.now() - b0;
  console.log(`${label}: streaming 20 × 500 changes ${streaming.toFixed(0)} ms, batch 20,000 changes ${batch.toFixed(0)} ms`);
  return { streaming, batch };
}
await writes("warm-up");
const without = await writes("no flow");
d = startDeliverer({ directory: directory([flow]), profiles: store, storage, allowPrivateNetworks: true });
await d.ready;
const withFlow = await writes("flow delivering");
while (!d.idle(scope, "bench")) await sleep(20);
await d.stop();
console.log(`write paths with a delivering flow: streaming ${((withFlow.streaming / without.streaming - 1) * 100).toFixed(1)} %, batch ${((withFlow.batch / without.batch - 1) * 100).toFixed(1)} % (target ≤ 10 %)`);

await store.close();
receiver.kill("SIGKILL");
rmSync(dir, { recursive: true, force: true });
