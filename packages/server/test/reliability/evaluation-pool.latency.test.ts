/**
 * Issue #37: evaluation whose cost grows with data runs off the main thread. Over real HTTP on
 * either store, with 150,000 demo profiles and as many events loaded into the server's store,
 * previews, builder estimates (several expressions, each a full pass over the snapshot) and a
 * batch job evaluate in the evaluation pool's worker thread while `/healthz` keeps p99 ≤ 50 ms
 * and another organization's definition list p99 ≤ 100 ms.
 *
 * The same requests are first run with the pool disabled (`evaluationWorkers: 0`, evaluation on
 * the main thread): there each pass holds the event loop for its whole length and /healthz's p99
 * breaks the bound — asserted, so the measure is known to catch a stall (figures in
 * docs/reliability.md). Then with one worker, where the bounds hold.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { openProfileStore } from "../../src/profiles/open.js";
import { DEMO_DATASETS, demoEvents, demoProfiles } from "../../src/profiles/demo.js";
import type { JsonObject } from "../../src/profiles/types.js";
import { createLogger, startServer } from "../../src/index.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { DEFS, ORG_A, ORG_B, TOKEN_B, client, definitionBody, obj, runSegmentJob, testConfig, type Client } from "../helpers/server-harness.js";
import { p99, probeLatency } from "../helpers/latency-probe.js";

const PROFILES = Number(process.env.SEGMENTD_TEST_POOL_PROFILES ?? 150_000);
const NOW = Date.UTC(2026, 10, 1);
const SCOPE = { orgId: ORG_A, sandboxName: "prod" };
/** Full passes over every profile: string tests on every row, an event count per profile. */
const EXPRESSIONS = [
  'person.name.fullName.contains("zq") or homeAddress.city.endsWith("xq")',
  'xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() > 1 and loyalty.points > 100',
  'homeAddress.street1.contains("Lake St") and person.name.lastName.startsWith("Q")',
  'xEvent[eventType = "commerce.productViews"].count() >= 2 or personalEmail.address.endsWith(".invalid")',
];

function probe(url: string) {
  const b = client(url, { token: TOKEN_B, org: ORG_B });
  return probeLatency(url, () => b.get(`${DEFS}?limit=10`));
}

const show = (xs: number[]) => `p99 ${p99(xs).toFixed(1)} ms over ${xs.length} samples (max ${Math.max(...xs).toFixed(1)})`;

/** A preview's estimate, polled until it is ready. */
async function preview(a: Client, expression: string): Promise<Record<string, unknown>> {
  const r = await a.post("/data/core/ups/preview", { predicateExpression: expression, predicateType: "pql/text" });
  assert.equal(r.status, 201, r.text);
  const id = obj(r.json).previewId as string;
  for (;;) {
    await new Promise((res) => setTimeout(res, 20));
    const e = obj((await a.get(`/data/core/ups/estimate/${id}`)).json);
    if (e.state === "RESULT_READY") return e;
    assert.notEqual(e.state, "FAILED", JSON.stringify(e));
  }
}

/** One server over the loaded store with `workers` evaluation workers; the probes' figures while it evaluates. */
async function measure(handle: TestStoreHandle, workers: number, round: number): Promise<{ health: number[]; other: number[]; estimateMs: number }> {
  const profiles = openProfileStore({ dataDir: handle.dataDir, databaseUrl: handle.databaseUrl, worker: true });
  const config = testConfig(handle, (c) => {
    // The first preview builds its snapshot within its deadline: on a loaded 2-vCPU host that can take longer than 10 s.
    c.organizations[0]!.sandboxes[0]!.limits = { evaluationDeadlineMs: 300_000 };
    c.batchSnapshots = { persist: false, evaluationWorkers: workers };
  });
  const server = await startServer(config, { logger: createLogger("silent"), store: await handle.open(), profiles });
  const a = client(server.url);
  let p: ReturnType<typeof probe> | null = null;
  try {
    const b = client(server.url, { token: TOKEN_B, org: ORG_B });
    for (let i = 0; i < 3; i++) assert.equal((await b.post(DEFS, definitionBody(`org B ${round}.${i}`))).status, 200);
    // The snapshots (the job's merge policy, the preview's) are built and handed to the worker before anything is measured.
    const t1 = performance.now();
    await runSegmentJob(a);
    await preview(a, EXPRESSIONS[0]!);
    console.log(`workers ${workers}: first job and preview (snapshot builds) ${(performance.now() - t1).toFixed(0)} ms`);
    // The load is real: one builder estimate of the expressions is several full passes.
    const warm = await a.post("/data/core/ups/segment/builder/estimate", { expressions: EXPRESSIONS });
    assert.equal(warm.status, 200, warm.text);
    const estimateMs = obj(warm.json).tookMs as number;
    p = probe(server.url);
    const t0 = performance.now();
    const counts = { previews: 0, estimates: 0, jobs: 0 };
    while (counts.jobs < 1 || performance.now() - t0 < 6000) {
      const e = await a.post("/data/core/ups/segment/builder/estimate", { expressions: EXPRESSIONS });
      assert.equal(e.status, 200, e.text);
      assert.equal((obj(e.json).estimates as unknown[]).length, EXPRESSIONS.length);
      counts.estimates++;
      const est = await preview(a, EXPRESSIONS[counts.previews % EXPRESSIONS.length]!);
      assert.ok((est.totalRows as number) >= PROFILES, JSON.stringify(est));
      counts.previews++;
      if (counts.jobs === 0) {
        await runSegmentJob(a);
        counts.jobs++;
      }
    }
    const l = await p.stop();
    p = null;
    console.log(`workers ${workers}: builder estimate ${estimateMs} ms; ${counts.estimates} builder estimates, ${counts.previews} previews, ${counts.jobs} job in ${((performance.now() - t0) / 1000).toFixed(1)} s; /healthz ${show(l.health)}; org B's list ${show(l.other)}`);
    return { ...l, estimateMs };
  } finally {
    await p?.stop().catch(() => undefined);
    await server.close();
  }
}

describe(`evaluation pool: ${PROFILES.toLocaleString("en-US")} profiles evaluated off the event loop`, () => {
  let handle: TestStoreHandle;
  before(async () => {
    handle = await createTestStore("evaluation-pool");
    // Loaded straight into the store (as the batch bench does): the ingestion API would take many minutes.
    const store = openProfileStore({ dataDir: handle.dataDir, databaseUrl: handle.databaseUrl, worker: true });
    const t0 = performance.now();
    const demo = { profiles: PROFILES, events: PROFILES, now: NOW, seed: 7 };
    for (const [input, gen] of [[DEMO_DATASETS.profiles, demoProfiles(demo)], [DEMO_DATASETS.events, demoEvents(demo)]] as const) {
      const ds = (await store.createDataset(SCOPE, input, NOW)).id;
      let batch: Array<{ index: number; value: JsonObject }> = [];
      for (const value of gen) {
        batch.push({ index: batch.length, value });
        if (batch.length === 5000) {
          await ingestRecords(store, SCOPE, ds, batch, { now: NOW });
          batch = [];
        }
      }
      if (batch.length > 0) await ingestRecords(store, SCOPE, ds, batch, { now: NOW });
    }
    await store.close();
    console.log(`loaded ${PROFILES} profiles and events in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });
  after(async () => handle?.dispose());

  test("in process the same requests stall /healthz and org B; in the pool they stay fast", async () => {
    // First the pool disabled (the sensitivity of the measure: the same work on the event loop breaks the bounds) …
    const inline = await measure(handle, 0, 0);
    assert.ok(p99(inline.health) > 50, `on the main thread /healthz ${show(inline.health)}: the load does not stall the event loop`);
    // … then the pool.
    const pooled = await measure(handle, 1, 1);
    assert.ok(pooled.health.length >= 100 && pooled.other.length >= 50, `too few samples: ${pooled.health.length} / ${pooled.other.length}`);
    assert.ok(p99(pooled.health) <= 50, `/healthz ${show(pooled.health)}; bound 50 ms`);
    assert.ok(p99(pooled.other) <= 100, `org B's definition list ${show(pooled.other)}; bound 100 ms`);
  });
});
