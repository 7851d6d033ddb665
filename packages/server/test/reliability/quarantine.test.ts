// Issue #22, acceptance 3: a store that already holds a poisonous record (an
// xdmEntity nested 2,200 levels deep, 13 KB: written below the boundary, as the
// service accepted it before RECORD_LIMITS) opens and serves. Its other profiles,
// the rest of that record's profile and another tenant are served over HTTP,
// a batch segment job completes with the right memberships, and the record is
// reported: GET /admin/quarantine (operator), GET /data/core/ups/quarantine (the
// organization's own) and segmentd_quarantined_records_total. Runs on both stores.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createLogger, startServer, type RunningServer } from "../../src/index.js";
import { openProfileStore } from "../../src/profiles/open.js";
import { nestsDeeperThan, parseStoredBody } from "../../src/profiles/quarantine.js";
import { deepMerge } from "../../src/profiles/xdm-object.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { JsonObject, TenantScope, ValidRecord } from "../../src/profiles/types.js";
import { arr, client, definitionBody, DEFS, obj, OPERATOR_TOKEN, ORG_A, ORG_B, TOKEN_B, testConfig } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const A: TenantScope = { orgId: ORG_A, sandboxName: "prod" };
const B: TenantScope = { orgId: ORG_B, sandboxName: "prod" };
const T0 = Date.UTC(2026, 10, 1);
const DEPTH = 2200;
const PROFILE = "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityIdNS=ECID&entityId=";
const EVENTS = "/data/core/ups/access/entities?schema.name=_xdm.context.experienceevent&relatedEntityIdNS=ECID&relatedEntityId=";

function deep(levels: number): JsonObject {
  let v: JsonObject = { leaf: true };
  for (let i = 1; i < levels; i++) v = { n: v };
  return v;
}

/** A record as validation would have passed it before the depth limit (written below the boundary). */
function record(index: number, kind: "profile" | "experienceevent", id: string, body: JsonObject, eventId: string | null = null): ValidRecord {
  const full = { identityMap: { ECID: [{ id, primary: true }] }, ...body };
  const json = JSON.stringify(full);
  return { index, kind, body: full, primary: { namespace: "ecid", id }, identities: [{ namespace: "ecid", id }], timestamp: T0 + index, eventId, size: Buffer.byteLength(json), json };
}

async function seed(p: ProfileStore): Promise<void> {
  const opts = { ingestedAt: T0, maxIdentitiesPerGraph: 50 };
  for (const [scope, id, schemaClass] of [[A, "crm", "profile"], [A, "loyalty", "profile"], [A, "web", "experienceevent"], [B, "crm", "profile"]] as const) {
    await p.createDataset(scope, { id, name: id, schemaClass, profileEnabled: true }, T0);
  }
  const poison = record(2, "profile", "poison", { homeAddress: { countryCode: "FR" }, xdmEntity: deep(DEPTH) });
  assert.ok(poison.json.length > 13_000, `the poisonous record is ${poison.json.length} characters`);
  await p.append(A, "crm", [
    record(0, "profile", "us-1", { homeAddress: { countryCode: "US" } }),
    record(1, "profile", "fr-1", { homeAddress: { countryCode: "FR" } }),
    poison,
  ], opts);
  // The rest of the poisoned identity's profile: a fragment of another dataset, still served.
  await p.append(A, "loyalty", [record(0, "profile", "poison", { homeAddress: { countryCode: "US" }, loyalty: { tier: "gold" } })], opts);
  await p.append(A, "web", [
    record(0, "experienceevent", "us-1", { eventType: "web.visit", _id: "ev-ok" }, "ev-ok"),
    record(1, "experienceevent", "us-1", { eventType: "web.visit", _id: "ev-deep", web: deep(DEPTH) }, "ev-deep"),
  ], opts);
  await p.append(B, "crm", [record(0, "profile", "b-1", { homeAddress: { countryCode: "US" } })], opts);
}

async function start(handle: TestStoreHandle): Promise<RunningServer> {
  return startServer(testConfig(handle), { logger: createLogger("silent"), store: await handle.open() });
}

async function runJob(url: string, token: string | undefined, segmentId: string): Promise<Record<string, unknown>> {
  const c = client(url, token === undefined ? {} : { token, org: ORG_B });
  const r = await c.post("/data/core/ups/segment/jobs", [{ segmentId }]);
  assert.equal(r.status, 200, r.text);
  const id = obj(r.json)["id"] as string;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const job = obj((await c.get(`/data/core/ups/segment/jobs/${id}`)).json);
    if (job["status"] === "SUCCEEDED" || job["status"] === "FAILED") return job;
    assert.ok(Date.now() < deadline, `job still ${String(job["status"])}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

function ups(profileBody: unknown): Record<string, unknown> {
  const [entry] = Object.values(obj(profileBody));
  return obj(obj(obj(obj(entry)["entity"])["segmentMembership"])["ups"]);
}

function metric(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? undefined : Number(m[1]);
}

describe("a store already holding a record nested 2,200 levels deep", () => {
  let handle: TestStoreHandle;
  let server: RunningServer | null = null;

  before(async () => {
    handle = await createTestStore("quarantine");
    // Written straight into the store the server will open (the embedded file; the PostgreSQL schema).
    const direct = openProfileStore({ dataDir: handle.dataDir, ...(handle.databaseUrl === undefined ? {} : { databaseUrl: handle.databaseUrl }), worker: false });
    try {
      await seed(direct);
    } finally {
      await direct.close();
    }
  });
  after(async () => {
    await server?.close();
    await handle.dispose();
  });

  it("opens, serves other profiles and the rest of that profile, runs batch jobs, and quarantines the record", async () => {
    server = await start(handle);
    const a = client(server.url);
    const b = client(server.url, { token: TOKEN_B, org: ORG_B });
    const operator = client(server.url, { token: OPERATOR_TOKEN });

    assert.equal((await a.get("/readyz")).status, 200);

    // Profile access: the other profiles, and the poisoned identity's profile without the bad fragment.
    const us = await a.get(`${PROFILE}us-1`);
    assert.equal(us.status, 200, us.text);
    const poisoned = await a.get(`${PROFILE}poison`);
    assert.equal(poisoned.status, 200, poisoned.text);
    const entity = obj(obj(Object.values(obj(poisoned.json))[0])["entity"]);
    assert.deepEqual(entity["homeAddress"], { countryCode: "US" }, "the loyalty fragment is served");
    assert.deepEqual(entity["loyalty"], { tier: "gold" });
    assert.equal(entity["xdmEntity"], undefined, "the quarantined fragment is not");
    // Events: the deep one is skipped, the other served.
    const events = await a.get(`${EVENTS}us-1`);
    assert.equal(events.status, 200, events.text);
    assert.deepEqual(arr(obj(events.json)["children"]).map((e) => obj(e)["entityId"]), ["ev-ok"]);
    // Another tenant, in the same test.
    assert.equal((await b.get(`${PROFILE}b-1`)).status, 200);

    // A batch segment job scans every profile (the poisoned one included) and completes.
    const def = await a.post(DEFS, definitionBody("us residents"));
    assert.equal(def.status, 200, def.text);
    const defId = obj(def.json)["id"] as string;
    const job = await runJob(server.url, undefined, defId);
    assert.equal(job["status"], "SUCCEEDED", JSON.stringify(job));
    assert.equal(obj(ups((await a.get(`${PROFILE}us-1`)).json)[defId])["status"], "realized");
    assert.equal(obj(ups((await a.get(`${PROFILE}poison`)).json)[defId])["status"], "realized", "qualifies on its servable fragment");
    assert.equal(ups((await a.get(`${PROFILE}fr-1`)).json)[defId], undefined);
    const defB = await b.post(DEFS, definitionBody("us residents b"));
    assert.equal(defB.status, 200, defB.text);
    const jobB = await runJob(server.url, TOKEN_B, obj(defB.json)["id"] as string);
    assert.equal(jobB["status"], "SUCCEEDED", JSON.stringify(jobB));

    // Reported: the operator's list (both records, once each however often they were read) and the metric.
    const list = await operator.get("/admin/quarantine");
    assert.equal(list.status, 200, list.text);
    const records = arr(obj(list.json)["records"]).map(obj);
    assert.deepEqual(records.map((r) => [r["orgId"], r["sandboxName"], r["datasetId"], r["kind"], r["recordId"]]).sort(), [
      [ORG_A, "prod", "crm", "profile", "ecid:poison"],
      [ORG_A, "prod", "web", "event", "ev-deep"],
    ]);
    for (const r of records) {
      assert.equal(r["reason"], "the stored body nests deeper than the limit of 64 levels");
      assert.ok(!Number.isNaN(Date.parse(r["quarantinedAt"] as string)));
    }
    assert.equal(obj(list.json)["next"], null);
    const onlyB = await operator.get(`/admin/quarantine?orgId=${encodeURIComponent(ORG_B)}&sandboxName=prod`);
    assert.deepEqual(obj(onlyB.json)["records"], []);
    const page = await operator.get("/admin/quarantine?limit=1");
    assert.equal(arr(obj(page.json)["records"]).length, 1);
    const rest = await operator.get(`/admin/quarantine?limit=1&after=${String(obj(page.json)["next"])}`);
    assert.equal(arr(obj(rest.json)["records"]).length, 1);
    // Each organization sees its own sandbox's, nobody else's.
    const own = await a.get("/data/core/ups/quarantine");
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(arr(obj(own.json)["records"]).map((r) => obj(r)["recordId"]).sort(), ["ecid:poison", "ev-deep"]);
    assert.deepEqual(obj((await client(server.url, { sandbox: "dev" }).get("/data/core/ups/quarantine")).json), { records: [], next: null });
    assert.deepEqual(obj((await b.get("/data/core/ups/quarantine")).json), { records: [], next: null });
    // Organizations' tokens are refused on the operator route.
    const refused = await a.get("/admin/quarantine");
    assert.equal(refused.status, 403);
    assert.equal(obj(arr(obj(obj(refused.json)["errors"])["403"])[0])["code"], "SEGMENTD-OPERATOR-403");

    const metrics = (await a.get("/metrics")).text;
    assert.equal(metric(metrics, "segmentd_quarantined_records_total"), 2);
    assert.equal(metric(metrics, "segmentd_profile_store_up"), 1);
  });

  it("a restart on the same store still serves, and the quarantine list survives it", async () => {
    await server?.close();
    server = await start(handle);
    const a = client(server.url);
    assert.equal((await a.get("/readyz")).status, 200);
    assert.equal((await a.get(`${PROFILE}poison`)).status, 200);
    assert.equal((await a.get(`${PROFILE}us-1`)).status, 200);
    const list = await client(server.url, { token: OPERATOR_TOKEN }).get("/admin/quarantine");
    assert.equal(arr(obj(list.json)["records"]).length, 2);
    // This process met the poisoned fragment once (counted once per process).
    assert.equal(metric((await a.get("/metrics")).text, "segmentd_quarantined_records_total"), 1);

    // The remedy: deleting the identity (data hygiene) removes its records and their quarantine entries.
    assert.equal((await a.delete(`${PROFILE}poison`)).status, 202);
    const left = await client(server.url, { token: OPERATOR_TOKEN }).get("/admin/quarantine");
    assert.deepEqual(arr(obj(left.json)["records"]).map((r) => obj(r)["recordId"]), ["ev-deep"]);
  });
});

describe("deep values below the boundary", () => {
  it("deepMerge merges values far deeper than the stack allows recursion, key by key", () => {
    const a = deep(200_000), b = deep(200_000);
    // Give the innermost objects different keys: the merge reaches them without recursing.
    let x: JsonObject = a, y: JsonObject = b;
    while (typeof x["n"] === "object") { x = x["n"] as JsonObject; y = y["n"] as JsonObject; }
    x["fromA"] = 1;
    y["fromB"] = 2;
    let m = deepMerge(a, b);
    while (typeof m["n"] === "object") m = m["n"] as JsonObject;
    assert.deepEqual(m, { leaf: true, fromA: 1, fromB: 2 });
    assert.deepEqual(deepMerge({ a: { b: 1, c: [1] }, d: 1 }, { a: { c: [2], e: { f: 1 } }, d: { g: 1 } }), { a: { b: 1, c: [2], e: { f: 1 } }, d: { g: 1 } });
  });

  it("a stored body is servable up to RECORD_LIMITS.maxDepth levels, not one more", () => {
    assert.equal(nestsDeeperThan(deep(64), 64), false);
    assert.equal(nestsDeeperThan(deep(65), 64), true);
    assert.equal(nestsDeeperThan({ a: [[[{}]]] }, 5), false);
    assert.equal(nestsDeeperThan({ a: [[[{}]]] }, 4), true);
    assert.deepEqual(parseStoredBody(JSON.stringify(deep(64))).problem, null);
    assert.equal(parseStoredBody(JSON.stringify(deep(65))).problem, "the stored body nests deeper than the limit of 64 levels");
    assert.match(parseStoredBody("{\"a\": ").problem ?? "", /^the stored body cannot be read: /);
    assert.equal(parseStoredBody("[1]").problem, "the stored body is not a JSON object");
  });
});
