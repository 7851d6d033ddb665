// POST /data/core/ups/access/entities (several profiles in one request) and
// DELETE /data/core/ups/access/entities (an entity by identity) over real HTTP,
// on the store SEGMENTD_TEST_STORE selects: responses, exact errors for bad
// input with nothing read or deleted, and sandbox / org isolation.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { call, ORG, OTHER_ORG, startProfileServer, type HttpHarness } from "./http-harness.js";
import { STORE_KIND } from "./test-store.js";

type Obj = Record<string, unknown>;
const PATH = "/data/core/ups/access/entities";
const PROFILE = "_xdm.context.profile";
const PROD: TenantScope = { orgId: ORG, sandboxName: "prod" };
const DEV: TenantScope = { orgId: ORG, sandboxName: "dev" };
const OTHER: TenantScope = { orgId: OTHER_ORG, sandboxName: "prod" };
const T = Date.UTC(2026, 10, 20);

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

const id = (entityId: string, code: string) => ({ entityId, entityIdNS: { code } });

/** Asserts a UPS error body (status, code, title) and returns its first item. */
function upsError(r: { status: number; json: unknown; text: string }, status: number, code: string, title: string): Obj {
  assert.equal(r.status, status, r.text);
  const body = r.json as Obj;
  assert.equal(body["status"], status);
  assert.equal(body["title"], title);
  const items = (body["errors"] as Record<string, Obj[]>)[String(status)]!;
  assert.equal(items[0]!["code"], code);
  return items[0]!;
}

describe(`profile access: bulk read and delete (${STORE_KIND})`, () => {
  let h: HttpHarness;
  let annPid: string, bobPid: string;

  const profileIds = async (scope: TenantScope, ...ids: Array<[string, string]>) =>
    Promise.all(ids.map(([ns, v]) => h.ts.store.findProfileId(scope, { namespace: ns, id: v })));

  before(async () => {
    h = await startProfileServer();
    h.policies.set("pdg-ts", { id: "pdg-ts", identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    h.policies.set("none-ts", { id: "none-ts", identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } });
    const s = h.ts.store;
    for (const [scope, label] of [[PROD, "Prod"], [DEV, "Dev"], [OTHER, "Other"]] as const) {
      const crm = (await s.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T)).id;
      const ev = (await s.createDataset(scope, { name: "events", schemaClass: "experienceevent", profileEnabled: true }, T)).id;
      const r = await ingestRecords(s, scope, crm, rec(
        { identityMap: { Email: [{ id: "ann@x.com", primary: true }], ECID: [{ id: "E-ann" }] }, person: { name: { firstName: `${label}Ann` } }, loyalty: { tier: "gold" } },
        { identityMap: { ECID: [{ id: "E-bob", primary: true }] }, person: { name: { firstName: `${label}Bob` } } },
      ), { now: T });
      assert.deepEqual(r.failed, []);
      const e = await ingestRecords(s, scope, ev, rec(
        { _id: "pv-1", timestamp: new Date(T).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: "E-ann", primary: true }] } },
      ), { now: T });
      assert.deepEqual(e.failed, []);
    }
    annPid = (await s.findProfileId(PROD, { namespace: "ecid", id: "E-ann" }))!;
    bobPid = (await s.findProfileId(PROD, { namespace: "ecid", id: "E-bob" }))!;
  });
  after(async () => { await h.close(); });

  describe("POST (several entities)", () => {
    it("answers each found profile once, keyed by its entity id, with the identity that found it", async () => {
      const r = await call(h.url, "POST", PATH, {
        schema: { name: PROFILE }, mergePolicyId: "pdg-ts", fields: ["person.name"],
        identities: [id("E-ann", "ECID"), id("ann@x.com", "Email"), id("E-bob", "ECID"), id("nobody", "ECID")],
        timeFilter: { startTime: 0, endTime: T + 1 }, limit: 10, orderBy: "-timestamp",
      });
      assert.equal(r.status, 200, r.text);
      const body = r.json as Record<string, Obj>;
      assert.deepEqual(Object.keys(body).sort(), [annPid, bobPid].sort());
      assert.deepEqual(body[annPid]!["requestedIdentity"], { entityId: "E-ann", entityIdNS: { code: "ECID" } });
      assert.equal(body[annPid]!["entityId"], annPid);
      assert.deepEqual(body[annPid]!["mergePolicy"], { id: "pdg-ts" });
      assert.deepEqual(body[annPid]!["entity"], { person: { name: { firstName: "ProdAnn" } } });
      assert.deepEqual(body[bobPid]!["entity"], { person: { name: { firstName: "ProdBob" } } });
      assert.equal(body[bobPid]!["optedOut"], false);
    });

    it("without stitching, two identities of one graph are two entities", async () => {
      const r = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, mergePolicyId: "none-ts", identities: [id("ann@x.com", "Email"), id("E-ann", "ECID"), id("ann@x.com", "email"), id("E-ann", "ECID")] });
      assert.equal(r.status, 200, r.text);
      const body = r.json as Record<string, Obj>;
      assert.deepEqual(Object.keys(body), [annPid, `${annPid}:ecid:E-ann`]);
      assert.deepEqual(body[annPid]!["requestedIdentity"], { entityId: "ann@x.com", entityIdNS: { code: "Email" } });
      assert.deepEqual(body[`${annPid}:ecid:E-ann`]!["requestedIdentity"], { entityId: "E-ann", entityIdNS: { code: "ECID" } });
    });

    it("reads the caller's sandbox and org only", async () => {
      const body = { schema: { name: PROFILE }, mergePolicyId: "pdg-ts", fields: ["person.name.firstName"], identities: [id("E-ann", "ECID")] };
      const prod = await call(h.url, "POST", PATH, body);
      const dev = await call(h.url, "POST", PATH, body, { sandbox: "dev" });
      const other = await call(h.url, "POST", PATH, body, { org: OTHER_ORG });
      const first = (r: { json: unknown }) => (Object.values(r.json as Obj)[0] as Obj)["entity"];
      assert.deepEqual(first(prod), { person: { name: { firstName: "ProdAnn" } } });
      assert.deepEqual(first(dev), { person: { name: { firstName: "DevAnn" } } });
      assert.deepEqual(first(other), { person: { name: { firstName: "OtherAnn" } } });
      const [devAnn] = await profileIds(DEV, ["ecid", "E-ann"]);
      assert.deepEqual(Object.keys(dev.json as Obj), [devAnn]);
      const missing = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: [id("nobody", "ECID")] }, { sandbox: "dev" });
      assert.equal(missing.status, 200);
      assert.deepEqual(missing.json, {});
    });

    it("refuses an identity without entityIdNS, naming the field", async () => {
      const r = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: [id("E-ann", "ECID"), { entityId: "E-bob" }] });
      const item = upsError(r, 400, "UPLIB-101206-500", "Invalid request: identities.1.entityIdNS is required");
      assert.equal(item["field"], "identities.1.entityIdNS");
      assert.equal(item["message"], "identities.1.entityIdNS is required");
    });

    it("validates the body against the route's schema", async () => {
      const r = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: [{ entityId: 7, entityIdNS: { code: "ECID" } }] });
      const item = upsError(r, 400, "UPLIB-101206-500", "Invalid request: identities.0.entityId must be string");
      assert.equal(item["field"], "identities.0.entityId");
    });

    it("refuses an unknown merge policy", async () => {
      const r = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, mergePolicyId: "nope", identities: [id("E-ann", "ECID")] });
      upsError(r, 404, "SEGMENTD-NOT-FOUND-404", "Merge policy with id 'nope' was not found");
    });

    it("refuses more than 100 identities, and none", async () => {
      const many = Array.from({ length: 101 }, (_, i) => id(`E-${i}`, "ECID"));
      upsError(await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: many }), 400, "SEGMENTD-LIMIT-400",
        "At most 100 identities can be read in one request; got 101");
      const hundred = await call(h.url, "POST", PATH, { schema: { name: PROFILE }, mergePolicyId: "pdg-ts", identities: [...many.slice(0, 99), id("E-bob", "ECID")] });
      assert.equal(hundred.status, 200, hundred.text);
      assert.deepEqual(Object.keys(hundred.json as Obj), [bobPid]);
      upsError(await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: [] }), 400, "SEGMENTD-BAD-REQUEST-400",
        "identities must list at least one identity");
    });

    it("refuses another schema, a missing schema and a reversed time filter", async () => {
      upsError(await call(h.url, "POST", PATH, { schema: { name: "_xdm.context.experienceevent" }, identities: [id("E-ann", "ECID")] }), 400,
        "SEGMENTD-BAD-REQUEST-400", "schema.name must be _xdm.context.profile: only profiles can be read in bulk");
      const noSchema = upsError(await call(h.url, "POST", PATH, { identities: [id("E-ann", "ECID")] }), 400, "UPLIB-101206-500", "Invalid request: schema is required");
      assert.equal(noSchema["field"], "schema");
      upsError(await call(h.url, "POST", PATH, { schema: { name: PROFILE }, identities: [id("E-ann", "ECID")], timeFilter: { startTime: 10, endTime: 5 } }), 400,
        "SEGMENTD-BAD-REQUEST-400", "timeFilter.startTime must not be after timeFilter.endTime");
    });
  });

  describe("DELETE (an entity by identity)", () => {
    const q = (params: Record<string, string>) => `${PATH}?${new URLSearchParams(params).toString()}`;
    let counts: () => Promise<string>;
    beforeEach(() => {
      // Everything that exists, per sandbox and org: a bad request must leave it all.
      counts = async () => JSON.stringify(await Promise.all([PROD, DEV, OTHER].map(async (s) => [
        await h.ts.store.countProfiles(s),
        ...(await profileIds(s, ["ecid", "E-ann"], ["email", "ann@x.com"], ["ecid", "E-bob"])),
        (await h.ts.store.getEvents(s, { namespace: "ecid", id: "E-ann" }, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } })).events.length,
      ])));
    });

    it("refuses bad input with exact errors and deletes nothing", async () => {
      const before = await counts();
      upsError(await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "E-ann" })), 400, "SEGMENTD-BAD-REQUEST-400",
        "entityIdNS is required: entities are deleted by identity (ID:NS)");
      const noId = upsError(await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityIdNS: "ECID" })), 400, "UPLIB-101206-500",
        "Invalid request: querystring entityId is required");
      assert.equal(noId["field"], "entityId");
      upsError(await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "E-ann", entityIdNS: "ECID", mergePolicyId: "nope" })), 404,
        "SEGMENTD-NOT-FOUND-404", "Merge policy with id 'nope' was not found");
      upsError(await call(h.url, "DELETE", q({ "schema.name": "_xdm.context.experienceevent", entityId: "E-ann", entityIdNS: "ECID" })), 400,
        "SEGMENTD-BAD-REQUEST-400", "schema.name must be _xdm.context.profile to delete an entity");
      upsError(await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "nobody", entityIdNS: "ECID" })), 404,
        "SEGMENTD-NOT-FOUND-404", "Profile with id 'ECID:nobody' was not found");
      assert.equal(await counts(), before);
    });

    it("deletes the identity's records and unlinks it, in the caller's sandbox only", async () => {
      const before = JSON.parse(await counts()) as unknown[][];
      const r = await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "E-bob", entityIdNS: "ECID", mergePolicyId: "pdg-ts" }), undefined, { sandbox: "dev" });
      assert.equal(r.status, 202, r.text);
      assert.equal(r.text, "");
      const afterDev = JSON.parse(await counts()) as unknown[][];
      assert.deepEqual(afterDev[0], before[0], "prod untouched");
      assert.deepEqual(afterDev[2], before[2], "the other org untouched");
      assert.equal(afterDev[1]![0], (before[1]![0] as number) - 1, "dev lost Bob's profile");
      assert.equal(afterDev[1]![3], null);
      const gone = await call(h.url, "GET", `${PATH}?schema.name=${PROFILE}&entityId=E-bob&entityIdNS=ECID&mergePolicyId=pdg-ts`, undefined, { sandbox: "dev" });
      assert.equal(gone.status, 404);
      const prodBob = await call(h.url, "GET", `${PATH}?schema.name=${PROFILE}&entityId=E-bob&entityIdNS=ECID&mergePolicyId=pdg-ts`);
      assert.equal(prodBob.status, 200);
    });

    it("deleting one identity of a graph removes its events and keeps the rest of the profile", async () => {
      const r = await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "E-ann", entityIdNS: "ECID" }));
      assert.equal(r.status, 202, r.text);
      const [ecidPid, emailPid] = await profileIds(PROD, ["ecid", "E-ann"], ["email", "ann@x.com"]);
      assert.equal(ecidPid, null);
      assert.equal(emailPid, annPid);
      const ann = await call(h.url, "GET", `${PATH}?schema.name=${PROFILE}&entityId=ann@x.com&entityIdNS=Email&mergePolicyId=pdg-ts&fields=person.name.firstName`);
      assert.deepEqual((Object.values(ann.json as Obj)[0] as Obj)["entity"], { person: { name: { firstName: "ProdAnn" } } });
      const events = await call(h.url, "GET", `${PATH}?schema.name=_xdm.context.experienceevent&relatedSchema.name=${PROFILE}&relatedEntityId=ann@x.com&relatedEntityIdNS=Email&mergePolicyId=pdg-ts`);
      assert.deepEqual((events.json as Obj)["children"], [], "the page view keyed by E-ann is gone");
      const devEvents = await call(h.url, "GET", `${PATH}?schema.name=_xdm.context.experienceevent&relatedSchema.name=${PROFILE}&relatedEntityId=E-ann&relatedEntityIdNS=ECID&mergePolicyId=pdg-ts`, undefined, { sandbox: "dev" });
      assert.equal(((devEvents.json as Obj)["children"] as unknown[]).length, 1, "dev still has its page view");
      const again = await call(h.url, "DELETE", q({ "schema.name": PROFILE, entityId: "E-ann", entityIdNS: "ECID" }));
      upsError(again, 404, "SEGMENTD-NOT-FOUND-404", "Profile with id 'ECID:E-ann' was not found");
    });
  });
});
