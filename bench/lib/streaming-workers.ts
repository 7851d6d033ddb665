/**
 * `npm run bench:streaming -- --workers` (#25): the streaming workers as deployed, beside the
 * all-in-one process in the same run, over one scripted stream (the equivalence suite's:
 * test/helpers/workers-run.ts) on PostgreSQL. Three deployments, one after another (never two
 * at once on this 2-core machine):
 *   A. the all-in-one process evaluating in process: its CPU per event (ingestion + evaluation);
 *   B. a hub with --workers and no worker running: the stream queues in JetStream (the hub's CPU
 *      per event: ingestion + publishing); then one worker starts and drains it: events/s per
 *      worker and its CPU per event (evaluation + fenced writes), and the messages it met of
 *      another partition (must be 0: partitions share nothing);
 *   C. a hub and one worker under a fixed offered load below capacity: the lag the hub's /metrics
 *      reports while the stream runs, and how soon after its end every partition is applied.
 * CPU is each process's own (/proc/<pid>/stat, user + system).
 */
import { readFileSync } from "node:fs";
import { target } from "./cost.js";
import { deploy, drive, scriptOf, STEP_MS, waitCaughtUp, type Deployment } from "../../packages/server/test/helpers/workers-run.js";

const PARTITIONS = 64;

function cpuMsOf(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  // utime and stime (fields 14 and 15 of stat, counted from 1), in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const pidOf = (p: { proc: { child: { pid?: number } } }): number => p.proc.child.pid!;

async function maxLagDuring<T>(d: Deployment, run: () => Promise<T>): Promise<{ result: T; maxLagS: number; samples: number }> {
  let maxLagS = 0;
  let samples = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      try {
        const text = await (await fetch(`${d.hub.url}/metrics`)).text();
        for (const m of text.matchAll(/^segmentd_stream_partition_lag_seconds\{[^}]*\} (\S+)$/gm)) maxLagS = Math.max(maxLagS, Number(m[1]));
        samples++;
      } catch {
        // The hub is busy or restarting: the next sample.
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  try {
    return { result: await run(), maxLagS, samples };
  } finally {
    done = true;
    await sampler;
  }
}

export async function runWorkersBench(o: { profiles: number; events: number; definitions: number; offeredEventsPerSecond: number }): Promise<void> {
  const scale = { profiles: o.profiles, events: o.events, definitions: o.definitions, batch: 500 };
  const script = scriptOf(scale);
  console.log(`\nstreaming workers (#25): ${o.events} events over ${o.profiles} profiles, ${o.definitions} continuous definitions, requests of 500 events, the hub's clock ${STEP_MS / 1000} s a request; PostgreSQL, ${PARTITIONS} partitions`);

  // A. The all-in-one process.
  const a = await deploy("all-in-one", "bencha");
  let aio: { cpuPerEventUs: number; eps: number };
  try {
    const c0 = cpuMsOf(pidOf(a.hub));
    const { sentMs } = await drive(a, script);
    aio = { cpuPerEventUs: ((cpuMsOf(pidOf(a.hub)) - c0) * 1000) / o.events, eps: o.events / (sentMs / 1000) };
  } finally {
    await a.close();
  }
  console.log(`A. all-in-one (in-process engine): ${aio.eps.toFixed(0)} events/s through the hub; hub CPU ${aio.cpuPerEventUs.toFixed(0)} µs/event (ingestion + evaluation; includes the profile load)`);

  // B. The stream queued with no worker, then drained by one.
  const b = await deploy("workers", "benchb");
  let drained: { eps: number; cpuPerEventUs: number; hubCpuPerEventUs: number; cross: string };
  try {
    const h0 = cpuMsOf(pidOf(b.hub));
    await drive(b, script);
    const hubCpuPerEventUs = ((cpuMsOf(pidOf(b.hub)) - h0) * 1000) / o.events;
    const w = await b.startWorker("bench-w1");
    const w0 = cpuMsOf(pidOf(w));
    const t0 = Date.now();
    await waitCaughtUp(b, PARTITIONS, 30 * 60_000);
    const secs = (Date.now() - t0) / 1000;
    const cpu = cpuMsOf(pidOf(w)) - w0;
    await w.stop();
    const line = /stopped: (\d+) messages applied in (\d+) batches, (\d+) of another partition/.exec(w.proc.stdout());
    drained = { eps: o.events / secs, cpuPerEventUs: (cpu * 1000) / o.events, hubCpuPerEventUs, cross: line ? `${line[3]} of ${line[1]} messages (${(Number(line[3]) / o.events).toFixed(3)} per event)` : "unknown (no stop line)" };
  } finally {
    await b.close();
  }
  console.log(`B. hub with --workers, no worker running: hub CPU ${drained.hubCpuPerEventUs.toFixed(0)} µs/event (ingestion + publishing); the stream queued`);
  console.log(`   one worker drains it: ${drained.eps.toFixed(0)} events/s per worker, worker CPU ${drained.cpuPerEventUs.toFixed(0)} µs/event (evaluation + fenced writes; includes loading each profile's state once)`);
  console.log(`   messages of another partition: ${drained.cross}`);
  console.log(target(`one worker's CPU per event ≤ 40 µs at ${o.definitions} definitions`, `${drained.cpuPerEventUs.toFixed(1)} µs`, drained.cpuPerEventUs <= 40,
    `the all-in-one process ${aio.cpuPerEventUs.toFixed(1)} µs for ingestion + evaluation, same run`));

  // C. Lag at a fixed offered load.
  const c = await deploy("workers", "benchc");
  try {
    await c.startWorker("bench-w1");
    const stepEveryMs = (500 / o.offeredEventsPerSecond) * 1000;
    const { result, maxLagS, samples } = await maxLagDuring(c, async () => {
      await drive(c, script, { stepEveryMs });
      return waitCaughtUp(c, PARTITIONS);
    });
    console.log(`C. one worker at ${o.offeredEventsPerSecond} events/s offered: largest partition lag ${maxLagS.toFixed(2)} s over ${samples} /metrics samples; every partition applied ${result} ms after the stream ended`);
    // The lag is what a transition waits for at a worker: an upper bound of its event-to-transition latency.
    console.log(target(`one worker's event-to-transition ≤ 20 ms at ${o.offeredEventsPerSecond} events/s offered (largest sampled partition lag)`, `${(maxLagS * 1000).toFixed(0)} ms`, maxLagS <= 0.02,
      `every partition applied ${result} ms after the stream ended`));
  } finally {
    await c.close();
  }
  console.log(`ratio: worker CPU per event / all-in-one CPU per event = ${(drained.cpuPerEventUs / aio.cpuPerEventUs).toFixed(2)}; hub + worker / all-in-one = ${((drained.cpuPerEventUs + drained.hubCpuPerEventUs) / aio.cpuPerEventUs).toFixed(2)}`);
}
