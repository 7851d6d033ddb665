/**
 * Batch segmentation benchmark (issue #7, acceptance 4), one command:
 *
 *   npm run bench:batch -- [--profiles 1000000] [--events 10000000] [--db bench/.data/batch.db]
 *                          [--reuse] [--backend sql|js] [--chunk 2000]
 *
 * 1. loads demo profiles and events into an embedded profile store (skipped with --reuse);
 * 2. builds 100 varied definitions (profile attributes, event counts in windows, chains,
 *    negated events, inSegment, string dates evaluated in memory);
 * 3. runs ONE job: evaluation of the 100 definitions + persisting the memberships in one
 *    transaction; prints wall time and peak memory (RSS);
 * 4. runs a hand-written SQL query over the same store computing the same 100 memberships,
 *    checks the counts agree, and prints the ratio;
 * 5. times an estimate (preview) over all profiles.
 * Writes only under bench/.data.
 */
import { mkdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { parse } from "@segmentd/pql";
import { DEMO_DATASETS, demoEvents, demoProfiles } from "../packages/server/src/profiles/demo.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../packages/server/src/profiles/ingest.js";
import type { JsonObject, TenantScope } from "../packages/server/src/profiles/types.js";
import { evaluateJob, type JobDefinition } from "../packages/server/src/batch/engine/evaluate-job.js";
import { PreviewService } from "../packages/server/src/batch/previews/preview-service.js";
import { SqliteBatchRepository } from "../packages/server/src/batch/store/sqlite-repository.js";

const { values: args } = parseArgs({
  options: {
    profiles: { type: "string", default: "1000000" },
    events: { type: "string", default: "10000000" },
    db: { type: "string", default: "bench/.data/batch.db" },
    reuse: { type: "boolean", default: false },
    backend: { type: "string", default: "sql" },
    chunk: { type: "string", default: "2000" },
  },
});

const NOW = Date.UTC(2026, 10, 21);
const DAY = 86_400_000;
const SCOPE: TenantScope = { orgId: "BENCH@AdobeOrg", sandboxName: "prod" };
const POLICY = { id: "bench-pdg", identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };

function gb(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(2)} GB`;
}

async function load(store: EmbeddedProfileStore, profiles: number, events: number): Promise<void> {
  const demo = { profiles, events, now: NOW, seed: 1 };
  const p = (await store.createDataset(SCOPE, DEMO_DATASETS.profiles, NOW)).id;
  const e = (await store.createDataset(SCOPE, DEMO_DATASETS.events, NOW)).id;
  const t0 = performance.now();
  for (const [ds, gen, n] of [[p, demoProfiles(demo), profiles], [e, demoEvents(demo), events]] as const) {
    let batch: Array<{ index: number; value: JsonObject }> = [];
    let done = 0;
    for (const value of gen) {
      batch.push({ index: batch.length, value });
      if (batch.length === 5000) {
        await ingestRecords(store, SCOPE, ds, batch, { now: NOW });
        done += batch.length;
        batch = [];
        if (done % 500_000 === 0) console.log(`  loaded ${done} / ${n}`);
      }
    }
    if (batch.length > 0) await ingestRecords(store, SCOPE, ds, batch, { now: NOW });
  }
  console.log(`load: ${profiles} profiles + ${events} events in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

interface BenchDefinition {
  id: string;
  pql: string;
  /** The same audience, hand-written over the store's tables (f = the profile's fragment, p.pid). */
  sql: string;
}

const NOT_OPTED_OUT = "NOT (coalesce(json_extract(f.body, '$.consents.marketing.preferred'), '') = 'n' OR coalesce(json_extract(f.body, '$.consents.collect.val'), '') = 'n')";

function eventCount(where: string, days: number): string {
  return `(SELECT count(*) FROM events e WHERE e.tid = p.tid AND e.pid = p.pid AND ${where} AND e.ts > ${NOW - days * DAY} AND e.ts < ${NOW})`;
}

function definitions(): BenchDefinition[] {
  const out: BenchDefinition[] = [];
  const add = (pql: string, sql: string) => out.push({ id: `bench-${String(out.length).padStart(3, "0")}`, pql, sql });
  const attr = (p: string) => `json_extract(f.body, '$.${p}')`;
  for (const t of ["bronze", "silver", "gold", "platinum"]) add(`loyalty.tier = "${t}"`, `${attr("loyalty.tier")} = '${t}'`);
  const gold = out[2]!;
  for (const c of ["US", "GB", "DE", "FR", "CA", "AU"]) add(`homeAddress.countryCode = "${c}"`, `${attr("homeAddress.countryCode")} = '${c}'`);
  for (let n = 500; n <= 5000; n += 500) add(`loyalty.points > ${n}`, `${attr("loyalty.points")} > ${n}`);
  for (const city of ["New York", "Austin", "Seattle", "Chicago", "Denver", "London", "Berlin", "Paris", "Toronto", "Sydney"]) {
    add(`homeAddress.city = "${city}" and loyalty.tier in ["gold", "platinum"]`, `${attr("homeAddress.city")} = '${city}' AND ${attr("loyalty.tier")} IN ('gold', 'platinum')`);
  }
  for (const d of [7, 14, 30, 60, 90]) {
    for (const k of [1, 2]) {
      add(`xEvent[eventType = "commerce.purchases" and timestamp occurs < ${d} days before now].count() >= ${k}`, `${eventCount("json_extract(e.body, '$.eventType') = 'commerce.purchases'", d)} >= ${k}`);
    }
  }
  const types = ["commerce.purchases", "commerce.productViews", "commerce.productListAdds", "web.webpagedetails.pageViews", "directMarketing.emailOpened"];
  for (const t of types) {
    for (const d of [1, 3, 7, 30]) {
      add(`chain(xEvent, timestamp, [A: WHAT(eventType = "${t}") WHEN(< ${d} days before now)])`, `${eventCount(`json_extract(e.body, '$.eventType') = '${t}'`, d)} >= 1`);
    }
  }
  for (const t of types) add(`not (exists X from xEvent : X.eventType = "${t}")`, `NOT EXISTS (SELECT 1 FROM events e WHERE e.tid = p.tid AND e.pid = p.pid AND json_extract(e.body, '$.eventType') = '${t}')`);
  for (const tier of ["bronze", "silver", "gold", "platinum"]) {
    for (const t of types) {
      add(`loyalty.tier = "${tier}" and xEvent[eventType = "${t}" and timestamp occurs < 14 days before now].count() > 0`, `${attr("loyalty.tier")} = '${tier}' AND ${eventCount(`json_extract(e.body, '$.eventType') = '${t}'`, 14)} > 0`);
    }
  }
  for (const c of ["spring-sale", "loyalty-bonus", "new-arrivals", "back-in-stock"]) {
    add(`xEvent[eventType = "directMarketing.emailOpened" and directMarketing.campaign = "${c}" and timestamp occurs < 30 days before now].count() > 0`,
      `${eventCount(`json_extract(e.body, '$.eventType') = 'directMarketing.emailOpened' AND json_extract(e.body, '$.directMarketing.campaign') = '${c}'`, 30)} > 0`);
  }
  // Dates as strings: PQL compares them as instants, outside the SQL back end (evaluated in memory).
  for (const y of [1960, 1970, 1980, 1990, 2000]) add(`person.birthDate < "${y}-01-01"`, `${attr("person.birthDate")} < '${y}-01-01'`);
  for (const c of ["US", "GB", "DE", "FR", "CA", "AU"]) {
    add(`inSegment("${gold.id}") and homeAddress.countryCode = "${c}"`, `(${gold.sql}) AND ${NOT_OPTED_OUT} AND ${attr("homeAddress.countryCode")} = '${c}'`);
  }
  return out;
}

function handWrittenCounts(file: string, defs: readonly BenchDefinition[]): { seconds: number; counts: number[] } {
  const db = new Database(file, { readonly: true });
  try {
    const tid = (db.prepare("SELECT tid FROM tenants WHERE org = ? AND sandbox = ?").get(SCOPE.orgId, SCOPE.sandboxName) as { tid: number }).tid;
    // One pass: every audience is a column; opted-out profiles are excluded as definitions do by default.
    const cols = defs.map((d, i) => `sum(CASE WHEN (${d.sql}) AND ${NOT_OPTED_OUT} THEN 1 ELSE 0 END) AS c${i}`);
    const sql = `SELECT ${cols.join(", ")} FROM profiles p LEFT JOIN fragments f ON f.tid = p.tid AND f.pid = p.pid WHERE p.tid = ?`;
    const t0 = performance.now();
    const row = db.prepare(sql).raw(true).get(tid) as number[];
    return { seconds: (performance.now() - t0) / 1000, counts: row.map(Number) };
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const profiles = Number(args.profiles);
  const events = Number(args.events);
  const file = path.resolve(args.db!);
  const cpus = os.cpus();
  console.log(`cpu: ${cpus[0]?.model ?? "unknown"} × ${cpus.length}, node ${process.version}; ${profiles} profiles, ${events} events, backend ${args.backend}`);
  if (!args.reuse) {
    rmSync(file, { force: true });
    rmSync(`${file}-wal`, { force: true });
    rmSync(`${file}-shm`, { force: true });
    mkdirSync(path.dirname(file), { recursive: true });
  }
  const store = new EmbeddedProfileStore({ path: file, synchronous: "normal", cacheMiB: 1024 });
  if (!args.reuse) await load(store, profiles, events);
  // A fresh membership state: the job below is the first one.
  const raw = new Database(file);
  raw.exec("DELETE FROM memberships; DELETE FROM transitions;");
  raw.close();

  const defs = definitions();
  const jobDefs: JobDefinition[] = defs.map((d) => {
    const refs = [...d.pql.matchAll(/inSegment\("([^"]+)"\)/g)].map((m) => m[1]!);
    return { id: d.id, query: parse(d.pql), references: refs, excludeOptOut: true, policy: POLICY };
  });
  const rssBefore = process.memoryUsage().rss;
  const t0 = performance.now();
  const outcome = await evaluateJob(store, SCOPE, jobDefs, { now: NOW, backend: args.backend === "js" ? "js" : "sql", chunkSize: Number(args.chunk) });
  const tEval = performance.now();
  await store.applyMembershipChanges(SCOPE, outcome.changes);
  const tEnd = performance.now();
  const peak = process.resourceUsage().maxRSS * 1024;
  const evalS = (tEval - t0) / 1000;
  const totalS = (tEnd - t0) / 1000;
  console.log(`job: ${outcome.totalProfiles} profiles, ${defs.length} definitions (${outcome.sqlDefinitions.length} SQL, ${Object.keys(outcome.inMemoryDefinitions).length} in memory), ${outcome.changes.length} memberships`);
  console.log(`  evaluation ${evalS.toFixed(1)} s + persisting ${(totalS - evalS).toFixed(1)} s = ${totalS.toFixed(1)} s (target ≤ 20 s at 1M/10M)`);
  console.log(`  peak RSS ${gb(peak)} (before the job ${gb(rssBefore)}; target ≤ 4 GB)`);

  const hand = handWrittenCounts(file, defs);
  const mismatches = defs.filter((d, i) => outcome.counters.get(d.id)!.qualified !== hand.counts[i]).map((d) => d.id);
  console.log(`hand-written SQL (one pass, counts only): ${hand.seconds.toFixed(1)} s; ratio job/SQL = ${(totalS / hand.seconds).toFixed(2)} (evaluation only ${(evalS / hand.seconds).toFixed(2)}; target ≤ 1.5)`);
  console.log(mismatches.length === 0 ? "  member counts agree for all 100 definitions" : `  COUNTS DIFFER for ${mismatches.join(", ")}`);

  const repo = new SqliteBatchRepository(":memory:");
  const previews = new PreviewService(store, repo, { now: () => NOW });
  const tp = performance.now();
  const created = await previews.create({ orgId: SCOPE.orgId, sandbox: { sandboxId: "bench", sandboxName: SCOPE.sandboxName, type: "production", default: true } }, {
    predicateExpression: 'loyalty.tier = "gold" and xEvent[eventType = "commerce.purchases"].count() > 0',
    graphType: "pdg",
  });
  await previews.idle();
  const est = await previews.estimate({ orgId: SCOPE.orgId, sandbox: { sandboxId: "bench", sandboxName: SCOPE.sandboxName, type: "production", default: true } }, created.previewId);
  console.log(`estimate: ${est.estimatedSize} of ${est.totalRows} (±${(1.96 * est.standardError).toFixed(0)}) in ${((performance.now() - tp) / 1000).toFixed(1)} s (target ≤ 2 s at 1M)`);
  await repo.close();
  await store.close();
  if (mismatches.length > 0) process.exitCode = 1;
}

await main();
