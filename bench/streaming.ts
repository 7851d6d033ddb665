/**
 * Streaming evaluation benchmark (issue #8, acceptance 4).
 *
 *   npm run bench:streaming       (= node --conditions=source --import tsx bench/streaming.ts)
 *   options: --definitions 500 --profiles 100000 --batch 50 --connections 8 --seconds 10 --warmup 5
 *            --paced 12000 --paced-connections 32
 *   Two measured phases, each --seconds long:
 *   1. throughput: a closed loop (autocannon) at --connections, each with one request of --batch
 *      events in flight: the sustained events/s, and the latency at saturation (which grows with
 *      the connections: Little's law);
 *   2. latency: an open loop (bench/lib/load-client.ts pacedLoad) at a steady --paced events/s
 *      (default 10,000, #26's rate; 0 skips the phase), requests of --batch events due at even
 *      intervals whatever the server does, up to --paced-connections at once: the
 *      event-to-transition latency while that rate is sustained, and (#26) the cost per event —
 *      CPU of all the bench process's threads and bytes allocated — beside a bare Fastify JSON
 *      endpoint in a process of its own given the same requests at the same rate; the #26
 *      targets printed as `target … met|MISSED`.
 *   --workers: then the streaming workers as deployed beside the all-in-one process (#25;
 *   bench/lib/streaming-workers.ts: --workers-events 100000 --workers-profiles 20000
 *   --workers-offered 10000 --workers-definitions 500; #26's worker targets printed as
 *   `target … met|MISSED`); --workers-only: just that
 *   --computed: #41's cost of 25 computed attributes beside the definitions, instead of the phases
 *   (bench/lib/computed-cost.ts: --rounds 3, --seconds 3 a round, --paced 500, --profiles 20000 unless given)
 *   --writes-in-flight 4 (membership writes committing at once; 1 = one at a time, for A/B runs)
 *   (--in-process: no HTTP and no client process, the same load driven from this process;
 *    --cpu-profile FILE: a CPU profile of this process during the measured phase only;
 *    --heap-profile FILE: a sampled heap profile of what the measured phase allocated and the
 *    GC had not collected by its end, by allocation site)
 *
 * The bench process runs the ingestion path the service uses for streamed
 * records — validate and append durably to the hub (`ingestRecords`, SQLite,
 * synchronous=FULL), then the streaming engine (reverse index → evaluation →
 * memberships and transitions, group-committed) — behind
 * POST /collection/batch/bench, with 500 continuous definitions.
 *
 * Workload (documented in docs/performance.md, "Streaming"):
 * - `--profiles` profiles (default 100,000) are loaded into the hub first, each
 *   with `loyalty.points` 0–999, a tier and a country; then one event per
 *   profile is streamed through the engine in-process (unmeasured), so that
 *   every profile's state is in memory and its first audiences are computed.
 * - 50 event types, uniform; 500 definitions, 10 per event type in 5 shapes:
 *   points band (3 % of profiles) + the type within 1–12 hours; ≥ 3 events of
 *   the type within 6 hours; tier + country (≈ 7 %) + the type today; points
 *   band + a two-step chain of two types within 12 hours; country + points band
 *   (profile only, never re-evaluated by events). Audiences are a few % of the
 *   profiles, so most events change no membership.
 * - A separate process (this file with --client) posts batches of `--batch`
 *   events for random profiles and types, stamped 50 ms before sending.
 *
 * Reported per phase: events/s, transitions/s, transitions per event, the share
 * of events that produced a transition, and the event-to-transition latency
 * (from the request's arrival, `onRequest`, to its transitions being durable)
 * at p50/p99 over the events that produced transitions (an event counts as
 * such when its profile has a transition in the response), plus the same
 * latency over all events and the client's request latency.
 */
import { rmSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { pacedLoad, percentile, postLoad, runLoadClient, type ClientResult } from "./lib/load-client.js";
import { COST_HEADER, costRow, measurePhase, selfMeter, startBareServer, target, type PhaseCost } from "./lib/cost.js";
import type { ValidRecord } from "../packages/server/src/profiles/types.js";
import { cpuDelta, threadCpu } from "./lib/thread-cpu.js";
import { watchGcPauses } from "./lib/gc-pauses.js";
import { watchLoopDelay } from "./lib/loop-delay.js";
import { startHeapProfile } from "./lib/heap-profile.js";
import { runWorkersBench } from "./lib/streaming-workers.js";
import { startCpuProfile } from "./lib/cpu-profile.js";

const { values: args } = parseArgs({
  options: {
    client: { type: "boolean", default: false },
    "in-process": { type: "boolean", default: false },
    url: { type: "string", default: "" },
    definitions: { type: "string", default: "500" },
    profiles: { type: "string", default: "100000" },
    batch: { type: "string", default: "50" },
    connections: { type: "string", default: "8" },
    seconds: { type: "string", default: "10" },
    /** Events per second of the open-loop latency phase (0: no such phase). */
    paced: { type: "string", default: "10000" },
    /** Most connections the open-loop client opens (a request due while all are busy waits, timed from when it was due). */
    "paced-connections": { type: "string", default: "32" },
    /** Client mode only: requests per second of an open loop (0: closed loop at --connections). */
    rate: { type: "string", default: "0" },
    /** Seconds of unmeasured load after the preload, so that the measured phase starts in steady state. */
    warmup: { type: "string", default: "5" },
    /** Write a CPU profile of the bench process during the measured phase only (node:inspector) to this file. */
    "cpu-profile": { type: "string", default: "" },
    /**
     * Write a sampled heap profile (node:inspector, one sample per 16 KiB) of the objects allocated
     * during the measured phase and not yet collected at its end — what the young generation
     * promoted, by allocation site: where the scavenges' copying comes from.
     */
    "heap-profile": { type: "string", default: "" },
    /** Membership writes committing at once (the engine's default 4; 1 = one at a time, as before pipelining). */
    "writes-in-flight": { type: "string", default: "4" },
    /** The embedded hub on the main thread instead of its worker thread (the server's default). */
    "direct-store": { type: "boolean", default: false },
    // A/B: the engine reads each record's profile again after the append (findProfileIds) instead
    // of taking the append's answer (storedPids), as before 2026-11-22.
    "reread-pids": { type: "boolean", default: false },
    // A/B: every event evaluated after its append (two commits per request), as before 2026-11-26.
    "after-append": { type: "boolean", default: false },
    // #25: after the in-process phases, the streaming workers as deployed beside the all-in-one
    // process (bench/lib/streaming-workers.ts); --workers-only runs just that.
    workers: { type: "boolean", default: false },
    "workers-only": { type: "boolean", default: false },
    "workers-events": { type: "string", default: "100000" },
    "workers-profiles": { type: "string", default: "20000" },
    "workers-offered": { type: "string", default: "10000" },
    "workers-definitions": { type: "string", default: "500" },
    // #41: the CPU per event 25 computed attributes add (bench/lib/computed-cost.ts), instead of the phases above;
    // with --profiles (default 20,000 in this mode), --seconds per round (default 3 here), --rounds, --connections,
    // --batch, --paced (events/s offered, default 500 here: below what the shared machine sustains in every world).
    computed: { type: "boolean", default: false },
    rounds: { type: "string", default: "3" },
  },
});

const PROFILES = Number(args.profiles);
const BATCH = Number(args.batch);
const EVENT_TYPES = 50;
const TIERS = ["gold", "silver", "bronze"];
const COUNTRIES = ["US", "FR", "DE", "JP", "BR"];

let seq = 0;

/** One request body: BATCH events for random profiles and types. */
function eventBatch(idPrefix: string, at: string): { messages: Array<Record<string, unknown>> } {
  const messages = [];
  for (let i = 0; i < BATCH; i++) {
    const who = Math.floor(Math.random() * PROFILES);
    messages.push({
      _id: `${idPrefix}-${++seq}`,
      identityMap: { CRMID: [{ id: `c${who}`, primary: true }] },
      eventType: `type.${Math.floor(Math.random() * EVENT_TYPES)}`,
      timestamp: at,
    });
  }
  return { messages };
}

async function runClient(): Promise<void> {
  const o = {
    url: args.url!,
    connections: Number(args.connections),
    seconds: Number(args.seconds),
    body: () => eventBatch(String(process.pid), new Date(Date.now() - 50).toISOString()),
  };
  if (Number(args.rate) > 0) await pacedLoad({ ...o, rate: Number(args.rate) });
  else await postLoad(o);
}

/** A closed loop at --connections, or with `eventsPerSecond` an open loop at that rate (up to --paced-connections). */
function load(url: string, seconds: string, eventsPerSecond = 0): Promise<ClientResult> {
  const connections = eventsPerSecond > 0 ? args["paced-connections"]! : args.connections!;
  return runLoadClient<ClientResult>(fileURLToPath(import.meta.url), [
    "--url", url, "--profiles", String(PROFILES), "--batch", String(BATCH), "--connections", connections, "--seconds", seconds, "--rate", String(eventsPerSecond / BATCH),
  ]);
}

/** The definitions of the workload (see the file comment). */
function workloadDefinitions(n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const type = `type.${i % EVENT_TYPES}`;
    const other = `type.${(i * 7 + 3) % EVENT_TYPES}`;
    const band = (i * 37) % 970;
    const tier = TIERS[i % 3]!;
    const country = COUNTRIES[Math.floor(i / 3) % 5]!;
    const points = `loyalty.points >= ${band} and loyalty.points < ${band + 30}`;
    out.push([
      `${points} and chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(< ${1 + (i % 12)} hours before now)])`,
      `xEvent[eventType = "${type}" and timestamp occurs < 6 hours before now].count() >= 3`,
      `loyalty.tier = "${tier}" and homeAddress.countryCode = "${country}" and chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(today)])`,
      `${points} and chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(< 12 hours before now), C1: WHAT(eventType = "${other}") WHEN(< 12 hours before now)])`,
      `homeAddress.countryCode = "${country}" and loyalty.points >= ${band} and loyalty.points < ${band + 50}`,
    ][Math.floor(i / EVENT_TYPES) % 5]!);
  }
  return out;
}

/** Latencies and counts of one phase. */
class Phase {
  events = 0;
  transitions = 0;
  eventsWithTransitions = 0;
  /** One entry per event that produced a transition (ms). */
  private withTransitions: number[] = [];
  /** One entry per request, weighted by its events when reported (ms). */
  private requests: Array<[number, number]> = [];
  /** Per request: waiting for the handler + the durable append (arrival → stored), then the evaluation and its writes (ms). */
  private appendMs: number[] = [];
  private evaluateMs: number[] = [];

  record(events: number, transitions: number, eventsWithTransitions: number, ms: number, appendMs: number): void {
    this.events += events;
    this.transitions += transitions;
    this.eventsWithTransitions += eventsWithTransitions;
    for (let i = 0; i < eventsWithTransitions; i++) this.withTransitions.push(ms);
    this.requests.push([ms, events]);
    this.appendMs.push(appendMs);
    this.evaluateMs.push(ms - appendMs);
  }

  /** Prints the phase's figures; returns its events/s and p99 event-to-transition latency (ms). */
  report(label: string, seconds: number, client: ClientResult | null): { eps: number; p99: number } {
    const wt = Float64Array.from(this.withTransitions).sort();
    const all = new Float64Array(this.events);
    let k = 0;
    for (const [ms, n] of this.requests) for (let i = 0; i < n; i++) all[k++] = ms;
    all.sort();
    const eps = this.events / seconds;
    const p99 = percentile(wt, 99);
    console.log("");
    console.log(`${label}`);
    console.log(`| figure | value |`);
    console.log(`|---|---|`);
    console.log(`| events stored and evaluated | ${this.events} in ${seconds} s |`);
    console.log(`| sustained events/s | ${eps.toFixed(0)} |`);
    console.log(`| transitions | ${this.transitions} (${(this.transitions / seconds).toFixed(0)}/s, ${(this.transitions / Math.max(1, this.events)).toFixed(3)} per event) |`);
    console.log(`| events with a transition | ${this.eventsWithTransitions} (${((100 * this.eventsWithTransitions) / Math.max(1, this.events)).toFixed(1)} %) |`);
    console.log(`| event-to-transition p50 / p99 (events with a transition) | ${percentile(wt, 50).toFixed(1)} ms / ${p99.toFixed(1)} ms |`);
    console.log(`| arrival-to-durable p50 / p99 (all events) | ${percentile(all, 50).toFixed(1)} ms / ${percentile(all, 99).toFixed(1)} ms |`);
    const append = Float64Array.from(this.appendMs).sort();
    const evaluate = Float64Array.from(this.evaluateMs).sort();
    console.log(`| per request: arrival → appended p50 / p99 | ${percentile(append, 50).toFixed(1)} ms / ${percentile(append, 99).toFixed(1)} ms |`);
    console.log(`| per request: appended → transitions durable p50 / p99 | ${percentile(evaluate, 50).toFixed(1)} ms / ${percentile(evaluate, 99).toFixed(1)} ms |`);
    if (client) {
      console.log(`| request p50 / p99 (client, ${BATCH} events per request) | ${client.p50} ms / ${client.p99} ms |`);
      console.log(`| non-2xx / errors | ${client.non2xx} / ${client.errors} |`);
    }
    return { eps, p99 };
  }
}

/** Starts the profilers asked for (--cpu-profile, --heap-profile); the returned function stops them and writes their files. */
async function startProfile(): Promise<() => Promise<void>> {
  const [cpu, heap] = await Promise.all([startCpuProfile(args["cpu-profile"]!, "the measured phase"), startHeapProfile(args["heap-profile"])]);
  return async () => {
    await cpu();
    await heap();
  };
}

function loadAverage(): string {
  return os.loadavg().map((x) => x.toFixed(2)).join(", ");
}

async function runBench(): Promise<void> {
  const Fastify = (await import("fastify")).default;
  const { ingestRecords } = await import("../packages/server/src/profiles/ingest.js");
  const { DefinitionCatalog } = await import("../packages/server/src/streaming/definition-catalog.js");
  const { StreamingEngine } = await import("../packages/server/src/streaming/engine.js");
  const { openRealtimeWorld } = await import("./lib/realtime.js");

  const ORG = "BENCHSTREAM0000000000000@AdobeOrg";
  const nDefinitions = Number(args.definitions);
  const world = await openRealtimeWorld(ORG, { streaming: Math.max(500, nDefinitions) }, { directStore: args["direct-store"] === true });
  const { dir, clock, bus, meta, hub, tenant, scope } = world;
  const catalog = new DefinitionCatalog(meta, bus);
  const engine = new StreamingEngine({ catalog, hub, clock, maxWritesInFlight: Number(args["writes-in-flight"]) });
  engine.start();
  console.log(`load average at start: ${loadAverage()} (${os.cpus().length} CPUs)`);
  try {
    let t0 = performance.now();
    for (const [i, pql] of workloadDefinitions(nDefinitions).entries()) await world.define(`streaming ${i}`, pql, "continuous");
    const set = await catalog.get(tenant, "continuous");
    console.log(`definitions: ${set.definitions.length} continuous in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    await hub.createDataset(scope, { id: "stream-events", name: "stream events", schemaClass: "experienceevent", profileEnabled: true }, clock.now());
    await hub.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, clock.now());
    t0 = performance.now();
    for (let start = 0; start < PROFILES; start += 5000) {
      const records = [];
      for (let i = start; i < Math.min(PROFILES, start + 5000); i++) {
        records.push({
          index: i - start,
          value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, homeAddress: { countryCode: COUNTRIES[i % 5] }, loyalty: { tier: TIERS[i % 3], points: (i * 7919) % 1000 } },
        });
      }
      await ingestRecords(hub, scope, "crm", records, { now: clock.now() });
    }
    console.log(`profiles: ${PROFILES} in the hub in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    /** What the streaming collection path does for a batch: validate + append durably, then evaluate. */
    // As the collection route does: known profiles' events are evaluated before their append and
    // written with their transitions in one commit (decideAhead); --after-append: every event is
    // evaluated after its append, its transitions written by a second commit (before 2026-11-26).
    const decideAhead = args["after-append"] ? undefined : (records: readonly ValidRecord[]) => engine.decideAhead(tenant, records);
    const ingest = async (messages: unknown[], phase: Phase | null, arrived: number): Promise<number> => {
      const r = await ingestRecords(hub, scope, "stream-events", messages.map((value, index) => ({ index, value })), { now: clock.now(), ...(decideAhead ? { decideAhead } : {}) });
      const appended = performance.now() - arrived;
      const written = await engine.onRecordsStored(tenant, r.stored, args["reread-pids"] ? undefined : r.storedPids, r.ahead);
      const ms = performance.now() - arrived;
      phase?.record(r.stored.length, written.length, new Set(written.map((t) => t.profileId)).size, ms, appended);
      return written.length;
    };

    // Preload: one event per profile, in order, in-process, so that every state is in memory.
    t0 = performance.now();
    let preloadTransitions = 0;
    const at = new Date(clock.now() - 60_000).toISOString();
    for (let start = 0; start < PROFILES; start += 1000) {
      const messages = [];
      for (let i = start; i < Math.min(PROFILES, start + 1000); i++) {
        messages.push({ _id: `preload-${i}`, identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, eventType: `type.${i % EVENT_TYPES}`, timestamp: at });
      }
      preloadTransitions += await ingest(messages, null, performance.now());
    }
    await engine.idle();
    console.log(`preload: ${PROFILES} events (one per profile) → ${preloadTransitions} transitions, ${engine.cachedStates} states in memory, in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    let phase = new Phase();
    if (args["in-process"]) {
      // The same load without HTTP: `connections` concurrent loops of batches.
      const drive = async (seconds: number, p: Phase): Promise<void> => {
        const end = performance.now() + seconds * 1000;
        const loop = async (): Promise<void> => {
          while (performance.now() < end) await ingest(eventBatch("in", new Date(Date.now() - 50).toISOString()).messages, p, performance.now());
        };
        await Promise.all(Array.from({ length: Number(args.connections) }, loop));
        await engine.idle();
      };
      if (Number(args.warmup) > 0) await drive(Number(args.warmup), new Phase());
      const stopProfile = await startProfile();
      await drive(Number(args.seconds), phase);
      await stopProfile();
      const r = phase.report(`in-process, ${args.connections} concurrent batches of ${BATCH}`, Number(args.seconds), null);
      console.log(`targets (in process, no HTTP): events/s ${r.eps >= 10_000 ? "meets" : "MISSES"} 10,000; p99 event-to-transition ${r.p99.toFixed(1)} ms ${r.p99 <= 50 ? "meets" : "MISSES"} 50 ms`);
    } else {
      const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
      const arrivals = new WeakMap<object, number>();
      app.addHook("onRequest", async (request) => {
        arrivals.set(request, performance.now());
      });
      app.post<{ Body: { messages: unknown[] } }>("/collection/batch/bench", async (request) => {
        const written = await ingest(request.body.messages, phase, arrivals.get(request) ?? performance.now());
        return { accepted: request.body.messages.length, transitions: written };
      });
      // The floor (#26): what the request costs without the streaming engine — HTTP, validation
      // and the durable append — the part of the cost per event no evaluation can remove.
      app.post<{ Body: { messages: unknown[] } }>("/collection/batch/floor", async (request) => {
        const r = await ingestRecords(hub, scope, "stream-events", request.body.messages.map((value, index) => ({ index, value })), { now: clock.now() });
        return { accepted: r.stored.length, transitions: 0 };
      });
      const base = await app.listen({ host: "127.0.0.1", port: 0 });
      const url = `${base}/collection/batch/bench`;
      if (Number(args.warmup) > 0) {
        phase = new Phase();
        await load(url, args.warmup!);
        await engine.idle();
        phase.report(`warm-up (not counted), ${args.warmup} s`, Number(args.warmup), null);
      }
      /** One measured phase: its load, with the bench process's CPU, GC pauses and event-loop delay meanwhile. */
      const measure = async (name: string, label: string, eventsPerSecond: number, cost?: PhaseCost[]): Promise<{ eps: number; p99: number }> => {
        phase = new Phase();
        const cpuBefore = threadCpu();
        const gc = watchGcPauses();
        const loop = watchLoopDelay();
        let client: ClientResult | undefined;
        const run = async () => {
          client = await load(url, args.seconds!, eventsPerSecond);
          await engine.idle();
          return client;
        };
        if (cost) cost.push(await measurePhase("in-process engine (bench process: HTTP, append, evaluation, writes)", selfMeter(), run, "event", BATCH));
        else await run();
        const gcSummary = gc.stop();
        const loopSummary = loop.stop();
        console.log("");
        console.log(`bench process CPU by thread during the ${name} phase: ${cpuDelta(cpuBefore, threadCpu())}`);
        console.log(`GC pauses on the main thread during the ${name} phase: ${gcSummary}`);
        console.log(`event-loop delay during the ${name} phase: ${loopSummary}`);
        return phase.report(label, Number(args.seconds), client!);
      };
      // 1. Throughput: the closed loop (the CPU and heap profiles, when asked for, cover this phase).
      const stopProfile = await startProfile();
      const saturated = await measure("throughput", `measured (throughput), closed loop: ${args.connections} connections, batches of ${BATCH}`, 0);
      await stopProfile();
      // 2. Latency at a steady rate: the open loop.
      const pacedRate = Number(args.paced);
      const costs: PhaseCost[] = [];
      if (pacedRate > 0) {
        // The reference, same client, same requests and rate: a bare Fastify endpoint of its own.
        const bare = await startBareServer();
        try {
          costs.push(await measurePhase("bare Fastify JSON (own process)", bare.meter, () => load(`${bare.url}/bare`, args.seconds!, pacedRate), "event", BATCH));
        } finally {
          await bare.close();
        }
      }
      const paced = pacedRate > 0
        ? await measure("paced", `measured (latency), open loop: ${pacedRate} events/s offered (${(pacedRate / BATCH).toFixed(0)} requests/s of ${BATCH}, due at even intervals, up to ${args["paced-connections"]} connections)`, pacedRate, costs)
        : null;
      // After the engine's phase: the engine never sees these events (its states would be behind).
      if (pacedRate > 0) costs.push(await measurePhase("floor: the same process without the engine (HTTP, validation, durable append)", selfMeter(), () => load(`${base}/collection/batch/floor`, args.seconds!, pacedRate), "event", BATCH));
      if (costs.length === 3) {
        console.log("");
        console.log(`cost per event, open loop at ${pacedRate} events/s (${BATCH} a request; every thread of the process; V8 heap bytes):`);
        console.log(COST_HEADER);
        for (const c of costs) console.log(costRow(c));
        const [ref, engineCost, floor] = costs as [PhaseCost, PhaseCost, PhaseCost];
        console.log(target(`in-process engine CPU per event ≤ 40 µs at ${nDefinitions} definitions`, `${engineCost.cpuUs.toFixed(1)} µs`, engineCost.cpuUs <= 40, `bare endpoint ${ref.cpuUs.toFixed(1)} µs per event, floor without the engine ${floor.cpuUs.toFixed(1)} µs, same run`));
        console.log(target(`p99 event-to-transition ≤ 20 ms at ${pacedRate} events/s open loop`, `${paced!.p99.toFixed(1)} ms`, paced!.p99 <= 20, `client p99 per request: bare ${ref.client.p99} ms, engine ${engineCost.client.p99} ms`));
      }
      console.log("");
      console.log(`targets: sustained events/s ${saturated.eps.toFixed(0)} (closed loop) ${saturated.eps >= 10_000 ? "meets" : "MISSES"} 10,000; ` +
        (paced === null
          ? `p99 event-to-transition ${saturated.p99.toFixed(1)} ms at saturation ${saturated.p99 <= 50 ? "meets" : "MISSES"} 50 ms`
          : `p99 event-to-transition ${paced.p99.toFixed(1)} ms while ${paced.eps.toFixed(0)} events/s are sustained (open loop) ${paced.p99 <= 50 && paced.eps >= 10_000 ? "meets" : "MISSES"} 50 ms at >= 10,000 events/s (at saturation: ${saturated.p99.toFixed(1)} ms)`));
      await app.close();
    }
    console.log(`sweep: ${engine.scheduled} memberships scheduled for a re-check; load average at end: ${loadAverage()}`);
  } finally {
    await engine.stop();
    catalog.close();
    await hub.close();
    await meta.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.client) await runClient();
else if (args.computed) {
  const { runComputedCost } = await import("./lib/computed-cost.js");
  const given = (flag: string) => process.argv.includes(`--${flag}`);
  await runComputedCost({
    profiles: given("profiles") ? PROFILES : 20_000, batch: BATCH, connections: given("connections") ? Number(args.connections) : 4,
    seconds: given("seconds") ? Number(args.seconds) : 3, rounds: Number(args.rounds), workload: workloadDefinitions(Number(args.definitions)),
    rate: given("paced") ? Number(args.paced) : 500,
  });
} else {
  if (!args["workers-only"]) await runBench();
  if (args.workers || args["workers-only"]) {
    await runWorkersBench({ profiles: Number(args["workers-profiles"]), events: Number(args["workers-events"]), definitions: Number(args["workers-definitions"]), offeredEventsPerSecond: Number(args["workers-offered"]) });
  }
}
