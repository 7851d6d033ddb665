/**
 * bench:streaming --computed (issue #41, acceptance 4): the CPU per event that 25 computed
 * attributes add beside the bench's 500 definitions.
 *
 * What is compared, and why: segmentd materialises no computed attribute value. A definition that
 * reads `_<tenant>.ComputedAttributes.<name>` is rewritten at save (computed/rewrite.ts,
 * `rewriteComputedAttributes`, the function the save calls) into the attribute's aggregate over
 * its lookback, and the engine evaluates that aggregate. An attribute no definition reads costs
 * nothing per event; one that definitions read costs what their aggregates cost. So the bench
 * measures 25 definitions reading the 25 attributes against 25 definitions of the same shape
 * reading a plain profile attribute (`loyalty.points > 100` for `…ComputedAttributes.spend > 100`),
 * each set beside the same 500 definitions, in worlds of their own, in alternating rounds of the
 * same load, plus a floor world without the engine (validation + durable append only) so that
 * the engine's own cost per event is plain − floor. A definition is continuous when the
 * rewritten expression is streaming-eligible (SUM/COUNT/MIN/MAX under 24 hours), otherwise
 * batch-only (it costs nothing per streamed event), and its plain twin gets the same method.
 * A second computed set, `--computed` "streaming", makes all 25 streaming-eligible: the upper
 * bound for 25 attributes that all count per event.
 *
 * CPU: process.cpuUsage() (every thread of this process, the profile store's worker included),
 * over each round's events. In process (no HTTP), an open loop at `rate` events/s in batches.
 */
import { format, parse } from "@segmentd/pql";
import { ingestRecords } from "../../packages/server/src/profiles/ingest.js";
import { DefinitionCatalog } from "../../packages/server/src/streaming/definition-catalog.js";
import { StreamingEngine } from "../../packages/server/src/streaming/engine.js";
import { rewriteComputedAttributes } from "../../packages/server/src/computed/rewrite.js";
import { analyzeAttributeExpression } from "../../packages/server/src/computed/expression.js";
import { PROFILE_SCHEMA_CLASS } from "../../packages/server/src/services/merge-policies.js";
import type { DurationUnit } from "../../packages/server/src/stores/computed-attributes.js";
import { openRealtimeWorld, type RealtimeWorld } from "./realtime.js";
import { rmSync } from "node:fs";

export interface ComputedCostOptions {
  profiles: number;
  batch: number;
  connections: number;
  /** Seconds of each measured round. */
  seconds: number;
  /** Events per second offered in each round (open loop). */
  rate: number;
  rounds: number;
  /** The bench's 500 definitions. */
  workload: string[];
}

const TENANT = "bench";
const EVENT_TYPES = 50;
const PAGES = 20;

interface Attr {
  name: string;
  expression: string;
  duration: { count: number; unit: DurationUnit };
  /** The definition reading it, and its twin reading a plain profile attribute. */
  reads: string;
  plain: string;
}

const sum = (t: number) => `xEvent[eventType = "type.${t}"].sum(commerce.order.priceTotal)`;
const count = (t: number) => `xEvent[eventType = "type.${t}"].count()`;
const min = (t: number) => `xEvent[eventType = "type.${t}"].min(commerce.order.priceTotal)`;
const max = (t: number) => `xEvent[eventType = "type.${t}"].max(commerce.order.priceTotal)`;
const recent = (t: number) => `xEvent[eventType = "type.${t}"].topN(timestamp, 1).map({"timestamp": timestamp, "value": web.webPageDetails.name}).head()`;
const list = (t: number) => `xEvent[eventType = "type.${t}"].topN(timestamp, 5).map(web.webPageDetails.name)`;

function attr(i: number, fn: "SUM" | "COUNT" | "MIN" | "MAX" | "MOST_RECENT" | "LIST", count_: number, unit: DurationUnit): Attr {
  const name = `ca${i}`;
  const t = (i * 11) % EVENT_TYPES;
  const path = `_${TENANT}.ComputedAttributes.${name}`;
  const byFn = {
    SUM: { expression: sum(t), reads: `${path} > 150`, plain: "loyalty.points > 150" },
    COUNT: { expression: count(t), reads: `${path} >= 2`, plain: "loyalty.points >= 2" },
    MIN: { expression: min(t), reads: `${path} < 20`, plain: "loyalty.points < 20" },
    MAX: { expression: max(t), reads: `${path} > 180`, plain: "loyalty.points > 180" },
    MOST_RECENT: { expression: recent(t), reads: `${path}.value = "page3"`, plain: 'loyalty.tier = "page3"' },
    LIST: { expression: list(t), reads: `"page3" in ${path}`, plain: '"page3" in loyalty.badges' },
  }[fn];
  return { name, duration: { count: count_, unit }, ...byFn };
}

/** 25 attributes: every function, every duration unit (the bounds included). */
export function allUnitsAttributes(): Attr[] {
  const spec: Array<[Parameters<typeof attr>[1], number, DurationUnit]> = [
    ["SUM", 1, "HOURS"], ["COUNT", 6, "HOURS"], ["MIN", 12, "HOURS"], ["MAX", 23, "HOURS"], ["SUM", 24, "HOURS"], ["COUNT", 3, "HOURS"], ["MOST_RECENT", 2, "HOURS"], ["LIST", 4, "HOURS"],
    ["SUM", 7, "DAYS"], ["COUNT", 1, "DAYS"], ["MIN", 3, "DAYS"], ["MAX", 2, "DAYS"], ["MOST_RECENT", 5, "DAYS"], ["LIST", 7, "DAYS"],
    ["SUM", 2, "WEEKS"], ["COUNT", 4, "WEEKS"], ["MIN", 1, "WEEKS"], ["MAX", 3, "WEEKS"], ["MOST_RECENT", 4, "WEEKS"],
    ["SUM", 6, "MONTHS"], ["COUNT", 1, "MONTHS"], ["MIN", 3, "MONTHS"], ["MAX", 2, "MONTHS"], ["MOST_RECENT", 1, "MONTHS"], ["LIST", 6, "MONTHS"],
  ];
  return spec.map(([fn, n, unit], i) => attr(i, fn, n, unit));
}

/** 25 streaming-eligible attributes (SUM, COUNT, MIN, MAX over 1–23 hours): every one evaluated per event. */
export function streamingAttributes(): Attr[] {
  const fns = ["SUM", "COUNT", "MIN", "MAX"] as const;
  return Array.from({ length: 25 }, (_, i) => attr(i, fns[i % 4]!, 1 + ((i * 5) % 23), "HOURS"));
}

/** The definition as the save evaluates it: its computed attribute paths rewritten into aggregates. */
export function rewritten(text: string, attrs: readonly Attr[]): string {
  const records = new Map(attrs.map((a) => [a.name, { expression: { type: "PQL" as const, format: "pql/text" as const, value: a.expression }, duration: a.duration }]));
  for (const a of attrs) analyzeAttributeExpression(a.expression); // the API's checks: throws on an expression it would refuse
  return format(rewriteComputedAttributes(parse(text), TENANT, records));
}

interface World {
  label: string;
  w: RealtimeWorld;
  engine: StreamingEngine | null;
  catalog: DefinitionCatalog | null;
  seq: number;
  continuous: number;
}

/** A batch of events for random profiles (or, with `first`, for profiles first, first + 1, …). */
function events(w: World, o: ComputedCostOptions, at: string, first?: number): Array<Record<string, unknown>> {
  const out = [];
  for (let i = 0; i < o.batch; i++) {
    const who = first === undefined ? Math.floor(Math.random() * o.profiles) : first + i;
    out.push({
      _id: `e-${++w.seq}`,
      identityMap: { CRMID: [{ id: `c${who}`, primary: true }] },
      eventType: `type.${Math.floor(Math.random() * EVENT_TYPES)}`,
      timestamp: at,
      commerce: { order: { priceTotal: Math.floor(Math.random() * 200) } },
      web: { webPageDetails: { name: `page${Math.floor(Math.random() * PAGES)}` } },
    });
  }
  return out;
}

async function openWorld(label: string, o: ComputedCostOptions, extra: Array<{ text: string; continuous: boolean | null }> | null): Promise<World> {
  const w = await openRealtimeWorld(`BENCHCOMPUTED${label.toUpperCase().padEnd(11, "0").slice(0, 11)}@AdobeOrg`, { streaming: 1000 });
  const world: World = { label, w, engine: null, catalog: null, seq: 0, continuous: 0 };
  if (extra !== null) {
    for (const [i, pql] of o.workload.entries()) await w.define(`streaming ${i}`, pql, "continuous");
    for (const [i, d] of extra.entries()) {
      const continuous = d.continuous ?? (await eligibleContinuous(w, d.text));
      await w.definitions.create(w.tenant, {
        name: `reads ${i}`, schema: { name: PROFILE_SCHEMA_CLASS }, expression: { type: "PQL", format: "pql/text", value: d.text },
        evaluationInfo: { batch: { enabled: !continuous }, continuous: { enabled: continuous }, synchronous: { enabled: false } },
      });
      if (continuous) world.continuous++;
    }
    world.catalog = new DefinitionCatalog(w.meta, w.bus);
    world.engine = new StreamingEngine({ catalog: world.catalog, hub: w.hub, clock: w.clock });
    world.engine.start();
  }
  await w.hub.createDataset(w.scope, { id: "stream-events", name: "stream events", schemaClass: "experienceevent", profileEnabled: true }, w.clock.now());
  await w.hub.createDataset(w.scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, w.clock.now());
  for (let start = 0; start < o.profiles; start += 5000) {
    const records = [];
    for (let i = start; i < Math.min(o.profiles, start + 5000); i++) {
      records.push({ index: i - start, value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, loyalty: { tier: "gold", points: (i * 7919) % 1000 } } });
    }
    await ingestRecords(w.hub, w.scope, "crm", records, { now: w.clock.now() });
  }
  // One event per profile, so that every state is in memory before the rounds.
  for (let start = 0; start < o.profiles; start += 1000) {
    await ingest(world, events(world, { ...o, batch: Math.min(1000, o.profiles - start) }, new Date(w.clock.now() - 60_000).toISOString(), start));
  }
  await world.engine?.idle();
  return world;
}

/** Streaming-eligible as the definition service decides it (eligibility, nothing stored). */
async function eligibleContinuous(w: RealtimeWorld, text: string): Promise<boolean> {
  const r = await w.definitions.eligibility(w.tenant, { type: "PQL", format: "pql/text", value: text }, undefined, PROFILE_SCHEMA_CLASS);
  return r.eligible.continuous;
}

async function ingest(world: World, messages: Array<Record<string, unknown>>): Promise<number> {
  const { w, engine } = world;
  const records = messages.map((value, index) => ({ index, value }));
  if (engine === null) return (await ingestRecords(w.hub, w.scope, "stream-events", records, { now: w.clock.now() })).stored.length;
  const r = await ingestRecords(w.hub, w.scope, "stream-events", records, { now: w.clock.now(), decideAhead: (rs) => engine.decideAhead(w.tenant, rs) });
  await engine.onRecordsStored(w.tenant, r.stored, r.storedPids, r.ahead);
  return r.stored.length;
}

/**
 * One round: batches due at even intervals (`rate` events/s, up to `connections` at once) for
 * `seconds`, so that every world commits the same batches at the same pace (a closed loop's
 * throughput would change how much each commit's fixed cost is shared); CPU µs per event.
 */
async function round(world: World, o: ComputedCostOptions): Promise<{ events: number; cpuUs: number }> {
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const due = Math.floor((o.rate * o.seconds) / o.batch);
  let next = 0;
  const loop = async (): Promise<void> => {
    for (let i = next++; i < due; i = next++) {
      const wait = t0 + (i * o.batch * 1000) / o.rate - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      n += await ingest(world, events(world, o, new Date(Date.now() - 50).toISOString()));
    }
  };
  await Promise.all(Array.from({ length: o.connections }, loop));
  await world.engine?.idle();
  const c = process.cpuUsage(c0);
  return { events: n, cpuUs: c.user + c.system };
}

async function close(world: World): Promise<void> {
  await world.engine?.stop();
  world.catalog?.close();
  await world.w.hub.close();
  await world.w.meta.close();
  rmSync(world.w.dir, { recursive: true, force: true });
}

export async function runComputedCost(o: ComputedCostOptions): Promise<void> {
  const all = allUnitsAttributes();
  const hot = streamingAttributes();
  console.log("computed attributes' cost per event (#41 acceptance 4)");
  console.log("A computed attribute has no per-event cost of its own: no value is materialised; a definition reading one is rewritten at save into");
  console.log("the attribute's aggregate over its lookback, which the engine evaluates. Compared: 25 definitions reading the 25 attributes vs");
  console.log(`25 of the same shape reading a plain profile attribute, each beside the same ${o.workload.length} definitions, alternating rounds of ${o.seconds} s at ${o.rate} events/s;`);
  console.log("the engine's own cost per event = the plain world − the floor world (validation + durable append, no engine).");
  const t0 = performance.now();
  const worlds: World[] = [];
  try {
    const computed: Array<{ text: string; continuous: boolean | null }> = all.map((a) => ({ text: rewritten(a.reads, all), continuous: null }));
    worlds.push(await openWorld("floor", o, null));
    const computedWorld = await openWorld("computed", o, computed);
    // The plain twins take the methods their computed definitions got.
    const methods = await Promise.all(computed.map((d) => eligibleContinuous(computedWorld.w, d.text)));
    worlds.push(await openWorld("plain", o, all.map((a, i) => ({ text: a.plain, continuous: methods[i]! }))));
    worlds.push(computedWorld);
    worlds.push(await openWorld("hot", o, hot.map((a) => ({ text: rewritten(a.reads, hot), continuous: null }))));
    console.log(`set-up: 4 worlds of ${o.profiles} profiles in ${((performance.now() - t0) / 1000).toFixed(0)} s; continuous among the 25 read: computed (every function and unit) ${computedWorld.continuous}, plain twins ${worlds[1]!.continuous}, all-streaming set ${worlds[3]!.continuous}`);
    // One unmeasured round each: the JIT and the states warm before anything is counted.
    for (const w of worlds) await round(w, o);
    const totals = new Map<string, { events: number; cpuUs: number }>(worlds.map((w) => [w.label, { events: 0, cpuUs: 0 }]));
    // Per round: the added CPU as a share of the engine's own, from that round's figures (the spread shows the noise).
    const shares: Record<"computed" | "hot", number[]> = { computed: [], hot: [] };
    for (let r = 0; r < o.rounds; r++) {
      // Alternating order each round, so that drift in the machine's load does not favour one world.
      const order = r % 2 === 0 ? worlds : [...worlds].reverse();
      const line: string[] = [];
      const us = new Map<string, number>();
      for (const w of order) {
        const x = await round(w, o);
        us.set(w.label, x.cpuUs / x.events);
        const t = totals.get(w.label)!;
        t.events += x.events;
        t.cpuUs += x.cpuUs;
        line.push(`${w.label} ${(x.cpuUs / x.events).toFixed(1)} µs (${x.events} events)`);
      }
      const own = us.get("plain")! - us.get("floor")!;
      for (const k of ["computed", "hot"] as const) shares[k].push((us.get(k)! - us.get("plain")!) / own);
      console.log(`round ${r + 1}: ${line.join(", ")}; added: computed ${(100 * shares.computed.at(-1)!).toFixed(1)} %, all-streaming ${(100 * shares.hot.at(-1)!).toFixed(1)} % of the engine's own`);
    }
    const per = (label: string) => totals.get(label)!.cpuUs / totals.get(label)!.events;
    const floor = per("floor");
    const plain = per("plain");
    const engineOwn = plain - floor;
    console.log("");
    console.log("| world | CPU µs per event (all rounds) |");
    console.log("|---|---|");
    console.log(`| floor: validation + durable append, no engine | ${floor.toFixed(1)} |`);
    console.log(`| ${o.workload.length} definitions + 25 reading plain profile attributes | ${plain.toFixed(1)} (engine's own: ${engineOwn.toFixed(1)}) |`);
    for (const [label, what] of [["computed", "25 reading the 25 attributes (every function and unit)"], ["hot", "25 reading 25 streaming-eligible attributes (SUM/COUNT/MIN/MAX, 1–23 h)"]] as const) {
      const added = per(label) - plain;
      const ratio = added / engineOwn;
      const sorted = [...shares[label]].sort((x, y) => x - y);
      const median = sorted[Math.floor(sorted.length / 2)]!;
      console.log(`| ${o.workload.length} definitions + ${what} | ${per(label).toFixed(1)} (added ${added.toFixed(1)} µs = ${(100 * ratio).toFixed(1)} % of the engine's own; rounds ${sorted.map((x) => (100 * x).toFixed(1)).join(" / ")} %, median ${(100 * median).toFixed(1)} %; target ≤ 15 % ${ratio <= 0.15 ? "met" : "MISSED"}) |`);
    }
  } finally {
    for (const w of worlds) await close(w);
  }
}
