/**
 * Micro-benchmark of the columnar back end (issue #7): 1M profiles and ~10M
 * synthetic events built straight into typed arrays (no row objects), then
 * ~12 typical definitions, each compiled once and run over all profiles.
 * Prints the best of a few runs per definition, in ms.
 *
 *   node --conditions=source --import tsx bench/columnar.ts
 *   PROFILES=200000 EVENTS_PER_PROFILE=10 node --conditions=source --import tsx bench/columnar.ts
 *   CODEGEN=0 …   (node-by-node loops, no generated code)
 *   ONLY='<pql>' …  (one definition)
 */
import os from "node:os";
import { compileColumnar, type Column, type ColumnarData, type ColumnarTable } from "../packages/pql/src/index.js";

const PROFILES = Number(process.env.PROFILES ?? 1_000_000);
const PER_PROFILE = Number(process.env.EVENTS_PER_PROFILE ?? 10);
const RUNS = Number(process.env.RUNS ?? 3);
const CODEGEN = process.env.CODEGEN !== "0";
const DAY = 86_400_000;
const NOW = Date.UTC(2024, 2, 15, 12, 0, 0);

// A small deterministic PRNG: the same data on every run.
let seed = 42;
const rand = () => {
  seed = (seed * 1_103_515_245 + 12_345) >>> 0;
  return seed / 2 ** 32;
};
const pick = (n: number) => Math.floor(rand() * n);

function stringColumn(n: number, dict: string[], code: (i: number) => number): Column {
  const codes = new Int32Array(n);
  for (let i = 0; i < n; i++) codes[i] = code(i);
  return { kind: "string", codes, dict };
}

function table(length: number, columns: Record<string, Column>): ColumnarTable {
  const objects = new Set<string>();
  for (const path of Object.keys(columns)) {
    const parts = path.split(".");
    for (let k = 1; k < parts.length; k++) objects.add(parts.slice(0, k).join("."));
  }
  const paths = Object.keys(columns);
  return { length, column: (p) => columns[p], hasChildren: (p) => objects.has(p), columnPaths: () => paths };
}

const t0 = performance.now();
const countries = ["US", "CA", "FR", "DE", "GB", "NO"];
const tiers = ["bronze", "silver", "gold", "platinum"];
const names = Array.from({ length: 1000 }, (_, k) => ["John", "joanna", "Ann", "Bob", "Jose"][k % 5]! + (k >= 5 ? String(k) : ""));
const ages = new Float64Array(PROFILES);
const vip = new Int8Array(PROFILES);
for (let i = 0; i < PROFILES; i++) {
  ages[i] = rand() < 0.05 ? NaN : 16 + pick(70);
  vip[i] = rand() < 0.1 ? -1 : rand() < 0.2 ? 1 : 0;
}
const profiles = table(PROFILES, {
  "homeAddress.countryCode": stringColumn(PROFILES, countries, () => (rand() < 0.02 ? -1 : pick(countries.length))),
  "person.age": { kind: "number", values: ages },
  "person.isVip": { kind: "boolean", values: vip },
  "person.name.firstName": stringColumn(PROFILES, names, () => pick(names.length)),
  "loyalty.tier": stringColumn(PROFILES, tiers, () => (rand() < 0.3 ? -1 : pick(tiers.length))),
  "segmentMembership.ups.seg-0001.status": stringColumn(PROFILES, ["realized", "exited"], () => (rand() < 0.7 ? -1 : pick(2))),
});

const eventStart = new Uint32Array(PROFILES + 1);
let total = 0;
for (let i = 0; i < PROFILES; i++) {
  eventStart[i] = total;
  total += pick(2 * PER_PROFILE + 1);
}
eventStart[PROFILES] = total;
const eventTypes = ["commerce.purchases", "commerce.productListAdds", "web.webpagedetails.pageViews", "commerce.checkouts"];
const eventTime = new Float64Array(total);
const price = new Float64Array(total);
for (let i = 0; i < PROFILES; i++) {
  // Oldest first within each profile, as the layout requires.
  // Spread over the last 90 days: one event per stratum, so each group is sorted.
  const lo = eventStart[i]!;
  const hi = eventStart[i + 1]!;
  const step = (90 * DAY) / Math.max(1, hi - lo);
  for (let r = lo; r < hi; r++) eventTime[r] = NOW - 90 * DAY + (r - lo + rand()) * step;
}
for (let r = 0; r < total; r++) price[r] = rand() < 0.5 ? NaN : Math.round(rand() * 20_000) / 100;
const events = table(total, {
  eventType: stringColumn(total, eventTypes, () => (rand() < 0.5 ? 2 : pick(eventTypes.length))),
  timestamp: { kind: "mixed", values: [] },
  "commerce.order.priceTotal": { kind: "number", values: price },
});

const data: ColumnarData = {
  profiles,
  events,
  eventStart,
  eventTime,
  // The definitions below are all columnar: a row read would be a regression.
  profile: () => {
    throw new Error("row object read");
  },
  event: () => {
    throw new Error("row object read");
  },
};
const buildMs = performance.now() - t0;

const DEFINITIONS = process.env.ONLY !== undefined ? [process.env.ONLY] : [
  'homeAddress.countryCode = "US"',
  'person.age >= 30 and homeAddress.countryCode in ["US", "CA"]',
  'homeAddress.countryCode = "US" and person.age >= 25 and loyalty.tier = "gold"',
  'person.isVip = true or loyalty.tier in ["gold", "platinum"]',
  'person.name.firstName.startsWith("jo", false)',
  'inSegment("seg-0001")',
  'xEvent[eventType = "commerce.purchases"].count() >= 2',
  'homeAddress.countryCode = "US" and xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() >= 3',
  'xEvent[eventType = "commerce.purchases" and timestamp occurs < 7 days before now].count() > 0',
  'exists X from xEvent : X.eventType = "web.webpagedetails.pageViews" and X.timestamp occurs today',
  'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal) >= 500',
  'not (exists X from xEvent : X.eventType = "commerce.checkouts")',
];

console.log(`columnar bench — Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? "unknown CPU"}`);
console.log(`${PROFILES.toLocaleString("en")} profiles, ${total.toLocaleString("en")} events, built in ${buildMs.toFixed(0)} ms; best of ${RUNS} runs${CODEGEN ? "" : ", no code generation"}`);
console.log("   wall     cpu");
let sum = 0;
let cpuSum = 0;
for (const q of DEFINITIONS) {
  const c = compileColumnar(q, { now: NOW, codegen: CODEGEN });
  let best = Infinity;
  let bestCpu = Infinity;
  let members = 0;
  for (let k = 0; k < RUNS; k++) {
    const out = new Uint8Array(PROFILES);
    const cpu = process.cpuUsage();
    const s = performance.now();
    c.run(data, out);
    best = Math.min(best, performance.now() - s);
    const used = process.cpuUsage(cpu);
    // CPU time of this process: on a shared machine, wall time also counts waiting for a core.
    bestCpu = Math.min(bestCpu, (used.user + used.system) / 1000);
    members = out.reduce((a, b) => a + b, 0);
  }
  sum += best;
  cpuSum += bestCpu;
  console.log(`${best.toFixed(1).padStart(7)} ms ${bestCpu.toFixed(1).padStart(7)} ms  ${String(members).padStart(8)} members  ${c.columnar ? "columnar" : `ROW FALLBACK (${c.reason})`}  ${q}`);
}
console.log(`${sum.toFixed(0).padStart(7)} ms ${cpuSum.toFixed(0).padStart(7)} ms  total for ${DEFINITIONS.length} definitions (load average ${os.loadavg()[0]!.toFixed(1)})`);
