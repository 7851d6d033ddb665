/**
 * Destinations API over real HTTP (docs/activation.md): connection specs, base and
 * target connections, flows with segmentSelectors/profileSelectors, JSON Patch under
 * If-Match, actions, deletes in order, runs/resend without a deliverer, exact 400s with
 * nothing stored, and another organization's or sandbox's ids answering 404 with
 * nothing read or changed. Runs on the store SEGMENTD_TEST_STORE names.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { arr, client, DEFS, definitionBody, obj, ORG_B, startHarness, TOKEN_B, type Client, type Harness, type Res } from "../helpers/server-harness.js";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };
const PUBLIC_URL = "https://93.184.215.14/hook";

function errorOf(r: Res): { status: number; code: unknown; message: unknown } {
  const body = obj(r.json);
  const items = arr(obj(body.errors)[String(r.status)]);
  return { status: r.status, code: obj(items[0]).code, message: obj(items[0]).message };
}

async function counts(c: Client): Promise<number[]> {
  const out: number[] = [];
  for (const p of ["/connections", "/targetConnections", "/flows"]) out.push(arr(obj((await c.get(F + p)).json).items).length);
  return out;
}

const segSel = (id: string) => ({ type: "PLATFORM_SEGMENT", value: { id } });
const attrSel = (path: string) => ({ type: "JSON_PATH", value: { path, operator: "EXISTS" } });
const flowBody = (targetId: string, audiences: string[], attrs: string[] = []) => ({
  name: "to the CRM",
  targetConnectionIds: [targetId],
  transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: audiences.map(segSel) }, profileSelectors: { selectors: attrs.map(attrSel) } } }],
});

describe("destinations API", () => {
  let h: Harness;
  let a: Client;
  let b: Client;
  let audience1 = "";
  let audience2 = "";

  before(async () => {
    h = await startHarness("act-api");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    audience1 = String(obj((await a.post(DEFS, definitionBody("US customers"))).json).id);
    audience2 = String(obj((await a.post(DEFS, definitionBody("FR customers", 'homeAddress.countryCode = "FR"'))).json).id);
  });
  after(async () => h.close());

  async function connection(c = a, auth: unknown = { specName: "Bearer Token", params: { token: "tok-123" } }): Promise<string> {
    const r = await c.post(`${F}/connections`, { name: "crm auth", connectionSpec: WEBHOOK, auth });
    assert.equal(r.status, 201, r.text);
    return String(obj(r.json).id);
  }
  async function target(connId: string, c = a, params: unknown = { httpEndpoint: PUBLIC_URL, headers: { "X-Tenant": "acme" } }): Promise<string> {
    const r = await c.post(`${F}/targetConnections`, { name: "crm", baseConnectionId: connId, connectionSpec: WEBHOOK, params });
    assert.equal(r.status, 201, r.text);
    return String(obj(r.json).id);
  }

  test("connection specs list the three destinations", async () => {
    const r = await a.get(`${F}/connectionSpecs`);
    assert.equal(r.status, 200);
    assert.deepEqual(arr(obj(r.json).items).map((s) => obj(s).name), ["HTTP API", "NATS JetStream subject", "File export"]);
    const one = await a.get(`${F}/connectionSpecs/${CONNECTION_SPEC_IDS.nats}`);
    assert.equal(obj(arr(obj(one.json).items)[0]).id, CONNECTION_SPEC_IDS.nats);
    assert.deepEqual(errorOf(await a.get(`${F}/connectionSpecs/nope`)), { status: 404, code: "SEGMENTD-DESTINATION-404", message: "Connection spec with id 'nope' was not found" });
  });

  test("create, read, patch, act on and delete a webhook dataflow", async () => {
    const connId = await connection();
    const conn = obj(arr(obj((await a.get(`${F}/connections/${connId}`)).json).items)[0]);
    assert.deepEqual(conn.auth, { specName: "Bearer Token", params: { token: "***" } });
    const targetId = await target(connId);
    const tgt = obj(arr(obj((await a.get(`${F}/targetConnections/${targetId}`)).json).items)[0]);
    assert.deepEqual(tgt.params, { httpEndpoint: PUBLIC_URL, headers: { "X-Tenant": "***" } });
    assert.equal(tgt.baseConnectionId, connId);

    const created = await a.post(`${F}/flows`, flowBody(targetId, [audience1], ["person.name.firstName", "identityMap.Email"]));
    assert.equal(created.status, 201, created.text);
    const { id: flowId, etag, signingSecret } = obj(created.json) as { id: string; etag: string; signingSecret: string };
    assert.match(signingSecret, /^whsec_[A-Za-z0-9+/]{32}$/);
    const got = await a.get(`${F}/flows/${flowId}`);
    assert.equal(got.status, 200);
    assert.ok(!got.text.includes(signingSecret), "the signing secret is shown once, on creation");
    const flow = obj(arr(obj(got.json).items)[0]);
    assert.equal(flow.etag, etag);
    assert.equal(flow.state, "enabled");
    assert.deepEqual(flow.targetConnectionIds, [targetId]);
    const params = obj(obj(arr(flow.transformations)[0]).params);
    assert.deepEqual(arr(obj(params.segmentSelectors).selectors).map((s) => obj(obj(s).value).id), [audience1]);
    assert.equal(obj(obj(arr(obj(params.segmentSelectors).selectors)[0]).value).name, "US customers");

    // The deliverer's view: secrets opened, selectors resolved.
    const df = await h.server.app.activation!.directory.get({ orgId: String(flow.imsOrgId), sandboxName: "prod" }, flowId);
    assert.ok(df);
    assert.deepEqual(df.target, { kind: "webhook", url: PUBLIC_URL, auth: { type: "bearer", token: "tok-123" }, headers: { "X-Tenant": "acme" }, signingSecret });
    assert.deepEqual(df.profileSelectors, { attributes: ["person.name.firstName"], identityNamespaces: ["email"] });
    const addedAt = df.segmentSelectors[0]!.addedAt;

    // JSON Patch needs the current etag.
    const add = [{ op: "add", path: "/transformations/0/params/segmentSelectors/selectors/-", value: segSel(audience2) }];
    assert.deepEqual(errorOf(await a.patch(`${F}/flows/${flowId}`, add)), { status: 428, code: "SEGMENTD-PRECONDITION-428", message: "If-Match header with the flow's etag is required" });
    const stale = await a.patch(`${F}/flows/${flowId}`, add, { "if-match": '"not-the-etag"' });
    assert.deepEqual(errorOf(stale), { status: 412, code: "SEGMENTD-PRECONDITION-412", message: `If-Match "not-the-etag" does not match the flow's current etag ${etag}` });
    const changes: string[] = [];
    const off = h.server.app.activation!.directory.onChange((_s, id) => changes.push(id));
    const patched = await a.patch(`${F}/flows/${flowId}`, [...add, { op: "replace", path: "/name", value: "renamed" }], { "if-match": etag });
    off();
    assert.equal(patched.status, 200, patched.text);
    assert.notEqual(obj(patched.json).etag, etag);
    assert.deepEqual(changes, [flowId]);
    const df2 = await h.server.app.activation!.directory.get({ orgId: String(flow.imsOrgId), sandboxName: "prod" }, flowId);
    assert.equal(df2!.name, "renamed");
    assert.equal(df2!.version, 2);
    assert.deepEqual(df2!.segmentSelectors.map((s) => s.audienceId), [audience1, audience2]);
    assert.equal(df2!.segmentSelectors[0]!.addedAt, addedAt, "an audience already selected keeps when it was added");

    // A patch that breaks a rule changes nothing.
    const etag2 = String(obj(patched.json).etag);
    for (const [ops, status, code, message] of [
      [[{ op: "replace", path: "/targetConnectionIds", value: ["other"] }], 400, "SEGMENTD-IMMUTABLE-400", "targetConnectionIds cannot change; create another flow"],
      [[{ op: "add", path: "/transformations/0/params/segmentSelectors/selectors/-", value: segSel("no-such-audience") }], 400, "SEGMENTD-DESTINATION-400", "segmentSelectors.selectors[2]: audience 'no-such-audience' does not exist in this sandbox"],
      [[{ op: "remove", path: "/nothing" }], 400, "SEGMENTD-DESTINATION-400", 'JSON Patch failed: operation 0: path "/nothing" does not exist'],
      [[{ op: "add", path: "/owner", value: "x" }], 400, "SEGMENTD-DESTINATION-400", "/owner cannot be patched (editable: name, description, state, transformations, delivery)"],
      [[{ op: "replace", path: "/delivery/maxBatchSize", value: 0 }], 400, "SEGMENTD-DESTINATION-400", "delivery.maxBatchSize must be an integer from 1 to 1000"],
    ] as const) {
      assert.deepEqual(errorOf(await a.patch(`${F}/flows/${flowId}`, ops, { "if-match": etag2 })), { status, code, message });
    }
    assert.equal(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).etag, etag2);

    // Remove an audience; disable; enable.
    const rm = await a.patch(`${F}/flows/${flowId}`, [{ op: "remove", path: "/transformations/0/params/segmentSelectors/selectors/0" }], { "if-match": etag2 });
    assert.equal(rm.status, 200, rm.text);
    const dis = await a.post(`${F}/flows/${flowId}/action?op=disable`);
    assert.equal(dis.status, 200, dis.text);
    assert.ok(!(await h.server.app.activation!.directory.listEnabled()).some((d) => d.flowId === flowId));
    assert.equal((await a.post(`${F}/flows/${flowId}/action?op=enable`)).status, 200);
    const enabled = (await h.server.app.activation!.directory.listEnabled()).find((d) => d.flowId === flowId);
    assert.deepEqual(enabled?.segmentSelectors.map((s) => s.audienceId), [audience2]);

    // A new signing secret, shown once; the deliverer's view follows.
    const rotated = await a.post(`${F}/flows/${flowId}/signingSecret`);
    assert.equal(rotated.status, 200, rotated.text);
    const newSecret = String(obj(rotated.json).signingSecret);
    assert.match(newSecret, /^whsec_/);
    assert.notEqual(newSecret, signingSecret);
    const afterRotate = (await h.server.app.activation!.directory.get({ orgId: String(flow.imsOrgId), sandboxName: "prod" }, flowId))?.target;
    assert.equal(afterRotate?.kind === "webhook" ? afterRotate.signingSecret : null, newSecret);
    assert.equal((await b.post(`${F}/flows/${flowId}/signingSecret`)).status, 404);

    // Runs and resend (the server's deliverer answers; deliverer-hook.test.ts covers the routes without one).
    assert.deepEqual(errorOf(await a.get(`${F}/runs`)), { status: 400, code: "SEGMENTD-DESTINATION-400", message: "GET /runs needs one property=flowId==<flow id>" });
    assert.deepEqual(errorOf(await a.post(`${F}/flows/${flowId}/resend`, { audienceIds: [audience1] })), {
      status: 400, code: "SEGMENTD-DESTINATION-400", message: `audienceIds[0] '${audience1}' is not an audience of this flow`,
    });
    const resent = await a.post(`${F}/flows/${flowId}/resend`, {});
    assert.equal(resent.status, 202, resent.text);
    const runId = String(obj(resent.json).runId);
    const runs = arr(obj((await a.get(`${F}/runs?property=flowId==${flowId}`)).json).items);
    assert.ok(runs.every((r) => obj(r).flowId === flowId), JSON.stringify(runs));
    assert.equal(obj(arr(obj((await a.get(`${F}/runs/${runId}`)).json).items)[0]).flowId, flowId);
    assert.equal((await b.get(`${F}/runs/${runId}`)).status, 404);
    assert.deepEqual(obj((await b.get(`${F}/runs?property=flowId==${flowId}`)).json).items, []);

    // Deletes in order: what is still used is refused.
    assert.deepEqual(errorOf(await a.delete(`${F}/connections/${connId}`)), { status: 409, code: "SEGMENTD-DESTINATION-IN-USE-409", message: `Connection '${connId}' is used by target connection '${targetId}'; delete that first` });
    assert.deepEqual(errorOf(await a.delete(`${F}/targetConnections/${targetId}`)), { status: 409, code: "SEGMENTD-DESTINATION-IN-USE-409", message: `Target connection '${targetId}' is used by flow '${flowId}'; delete that first` });
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
    assert.equal((await a.delete(`${F}/targetConnections/${targetId}`)).status, 204);
    assert.equal((await a.delete(`${F}/connections/${connId}`)).status, 204);
    assert.deepEqual(errorOf(await a.get(`${F}/flows/${flowId}`)), { status: 404, code: "SEGMENTD-DESTINATION-404", message: `Flow with id '${flowId}' was not found` });
  });

  test("PATCH connections and target connections: secrets left as *** are kept, URLs checked again, flows notified", async () => {
    const connId = await connection();
    const targetId = await target(connId);
    const fl = await a.post(`${F}/flows`, flowBody(targetId, [audience1]));
    const flowId = String(obj(fl.json).id);
    const scope = { orgId: "AAAAAAAAAAAAAAAAAAAAAAAA@AdobeOrg", sandboxName: "prod" };
    const dir = h.server.app.activation!.directory;
    const etagOf = async (path: string) => String(obj(arr(obj((await a.get(F + path)).json).items)[0]).etag);
    const changes: string[] = [];
    const off = dir.onChange((_s, id) => changes.push(id));
    try {
      // Target: a header added, the existing one left as "***", the URL changed.
      let etag = await etagOf(`/targetConnections/${targetId}`);
      assert.deepEqual(errorOf(await a.patch(`${F}/targetConnections/${targetId}`, [{ op: "replace", path: "/name", value: "x" }])), {
        status: 428, code: "SEGMENTD-PRECONDITION-428", message: "If-Match header with the target connection's etag is required",
      });
      const refused = await a.patch(`${F}/targetConnections/${targetId}`, [{ op: "replace", path: "/params/httpEndpoint", value: "http://0x7f.1/hook" }], { "if-match": etag });
      assert.deepEqual(errorOf(refused), { status: 400, code: "SEGMENTD-DESTINATION-ADDRESS-400", message: "Destination address 127.0.0.1 is a loopback address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set" });
      assert.equal(await etagOf(`/targetConnections/${targetId}`), etag, "nothing changed");
      const ok = await a.patch(`${F}/targetConnections/${targetId}`, [
        { op: "replace", path: "/params/httpEndpoint", value: "https://93.184.215.15/v2" },
        { op: "add", path: "/params/headers/X-Extra", value: "extra-value" },
      ], { "if-match": etag });
      assert.equal(ok.status, 200, ok.text);
      let df = await dir.get(scope, flowId);
      assert.deepEqual(df?.target.kind === "webhook" ? [df.target.url, df.target.headers] : null, ["https://93.184.215.15/v2", { "X-Tenant": "acme", "X-Extra": "extra-value" }]);
      assert.deepEqual(changes, [flowId]);
      // Connection: the token replaced; then a rename keeps it ("***" untouched).
      etag = await etagOf(`/connections/${connId}`);
      const tok = await a.patch(`${F}/connections/${connId}`, [{ op: "replace", path: "/auth/params/token", value: "tok-NEW" }], { "if-match": etag });
      assert.equal(tok.status, 200, tok.text);
      const ren = await a.patch(`${F}/connections/${connId}`, [{ op: "replace", path: "/name", value: "renamed auth" }], { "if-match": String(obj(tok.json).etag) });
      assert.equal(ren.status, 200, ren.text);
      df = await dir.get(scope, flowId);
      assert.deepEqual(df?.target.kind === "webhook" ? df.target.auth : null, { type: "bearer", token: "tok-NEW" });
      assert.deepEqual(changes, [flowId, flowId, flowId]);
      assert.deepEqual(errorOf(await a.patch(`${F}/connections/${connId}`, [{ op: "add", path: "/connectionSpec", value: {} }], { "if-match": String(obj(ren.json).etag) })), {
        status: 400, code: "SEGMENTD-DESTINATION-400", message: "/connectionSpec cannot be patched (editable: name, description, auth)",
      });
      // Another organization: 404, nothing changed.
      const before = await etagOf(`/connections/${connId}`);
      assert.equal((await b.patch(`${F}/connections/${connId}`, [{ op: "replace", path: "/name", value: "stolen" }], { "if-match": before })).status, 404);
      assert.equal((await b.patch(`${F}/targetConnections/${targetId}`, [{ op: "replace", path: "/name", value: "stolen" }], { "if-match": "*" })).status, 404);
      assert.equal(await etagOf(`/connections/${connId}`), before);
    } finally {
      off();
    }
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
  });

  test("NATS and file destinations", async () => {
    const nats = await a.post(`${F}/connections`, { name: "nats", connectionSpec: { id: CONNECTION_SPEC_IDS.nats } });
    const nt = await a.post(`${F}/targetConnections`, { name: "subj", baseConnectionId: obj(nats.json).id, connectionSpec: { id: CONNECTION_SPEC_IDS.nats }, params: { subject: "crm.members", serverUrl: "nats://93.184.215.14:4222" } });
    assert.equal(nt.status, 201, nt.text);
    const nf = await a.post(`${F}/flows`, flowBody(String(obj(nt.json).id), [audience1]));
    assert.equal(nf.status, 201, nf.text);
    assert.equal(obj(nf.json).signingSecret, undefined);
    assert.deepEqual(errorOf(await a.post(`${F}/flows/${String(obj(nf.json).id)}/signingSecret`)), {
      status: 400, code: "SEGMENTD-DESTINATION-400", message: `Flow '${String(obj(nf.json).id)}' does not send webhooks; it has no signing secret`,
    });
    const file = await a.post(`${F}/connections`, { name: "files", connectionSpec: { id: CONNECTION_SPEC_IDS.file } });
    const ft = await a.post(`${F}/targetConnections`, {
      name: "daily", baseConnectionId: obj(file.json).id, connectionSpec: { id: CONNECTION_SPEC_IDS.file },
      params: { format: "csv", compression: "GZIP", exportMode: "FIRST_FULL_THEN_INCREMENTAL", frequency: "EVERY_6_HOURS" },
    });
    assert.equal(ft.status, 201, ft.text);
    const ff = await a.post(`${F}/flows`, flowBody(String(obj(ft.json).id), [audience2]));
    const scope = { orgId: "AAAAAAAAAAAAAAAAAAAAAAAA@AdobeOrg", sandboxName: "prod" };
    assert.deepEqual((await h.server.app.activation!.directory.get(scope, String(obj(nf.json).id)))!.target, { kind: "nats", subject: "crm.members", serverUrl: "nats://93.184.215.14:4222" });
    assert.deepEqual((await h.server.app.activation!.directory.get(scope, String(obj(ff.json).id)))!.target, { kind: "file", format: "csv", gzip: true, mode: "incremental", frequency: "EVERY_6_HOURS" });
    for (const id of [obj(nf.json).id, obj(ff.json).id]) assert.equal((await a.delete(`${F}/flows/${String(id)}`)).status, 204);
  });

  test("bad input is a 400 with its exact code and message, and nothing is stored", async () => {
    const connId = await connection();
    const targetId = await target(connId);
    const before = await counts(a);
    const cases: [string, unknown, string, string][] = [
      ["/connections", { connectionSpec: WEBHOOK }, "SEGMENTD-DESTINATION-400", "name is required"],
      ["/connections", { name: "n".repeat(257), connectionSpec: WEBHOOK }, "SEGMENTD-DESTINATION-400", "name is longer than 256 characters"],
      ["/connections", { name: "x", description: "d".repeat(4097), connectionSpec: WEBHOOK }, "SEGMENTD-DESTINATION-400", "description is longer than 4096 characters"],
      ["/connections", { name: "x", connectionSpec: { id: "nope" } }, "SEGMENTD-DESTINATION-400", 'connectionSpec.id "nope" is not one of segmentd\'s connection specs (GET /connectionSpecs)'],
      ["/connections", { name: "x", connectionSpec: WEBHOOK, auth: { specName: "Basic", params: {} } }, "SEGMENTD-DESTINATION-400", 'auth.specName "Basic" is not one of: None, Bearer Token, OAuth2 Client Credentials'],
      ["/connections", { name: "x", connectionSpec: WEBHOOK, auth: { specName: "Bearer Token", params: {} } }, "SEGMENTD-DESTINATION-400", "auth.params.token is required"],
      ["/connections", { name: "x", connectionSpec: { id: CONNECTION_SPEC_IDS.nats }, auth: { specName: "Bearer Token", params: { token: "t" } } }, "SEGMENTD-DESTINATION-400", 'auth.specName "Bearer Token" is not offered by this connection spec (only None)'],
      ["/connections", { name: "x", connectionSpec: WEBHOOK, auth: { specName: "OAuth2 Client Credentials", params: { accessTokenUrl: "http://127.0.0.1/token", clientId: "c", clientSecret: "s" } } }, "SEGMENTD-DESTINATION-ADDRESS-400", "Destination address 127.0.0.1 is a loopback address; segmentd refuses loopback, private, link-local and metadata addresses unless activation.allowPrivateNetworks is set"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: "ftp://93.184.215.14/x" } }, "SEGMENTD-DESTINATION-URL-400", 'params.httpEndpoint must use http or https, not "ftp:"'],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: "https://user:pw@93.184.215.14/x" } }, "SEGMENTD-DESTINATION-URL-400", "params.httpEndpoint must not contain credentials (user:password@); use the connection's auth instead"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: `https://93.184.215.14/${"a".repeat(2048)}` } }, "SEGMENTD-DESTINATION-URL-400", "params.httpEndpoint is longer than 2048 characters"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: "not a url" } }, "SEGMENTD-DESTINATION-URL-400", "params.httpEndpoint is not a valid absolute URL"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: { Authorization: "x" } } }, "SEGMENTD-DESTINATION-HEADER-400", 'params.headers: "Authorization" is set by segmentd and cannot be configured'],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: { "webhook-id": "x" } } }, "SEGMENTD-DESTINATION-HEADER-400", 'params.headers: "webhook-id" is set by segmentd and cannot be configured'],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: { "X-A": "a\r\nX-Injected: 1" } } }, "SEGMENTD-DESTINATION-HEADER-400", "params.headers.X-A contains a control character"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: { "bad name": "x" } } }, "SEGMENTD-DESTINATION-HEADER-400", 'params.headers: "bad name" is not a valid header name (a token of at most 64 characters)'],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, "v"])) } }, "SEGMENTD-DESTINATION-HEADER-400", "params.headers has 21 headers; at most 20 are allowed"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, headers: { "X-A": "v".repeat(1025) } } }, "SEGMENTD-DESTINATION-HEADER-400", "params.headers.X-A is longer than 1024 characters"],
      ["/targetConnections", { name: "t", baseConnectionId: "missing", connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL } }, "SEGMENTD-DESTINATION-400", "baseConnectionId 'missing' does not name a connection of this sandbox"],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: { id: CONNECTION_SPEC_IDS.nats }, params: { subject: "a.b" } }, "SEGMENTD-DESTINATION-400", `baseConnectionId '${connId}' is a connection of another connection spec`],
      ["/targetConnections", { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL, subject: "x" } }, "SEGMENTD-DESTINATION-400", "params.subject is not a parameter of this connection spec (allowed: httpEndpoint, headers)"],
      ["/flows", flowBody(targetId, ["no-such-audience"]), "SEGMENTD-DESTINATION-400", "segmentSelectors.selectors[0]: audience 'no-such-audience' does not exist in this sandbox"],
      ["/flows", flowBody(targetId, [audience1, audience1]), "SEGMENTD-DESTINATION-400", `segmentSelectors.selectors[1]: audience ${audience1} is selected twice`],
      ["/flows", flowBody(targetId, [audience1], ["person..name"]), "SEGMENTD-DESTINATION-400", 'profileSelectors.selectors[0].value.path "person..name" is not an XDM field path (dot-separated names)'],
      ["/flows", flowBody("missing", [audience1]), "SEGMENTD-DESTINATION-400", "targetConnectionIds[0] 'missing' does not name a target connection of this sandbox"],
      ["/flows", { ...flowBody(targetId, []), targetConnectionIds: [] }, "SEGMENTD-DESTINATION-400", "targetConnectionIds must hold exactly one target connection id"],
      ["/flows", { ...flowBody(targetId, []), delivery: { timeoutMs: 5 } }, "SEGMENTD-DESTINATION-400", "delivery.timeoutMs must be an integer from 100 to 60000"],
      ["/flows", { ...flowBody(targetId, []), delivery: { speed: 5 } }, "SEGMENTD-DESTINATION-400", "delivery.speed is not a delivery setting (allowed: maxBatchSize, maxWaitMs, concurrency, ratePerSecond, retryPeriodMs, timeoutMs)"],
    ];
    for (const [path, body, code, message] of cases) {
      const r = await a.post(F + path, body);
      assert.deepEqual(errorOf(r), { status: 400, code, message }, `${path} ${JSON.stringify(body).slice(0, 200)}`);
    }
    const big = await a.post(`${F}/connections`, { name: "x".repeat(70 * 1024), connectionSpec: WEBHOOK });
    assert.deepEqual(errorOf(big), { status: 413, code: "SEGMENTD-BODY-TOO-LARGE-413", message: "Request body is larger than the limit of 65536 bytes" });
    assert.deepEqual(await counts(a), before);
  });

  test("concurrent writers: one PATCH per etag wins; a delete racing a create never leaves a dangling reference", async () => {
    const connId = await connection();
    const targetId = await target(connId);
    const fl = await a.post(`${F}/flows`, flowBody(targetId, [audience1]));
    const flowId = String(obj(fl.json).id);
    const etag = String(obj(fl.json).etag);
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => a.patch(`${F}/flows/${flowId}`, [{ op: "replace", path: "/name", value: `writer ${i}` }], { "if-match": etag })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 412, 412, 412, 412, 412], results.map((r) => r.text).join("\n"));
    const winner = results.findIndex((r) => r.status === 200);
    const now = obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]);
    assert.equal(now.name, `writer ${winner}`);
    assert.equal(now.etag, obj(results[winner]!.json).etag);
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
    assert.equal((await a.delete(`${F}/targetConnections/${targetId}`)).status, 204);

    for (let round = 0; round < 5; round++) {
      const base = await connection();
      const [created, deleted] = await Promise.all([
        a.post(`${F}/targetConnections`, { name: "racer", baseConnectionId: base, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL } }),
        a.delete(`${F}/connections/${base}`),
      ]);
      // Either the target came first (and the delete was refused), or the delete did (and the create was).
      if (created.status === 201) assert.equal(deleted.status, 409, deleted.text);
      else {
        assert.equal(deleted.status, 204);
        assert.equal(errorOf(created).message, `baseConnectionId '${base}' does not name a connection of this sandbox`);
      }
    }
    const targets = arr(obj((await a.get(`${F}/targetConnections`)).json).items).map((t) => String(obj(t).baseConnectionId));
    for (const base of targets) assert.equal((await a.get(`${F}/connections/${base}`)).status, 200, `target's base connection ${base} exists`);
  });

  test("another organization or sandbox cannot read, change or use this one's resources", async () => {
    const connId = await connection();
    const targetId = await target(connId);
    const fl = await a.post(`${F}/flows`, flowBody(targetId, [audience1]));
    const flowId = String(obj(fl.json).id);
    const etag = String(obj(fl.json).etag);
    const dev = client(h.url, { sandbox: "dev" });
    for (const other of [b, dev]) {
      assert.equal(arr(obj((await other.get(`${F}/flows`)).json).items).length, 0);
      assert.equal(arr(obj((await other.get(`${F}/connections`)).json).items).length, 0);
      for (const [path, kind, id] of [["/connections/", "Connection", connId], ["/targetConnections/", "Target connection", targetId], ["/flows/", "Flow", flowId]] as const) {
        const nf = { status: 404, code: "SEGMENTD-DESTINATION-404", message: `${kind} with id '${id}' was not found` };
        assert.deepEqual(errorOf(await other.get(F + path + id)), nf);
        assert.deepEqual(errorOf(await other.delete(F + path + id)), nf);
      }
      const nf = { status: 404, code: "SEGMENTD-DESTINATION-404", message: `Flow with id '${flowId}' was not found` };
      assert.deepEqual(errorOf(await other.patch(`${F}/flows/${flowId}`, [{ op: "replace", path: "/name", value: "stolen" }], { "if-match": etag })), nf);
      assert.deepEqual(errorOf(await other.post(`${F}/flows/${flowId}/action?op=disable`)), nf);
      assert.deepEqual(errorOf(await other.post(`${F}/flows/${flowId}/resend`, {})), nf);
      assert.deepEqual(obj((await other.get(`${F}/runs?property=flowId==${flowId}`)).json).items, []);
      // Nor point its own resources at this one's.
      const own = await other.post(`${F}/targetConnections`, { name: "t", baseConnectionId: connId, connectionSpec: WEBHOOK, params: { httpEndpoint: PUBLIC_URL } });
      assert.deepEqual(errorOf(own), { status: 400, code: "SEGMENTD-DESTINATION-400", message: `baseConnectionId '${connId}' does not name a connection of this sandbox` });
      const ownFlow = await other.post(`${F}/flows`, flowBody(targetId, [audience1]));
      assert.deepEqual(errorOf(ownFlow), { status: 400, code: "SEGMENTD-DESTINATION-400", message: `targetConnectionIds[0] '${targetId}' does not name a target connection of this sandbox` });
    }
    // B's own flow cannot select A's audience.
    const bConn = await connection(b);
    const bTarget = await target(bConn, b);
    assert.deepEqual(errorOf(await b.post(`${F}/flows`, flowBody(bTarget, [audience1]))), {
      status: 400, code: "SEGMENTD-DESTINATION-400", message: `segmentSelectors.selectors[0]: audience '${audience1}' does not exist in this sandbox`,
    });
    const still = obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]);
    assert.equal(still.etag, etag);
    assert.equal(still.name, "to the CRM");
    assert.equal(still.state, "enabled");
  });
});
