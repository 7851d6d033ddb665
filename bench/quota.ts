/**
 * Data lifecycle benchmark: load from a separate process (autocannon's CLI)
 *   1. GET  /data/core/hygiene/quota            — all four quotas (p99 latency)
 *   2. POST /data/core/hygiene/workorder        — record-delete work orders of
 *      10 identities each (acceptance throughput: validation + atomic
 *      check-and-consume + persist; the runner executes them meanwhile)
 * and then checks that the quota consumed equals 10 × the accepted orders.
 *
 *   npm run bench:quota        (script: node --conditions=source --import tsx bench/quota.ts)
 *   BENCH_SECONDS=20 BENCH_CONNECTIONS=10 node --conditions=source --import tsx bench/quota.ts
 *   SEGMENTD_DATABASE_URL=postgres://127.0.0.1:5432/test ...   (PostgreSQL hygiene store, fresh schema)
 *
 * The app is assembled here from the foundation's auth/error plumbing plus
 * registerHygiene, because the hygiene routes are not yet part of buildApp.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import pg from "pg";
import { installBodyParsing } from "../packages/server/src/http/body-parsing.js";
import { installErrorHandling } from "../packages/server/src/http/errors.js";
import { defaultHygieneConfig } from "../packages/server/src/hygiene/entitlements.js";
import { Hygiene } from "../packages/server/src/hygiene/hygiene.js";
import { registerHygiene } from "../packages/server/src/hygiene/index.js";
import { openPgHygieneStore } from "../packages/server/src/hygiene/store/pg-store.js";
import { openSqliteHygieneStore } from "../packages/server/src/hygiene/store/sqlite-store.js";
import type { HygieneStore } from "../packages/server/src/hygiene/store/types.js";
import { SystemClock } from "../packages/server/src/platform/clock.js";
import { defaultConfig } from "../packages/server/src/platform/config.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { Authenticator } from "../packages/server/src/services/auth/authenticator.js";
import { TenantDirectory } from "../packages/server/src/services/tenancy.js";
import { autocannon, BENCH_KEY, BENCH_ORG, BENCH_TOKEN, type LoadResult } from "./lib/server.js";

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 10);
const IDS_PER_ORDER = 10;
const databaseUrl = process.env.SEGMENTD_DATABASE_URL;

const dataDir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-quota-"));
const schema = `bench_hygiene_${process.pid}`;
let store: HygieneStore;
if (databaseUrl) {
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.end();
  store = await openPgHygieneStore(databaseUrl, { schema });
} else {
  store = openSqliteHygieneStore(dataDir);
}
const profiles = new EmbeddedProfileStore({ path: path.join(dataDir, "profiles.db") });
const config = defaultConfig();
config.auth.staticTokens = [{ token: BENCH_TOKEN, orgs: [BENCH_ORG] }];
config.auth.apiKeys = [BENCH_KEY];
config.organizations = [{ id: BENCH_ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }];
const clock = new SystemClock();
const hygiene = new Hygiene({
  store,
  profiles,
  clock,
  config: {
    ...defaultHygieneConfig(),
    // Large allowances so that the throughput run measures acceptance, not rejection.
    defaults: { datasetExpirationQuota: 1000, dailyConsumerDeleteIdentitiesQuota: 1e12, monthlyConsumerDeleteIdentitiesQuota: 1e12, monthlyUpdatedFieldIdentitiesQuota: 1e12 },
    pollIntervalMs: 0,
  },
});
const app = Fastify({ logger: false });
installErrorHandling(app);
installBodyParsing(app);
await registerHygiene(app, { hygiene, authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config) });
const base = await app.listen({ host: "127.0.0.1", port: 0 });
const headers = { authorization: `Bearer ${BENCH_TOKEN}`, "x-api-key": BENCH_KEY, "x-gw-ims-org-id": BENCH_ORG };

try {
  // Some state for /quota to report: active expirations and consumed identities.
  const ctx = { orgId: BENCH_ORG, sandboxName: "prod", actor: "bench" };
  for (let i = 0; i < 20; i++) {
    await profiles.createDataset({ orgId: BENCH_ORG, sandboxName: "prod" }, { id: `ds${i}`, name: `Dataset ${i}`, schemaClass: "profile", profileEnabled: true }, clock.now());
    await hygiene.expirations.create(ctx, { datasetId: `ds${i}`, displayName: `bench ${i}`, expiry: "2099-01-01" });
  }
  await hygiene.workOrders.create(ctx, { action: "delete_identity", datasetId: "ALL", identities: [{ namespace: { code: "email" }, id: "seed@x.com" }] });
  await hygiene.runner.idle();
  const before = (await hygiene.quotas.report(BENCH_ORG, "dailyConsumerDeleteIdentitiesQuota")).quotas[0]!.consumed;

  const quota = await autocannon(`${base}/data/core/hygiene/quota`, { headers, connections, seconds });
  const orderBody = JSON.stringify({
    action: "delete_identity",
    datasetId: "ALL",
    displayName: "bench [<id>]",
    identities: Array.from({ length: IDS_PER_ORDER }, (_, i) => ({ namespace: { code: "email" }, id: `u${i}-[<id>]@x.com` })),
  });
  const orders = await autocannon(`${base}/data/core/hygiene/workorder`, {
    method: "POST",
    headers: { ...headers, "x-sandbox-name": "prod", "content-type": "application/json" },
    body: orderBody,
    idReplacement: true,
    connections,
    seconds,
  });
  const drainStart = performance.now();
  await hygiene.runner.idle();
  const drainMs = performance.now() - drainStart;
  const after = (await hygiene.quotas.report(BENCH_ORG, "dailyConsumerDeleteIdentitiesQuota")).quotas[0]!.consumed;
  // Counted from the store: autocannon does not count the requests still in flight when it stops.
  const stored = await store.listWorkOrders(BENCH_ORG, { orderBy: { field: "createdAt", direction: "asc" }, offset: 0, limit: 1 });
  const accepted = stored.total - 1;

  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  console.log(`segmentd data lifecycle bench — hygiene store ${store.kind}, Node ${process.version}, ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`);
  console.log(`autocannon (separate process): ${connections} connections × ${seconds} s per scenario`);
  const row = (name: string, r: LoadResult) =>
    console.log(`${name.padEnd(40)} p50 ${r.p50} ms  p90 ${r.p90} ms  p99 ${r.p99} ms  max ${r.max} ms  ${Math.round(r.rps)} req/s  (${r.requests} requests, non-2xx ${r.non2xx}, errors ${r.errors})`);
  row("GET /quota (all four)", quota);
  row(`POST /workorder (${IDS_PER_ORDER} identities)`, orders);
  console.log(`stored ${accepted} accepted work orders (${Math.round(accepted / seconds)} orders/s, ${Math.round((accepted * IDS_PER_ORDER) / seconds)} identities/s); quota consumed rose by ${after - before}; the runner finished the backlog ${(drainMs / 1000).toFixed(1)} s after the load ended`);
  if (after - before !== accepted * IDS_PER_ORDER) {
    console.error(`quota accounting mismatch: consumed +${after - before}, accepted ${accepted} × ${IDS_PER_ORDER}`);
    process.exitCode = 1;
  }
  if (quota.non2xx > 0 || quota.errors > 0 || orders.non2xx > 0 || orders.errors > 0) {
    console.error("some requests failed; the figures above are not valid");
    process.exitCode = 1;
  }
} finally {
  await app.close();
  await hygiene.stop();
  await store.close();
  await profiles.close();
  if (databaseUrl) {
    const admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
  rmSync(dataDir, { recursive: true, force: true });
}
