/**
 * The audience builder's server side over real HTTP (#29): the palette lists the profile
 * attributes and event types (with fields, types, counts and examples) found in the sandbox's
 * data and the identity fields its schemas' descriptors name, cached until refreshed; another
 * organization's palette holds nothing of this one's. The live estimate of several expressions
 * equals, expression by expression, what POST /preview + GET /estimate answer. Bad requests get
 * their status, code and message.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { parse } from "@segmentd/pql";
import { combinations } from "../src/batch/builder/estimates.js";
import { EVENT_CLASS, ORG_B, PROFILE_CLASS, TOKEN_B, arr, client, obj, profileDataset, startHarness, xdmMessage, type Client, type Harness } from "./helpers/server-harness.js";

const FIELDS = "/data/core/ups/segment/builder/fields";
const ESTIMATE = "/data/core/ups/segment/builder/estimate";
const DAY = 86_400_000;

let h: Harness;
let a: Client;
let profiles = "";

function field(list: unknown, path: string): Record<string, unknown> | undefined {
  return arr(list).map(obj).find((f) => f.path === path);
}

async function previewEstimate(expression: string): Promise<Record<string, unknown>> {
  const r = await a.post("/data/core/ups/preview", { predicateExpression: expression, predicateType: "pql/text", graphType: "none" });
  assert.equal(r.status, 201, r.text);
  const id = obj(r.json).previewId as string;
  for (let i = 0; ; i++) {
    const e = obj((await a.get(`/data/core/ups/estimate/${id}`)).json);
    if (e.state === "RESULT_READY") return e;
    assert.ok(e.state !== "FAILED" && i < 200, JSON.stringify(e));
    await new Promise((res) => setTimeout(res, 25));
  }
}

describe("audience builder API", () => {
  before(async () => {
    h = await startHarness("builder");
    a = client(h.url);
    profiles = await profileDataset(a, "crm", PROFILE_CLASS);
    const events = await profileDataset(a, "web", EVENT_CLASS);
    const now = Date.now();
    for (let i = 0; i < 30; i++) {
      const identityMap = { Email: [{ id: `b${i}@example.com`, primary: true }] };
      const entity = {
        identityMap,
        person: { age: 20 + i, birthDate: `19${70 + (i % 20)}-0${1 + (i % 9)}-15`, name: { firstName: `N${i % 4}` } },
        loyalty: { points: i * 1.5, isMember: i % 2 === 0, tier: ["gold", "silver", "bronze"][i % 3] },
        favoriteColors: ["teal", "red"].slice(0, 1 + (i % 2)),
      };
      assert.equal((await a.post("/collection/builder?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, entity))).status, 200);
      for (let k = 0; k < i % 3; k++) {
        const e = { _id: `b${i}-${k}`, eventType: k === 0 ? "commerce.purchases" : "web.pageViews", timestamp: new Date(now - (k + 1) * DAY).toISOString(), identityMap, ...(k === 0 ? { commerce: { order: { priceTotal: 10 + i } } } : { web: { webPageDetails: { name: "home" } } }) };
        assert.equal((await a.post("/collection/builder?syncValidation=true", xdmMessage(events, EVENT_CLASS, e))).status, 200);
      }
    }
    const schema = await a.post("/data/foundation/schemaregistry/tenant/schemas", { type: "object", title: "Members", allOf: [{ $ref: PROFILE_CLASS }] }, { accept: "application/vnd.adobe.xed+json; version=1" });
    assert.equal(schema.status, 201, schema.text);
    const descriptor = await a.post("/data/foundation/schemaregistry/tenant/descriptors", {
      "@type": "xdm:descriptorIdentity", "xdm:sourceSchema": obj(schema.json).$id, "xdm:sourceVersion": 1, "xdm:sourceProperty": "/personalEmail/address",
      "xdm:namespace": "Email", "xdm:property": "xdm:code", "xdm:isPrimary": true,
    }, { accept: "application/vnd.adobe.xed+json; version=1" });
    assert.equal(descriptor.status, 201, descriptor.text);
  });
  after(async () => h.close());

  test("the palette: attributes and event types from the data, with types, counts and examples", async () => {
    const r = await a.get(FIELDS);
    assert.equal(r.status, 200, r.text);
    const p = obj(r.json);
    const prof = obj(p.profile);
    assert.equal(prof.sampled, 30);
    const expected: [string, string, number][] = [
      ["person.age", "integer", 30], ["person.birthDate", "date", 30], ["person.name.firstName", "string", 30],
      ["loyalty.points", "number", 30], ["loyalty.isMember", "boolean", 30], ["loyalty.tier", "string", 30], ["favoriteColors", "array", 30],
    ];
    for (const [path, type, count] of expected) {
      const f = field(prof.fields, path);
      assert.ok(f, `${path} listed`);
      assert.deepEqual([f.type, f.count], [type, count], path);
    }
    assert.equal(field(prof.fields, "favoriteColors")!.items, "string");
    assert.deepEqual(field(prof.fields, "loyalty.tier")!.examples, ["gold", "silver", "bronze"]);
    assert.equal(field(prof.fields, "identityMap"), undefined, "identities are listed apart");
    assert.equal(arr(prof.fields).some((f) => String(obj(f).path).startsWith("identityMap")), false);

    const ev = obj(p.events);
    assert.equal(ev.sampled, 30, "10 profiles with one event, 10 with two");
    const types = arr(ev.eventTypes).map(obj);
    assert.deepEqual(types.map((t) => [t.eventType, t.count]), [["commerce.purchases", 20], ["web.pageViews", 10]]);
    assert.deepEqual([field(types[0]!.fields, "commerce.order.priceTotal")?.type, field(types[0]!.fields, "timestamp")?.type], ["integer", "date-time"]);
    assert.equal(field(types[0]!.fields, "web.webPageDetails.name"), undefined, "a type's fields are its own events' fields");
    assert.deepEqual(field(types[1]!.fields, "web.webPageDetails.name")?.examples, ["home"]);
    assert.deepEqual(obj(p.identities), { namespaces: ["email"], descriptors: [{ path: "personalEmail.address", namespace: "Email", primary: true }] });
  });

  test("the palette is cached until refreshed; another organization's holds nothing of this one's", async () => {
    const before = obj((await a.get(FIELDS)).json);
    assert.equal((await a.post("/collection/builder?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, { identityMap: { Email: [{ id: "new@example.com", primary: true }] }, mobilePhone: { number: "555" } }))).status, 200);
    const cached = obj((await a.get(FIELDS)).json);
    assert.deepEqual(cached, before);
    const fresh = obj((await a.get(`${FIELDS}?refresh=true`)).json);
    assert.equal(field(obj(fresh.profile).fields, "mobilePhone.number")?.type, "string");
    const other = obj((await client(h.url, { token: TOKEN_B, org: ORG_B }).get(FIELDS)).json);
    assert.deepEqual([obj(other.profile).sampled, obj(other.profile).fields, obj(other.events).eventTypes, obj(other.identities).namespaces], [0, [], [], []]);
  });

  test("live estimates equal the estimate API's, expression by expression", async () => {
    const expressions = [
      'loyalty.tier = "silver" and xEvent.exists(e => e.eventType = "commerce.purchases")',
      'loyalty.tier = "gold"',
      'xEvent.exists(e => e.eventType = "commerce.purchases")',
      "person.age > 1000",
      // Combinations of the expressions above: counted from their flags, equal all the same.
      'loyalty.tier = "gold" or xEvent.exists(e => e.eventType = "commerce.purchases")',
      'loyalty.tier = "gold" and xEvent.exists(e => e.eventType = "commerce.purchases") and person.age > 1000',
    ];
    const r = await a.post(ESTIMATE, { expressions });
    assert.equal(r.status, 200, r.text);
    const body = obj(r.json);
    assert.equal(body.totalRows, 31);
    const got = arr(body.estimates).map(obj);
    assert.equal(got.length, expressions.length);
    for (const [i, text] of expressions.entries()) {
      const want = await previewEstimate(text);
      assert.deepEqual(
        [got[i]!.estimatedSize, got[i]!.profilesReadSoFar, got[i]!.profilesMatchedSoFar, got[i]!.standardError, got[i]!.estimatedSizeRange],
        [want.estimatedSize, want.profilesReadSoFar, want.profilesMatchedSoFar, want.standardError, want.estimatedSizeRange],
        text,
      );
    }
    assert.deepEqual(combinations(expressions.map((x) => parse(x))), [null, null, null, null, { op: "or", of: [1, 2] }, { op: "and", of: [1, 2, 3] }], "the last two are combined, not evaluated");
    assert.deepEqual(got.map((e) => e.estimatedSize), [10, 10, 20, 0, 30, 0], "every third profile is silver and buys; 20 of 30 buy, the other 10 are gold");
  });

  test("bad requests: status, code and message", async () => {
    const cases: [unknown, number, string, string][] = [
      [{ expressions: ["person.age > 1", "person.age >"] }, 400, "SEGMENTD-PQL-400", "expressions[1] is not valid PQL: "],
      [{ expressions: [] }, 400, "UPLIB-101206-500", "Invalid request: expressions must NOT have fewer than 1 items"],
      [{ expressions: Array.from({ length: 21 }, () => "person.age > 1") }, 400, "UPLIB-101206-500", "Invalid request: expressions must NOT have more than 20 items"],
      [{ expressions: ["x = 1"], graphType: "full" }, 400, "UPLIB-101206-500", "Invalid request: graphType must be equal to one of the allowed values"],
      [{ expressions: [`person.name = "${"x".repeat(70_000)}"`] }, 400, "SEGMENTD-LIMIT-400", "expressions[0] is 70016 bytes; the limit is "],
    ];
    for (const [body, status, code, title] of cases) {
      const r = await a.post(ESTIMATE, body);
      assert.equal(r.status, status, r.text);
      const e = obj(r.json);
      assert.equal(e.type, `https://ns.adobe.com/aep/errors/${code}`, r.text);
      assert.ok(String(e.title).startsWith(title), `${String(e.title)} starts with ${title}`);
    }
    const q = await a.get(`${FIELDS}?refresh=maybe`);
    assert.equal(q.status, 400, q.text);
    assert.equal(obj(q.json).title, "Invalid request: querystring refresh must be boolean");
  });
});
