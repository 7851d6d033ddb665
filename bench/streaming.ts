/**
 * Streaming evaluation benchmark (issue #8, acceptance 4).
 *
 *   npm run bench:streaming       (= node --conditions=source --import tsx bench/streaming.ts)
 *   options: --definitions 500 --profiles 10000 --batch 50 --connections 32 --seconds 10 --rate 0 --warmup 5
 *   (--rate N: N requests/s in total, to measure latency below saturation)
 *
 * The bench process runs the ingestion path the service uses for streamed
 * records — validate, durable append to the hub (SQLite, synchronous=FULL),
 * then the streaming engine (reverse index → evaluation → memberships and
 * transitions, group-committed) — behind POST /collection/batch/bench, with
 * 500 continuous definitions. The load comes from a separate process (this
 * file with --client): autocannon posting batches of events for random
 * profiles and event types. Reported: sustained events/s, and the
 * event-to-transition latency (from the request's arrival to its transitions
 * being durable) at p50/p99, measured in the server.
 */
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { postLoad, runLoadClient, type ClientResult } from "./lib/load-client.js";
import { parseArgs } from "node:util";
import Fastify from "fastify";

const { values: args } = parseArgs({
  options: {
    client: { type: "boolean", default: false },
    url: { type: "string", default: "" },
    definitions: { type: "string", default: "500" },
    profiles: { type: "string", default: "10000" },
    batch: { type: "string", default: "50" },
    connections: { type: "string", default: "32" },
    seconds: { type: "string", default: "10" },
    /** Requests per second for the whole client (0 = as fast as possible): latency below saturation. */
    rate: { type: "string", default: "0" },
    /** Seconds of unmeasured load first, so that profile states are in memory (steady state). */
    warmup: { type: "string", default: "5" },
  },
});

const PROFILES = Number(args.profiles);
const BATCH = Number(args.batch);
const EVENT_TYPES = 50;

let seq = 0;

async function runClient(): Promise<void> {
  await postLoad({
    url: args.url!,
    connections: Number(args.connections),
    seconds: Number(args.seconds),
    rate: Number(args.rate),
    body() {
      const messages = [];
      const at = new Date(Date.now() - 50).toISOString();
      for (let i = 0; i < BATCH; i++) {
        const who = Math.floor(Math.random() * PROFILES);
        messages.push({
          _id: `${process.pid}-${++seq}`,
          identityMap: { CRMID: [{ id: `c${who}`, primary: true }] },
          eventType: `type.${Math.floor(Math.random() * EVENT_TYPES)}`,
          timestamp: at,
        });
      }
      return { messages };
    },
  });
}

function load(url: string, seconds: string = args.seconds!): Promise<ClientResult> {
  return runLoadClient<ClientResult>(fileURLToPath(import.meta.url), [
    "--url", url, "--profiles", String(PROFILES), "--batch", String(BATCH), "--connections", args.connections!, "--seconds", seconds, "--rate", args.rate!,
  ]);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function runBench(): Promise<void> {
  const { ingestRecords } = await import("../packages/server/src/profiles/ingest.js");
  const { validateRecord } = await import("../packages/server/src/profiles/validate.js");
  const { DefinitionCatalog } = await import("../packages/server/src/streaming/definition-catalog.js");
  const { StreamingEngine } = await import("../packages/server/src/streaming/engine.js");
  const { openRealtimeWorld } = await import("./lib/realtime.js");

  const ORG = "BENCHSTREAM0000000000000@AdobeOrg";
  const world = await openRealtimeWorld(ORG, { streaming: 500 });
  const { dir, clock, bus, meta, hub, tenant, scope } = world;
  const catalog = new DefinitionCatalog(meta, bus);
  const engine = new StreamingEngine({ catalog, hub, clock });
  try {
    const t0 = performance.now();
    const tiers = ["gold", "silver", "bronze"];
    const countries = ["US", "FR", "DE", "JP", "BR"];
    const n = Number(args.definitions);
    for (let i = 0; i < n; i++) {
      const type = `type.${i % EVENT_TYPES}`;
      const other = `type.${(i * 7 + 3) % EVENT_TYPES}`;
      const pql = [
        `chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(< ${1 + (i % 12)} hours before now)])`,
        `xEvent[eventType = "${type}" and timestamp occurs < 6 hours before now].count() >= ${1 + (i % 3)}`,
        `loyalty.tier = "${tiers[i % 3]}" and chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(today)])`,
        `chain(xEvent, timestamp, [C0: WHAT(eventType = "${type}") WHEN(< 12 hours before now), C1: WHAT(eventType = "${other}") WHEN(< 12 hours before now)])`,
        `homeAddress.countryCode = "${countries[i % 5]}" and loyalty.points > ${(i * 37) % 1000}`,
      ][i % 5]!;
      await world.define(`streaming ${i}`, pql, "continuous");
    }
    const set = await catalog.get(tenant, "continuous");
    console.log(`definitions: ${set.definitions.length} continuous in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    await hub.createDataset(scope, { id: "stream-events", name: "stream events", schemaClass: "experienceevent", profileEnabled: true }, clock.now());
    await hub.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, clock.now());
    const dataset = (await hub.getDataset(scope, "stream-events"))!;
    for (let start = 0; start < PROFILES; start += 5000) {
      const records = [];
      for (let i = start; i < Math.min(PROFILES, start + 5000); i++) {
        records.push({ index: i - start, value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, homeAddress: { countryCode: countries[i % 5] }, loyalty: { tier: tiers[i % 3], points: (i * 7919) % 1000 } } });
      }
      await ingestRecords(hub, scope, "crm", records, { now: clock.now() });
    }
    console.log(`profiles: ${PROFILES} in the hub`);

    const latencies: number[] = [];
    let events = 0;
    let transitions = 0;
    const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
    // What the streaming collection path does for a batch: validate, append durably, evaluate.
    app.post<{ Body: { messages: unknown[] } }>("/collection/batch/bench", async (request) => {
      const arrived = performance.now();
      const valid = [];
      for (const [i, m] of request.body.messages.entries()) {
        const r = validateRecord(m, i, dataset);
        if (r.ok) valid.push(r.record);
      }
      await hub.append(scope, dataset.id, valid, { ingestedAt: clock.now(), maxIdentitiesPerGraph: 50 });
      const written = await engine.onRecordsStored(tenant, valid);
      const ms = performance.now() - arrived;
      events += valid.length;
      transitions += written.length;
      for (let i = 0; i < written.length; i++) latencies.push(ms);
      return { accepted: valid.length, transitions: written.length };
    });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });

    if (Number(args.warmup) > 0) {
      await load(`${url}/collection/batch/bench`, args.warmup!);
      await engine.idle();
      console.log(`warm-up: ${events} events, ${transitions} transitions in ${args.warmup} s (not counted below)`);
      events = 0;
      transitions = 0;
      latencies.length = 0;
    }
    const started = performance.now();
    const client = await load(`${url}/collection/batch/bench`);
    await engine.idle();
    const seconds = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const eps = events / Number(args.seconds);
    console.log("");
    console.log(`| figure | value |`);
    console.log(`|---|---|`);
    console.log(`| events stored and evaluated | ${events} in ${args.seconds} s of load (${seconds.toFixed(1)} s with drain) |`);
    console.log(`| sustained events/s | ${eps.toFixed(0)} |`);
    console.log(`| transitions written | ${transitions} |`);
    console.log(`| event-to-transition p50 / p99 | ${percentile(latencies, 50).toFixed(1)} ms / ${percentile(latencies, 99).toFixed(1)} ms |`);
    console.log(`| request p50 / p99 (client, ${BATCH} events per request) | ${client.p50} ms / ${client.p99} ms |`);
    console.log(`| non-2xx / errors | ${client.non2xx} / ${client.errors} |`);
    console.log("");
    console.log(`targets: events/s ${eps >= 10_000 ? "meets" : "MISSES"} 10,000; p99 event-to-transition ${percentile(latencies, 99) <= 50 ? "meets" : "MISSES"} 50 ms`);
    await app.close();
  } finally {
    await engine.stop();
    catalog.close();
    await hub.close();
    await meta.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.client) await runClient();
else await runBench();
