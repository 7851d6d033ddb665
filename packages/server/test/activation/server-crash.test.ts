// Issue #38, acceptance 2, with the real server: kill -9 of the server five times while it ingests,
// evaluates and delivers, restarted each time on the same data (the store SEGMENTD_TEST_STORE
// picks). Two webhook flows are created over the Flow Service API, to two receiver processes (one
// healthy, one failing 30 % of requests); audiences change through the public API only: streaming
// ingestion of profile records and events (continuous audiences) and batch segment jobs. At the
// end (server up, delivery idle) the transitions each receiver got equal the transition log —
// nothing missing, nothing extra, per profile in log order, each log position under one
// webhook-id — and what the API acknowledged is in the log: each profile's last acknowledged
// record decides its audiences, two acknowledged purchases put it in the buyers audience.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { openProfileStore } from "../../src/profiles/open.js";
import type { LoggedTransition } from "../../src/profiles/store.js";
import { childFixture, type ChildFixture } from "../helpers/child-fixture.js";
import { API_KEY, DEFS, ORG_A, TOKEN_A, client, obj, runSegmentJob } from "../helpers/server-harness.js";
import { testDatabaseUrl, testStoreKind } from "../helpers/test-store.js";
import { assertEqualsLog, createWebhookFlow, flowLive, missingSeqs, settledStats } from "./crash-checks.js";
import { received, startReceiver, until, type Receiver } from "./delivery-harness.js";
import { ackedNotInLog, IngestLoad, PURCHASE, type IngestTarget } from "./ingest-load.js";

const KIND = testStoreKind();
const KILLS = 5;
const SCOPE = { orgId: ORG_A, sandboxName: "prod" };
const HEADERS = { authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod", "content-type": "application/json" };
/** Messages acknowledged in a round before its kill may come (a count, not a time: a loaded host is slower). */
const ACKS_PER_ROUND = 150;
const DELIVERY = { maxBatchSize: 20, maxWaitMs: 50, concurrency: 4, retryPeriodMs: 60_000, timeoutMs: 1000 };

describe(`kill -9 of the server during delivery (${KIND})`, { timeout: 240_000 }, () => {
  let fx: ChildFixture;
  let dir: string;
  const receivers: Record<string, Receiver> = {};

  before(async () => {
    fx = await childFixture("srvcrash", { activation: { allowPrivateNetworks: true } });
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-server-crash-"));
    receivers.healthy = await startReceiver(path.join(dir, "healthy.ndjson"));
    receivers.flaky = await startReceiver(path.join(dir, "flaky.ndjson"), { failRate: 0.3 });
  });

  after(async () => {
    await fx.dispose();
    if (fx.store.databaseUrl !== undefined) {
      // The server's module schemas sit next to the test schema (`<schema>_profiles`, `_delivery`, …).
      const schema = /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(fx.store.databaseUrl))![1]!;
      const u = new URL(testDatabaseUrl());
      if (u.username === "") u.username = process.env["PGUSER"] || "postgres";
      const c = new pg.Client({ connectionString: u.toString() });
      await c.connect();
      const rows = (await c.query<{ nspname: string }>("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)", [`${schema}_`])).rows;
      for (const r of rows) await c.query(`DROP SCHEMA IF EXISTS "${r.nspname}" CASCADE`);
      await c.end();
    }
    rmSync(dir, { recursive: true, force: true });
  });

  test("five kills while ingesting and delivering: each receiver's transitions equal the log, acknowledged writes included", async () => {
    const t0 = Date.now();
    let server = await fx.start();
    const api = () => client(server.url);
    const call = (method: string, url: string, body?: unknown) => api().call(method, url, body);

    // Datasets, audiences (three continuous, one batch) and the two flows, all over HTTP.
    const dataset = async (name: string, cls: string) => {
      const r = await call("POST", "/data/foundation/catalog/dataSets", { name, schemaRef: { id: `https://ns.adobe.com/xdm/context/${cls}`, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] } });
      assert.equal(r.status, 201, r.text);
      return String((r.json as string[])[0]).replace("@/dataSets/", "");
    };
    const crm = await dataset("CRM", "profile");
    const web = await dataset("Web", "experienceevent");
    const define = async (name: string, value: string, continuous: boolean) => {
      const r = await call("POST", DEFS, { name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value },
        evaluationInfo: { batch: { enabled: !continuous }, continuous: { enabled: continuous }, synchronous: { enabled: false } } });
      assert.equal(r.status, 200, r.text);
      return String(obj(r.json).id);
    };
    const aud = {
      us: await define("US (streaming)", 'homeAddress.countryCode = "US"', true),
      fr: await define("FR (streaming)", 'homeAddress.countryCode = "FR"', true),
      buyers: await define("two purchases (streaming)", `xEvent[eventType = "${PURCHASE}" and timestamp occurs < 1 hours before now].count() >= 2`, true),
      de: await define("DE (batch)", 'homeAddress.countryCode = "DE"', false),
    };
    const audiences = Object.values(aud);
    const flows: Record<string, { flowId: string; secret: string }> = {};
    for (const n of ["healthy", "flaky"]) flows[n] = await createWebhookFlow(call, n, receivers[n]!.url, audiences, DELIVERY);
    // Writes start once the deliverer holds both flows (their start position in the log is fixed).
    const liveMs = [await flowLive(call, flows.healthy!.flowId), await flowLive(call, flows.flaky!.flowId)];
    const target = (): IngestTarget => ({ url: server.url, headers: HEADERS, profileDataset: crm, eventDataset: web });
    const delivered = (n: string) => received(receivers[n]!.log, flows[n]!.secret);

    // Five rounds: ingest (and a batch job) until enough is acknowledged and delivery is under way, then kill -9 at a random moment.
    const load = new IngestLoad(300, 4, 8);
    const rounds: string[] = [];
    const jobIds: string[] = [];
    for (let k = 0; k < KILLS; k++) {
      if (k > 0) server = await fx.start();
      const startedAt = Date.now();
      const deliveredBefore = delivered("healthy").length;
      const ackedBefore = load.acked;
      let stopped = false;
      const writing = load.run(target(), () => stopped);
      // A batch job in the middle of the round (not awaited: the kill may interrupt it).
      const job = new Promise((r) => setTimeout(r, 300 + Math.random() * 700)).then(() => call("POST", "/data/core/ups/segment/jobs", { segments: [{ segmentId: "*" }] }))
        .then((r) => void (r.status === 200 && jobIds.push(String(obj(r.json).id))), () => undefined);
      await until(() => load.acked - ackedBefore >= ACKS_PER_ROUND && delivered("healthy").length > deliveredBefore, `round ${k}: ${ACKS_PER_ROUND} acknowledged messages and deliveries`, 60_000);
      // Rounds 1 and 3 are killed once their batch job was accepted (it may still be running), the others at a random moment.
      if (k % 2 === 1) await job;
      else await new Promise((r) => setTimeout(r, Math.random() * 1500));
      server.s.child.kill("SIGKILL");
      assert.equal((await server.s.exited).signal, "SIGKILL");
      stopped = true;
      await writing;
      await job;
      rounds.push(`round ${k}: ${load.acked - ackedBefore} acked, ${delivered("healthy").length - deliveredBefore} healthy requests, ${Date.now() - startedAt} ms`);
    }

    // Up again: the unanswered records are sent again, a last batch job runs; then nothing more is written.
    server = await fx.start();
    for (let i = 0; i < 5 && load.pendingRetries > 0; i++) await load.run(target(), () => false, () => {}, true);
    assert.equal(load.pendingRetries, 0, "every profile record acknowledged in the end");
    await runSegmentJob(api());
    const writtenAt = Date.now();
    // The jobs the kills met: each ended (succeeded, or failed as interrupted at the restart).
    const jobs = new Map<string, number>();
    for (const id of jobIds) {
      const st = String(obj((await call("GET", `/data/core/ups/segment/jobs/${id}`)).json).status);
      jobs.set(st, (jobs.get(st) ?? 0) + 1);
    }

    const store = openProfileStore({ dataDir: fx.store.dataDir, ...(fx.store.databaseUrl === undefined ? {} : { databaseUrl: fx.store.databaseUrl }), worker: false });
    let log: LoggedTransition[];
    try {
      log = await store.readTransitionLog(SCOPE, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: audiences, limit: 1_000_000 });
      // What the API acknowledged is in the log: per profile and audience, the last logged transition is the acknowledged state.
      const wrong = await ackedNotInLog(load, log, aud, (ecid) => store.findProfileId(SCOPE, { namespace: "ecid", id: ecid }));
      assert.deepEqual(wrong, [], "acknowledged writes and the transition log agree");
    } finally {
      await store.close();
    }
    assert.ok(log.length > 500, `a real log (${log.length} transitions)`);

    // Delivery catches up with the whole log at both receivers.
    await until(() => missingSeqs(log, delivered("healthy")).length === 0 && missingSeqs(log, delivered("flaky")).length === 0, "every logged transition at both receivers", 120_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: missing healthy ${missingSeqs(log, delivered("healthy")).length}, flaky ${missingSeqs(log, delivered("flaky")).length} of ${log.length}\n${server.s.stderr().slice(-3000)}`);
    });
    const drainedMs = Date.now() - writtenAt;
    const figures: string[] = [];
    for (const n of ["healthy", "flaky"]) {
      const f = assertEqualsLog(n, log, delivered(n));
      const stats = await settledStats(call, flows[n]!.flowId);
      assert.deepEqual([stats.dead, stats.retrying], [0, 0], `${n}: no dead letters, nothing waiting for a retry`);
      figures.push(`${n}: ${f.requests} requests, ${f.positions} positions, ${f.duplicates} carried again; stats ${JSON.stringify(stats)}`);
    }
    server.s.child.kill("SIGTERM");
    assert.equal((await server.s.exited).code, 0, server.s.stderr().slice(-2000));
    process.stdout.write(`# ${KIND}: ${log.length} transitions, ${load.acked} messages acknowledged (${load.ackedIds.size} events), ${load.unanswered} unanswered; drained ${drainedMs} ms after the last write; flows live ${liveMs.join("/")} ms after their 201; batch jobs during the rounds ${JSON.stringify(Object.fromEntries(jobs))}; ${Date.now() - t0} ms in all\n# ${rounds.join("\n# ")}\n# ${figures.join("\n# ")}\n`);
  });
});
