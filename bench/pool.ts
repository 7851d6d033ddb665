/**
 * The evaluation pool (issue #37): a preview's evaluation at 1M profiles in process vs in the
 * pool's worker thread, alternating runs. Per run: wall ms, CPU ms of the process (every thread),
 * and the main thread's longest event-loop block (the largest gap between ticks of a 1-ms timer;
 * perf_hooks' monitorEventLoopDelay, enabled just before, reported 1.5–3 ms for in-process runs
 * that held the loop ~25 ms). Also the main thread's own steps: the first hand-over of a part to a
 * worker (descriptor and string lists) and counting the sample from the flags.
 *
 *   node --conditions=source --import tsx bench/pool.ts
 *   PROFILES=200000 RUNS=3 node --conditions=source --import tsx bench/pool.ts
 */
import os from "node:os";
import { parse, type Column } from "../packages/pql/src/index.js";
import { PartBuilder, Snapshot, SnapshotPart } from "../packages/server/src/batch/columnar/snapshot.js";
import { EvaluationPool } from "../packages/server/src/batch/pool/evaluation-pool.js";
import { partFlags } from "../packages/server/src/batch/pool/part-flags.js";
import { countSample, sampleSize } from "../packages/server/src/batch/previews/preview-service.js";
import { DEFAULT_LIMITS } from "../packages/server/src/platform/config.js";
import { demoEvent, demoProfile } from "../packages/server/src/profiles/demo.js";
import { NO_MERGE_POLICY } from "../packages/server/src/profiles/types.js";
import { EvaluationBudget } from "../packages/server/src/services/evaluation-budget.js";

const PROFILES = Number(process.env.PROFILES ?? 1_000_000);
const RUNS = Number(process.env.RUNS ?? 3);
const NOW = Date.UTC(2026, 10, 1);
/** A pass over every profile's own strings (a regex on each e-mail address) and its events. */
const EXPRESSION = process.env.ONLY ?? 'personalEmail.address.matches("^[a-m].*[0-4]@") or xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() > 0';

const t0 = performance.now();
const b = new PartBuilder();
const demo = { profiles: PROFILES, events: PROFILES, now: NOW, seed: 7 };
for (let i = 0; i < PROFILES; i++) {
  const id = String(i + 1);
  const body = demoEvent(i, demo);
  b.add({ profileId: id, identities: [{ namespace: "ECID", id: `E${id}` }], entity: demoProfile(i, demo), sources: [], lastModifiedAt: null, optedOut: false,
    events: [{ datasetId: "ds", eventId: `e${i}`, primary: { namespace: "ECID", id: `E${id}` }, timestamp: 0, body }], identity: null });
}
const base = b.finish();
const snap = new Snapshot(NO_MERGE_POLICY, base, SnapshotPart.empty(), new Uint8Array(base.ordinals), new Map(), 1, true);
console.log(`pool bench — Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "unknown CPU"}; ${PROFILES.toLocaleString("en")} profiles (+1 event each) built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
console.log(`expression: ${EXPRESSION}`);

const query = parse(EXPRESSION);
const none = snap.parts().map(() => new Map<string, Column>());
const fraction = sampleSize(PROFILES) / PROFILES;
const pool = new EvaluationPool(1);

/** The main thread's longest stall while `fn` runs: the largest gap between ticks of a 1-ms timer. */
async function longestBlock<T>(fn: () => Promise<T>): Promise<{ value: T; block: number }> {
  let last = performance.now();
  let block = 0;
  const tick = setInterval(() => {
    const t = performance.now();
    block = Math.max(block, t - last);
    last = t;
  }, 1);
  await new Promise((r) => setTimeout(r, 20));
  block = 0;
  last = performance.now();
  const value = await fn();
  await new Promise((r) => setTimeout(r, 20));
  clearInterval(tick);
  return { value, block };
}

async function preview(p: EvaluationPool | null): Promise<{ wall: number; cpu: number; block: number; count: number; matched: number }> {
  const cpu = process.cpuUsage();
  const s = performance.now();
  let count = 0;
  const { value: r, block } = await longestBlock(async () => {
    const flags = await partFlags(p, snap, query, NOW, none, new EvaluationBudget(DEFAULT_LIMITS, { deadline: false }));
    const c0 = performance.now();
    const result = await countSample(snap, flags, fraction, 10_000);
    count = performance.now() - c0;
    return result;
  });
  // Both timers' 20-ms pauses are not the preview's.
  const wall = performance.now() - s - 40;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / 1000, block, count, matched: r.matched };
}

// The first hand-over of the part to the worker (descriptor, string lists): timed on its own.
{
  const s = performance.now();
  const { block } = await longestBlock(() => partFlags(pool, snap, parse("person.name.fullName.isNotNull()"), NOW, none, new EvaluationBudget(DEFAULT_LIMITS, { deadline: false })));
  console.log(`first hand-over to the worker + one pass: ${(performance.now() - s - 40).toFixed(0)} ms wall, longest block ${block.toFixed(1)} ms; copied to shared memory: ${pool.stats.copiedBytes} bytes`);
}

console.log("mode        wall ms   cpu ms   longest block ms   countSample ms   matched");
for (let k = 0; k < RUNS; k++) {
  for (const [label, p] of [["in process", null], ["pool", pool]] as const) {
    const r = await preview(p);
    console.log(`${label.padEnd(10)} ${r.wall.toFixed(0).padStart(8)} ${r.cpu.toFixed(0).padStart(8)} ${r.block.toFixed(1).padStart(18)} ${r.count.toFixed(1).padStart(16)} ${String(r.matched).padStart(9)}`);
  }
}
await pool.close();
