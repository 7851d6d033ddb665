/**
 * Over real HTTP (#28): explain's `attributes` — each profile attribute the expression reads,
 * the fragment (dataset, record, time) and merge-policy rule that supplied it, under
 * timestampOrdered and dataSetPrecedence with two datasets, its value the merged profile's —
 * and GET /segment/memberships, a profile's memberships across every audience with history,
 * after two batch jobs where the profile enters and then leaves an audience; bad requests
 * (status, code, message) and other organizations and sandboxes, which see nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, MPS, PROFILE_CLASS, profileDataset, runSegmentJob, xdmMessage, ORG_A, ORG_B, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const MEMBERSHIPS = "/data/core/ups/segment/memberships";
const DAY = 86_400_000;
const NOW = Date.now();
const ANN = "ann@example.com";

let h: Harness;
let a: Client;
let crm: string;
let web: string;
let crmFirst: string;
const ids: Record<string, string> = {};

/** A profile record of `email` in a dataset, modified `daysAgo` (its fragment's time). */
async function ingest(datasetId: string, email: string, daysAgo: number, attrs: Record<string, unknown>): Promise<void> {
  const entity = { identityMap: { Email: [{ id: email, primary: true }] }, _repo: { modifyDate: new Date(NOW - daysAgo * DAY).toISOString() }, ...attrs };
  const r = await a.post("/collection/memberships?syncValidation=true", xdmMessage(datasetId, PROFILE_CLASS, entity));
  assert.equal(r.status, 200, r.text);
}

async function define(name: string, pql: string, extra: Record<string, unknown> = {}): Promise<void> {
  const d = await a.post(DEFS, definitionBody(name, pql, extra));
  assert.equal(d.status, 200, d.text);
  ids[name] = obj(d.json).id as string;
}

const memberships = (email: string, c: Client = a) => c.get(`${MEMBERSHIPS}?entityId=${encodeURIComponent(email)}&entityIdNS=Email`);

describe("attribute provenance and a profile's memberships", () => {
  before(async () => {
    h = await startHarness("profile-memberships");
    a = client(h.url);
    crm = await profileDataset(a, "crm", PROFILE_CLASS);
    web = await profileDataset(a, "web", PROFILE_CLASS);
    // CRM is older and knows the loyalty tier; web is newer and knows the city; both know the age.
    await ingest(crm, ANN, 2, { person: { age: 41, name: { firstName: "Ann" } }, loyalty: { tier: "gold" } });
    await ingest(web, ANN, 1, { person: { age: 42 }, homeAddress: { city: "Lyon" } });
    await ingest(crm, "bob@example.com", 2, { person: { age: 25 } });
    const mp = await a.post(MPS, { name: "crm first", schema: { name: "_xdm.context.profile" }, identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order: [crm, web] } });
    assert.equal(mp.status, 200, mp.text);
    crmFirst = obj(mp.json).id as string;
    const pql = 'person.age > 41 and loyalty.tier = "gold" and homeAddress.city = "Lyon" or person.nickname = "x"';
    await define("newest wins", pql);
    await define("crm first", pql, { mergePolicyId: crmFirst });
    await define("over 40", "person.age > 40");
    await define("gold", 'loyalty.tier = "gold"');
    await define("flapping", "person.age > 1000");
    await runSegmentJob(a);
  });
  after(async () => h.close());

  test("each attribute read: the fragment and merge-policy rule that supplied it, its value the merged profile's", async () => {
    const sourceOf = (ds: string, daysAgo: number) => ({ datasetId: ds, recordId: `email:${ANN}`, timestamp: new Date(NOW - daysAgo * DAY).toISOString() });
    const cases: [string, string | undefined, unknown[]][] = [
      [ids["newest wins"]!, undefined, [
        { path: "person.age", value: 42, source: sourceOf(web, 1), rule: "timestampOrdered" },
        { path: "loyalty.tier", value: "gold", source: sourceOf(crm, 2), rule: "timestampOrdered" },
        { path: "homeAddress.city", value: "Lyon", source: sourceOf(web, 1), rule: "timestampOrdered" },
        { path: "person.nickname", value: null, source: null, rule: "none" },
      ]],
      [ids["crm first"]!, crmFirst, [
        { path: "person.age", value: 41, source: sourceOf(crm, 2), rule: "dataSetPrecedence", rank: 1 },
        { path: "loyalty.tier", value: "gold", source: sourceOf(crm, 2), rule: "dataSetPrecedence", rank: 1 },
        { path: "homeAddress.city", value: "Lyon", source: sourceOf(web, 1), rule: "dataSetPrecedence", rank: 2 },
        { path: "person.nickname", value: null, source: null, rule: "none", rank: null },
      ]],
    ];
    for (const [id, policyId, want] of cases) {
      const r = await a.get(`${DEFS}/${id}/explain?entityId=${encodeURIComponent(ANN)}&entityIdNS=Email`);
      assert.equal(r.status, 200, r.text);
      const x = obj(r.json);
      assert.deepEqual(x.attributes, want);
      assert.equal(x.result, policyId === undefined, "42 > 41 with the newest age, not with CRM's");
      // The values are the merged profile's, as the profile access API merges it under the same policy.
      const entities = obj((await a.get(`/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${encodeURIComponent(ANN)}&entityIdNS=Email${policyId === undefined ? "" : `&mergePolicyId=${policyId}`}`)).json);
      const entity = obj(obj(Object.values(entities)[0]).entity);
      for (const attr of arr(x.attributes).map(obj)) {
        const merged = (attr.path as string).split(".").reduce<unknown>((v, k) => (v === undefined || v === null ? undefined : (v as Record<string, unknown>)[k]), entity);
        assert.deepEqual(attr.value, merged ?? null, attr.path as string);
      }
    }
    const draft = await a.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: "xEvent.exists(e => e.x = 1) and inSegment(\"s\") and person.age > 1" }, mergePolicyId: crmFirst, entityId: ANN, entityIdNS: "Email" });
    assert.equal(draft.status, 200, draft.text);
    assert.deepEqual(obj(draft.json).attributes, [{ path: "person.age", value: 41, source: sourceOf(crm, 2), rule: "dataSetPrecedence", rank: 1 }], "event fields and inSegment are not profile attributes");
  });

  test("memberships across every audience with history: entered, then left after the data changed", async () => {
    await ingest(web, ANN, 0, { person: { age: 30 } });
    await runSegmentJob(a);
    const r = await memberships(ANN);
    assert.equal(r.status, 200, r.text);
    const body = obj(r.json);
    assert.deepEqual([body.entityId, body.entityIdNS, typeof body.profileId], [ANN, "Email", "string"]);
    const byName = new Map(arr(body.memberships).map(obj).map((m) => [m.name as string, m]));
    assert.deepEqual([...byName.keys()].sort(), ["gold", "newest wins", "over 40"], "only the audiences the profile has a membership in");
    const over40 = byName.get("over 40")!;
    assert.equal(over40.segmentId, ids["over 40"]);
    assert.equal(over40.status, "exited");
    const moves = arr(over40.transitions).map(obj);
    assert.deepEqual(moves.map((t) => [t.from, t.to, t.source]), [[null, "realized", "batch"], ["realized", "exited", "batch"]]);
    assert.ok(Date.parse(moves[0]!.at as string) <= Date.parse(moves[1]!.at as string));
    assert.equal(over40.lastQualificationTime, moves[1]!.at, "the exit's time");
    const gold = byName.get("gold")!;
    assert.deepEqual([gold.status, arr(gold.transitions).length], ["realized", 1]);
    assert.deepEqual(arr(body.memberships).map((m) => obj(m).segmentId), [...arr(body.memberships).map((m) => obj(m).segmentId as string)].sort(), "by segment id");
    const bob = obj((await memberships("bob@example.com")).json);
    assert.deepEqual(bob.memberships, [], "in no audience");
  });

  test("the most recent 100 transitions of an audience, oldest first, as explain shows them", async () => {
    const profileId = obj((await memberships(ANN)).json).profileId as string;
    const def = ids["flapping"]!;
    const changes = Array.from({ length: 105 }, (_, i) => ({ profileId, definitionId: def, status: i % 2 === 0 ? "realized" as const : "exited" as const, source: "streaming" as const, at: NOW + i * 1000 }));
    for (let i = 0; i < changes.length; i += 50) await h.server.profiles.applyMembershipChanges({ orgId: ORG_A, sandboxName: "prod" }, changes.slice(i, i + 50));
    const flapping = arr(obj((await memberships(ANN)).json).memberships).map(obj).find((m) => m.segmentId === def)!;
    const moves = arr(flapping.transitions).map(obj);
    assert.equal(moves.length, 100);
    assert.deepEqual(moves.map((t) => Date.parse(t.at as string)), changes.slice(5).map((c) => c.at));
    assert.deepEqual([flapping.status, moves.at(-1)!.to, moves.at(-1)!.source], ["realized", "realized", "streaming"]);
    const explained = obj((await a.get(`${DEFS}/${def}/explain?entityId=${encodeURIComponent(ANN)}&entityIdNS=Email`)).json);
    assert.deepEqual(obj(explained.membership).history, moves, "explain's history: the same 100");
  });

  test("the OpenAPI document has the route and explain's attributes", async () => {
    const paths = obj(obj((await a.get("/openapi.json")).json).paths);
    const schemaOf = (p: string, method: string) => obj(obj(obj(obj(obj(obj(obj(paths[p])[method]).responses)["200"]).content)["application/json"]).schema);
    const item = obj(obj(obj(schemaOf("/data/core/ups/segment/memberships", "get").properties).memberships).items);
    assert.deepEqual(Object.keys(obj(item.properties)), ["segmentId", "name", "status", "lastQualificationTime", "transitions"]);
    const attribute = obj(obj(obj(schemaOf("/data/core/ups/segment/definitions/{id}/explain", "get").properties).attributes).items);
    assert.deepEqual(Object.keys(obj(attribute.properties)), ["path", "value", "source", "rule", "rank"]);
  });

  test("bad requests and other organizations and sandboxes: status, code and message", async () => {
    const long = "x".repeat(1025);
    const cases: [string, Client, number, string, string][] = [
      [`${MEMBERSHIPS}?entityId=${encodeURIComponent(ANN)}`, a, 400, "UPLIB-101206-500", "Invalid request: querystring entityIdNS is required"],
      [`${MEMBERSHIPS}?entityIdNS=Email`, a, 400, "UPLIB-101206-500", "Invalid request: querystring entityId is required"],
      [`${MEMBERSHIPS}?entityId=${long}&entityIdNS=Email`, a, 400, "UPLIB-101206-500", "Invalid request: querystring entityId must NOT have more than 1024 characters"],
      [`${MEMBERSHIPS}?entityId=x&entityIdNS=Email`, a, 404, "SEGMENTD-NOT-FOUND-404", "Profile with id 'Email:x' was not found"],
      [`${MEMBERSHIPS}?entityId=${encodeURIComponent(ANN)}&entityIdNS=Email`, client(h.url, { token: TOKEN_B, org: ORG_B }), 404, "SEGMENTD-NOT-FOUND-404", `Profile with id 'Email:${ANN}' was not found`],
      [`${MEMBERSHIPS}?entityId=${encodeURIComponent(ANN)}&entityIdNS=Email`, client(h.url, { sandbox: "dev" }), 404, "SEGMENTD-NOT-FOUND-404", `Profile with id 'Email:${ANN}' was not found`],
    ];
    for (const [url, c, status, code, title] of cases) {
      const r = await c.get(url);
      assert.equal(r.status, status, r.text);
      const body = obj(r.json);
      assert.equal(body.type, `https://ns.adobe.com/aep/errors/${code}`);
      assert.equal(body.title, title);
    }
    const explained = await client(h.url, { sandbox: "dev" }).post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: "person.age > 1" }, entityId: ANN, entityIdNS: "Email" });
    assert.equal(explained.status, 404, "explain in another sandbox sees nothing either");
  });
});
