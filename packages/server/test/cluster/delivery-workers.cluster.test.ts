// Issue #38, acceptance 2, in cluster mode: a hub with two streaming workers (processes, over a
// nats-server of the test's own and PostgreSQL); the workers write the transitions, the hub
// delivers them from the log to a webhook flow created over its API. While records and events
// stream in, a worker is killed with kill -9 five times and started again each time. Then (every
// acknowledged write evaluated, delivery idle) the transitions the receiver got equal the log —
// nothing missing, nothing extra, per profile in log order, each position under one webhook-id —
// and the log holds what the API acknowledged.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { openProfileStore } from "../../src/profiles/open.js";
import type { LoggedTransition, ProfileStore } from "../../src/profiles/store.js";
import { killAll } from "../helpers/spawn.js";
import { testDatabaseUrl } from "../helpers/test-store.js";
import { deploy, KEY, ORG, TOKEN, type Deployment } from "../helpers/workers-run.js";
import { assertEqualsLog, createWebhookFlow, flowLive, missingSeqs, settledStats } from "../activation/crash-checks.js";
import { received, startReceiver, until, type Receiver } from "../activation/delivery-harness.js";
import { ackedNotInLog, IngestLoad, PURCHASE } from "../activation/ingest-load.js";

const PARTITIONS = 8;
const KILLS = 5;
const SCOPE = { orgId: ORG, sandboxName: "prod" };
const HEADERS = { authorization: `Bearer ${TOKEN}`, "x-api-key": KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "prod", "content-type": "application/json" };

describe("kill -9 of a streaming worker during delivery (hub + 2 workers, nats-server, PostgreSQL)", { timeout: 240_000 }, () => {
  let d: Deployment;
  let dir: string;
  let receiver: Receiver;
  let store: ProfileStore | null = null;

  before(async () => {
    d = await deploy("workers", "dlvkill", PARTITIONS, { config: { activation: { allowPrivateNetworks: true } }, testClock: false });
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-workers-"));
    receiver = await startReceiver(path.join(dir, "receiver.ndjson"));
  });

  after(async () => {
    await store?.close();
    killAll();
    await d.close().catch(() => {});
    // The module schemas close() does not know (`_delivery`, …).
    const u = new URL(testDatabaseUrl());
    if (u.username === "") u.username = process.env["PGUSER"] || "postgres";
    const c = new pg.Client({ connectionString: u.toString() });
    await c.connect();
    for (const r of (await c.query<{ nspname: string }>("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)", [`${d.schema}_`])).rows) await c.query(`DROP SCHEMA IF EXISTS "${r.nspname}" CASCADE`);
    await c.end();
    rmSync(dir, { recursive: true, force: true });
  });

  test("five kills of a worker while events stream in: the receiver's transitions equal the log", async () => {
    const t0 = Date.now();
    const workers = [await d.startWorker("w1"), await d.startWorker("w2")];
    const dataset = async (name: string, cls: string) => {
      const r = await d.call("POST", "/data/foundation/catalog/dataSets", { name, schemaRef: { id: `https://ns.adobe.com/xdm/context/${cls}`, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] } });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      return String((r.json as string[])[0]).replace("@/dataSets/", "");
    };
    const crm = await dataset("CRM", "profile");
    const web = await dataset("Web", "experienceevent");
    const define = async (name: string, value: string) => {
      const r = await d.call("POST", "/data/core/ups/segment/definitions", { name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value },
        evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return (r.json as { id: string }).id;
    };
    const aud = {
      us: await define("US", 'homeAddress.countryCode = "US"'),
      fr: await define("FR", 'homeAddress.countryCode = "FR"'),
      buyers: await define("two purchases", `xEvent[eventType = "${PURCHASE}" and timestamp occurs < 1 hours before now].count() >= 2`),
    };
    const audiences = Object.values(aud);
    const flow = await createWebhookFlow(d.call, "crm", receiver.url, audiences, { maxBatchSize: 20, maxWaitMs: 50, concurrency: 4, retryPeriodMs: 60_000, timeoutMs: 1000 });
    const delivered = () => received(receiver.log, flow.secret);
    await flowLive(d.call, flow.flowId);

    // The hub is never killed: the load runs throughout; a worker dies five times under it.
    const load = new IngestLoad(300, 4, 8, 11);
    let stopped = false;
    const writing = load.run({ url: d.hub.url, headers: HEADERS, profileDataset: crm, eventDataset: web }, () => stopped, undefined);
    const rounds: string[] = [];
    for (let k = 0; k < KILLS; k++) {
      const ackedBefore = load.acked;
      const deliveredBefore = delivered().length;
      await until(() => load.acked - ackedBefore >= 150 && delivered().length > deliveredBefore, `round ${k}: writes acknowledged and delivered`, 60_000);
      await new Promise((r) => setTimeout(r, Math.random() * 1500));
      const victim = workers[Math.floor(Math.random() * workers.length)]!;
      await victim.kill();
      const exit = await victim.proc.exited;
      // A worker that ended on its own (a crash) would not be this test's kill: its output says why.
      assert.equal(exit.signal, "SIGKILL", `the worker exited by itself (${JSON.stringify(exit)}):\n${victim.proc.stderr().slice(-4000)}\n${victim.proc.stdout().slice(-2000)}`);
      const down = Date.now();
      await new Promise((r) => setTimeout(r, 500 + Math.random() * 1500));
      await victim.start();
      rounds.push(`kill ${k}: ${victim === workers[0] ? "w1" : "w2"}, down ${Date.now() - down} ms, ${load.acked - ackedBefore} acked this round`);
    }
    stopped = true;
    await writing;
    assert.equal(load.pendingRetries, 0, `every profile record acknowledged (the hub stayed up): ${JSON.stringify([...load.refused])}`);
    const writtenAt = Date.now();

    // Every acknowledged write evaluated: the log agrees with what the API acknowledged, and stops growing.
    store = openProfileStore({ dataDir: d.dir, databaseUrl: d.databaseUrl });
    const s = store;
    const readLog = () => s.readTransitionLog(SCOPE, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: audiences, limit: 1_000_000 });
    const pidOf = (ecid: string) => s.findProfileId(SCOPE, { namespace: "ecid", id: ecid });
    let log: LoggedTransition[] = [];
    let wrong: string[] = [];
    await until(async () => {
      log = await readLog();
      wrong = await ackedNotInLog(load, log, aud, pidOf);
      return wrong.length === 0;
    }, "the workers evaluated every acknowledged write", 90_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: ${wrong.length} disagree, e.g. ${wrong.slice(0, 5).join("; ")}`);
    });
    const evaluatedMs = Date.now() - writtenAt;
    let stable = 0;
    await until(async () => {
      const n = (await readLog()).length;
      stable = n === log.length ? stable + 1 : 0;
      if (n !== log.length) log = await readLog();
      return stable >= 20; // 2 s without a new transition
    }, "the log to stop growing", 30_000);
    assert.ok(log.length > 300, `a real log (${log.length} transitions)`);

    await until(() => missingSeqs(log, delivered()).length === 0, "every logged transition at the receiver", 90_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: missing ${missingSeqs(log, delivered()).length} of ${log.length}\n${d.hub.proc.stderr().slice(-3000)}`);
    });
    const drainedMs = Date.now() - writtenAt;
    assert.equal((await readLog()).length, log.length, "no transition written after the log was read");
    const f = assertEqualsLog("receiver", log, delivered());
    const stats = await settledStats(d.call, flow.flowId);
    assert.deepEqual([stats.dead, stats.retrying], [0, 0], "no dead letters, nothing waiting for a retry");
    process.stdout.write(`# ${log.length} transitions, ${load.acked} messages acknowledged, ${load.unanswered} unanswered; evaluated ${evaluatedMs} ms and delivered ${drainedMs} ms after the last write; ${Date.now() - t0} ms in all\n# ${rounds.join("\n# ")}\n# receiver: ${f.requests} requests, ${f.positions} positions, ${f.duplicates} carried again; stats ${JSON.stringify(stats)}\n`);
  });
});
