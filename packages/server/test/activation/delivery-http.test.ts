// The deliverer as the server wires it (activation plugin's hook): a webhook flow created through
// the Flow Service API, transitions written to the profile store, a real receiver in its own
// process gets them signed with the secret the API returned once; the flow's stats show them.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import fp from "fastify-plugin";
import { Registry } from "prom-client";
import { activationPlugin } from "../../src/activation/http/plugin.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { SystemClock } from "../../src/platform/clock.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { arr, client, obj, ORG_A, testConfig } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { openProfileStore } from "../../src/profiles/open.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import { killAll } from "../helpers/spawn.js";
import { received, startReceiver, until, type Receiver } from "./delivery-harness.js";

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };

describe("delivery through the activation plugin", { timeout: 60_000 }, () => {
  let handle: TestStoreHandle;
  let profiles: ProfileStore;
  let app: FastifyInstance;
  let url = "";
  let dir: string;
  let receiver: Receiver;
  const registry = new Registry();

  before(async () => {
    handle = await createTestStore("act-deliver");
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-http-"));
    receiver = await startReceiver(path.join(dir, "r.ndjson"));
    profiles = openProfileStore({ dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }) });
    const config = testConfig(handle);
    const clock = new SystemClock();
    app = Fastify({ logger: false });
    installErrorHandling(app);
    installBodyParsing(app);
    await app.register(fp(async () => {}, { name: "segmentd-profiles" }));
    await app.register(activationPlugin, {
      authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config),
      dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }),
      activation: { allowPrivateNetworks: true }, clock, profiles, metrics: registry,
      audiences: async (_t, ids) => new Map(ids.filter((id) => id.startsWith("aud-")).map((id) => [id, `Audience ${id}`])),
    });
    url = await app.listen({ port: 0, host: "127.0.0.1" });
  });

  after(async () => {
    await app.close();
    await profiles.close();
    killAll();
    if (handle.databaseUrl !== undefined) {
      // The delivery state's schema sits next to the test schema (moduleSchema): dropped with it.
      const schema = /search_path=([a-z0-9_]+)/.exec(decodeURIComponent(handle.databaseUrl))![1]!;
      const u = new URL(handle.databaseUrl);
      u.search = "";
      if (u.username === "") u.username = process.env["PGUSER"] || process.env["USER"] || os.userInfo().username;
      const c = new pg.Client({ connectionString: u.toString() });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}_delivery" CASCADE`);
      await c.end();
    }
    await handle.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a flow created over HTTP delivers its audience's transitions, signed with the secret returned at creation", async () => {
    const a = client(url);
    const conn = await a.post(`${F}/connections`, { name: "c", connectionSpec: WEBHOOK });
    const tgt = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: obj(conn.json).id, connectionSpec: WEBHOOK, params: { httpEndpoint: receiver.url } });
    const f = await a.post(`${F}/flows`, {
      name: "f", targetConnectionIds: [obj(tgt.json).id],
      transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: "aud-1" } }] } } }],
    });
    assert.equal(f.status, 201, f.text);
    const flowId = String(obj(f.json).id);
    const secret = String(obj(f.json).signingSecret);
    assert.match(secret, /^whsec_/);
    const scope = { orgId: ORG_A, sandboxName: "prod" };
    // Written right after the 201: the API answers once the flow is delivered from a fixed log
    // position, so these arrive as transitions (with their log positions), not folded into a snapshot.
    const now = Date.now();
    await profiles.applyMembershipChanges(scope, [
      { profileId: "11", definitionId: "aud-1", status: "realized", source: "streaming", at: now },
      { profileId: "12", definitionId: "aud-2", status: "realized", source: "streaming", at: now },
    ]);
    await until(() => received(receiver.log, secret).length > 0, "the delivery", 20_000);
    const rs = received(receiver.log, secret);
    assert.ok(rs.every((r) => r.signed));
    assert.ok(rs.every((r) => r.webhookId.startsWith(`msg_${flowId}_`)));
    assert.deepEqual(rs.flatMap((r) => r.profiles.map((p) => [p.profileId, p.ups])), [["11", { "aud-1": { status: "realized", lastQualificationTime: new Date(now).toISOString() } }]]);
    assert.equal(rs.flatMap((r) => r.profiles.flatMap((p) => p.seqs)).length, 1, "sent as a transition, with its log position");
    await until(async () => obj(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).deliveryStats).sent === 1, "the flow's stats", 10_000);
    assert.match(await registry.metrics(), new RegExp(`segmentd_delivery_sent_total\\{flow="${flowId}"\\} 1`));
  });
});
