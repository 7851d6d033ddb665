/**
 * The activation plugin's deliverer hook: started once the app is ready with the
 * directory and the safety setting, stopped before the store closes; its reports feed
 * flow stats (deliveryStats), runs (GET /runs, /runs/{id}) and resend — each scoped to
 * the caller's sandbox. A stand-in deliverer records what it was asked.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import Fastify, { type FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { activationPlugin, type DelivererDeps, type StartDeliverer } from "../../src/activation/http/plugin.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import type { DeliveryReports, TenantScope } from "../../src/activation/types.js";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { SystemClock } from "../../src/platform/clock.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { arr, client, obj, ORG_A, ORG_B, testConfig, TOKEN_B, type Client } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };

describe("deliverer hook", () => {
  let handle: TestStoreHandle;
  let app: FastifyInstance;
  let url = "";
  const calls: string[] = [];
  let started: DelivererDeps | undefined;
  let stopped = false;
  const runOf = (scope: TenantScope, flowId: string) => ({ id: `run-${flowId}`, flowId, sandboxName: scope.sandboxName, metrics: { recordSummary: { outputRecordCount: 3 } } });
  const reports: DeliveryReports = {
    stats: async (scope, flowId) => {
      calls.push(`stats ${scope.orgId} ${flowId}`);
      return { sent: 3, failed: 1, retrying: 0, dead: 0, lagSeconds: 0.5, lastError: { at: "2026-01-01T00:00:00.000Z", message: "HTTP 500", status: 500 } };
    },
    runs: async (scope, flowId, q) => {
      calls.push(`runs ${scope.orgId} ${flowId} ${q.offset} ${q.limit}`);
      return { items: [runOf(scope, flowId)], total: 1 };
    },
    resend: async (scope, flowId, audienceIds) => {
      calls.push(`resend ${scope.orgId} ${flowId} ${JSON.stringify(audienceIds ?? null)}`);
      return { runId: `resend-${flowId}` };
    },
    deadLetters: async (scope, flowId) => {
      calls.push(`dead ${scope.orgId} ${flowId}`);
      return [{ unitId: "l7", webhookId: `msg_${flowId}_l7`, items: 2, attempts: 9, lastError: { at: "2026-01-01T00:00:00.000Z", message: "HTTP 500", status: 500 } }];
    },
    replayDead: async (scope, flowId, unitIds) => {
      calls.push(`replay ${scope.orgId} ${flowId} ${JSON.stringify(unitIds ?? null)}`);
      return unitIds?.length ?? 1;
    },
  };

  async function openApp(startDeliverer: StartDeliverer | null): Promise<{ app: FastifyInstance; url: string }> {
    const config = testConfig(handle);
    const clock = new SystemClock();
    const app = Fastify({ logger: false });
    installErrorHandling(app);
    installBodyParsing(app);
    // The plugin depends on the profile plane; a stand-in of that name satisfies the check.
    await app.register(fp(async () => {}, { name: "segmentd-profiles" }));
    await app.register(activationPlugin, {
      authenticator: new Authenticator(config.auth, clock),
      tenants: new TenantDirectory(config),
      dataDir: handle.dataDir,
      ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }),
      activation: { allowPrivateNetworks: true },
      clock,
      audiences: async (_t, ids) => new Map(ids.filter((id) => id.startsWith("aud-")).map((id) => [id, `Audience ${id}`])),
      startDeliverer,
    });
    return { app, url: await app.listen({ port: 0, host: "127.0.0.1" }) };
  }

  before(async () => {
    handle = await createTestStore("act-hook");
    ({ app, url } = await openApp((deps) => {
      started = deps;
      return { stop: async () => void (stopped = true), reports };
    }));
  });
  after(async () => {
    await app.close();
    assert.equal(stopped, true, "the deliverer is stopped when the app closes");
    await handle.dispose();
  });

  async function flow(c: Client): Promise<string> {
    const conn = await c.post(`${F}/connections`, { name: "c", connectionSpec: WEBHOOK });
    const tgt = await c.post(`${F}/targetConnections`, { name: "t", baseConnectionId: obj(conn.json).id, connectionSpec: WEBHOOK, params: { httpEndpoint: "http://127.0.0.1:9/hook" } });
    const f = await c.post(`${F}/flows`, {
      name: "f", targetConnectionIds: [obj(tgt.json).id],
      transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: "aud-1" } }, { type: "PLATFORM_SEGMENT", value: { id: "aud-2" } }] } } }],
    });
    assert.equal(f.status, 201, f.text);
    return String(obj(f.json).id);
  }

  test("started with the directory; reports serve stats, runs and resend for the caller's sandbox only", async () => {
    assert.ok(started, "started once the app was ready");
    assert.equal(started.allowPrivateNetworks, true);
    assert.equal(started.directory, app.activation!.directory);
    const a = client(url);
    const b = client(url, { token: TOKEN_B, org: ORG_B });
    const flowId = await flow(a);
    assert.deepEqual((await started.directory.listEnabled()).map((d) => d.flowId), [flowId]);

    const got = obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]);
    assert.deepEqual(got.deliveryStats, { sent: 3, failed: 1, retrying: 0, dead: 0, lagSeconds: 0.5, lastError: { at: "2026-01-01T00:00:00.000Z", message: "HTTP 500", status: 500 } });
    assert.deepEqual(obj(arr(obj((await a.get(`${F}/flows`)).json).items)[0]).deliveryStats, got.deliveryStats);
    const runs = obj((await a.get(`${F}/runs?property=flowId==${flowId}&limit=5`)).json);
    assert.deepEqual(runs.items, [runOf({ orgId: ORG_A, sandboxName: "prod" }, flowId)]);
    const one = await a.get(`${F}/runs/run-${flowId}`);
    assert.equal(one.status, 200, one.text);
    assert.equal(obj(arr(obj(one.json).items)[0]).flowId, flowId);
    const resend = await a.post(`${F}/flows/${flowId}/resend`, { audienceIds: ["aud-2"] });
    assert.equal(resend.status, 202, resend.text);
    assert.deepEqual(resend.json, { runId: `resend-${flowId}` });
    assert.equal((await a.post(`${F}/flows/${flowId}/resend`)).status, 202, "the body is optional");

    // Organization B reaches none of it, and the deliverer is never asked on its behalf about A's flow.
    const before = calls.length;
    assert.equal((await b.get(`${F}/flows/${flowId}`)).status, 404);
    assert.deepEqual(obj((await b.get(`${F}/runs?property=flowId==${flowId}`)).json).items, []);
    assert.equal((await b.get(`${F}/runs/run-${flowId}`)).status, 404);
    assert.equal((await b.post(`${F}/flows/${flowId}/resend`, {})).status, 404);
    assert.deepEqual(calls.slice(before), []);
    assert.deepEqual(calls.filter((c) => c.startsWith("resend")), [`resend ${ORG_A} ${flowId} ["aud-2"]`, `resend ${ORG_A} ${flowId} null`]);

    // Without a deliverer: no runs, and resend is unavailable.
    const bare = await openApp(null);
    try {
      const c = client(bare.url);
      const id = await flow(c);
      assert.equal(bare.app.activation!.reports(), undefined);
      assert.deepEqual(obj((await c.get(`${F}/runs?property=flowId==${id}`)).json).items, []);
      assert.equal((await c.get(`${F}/runs/anything`)).status, 404);
      const r503 = await c.post(`${F}/flows/${id}/resend`, {});
      assert.equal(r503.status, 503);
      assert.deepEqual(obj(arr(obj(obj(r503.json).errors)["503"])[0]), { code: "SEGMENTD-UNAVAILABLE-503", message: "Delivery is not running in this server" });
      assert.equal(obj(arr(obj((await c.get(`${F}/flows/${id}`)).json).items)[0]).deliveryStats, undefined);
    } finally {
      await bare.app.close();
    }

    // A disabled flow is not resent.
    assert.equal((await a.post(`${F}/flows/${flowId}/action?op=disable`)).status, 200);
    const r = await a.post(`${F}/flows/${flowId}/resend`, {});
    assert.equal(r.status, 409);
    assert.equal(obj(arr(obj(obj(r.json).errors)["409"])[0]).message, `Flow '${flowId}' is disabled; enable it before resending`);
  });

  test("dead letters are listed and replayed for the caller's sandbox only; bad bodies are refused before the deliverer is asked", async () => {
    const a = client(url);
    const b = client(url, { token: TOKEN_B, org: ORG_B });
    const flowId = await flow(a);
    const listed = await a.get(`${F}/flows/${flowId}/deadLetters`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(obj(listed.json).items, [{ unitId: "l7", webhookId: `msg_${flowId}_l7`, items: 2, attempts: 9, lastError: { at: "2026-01-01T00:00:00.000Z", message: "HTTP 500", status: 500 } }]);
    const all = await a.post(`${F}/flows/${flowId}/deadLetters/replay`);
    assert.equal(all.status, 202, all.text);
    assert.deepEqual(all.json, { replayed: 1 });
    const some = await a.post(`${F}/flows/${flowId}/deadLetters/replay`, { unitIds: ["l7", "l9"] });
    assert.deepEqual([some.status, some.json], [202, { replayed: 2 }]);
    assert.deepEqual(calls.filter((c) => c.startsWith("replay")), [`replay ${ORG_A} ${flowId} null`, `replay ${ORG_A} ${flowId} ["l7","l9"]`]);

    const before = calls.length;
    const wrong = await a.post(`${F}/flows/${flowId}/deadLetters/replay`, { unitIds: "l7" });
    assert.equal(wrong.status, 400, wrong.text);
    const extra = await a.post(`${F}/flows/${flowId}/deadLetters/replay`, { unitIds: [], everything: true });
    assert.equal(extra.status, 400, extra.text);
    assert.equal((await b.get(`${F}/flows/${flowId}/deadLetters`)).status, 404);
    assert.equal((await b.post(`${F}/flows/${flowId}/deadLetters/replay`, {})).status, 404);
    assert.equal((await a.get(`${F}/flows/no-such-flow/deadLetters`)).status, 404);
    assert.deepEqual(calls.slice(before), [], "the deliverer was not asked");

    assert.equal((await a.post(`${F}/flows/${flowId}/action?op=disable`)).status, 200);
    const r = await a.post(`${F}/flows/${flowId}/deadLetters/replay`, {});
    assert.equal(r.status, 409);
    assert.equal(obj(arr(obj(obj(r.json).errors)["409"])[0]).message, `Flow '${flowId}' is disabled; enable it before replaying`);
  });
});
