#!/usr/bin/env node
// Runs one test suite with node's test runner (through tsx, on the TypeScript
// sources). Node 20 does not expand globs, so the files are listed here.
//
//   unit    every packages/*/test/**/*.test.ts except the suites below and
//           test/pg-only/, on the embedded store. Never reads ../shared. This is `npm test`.
//   pg      packages/server/test/**/*.test.ts again (and test/pg-only/), with the PostgreSQL store
//           (SEGMENTD_TEST_DATABASE_URL, default postgres://127.0.0.1:5432/test).
//   compat  *.compat.test.ts: checks against ../shared (Adobe's OpenAPI files).
//   e2e     *.e2e.test.ts: the audience tool in a real browser (Chromium).
//   cluster *.cluster.test.ts: hub and edge nodes as processes over nats-server (JetStream).
//   workers *.workers.test.ts: a hub and streaming workers as processes over nats-server and
//           PostgreSQL, against the all-in-one (#25's equivalence; several minutes).
//   latency *.latency.test.ts: latency held while hostile requests run (#37), on the embedded store
//           then on PostgreSQL, one file at a time so that no other suite shares the two cores
//           (#38's delivery stream on PostgreSQL only: LATENCY_ONE_STORE below).
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const suite = process.argv[2] ?? "unit";
const extra = process.argv.slice(3);

function find(dir) {
  let out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    if (name === "node_modules" || name === "dist") continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out = out.concat(find(full));
    else if (name.endsWith(".test.ts")) out.push(path.relative(root, full));
  }
  return out;
}

const all = ["pql", "server", "web"].flatMap((p) => find(path.join(root, "packages", p, "test"))).sort();
const special = (f) => f.endsWith(".compat.test.ts") || f.endsWith(".e2e.test.ts") || f.endsWith(".cluster.test.ts") || f.endsWith(".workers.test.ts") || f.endsWith(".latency.test.ts");
const env = { ...process.env };
let files;
switch (suite) {
  case "unit":
    files = all.filter((f) => !special(f) && !f.includes("/pg-only/"));
    env.SEGMENTD_TEST_STORE = "embedded";
    break;
  case "pg":
    files = all.filter((f) => f.startsWith("packages/server/") && !special(f) && !f.includes("/embedded-only/"));
    env.SEGMENTD_TEST_STORE = "postgres";
    env.SEGMENTD_TEST_DATABASE_URL ??= "postgres://127.0.0.1:5432/test";
    break;
  case "compat":
    files = all.filter((f) => f.endsWith(".compat.test.ts"));
    break;
  case "e2e":
    files = all.filter((f) => f.endsWith(".e2e.test.ts"));
    break;
  case "cluster":
    files = all.filter((f) => f.endsWith(".cluster.test.ts"));
    break;
  case "latency":
    files = all.filter((f) => f.endsWith(".latency.test.ts"));
    env.SEGMENTD_TEST_DATABASE_URL ??= "postgres://127.0.0.1:5432/test";
    break;
  case "workers":
    files = all.filter((f) => f.endsWith(".workers.test.ts"));
    env.SEGMENTD_TEST_DATABASE_URL ??= "postgres://127.0.0.1:5432/test";
    break;
  default:
    console.error(`unknown suite ${suite}: use unit, pg, compat, e2e, cluster, workers or latency`);
    process.exit(2);
}
if (extra.length > 0) files = files.filter((f) => extra.some((e) => f.includes(e)));
if (files.length === 0) {
  console.error(`no test files for suite ${suite}`);
  process.exit(1);
}
/**
 * Latency files that run on one store only (SEGMENTD_LATENCY_EVERY_STORE=1 runs them on both): #38's
 * scripted delivery stream (4.5 minutes a store) on PostgreSQL, the deployed store; the embedded
 * store's delivery paths are npm test's delivery suites (kills, retries, order) at a smaller scale.
 */
const LATENCY_ONE_STORE = new Map([["delivery-stream.latency.test.ts", "postgres"]]);
if (suite === "latency") {
  for (const store of ["embedded", "postgres"]) {
    const mine = files.filter((f) => process.env.SEGMENTD_LATENCY_EVERY_STORE === "1" || (LATENCY_ONE_STORE.get(path.basename(f)) ?? store) === store);
    if (mine.length === 0) continue;
    const args = ["--conditions=source", "--import", "tsx", "--test", "--test-reporter=spec", "--test-concurrency=1", ...mine];
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit", env: { ...env, SEGMENTD_TEST_STORE: store } });
    if (r.status !== 0) process.exit(r.status ?? 1);
  }
  process.exit(0);
}
const args = ["--conditions=source", "--import", "tsx", "--test", "--test-reporter=spec", "--test-concurrency=2", ...files];
const r = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit", env });
process.exit(r.status ?? 1);
