// The NATS JetStream destination against a real nats-server (its own, on a free port, JetStream
// in a temp folder): a flow created over HTTP publishes every transition to its own stream, one
// message per transition, per profile in log order, under a stable Nats-Msg-Id; nats-server
// killed (SIGKILL) and restarted mid-delivery loses nothing and the stream holds each transition
// once; bad input gets its exact 400/404 with nothing stored. Runs on SEGMENTD_TEST_STORE's store.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import { activationPlugin } from "../../src/activation/http/plugin.js";
import { natsStreamName, type NatsMessage } from "../../src/activation/delivery/nats-sender.js";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { SystemClock } from "../../src/platform/clock.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import type { MembershipChange } from "../../src/profiles/store.js";
import { arr, client, DEFS, definitionBody, obj, ORG_A, ORG_B, PROFILE_CLASS, profileDataset, startHarness, xdmMessage, testConfig, TOKEN_B, type Client, type Harness, type Res } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { TestDirectory, until } from "./delivery-harness.js";
import { startDeliverer } from "../../src/activation/delivery/deliverer.js";
import { assertPublicTarget } from "../../src/activation/url-safety.js";
import type { Dataflow } from "../../src/activation/types.js";

const F = "/data/foundation/flowservice";
const NATS = { id: CONNECTION_SPEC_IDS.nats, version: "1.0" };
const scope = { orgId: ORG_A, sandboxName: "prod" };

function errorOf(r: Res): { status: number; code: unknown; message: unknown } {
  const items = arr(obj(obj(r.json).errors)[String(r.status)]);
  return { status: r.status, code: obj(items[0]).code, message: obj(items[0]).message };
}

async function counts(c: Client): Promise<number[]> {
  const out: number[] = [];
  for (const p of ["/connections", "/targetConnections", "/flows"]) out.push(arr(obj((await c.get(F + p)).json).items).length);
  return out;
}

const flowBody = (targetId: string, audiences: string[], delivery: Record<string, number> = {}, attrs: string[] = []) => ({
  name: "to the members stream",
  targetConnectionIds: [targetId],
  transformations: [{ name: "GeneralTransform", params: {
    segmentSelectors: { selectors: audiences.map((id) => ({ type: "PLATFORM_SEGMENT", value: { id } })) },
    profileSelectors: { selectors: attrs.map((path) => ({ type: "JSON_PATH", value: { path, operator: "EXISTS" } })) },
  } }],
  delivery: { maxBatchSize: 20, maxWaitMs: 20, retryPeriodMs: 60_000, timeoutMs: 1000, ...delivery },
});

/** A NATS connection, target and flow over HTTP; the flow's id. */
async function natsFlow(c: Client, params: Record<string, unknown>, audiences: string[], delivery: Record<string, number> = {}, attrs: string[] = []): Promise<string> {
  return (await natsFlowAndTarget(c, params, audiences, delivery, attrs)).flowId;
}

async function natsFlowAndTarget(c: Client, params: Record<string, unknown>, audiences: string[], delivery: Record<string, number>, attrs: string[]): Promise<{ flowId: string; targetId: string }> {
  const conn = await c.post(`${F}/connections`, { name: "nats", connectionSpec: NATS });
  assert.equal(conn.status, 201, conn.text);
  const tgt = await c.post(`${F}/targetConnections`, { name: "members", baseConnectionId: obj(conn.json).id, connectionSpec: NATS, params });
  assert.equal(tgt.status, 201, tgt.text);
  const f = await c.post(`${F}/flows`, flowBody(String(obj(tgt.json).id), audiences, delivery, attrs));
  assert.equal(f.status, 201, f.text);
  assert.equal(obj(f.json).signingSecret, undefined, "a NATS flow has no signing secret");
  return { flowId: String(obj(f.json).id), targetId: String(obj(tgt.json).id) };
}

interface Stored {
  streamSeq: number;
  msgId: string;
  subject: string;
  body: NatsMessage;
}

/** Every message of the stream, in stream order, read by a JetStream consumer. */
async function readStream(nc: NatsConnection, jsm: JetStreamManager, name: string): Promise<Stored[]> {
  const last = (await jsm.streams.info(name)).state.last_seq;
  const consumer = await jetstream(nc).consumers.get(name, { deliver_policy: DeliverPolicy.All });
  const out: Stored[] = [];
  let seq = 0;
  while (seq < last) {
    const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
    for await (const m of batch) {
      out.push({ streamSeq: m.seq, msgId: m.headers?.get("Nats-Msg-Id") ?? "", subject: m.subject, body: m.json<NatsMessage>() });
      seq = m.seq;
      if (seq >= last) break;
    }
  }
  return out;
}

async function storedCount(jsm: JetStreamManager, name: string): Promise<number> {
  try {
    return (await jsm.streams.info(name)).state.messages;
  } catch {
    return 0;
  }
}

/** Each transition once, its id stable, and per profile in log order (the order of `seq`). */
function assertLogOrder(stored: Stored[], flowId: string, expected: number[]): void {
  const logged = stored.filter((s) => s.body.seq !== null);
  assert.deepEqual(logged.map((s) => s.body.seq).sort((x, y) => x! - y!), [...expected].sort((x, y) => x - y), "every transition, each once");
  for (const s of logged) assert.equal(s.msgId, `${flowId}:${s.body.seq}`, "Nats-Msg-Id = flow and log position");
  assert.equal(new Set(stored.map((s) => s.msgId)).size, stored.length, "no message id twice in the stream");
  const perProfile = new Map<string, number[]>();
  for (const s of logged) perProfile.set(s.body.profileId, [...(perProfile.get(s.body.profileId) ?? []), s.body.seq!]);
  for (const [p, seqs] of perProfile) assert.deepEqual(seqs, [...seqs].sort((x, y) => x - y), `profile ${p} in log order`);
}

describe("NATS JetStream destination", { timeout: 240_000 }, () => {
  let dir: string;
  let nats: RunningNatsServer;
  let h: Harness;
  let a: Client;
  let b: Client;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const audiences: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-nats-dest-"));
    nats = await startNatsServer({ dir: path.join(dir, "nats"), domain: "dest" });
    h = await startHarness("act-nats", { patch: (c) => void (c.activation = { allowPrivateNetworks: true }) });
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    for (const name of ["US", "FR", "kill", "attrs"]) audiences.push(String(obj((await a.post(DEFS, definitionBody(`${name} customers`))).json).id));
    nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    jsm = await jetstreamManager(nc);
  });

  after(async () => {
    await nc?.close().catch(() => {});
    await h?.close();
    await nats?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const logAfter = async (afterSeq: number, ids: string[]) => h.server.profiles.readTransitionLog(scope, { afterSeq, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: ids, limit: 1_000_000 });
  const lastSeq = async () => (await logAfter(0, audiences)).reduce((m, r) => Math.max(m, r.seq), 0);

  test("a flow created over HTTP: members as existing, then every transition, one message each, per profile in log order", { timeout: 120_000 }, async () => {
    const [us, fr] = audiences as [string, string];
    const t0 = Date.now() - 60_000;
    const members = Array.from({ length: 15 }, (_, i) => String(i + 1));
    await h.server.profiles.applyMembershipChanges(scope, members.map((p) => ({ profileId: p, definitionId: us, status: "realized" as const, source: "batch" as const, at: t0 })));
    const before = await lastSeq();
    const flowId = await natsFlow(a, { subject: "crm.members", serverUrl: nats.url }, [us, fr]);
    const stream = natsStreamName(flowId);
    assert.equal(stream, `SEGMENTD_FLOW_${flowId.replaceAll("-", "")}`);
    await until(async () => (await storedCount(jsm, stream)) === members.length, "the members as existing", 30_000);

    // 40 profiles enter and leave both audiences, three times over, in batches.
    for (let round = 0; round < 6; round++) {
      const changes: MembershipChange[] = [];
      for (let p = 0; p < 40; p++) for (const aud of [us, fr]) changes.push({ profileId: String(100 + p), definitionId: aud, status: round % 2 === 0 ? "realized" : "exited", source: "streaming", at: t0 + round * 1000 + p });
      await h.server.profiles.applyMembershipChanges(scope, changes);
    }
    const expected = (await logAfter(before, [us, fr])).map((r) => r.seq);
    assert.equal(expected.length, 6 * 40 * 2);
    await until(async () => (await storedCount(jsm, stream)) >= members.length + expected.length, "every transition in the stream", 60_000);
    const stored = await readStream(nc, jsm, stream);
    assert.equal(stored.length, members.length + expected.length);
    assertLogOrder(stored, flowId, expected);
    assert.ok(stored.every((s) => s.subject === "crm.members"));

    const existing = stored.filter((s) => s.body.seq === null);
    assert.deepEqual(existing.map((s) => s.body.profileId).sort(), [...members].sort());
    assert.deepEqual(existing[0]!.body, { flowId, profileId: existing[0]!.body.profileId, audienceId: us, status: "existing", lastQualificationTime: new Date(t0).toISOString(), seq: null, identityMap: {}, attributes: {} });
    assert.match(existing[0]!.msgId, new RegExp(`^${flowId}:s[^:]+:${existing[0]!.body.profileId}$`));
    const log = new Map((await logAfter(before, [us, fr])).map((r) => [r.seq, r]));
    for (const s of stored.filter((x) => x.body.seq !== null)) {
      const r = log.get(s.body.seq!)!;
      assert.deepEqual(s.body, { flowId, profileId: r.profileId, audienceId: r.definitionId, status: r.to, lastQualificationTime: new Date(r.at).toISOString(), seq: r.seq, identityMap: {}, attributes: {} });
    }
    const stats = obj(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).deliveryStats);
    assert.deepEqual({ sent: stats.sent, dead: stats.dead }, { sent: members.length + expected.length, dead: 0 });
    const info = await jsm.streams.info(stream);
    assert.deepEqual(info.config.subjects, ["crm.members"]);
    assert.equal(info.config.duplicate_window, 10 * 60 * 1_000_000_000);

    // Another organization reaches none of it.
    assert.equal((await b.get(`${F}/flows/${flowId}`)).status, 404);
    assert.equal((await b.post(`${F}/flows/${flowId}/resend`, {})).status, 404);
    assert.equal((await b.delete(`${F}/flows/${flowId}`)).status, 404);
    assert.equal((await a.get(`${F}/flows/${flowId}`)).status, 200);
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
  });

  test("nats-server killed (SIGKILL) and restarted mid-delivery: nothing missing, each transition stored once", { timeout: 120_000 }, async (t) => {
    const kill = audiences[2]!;
    const flowId = await natsFlow(a, { subject: "crm.kill", serverUrl: nats.url }, [kill], { maxBatchSize: 20, ratePerSecond: 25, concurrency: 2 });
    const stream = natsStreamName(flowId);
    const before = await lastSeq();
    // A first transition, through once the flow runs (its snapshot, which may show it as existing, goes first).
    await h.server.profiles.applyMembershipChanges(scope, [{ profileId: "999", definitionId: kill, status: "realized", source: "edge", at: Date.now() }]);
    await until(async () => (await readStream(nc, jsm, stream).catch(() => [])).some((m) => m.body.seq !== null), "the flow running", 30_000);
    const snapshot = (await readStream(nc, jsm, stream)).filter((m) => m.body.seq === null);
    assert.deepEqual(snapshot.map((m) => m.body.profileId), snapshot.length === 0 ? [] : ["999"]);
    const t0 = Date.now();
    for (let round = 0; round < 10; round++) {
      const changes: MembershipChange[] = [];
      for (let p = 0; p < 300; p++) changes.push({ profileId: String(1000 + p), definitionId: kill, status: round % 2 === 0 ? "realized" : "exited", source: "edge", at: t0 + round * 1000 + p });
      await h.server.profiles.applyMembershipChanges(scope, changes);
    }
    const expected = (await logAfter(before, [kill])).map((r) => r.seq);
    assert.equal(expected.length, 3001);
    await until(async () => (await storedCount(jsm, stream)) >= 300, "delivery under way", 60_000);
    const atKill = await storedCount(jsm, stream);
    assert.ok(atKill < expected.length, `mid-delivery (${atKill} of ${expected.length} stored)`);
    await nats.kill();
    await new Promise((r) => setTimeout(r, 1500));
    await nats.restart();
    const restarted = Date.now();
    const total = expected.length + snapshot.length;
    await until(async () => (await storedCount(jsm, stream)) >= total && ((await a.get(`${F}/flows/${flowId}`)).json as { items: Array<{ deliveryStats: { sent: number } }> }).items[0]!.deliveryStats.sent === total,
      "every transition after the restart", 120_000);
    const caughtUpMs = Date.now() - restarted;
    const stored = await readStream(nc, jsm, stream);
    assert.equal(stored.length, total, "the stream holds each transition once");
    assertLogOrder(stored, flowId, expected);
    const stats = obj(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).deliveryStats);
    assert.ok(Number(stats.failed) >= 1, `the outage was seen (${String(stats.failed)} failed attempts)`);
    assert.equal(stats.dead, 0);
    t.diagnostic(`${atKill} of ${expected.length} stored at the kill; ${String(stats.failed)} failed attempts; all stored ${caughtUpMs} ms after the restart`);
    // A message published again under a stored id (what a retry after a lost ack does) is not stored twice.
    const again = await jetstream(nc).publish("crm.kill", new TextEncoder().encode(JSON.stringify(stored[0]!.body)), { msgID: stored[0]!.msgId });
    assert.deepEqual({ duplicate: again.duplicate, seq: again.seq }, { duplicate: true, seq: stored[0]!.streamSeq });
    assert.equal(await storedCount(jsm, stream), total);
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
  });

  test("the selected attributes and identities in each message; a patched subject is followed", { timeout: 120_000 }, async () => {
    const aud = audiences[3]!;
    const profilesDs = await profileDataset(a, "crm", PROFILE_CLASS);
    const r = await a.post("/collection/nats?syncValidation=true", xdmMessage(profilesDs, PROFILE_CLASS, {
      identityMap: { Email: [{ id: "ada@example.com", primary: true }], Phone: [{ id: "+100" }] }, person: { name: { firstName: "Ada", lastName: "Lovelace" } },
    }));
    assert.equal(r.status, 200, r.text);
    const pid = (await h.server.profiles.findProfileId(scope, { namespace: "email", id: "ada@example.com" }))!;
    assert.ok(pid !== null);
    const email = (await h.server.profiles.graphIdentities(scope, pid)).find((i) => i.namespace.toLowerCase() === "email")!;
    const { flowId, targetId } = await natsFlowAndTarget(a, { subject: "crm.attrs", serverUrl: nats.url }, [aud], {}, ["person.name.firstName", "identityMap.Email"]);
    const stream = natsStreamName(flowId);
    await h.server.profiles.applyMembershipChanges(scope, [{ profileId: pid, definitionId: aud, status: "realized", source: "streaming", at: Date.now() }]);
    // The transition (and, when the audience's snapshot read came after it, the member as existing too).
    const realized = async () => (await readStream(nc, jsm, stream)).filter((m) => m.body.seq !== null);
    await until(async () => (await storedCount(jsm, stream)) >= 1 && (await realized()).length === 1, "the message", 30_000);
    const [first] = await realized();
    assert.deepEqual({ identityMap: first!.body.identityMap, attributes: first!.body.attributes, status: first!.body.status },
      { identityMap: { [email.namespace]: [{ id: "ada@example.com" }] }, attributes: { person: { name: { firstName: "Ada" } } }, status: "realized" });

    const patched = await a.patch(`${F}/targetConnections/${targetId}`, [{ op: "replace", path: "/params/subject", value: "crm.attrs2" }], { "if-match": "*" });
    assert.equal(patched.status, 200, patched.text);
    await h.server.profiles.applyMembershipChanges(scope, [{ profileId: pid, definitionId: aud, status: "exited", source: "streaming", at: Date.now() }]);
    await until(async () => (await realized()).length === 2, "the message on the new subject", 30_000);
    assert.deepEqual((await realized()).map((m) => [m.subject, m.body.status]), [["crm.attrs", "realized"], ["crm.attrs2", "exited"]]);
    assert.deepEqual((await jsm.streams.info(stream)).config.subjects, ["crm.attrs2"]);
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
  });

  test("a server URL on a private address is refused again at send time, with the exact error; nothing is published", { timeout: 120_000 }, async () => {
    const directory = new TestDirectory();
    const flow: Dataflow = {
      scope, flowId: "nats-refused", name: "refused", state: "enabled",
      target: { kind: "nats", subject: "crm.refused", serverUrl: nats.url },
      delivery: { maxBatchSize: 10, maxWaitMs: 10, concurrency: 1, ratePerSecond: 0, retryPeriodMs: 60_000, timeoutMs: 1000 },
      segmentSelectors: [{ audienceId: "aud-refused", startTime: 0, addedAt: 0 }],
      profileSelectors: { attributes: [], identityNamespaces: [] },
      createdAt: 0, updatedAt: 0, version: 1,
    };
    directory.set(flow);
    const d = startDeliverer({ directory, profiles: h.server.profiles, storage: { dataDir: path.join(dir, "refused"), ...(h.store.databaseUrl === undefined ? {} : { databaseUrl: h.store.databaseUrl }) }, allowPrivateNetworks: false });
    try {
      await d.ready;
      await until(() => d.idle(scope, flow.flowId), "the empty snapshot", 20_000);
      await h.server.profiles.applyMembershipChanges(scope, [{ profileId: "9", definitionId: "aud-refused", status: "realized", source: "edge", at: Date.now() }]);
      await until(async () => (await d.reports.stats(scope, flow.flowId)).failed >= 1, "the refused attempt", 20_000);
      const refusal = await assertPublicTarget(`http://127.0.0.1:${nats.port}/`, { allowPrivateNetworks: false }).then(() => "allowed", (err: Error) => err.message);
      const stats = await d.reports.stats(scope, flow.flowId);
      assert.equal(stats.lastError?.message, `Destination address refused at send time: ${refusal}`);
      assert.equal(stats.retrying, 1);
      assert.equal(stats.sent, 0);
      await assert.rejects(jsm.streams.info(natsStreamName(flow.flowId)), "no stream was made");
    } finally {
      await d.stop();
    }
  });
});

describe("NATS destination input", () => {
  let handle: TestStoreHandle;
  const apps: FastifyInstance[] = [];

  /** The activation routes alone (no deliverer), refusing private addresses; `natsUrl`: the server's own NATS. */
  async function openApp(natsUrl?: string): Promise<string> {
    const config = testConfig(handle);
    const clock = new SystemClock();
    const app = Fastify({ logger: false });
    installErrorHandling(app);
    installBodyParsing(app);
    await app.register(fp(async () => {}, { name: "segmentd-profiles" }));
    await app.register(activationPlugin, {
      authenticator: new Authenticator(config.auth, clock),
      tenants: new TenantDirectory(config),
      dataDir: handle.dataDir,
      ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }),
      activation: { allowPrivateNetworks: false },
      clock,
      audiences: async (_t, ids) => new Map(ids.filter((id) => id.startsWith("aud-")).map((id) => [id, `Audience ${id}`])),
      ...(natsUrl === undefined ? {} : { natsUrl }),
      startDeliverer: null,
    });
    apps.push(app);
    return app.listen({ port: 0, host: "127.0.0.1" });
  }

  before(async () => {
    handle = await createTestStore("act-nats-in");
  });
  after(async () => {
    for (const app of apps) await app.close();
    await handle.dispose();
  });

  test("bad server URLs and subjects, a target without a server, another organization's ids: exact 400/404, nothing stored", { timeout: 120_000 }, async () => {
    const url = await openApp();
    const a = client(url);
    const b = client(url, { token: TOKEN_B, org: ORG_B });
    const conn = await a.post(`${F}/connections`, { name: "nats", connectionSpec: NATS });
    const connId = String(obj(conn.json).id);
    const withoutServer = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: connId, connectionSpec: NATS, params: { subject: "crm.members" } });
    assert.equal(withoutServer.status, 201, withoutServer.text);
    const bare = String(obj(withoutServer.json).id);
    const before = await counts(a);
    const target = (params: unknown) => ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: NATS, params }] as const;
    const loopback = "Destination address 127.0.0.1 is a loopback address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set";
    const cases: Array<[string, unknown, string, string]> = [
      [...target({ subject: "crm.members", serverUrl: "nats://127.0.0.1:4222" }), "SEGMENTD-DESTINATION-ADDRESS-400", loopback],
      [...target({ subject: "crm.members", serverUrl: "nats://127.1:4222" }), "SEGMENTD-DESTINATION-ADDRESS-400", loopback],
      [...target({ subject: "crm.members", serverUrl: "tls://10.1.2.3" }), "SEGMENTD-DESTINATION-ADDRESS-400", "Destination address 10.1.2.3 is a private address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set"],
      [...target({ subject: "crm.members", serverUrl: "nats://169.254.169.254:4222" }), "SEGMENTD-DESTINATION-ADDRESS-400", "Destination address 169.254.169.254 is a cloud metadata address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set"],
      [...target({ subject: "crm.members", serverUrl: "http://93.184.215.14:4222" }), "SEGMENTD-DESTINATION-URL-400", 'params.serverUrl must use nats or tls, not "http:"'],
      [...target({ subject: "crm.members", serverUrl: "nats://user:pw@93.184.215.14:4222" }), "SEGMENTD-DESTINATION-URL-400", "params.serverUrl must not contain credentials (user:password@)"],
      [...target({ subject: "crm.members", serverUrl: "nats://93.184.215.14:4222/x?y=1" }), "SEGMENTD-DESTINATION-URL-400", "params.serverUrl must be only a scheme, a host and a port (nats://host:4222)"],
      [...target({ subject: "crm.members", serverUrl: "not a url" }), "SEGMENTD-DESTINATION-URL-400", "params.serverUrl is not a valid absolute URL"],
      [...target({ subject: "crm.members", serverUrl: 4222 }), "SEGMENTD-DESTINATION-400", "params.serverUrl must be a string"],
      [...target({ subject: "crm.*" }), "SEGMENTD-DESTINATION-400", "params.subject must be dot-separated tokens of letters, digits, _ and - (no wildcards or spaces)"],
      [...target({ subject: "crm.>" }), "SEGMENTD-DESTINATION-400", "params.subject must be dot-separated tokens of letters, digits, _ and - (no wildcards or spaces)"],
      [...target({ subject: "crm members" }), "SEGMENTD-DESTINATION-400", "params.subject must be dot-separated tokens of letters, digits, _ and - (no wildcards or spaces)"],
      [...target({ subject: "segmentd.ev.x" }), "SEGMENTD-DESTINATION-400", 'params.subject must not start with "segmentd." (reserved for segmentd\'s own streams and NATS inboxes)'],
      [...target({ subject: "_INBOX.abc" }), "SEGMENTD-DESTINATION-400", 'params.subject must not start with "_INBOX." (reserved for segmentd\'s own streams and NATS inboxes)'],
      [...target({}), "SEGMENTD-DESTINATION-400", "params.subject is required"],
      [...target({ subject: "a.b", url: "nats://93.184.215.14" }), "SEGMENTD-DESTINATION-400", "params.url is not a parameter of this connection spec (allowed: subject, serverUrl)"],
      ["/flows", flowBody(bare, ["aud-1"]), "SEGMENTD-DESTINATION-400", `targetConnectionIds[0] '${bare}' names no NATS server (params.serverUrl) and this server has no natsUrl configured; give the target connection a serverUrl`],
    ];
    for (const [p, body, code, message] of cases) assert.deepEqual(errorOf(await a.post(F + p, body)), { status: 400, code, message }, `${p} ${JSON.stringify(body)}`);
    assert.deepEqual(await counts(a), before, "nothing stored");

    // A public server is accepted (an IP literal: no DNS), tls:// too; the URL is shown as given.
    const ok = await a.post(`${F}/targetConnections`, { name: "t", baseConnectionId: connId, connectionSpec: NATS, params: { subject: "crm.members", serverUrl: "tls://93.184.215.14:4443" } });
    assert.equal(ok.status, 201, ok.text);
    const okId = String(obj(ok.json).id);
    assert.deepEqual(obj(arr(obj((await a.get(`${F}/targetConnections/${okId}`)).json).items)[0]).params, { subject: "crm.members", serverUrl: "tls://93.184.215.14:4443" });
    const patched = await a.patch(`${F}/targetConnections/${okId}`, [{ op: "replace", path: "/params/serverUrl", value: "nats://192.168.1.4:4222" }], { "if-match": "*" });
    assert.deepEqual(errorOf(patched), { status: 400, code: "SEGMENTD-DESTINATION-ADDRESS-400", message: "Destination address 192.168.1.4 is a private address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set" });
    const f = await a.post(`${F}/flows`, flowBody(okId, ["aud-1"]));
    assert.equal(f.status, 201, f.text);
    const flowId = String(obj(f.json).id);
    const resolved = (await apps[0]!.activation!.directory.get(scope, flowId))!.target;
    assert.deepEqual(resolved, { kind: "nats", subject: "crm.members", serverUrl: "tls://93.184.215.14:4443" });

    // Organization B: A's ids are not found, and B cannot point anything at them.
    const after = await counts(a);
    assert.deepEqual(errorOf(await b.get(`${F}/flows/${flowId}`)), { status: 404, code: "SEGMENTD-DESTINATION-404", message: `Flow with id '${flowId}' was not found` });
    assert.equal((await b.get(`${F}/targetConnections/${okId}`)).status, 404);
    assert.equal((await b.patch(`${F}/flows/${flowId}`, [{ op: "replace", path: "/name", value: "x" }], { "if-match": "*" })).status, 404);
    assert.equal((await b.delete(`${F}/flows/${flowId}`)).status, 404);
    assert.deepEqual(errorOf(await b.post(`${F}/flows`, flowBody(okId, []))), { status: 400, code: "SEGMENTD-DESTINATION-400", message: `targetConnectionIds[0] '${okId}' does not name a target connection of this sandbox` });
    assert.deepEqual(errorOf(await b.post(`${F}/targetConnections`, { name: "t", baseConnectionId: connId, connectionSpec: NATS, params: { subject: "x" } })),
      { status: 400, code: "SEGMENTD-DESTINATION-400", message: `baseConnectionId '${connId}' does not name a connection of this sandbox` });
    assert.deepEqual(await counts(b), [0, 0, 0]);
    assert.deepEqual(await counts(a), after);
  });

  test("with the server's own natsUrl, a target without serverUrl publishes there", { timeout: 120_000 }, async () => {
    const c = client(await openApp("nats://nats.internal:4222"));
    const conn = await c.post(`${F}/connections`, { name: "nats", connectionSpec: NATS });
    const tgt = await c.post(`${F}/targetConnections`, { name: "t", baseConnectionId: obj(conn.json).id, connectionSpec: NATS, params: { subject: "crm.members" } });
    const f = await c.post(`${F}/flows`, flowBody(String(obj(tgt.json).id), ["aud-1"]));
    assert.equal(f.status, 201, f.text);
    const target = (await apps.at(-1)!.activation!.directory.get(scope, String(obj(f.json).id)))!.target;
    assert.deepEqual(target, { kind: "nats", subject: "crm.members", fallbackUrl: "nats://nats.internal:4222" });
  });
});
