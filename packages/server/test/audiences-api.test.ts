/**
 * The Audiences API (#27) over real HTTP, with Adobe's requests as its OpenAPI
 * file and guides show them: every segment definition is a Platform audience
 * (both APIs see one record), external "custom upload" audiences are created
 * and listed with them, lifecycle rules hold, and bad input is refused with
 * nothing stored — for this tenant and others.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { API_KEY, DEFS, ORG_A, ORG_B, TOKEN_A, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const AUD = "/data/core/ups/audiences";
const JOBS = "/data/core/ups/segment/jobs";
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";

/** Adobe's sample request for a Platform-generated audience (segmentation.yaml CreatePlatformAudienceRequestBody). */
const PLATFORM_SAMPLE = {
  name: "People who ordered in the last 30 days",
  profileInstanceId: "ups",
  description: "This audience is generated to see people who ordered in the last 30 days.",
  type: "SegmentDefinition",
  expression: { type: "PQL", format: "pql/text", value: 'workAddress.country = "US"' },
  schema: { name: "_xdm.context.profile" },
  labels: ["core/C1"],
};

const ADOBE_HEADERS = {
  Accept: "application/json", "Content-Type": "application/json", Authorization: `Bearer ${TOKEN_A}`,
  "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod",
};

let h: Harness;
let a: Client;
let b: Client;

async function adobe(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const r = await fetch(h.url + path, { method, headers: ADOBE_HEADERS, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await r.text();
  return { status: r.status, json: text === "" ? {} : obj(JSON.parse(text)), text };
}

async function listAll(c: Client, query = ""): Promise<Record<string, unknown>[]> {
  const r = await c.get(`${AUD}?limit=100${query}`);
  assert.equal(r.status, 200, r.text);
  return arr(obj(r.json).children).map(obj);
}

function errorOf(json: unknown): { status: unknown; code: unknown; title: unknown } {
  const j = obj(json);
  const items = Object.values(obj(j.errors))[0] as { code: unknown }[] | undefined;
  return { status: j.status, code: items?.[0]?.code ?? j.type, title: j.title };
}

before(async () => {
  h = await startHarness("audiences");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
});
after(async () => h.close());

describe("Platform audiences are segment definitions", () => {
  test("a definition created through the definitions API is listed and read as an audience", async () => {
    const d = obj((await a.post(DEFS, definitionBody("aud-def-1", 'homeAddress.countryCode = "FR"', { description: "French customers" }))).json);
    const got = await a.get(`${AUD}/${d.id as string}`);
    assert.equal(got.status, 200, got.text);
    const x = obj(got.json);
    for (const [k, v] of Object.entries({
      id: d.id, audienceId: d.id, name: "aud-def-1", description: "French customers", namespace: "AEPSegments", type: "SegmentDefinition",
      originName: "REAL_TIME_CUSTOMER_PROFILE", lifecycleState: "published", createdBy: "static-token", isSystem: false,
      mergePolicyId: d.mergePolicyId, creationTime: d.creationTime, createEpoch: Math.floor((d.creationTime as number) / 1000), updateTime: d.updateTime,
    })) assert.deepEqual(x[k], v, k);
    assert.deepEqual(x.expression, d.expression);
    assert.deepEqual(x.labels, []);
    assert.deepEqual(x.definedOn, [{ "meta:resourceType": "unions", "meta:containerId": "tenant", $ref: "https://ns.adobe.com/xdm/context/profile__union" }]);
    assert.match(x._etag as string, /^"[0-9a-f-]{36}"$/);
    // The definitions API does not grow the audience fields.
    assert.equal(obj((await a.get(`${DEFS}/${d.id as string}`)).json).audience, undefined);
  });

  test("POST /audiences with Adobe's sample creates a definition the definitions API reads; edits flow both ways", async () => {
    const r = await adobe("POST", AUD, PLATFORM_SAMPLE);
    assert.equal(r.status, 201, r.text);
    const id = r.json.id as string;
    assert.equal(r.json.audienceId, id);
    assert.deepEqual(r.json.labels, ["core/C1"]);
    assert.equal(r.json.lifecycleState, "published");
    const def = obj((await a.get(`${DEFS}/${id}`)).json);
    assert.equal(def.name, PLATFORM_SAMPLE.name);
    assert.deepEqual(def.expression, PLATFORM_SAMPLE.expression);
    // Definitions API → audience.
    const p = await a.patch(`${DEFS}/${id}`, { ...def, name: "renamed through definitions" });
    assert.equal(p.status, 200, p.text);
    const aud = obj((await a.get(`${AUD}/${id}`)).json);
    assert.equal(aud.name, "renamed through definitions");
    assert.deepEqual(aud.labels, ["core/C1"], "a definitions PATCH keeps the audience's labels");
    // Audience → definitions API, with Adobe's PATCH sample.
    const patched = await adobe("PATCH", `${AUD}/${id}`, [{ op: "add", path: "/expression", value: { type: "PQL", format: "pql/text", value: 'workAddress.country = "CA"' } }]);
    assert.equal(patched.status, 201, patched.text);
    assert.equal(obj(patched.json.expression).value, 'workAddress.country = "CA"');
    assert.equal(obj(obj((await a.get(`${DEFS}/${id}`)).json).expression).value, 'workAddress.country = "CA"');
    // PUT replaces: the description left out is gone.
    const put = await adobe("PUT", `${AUD}/${id}`, { ...PLATFORM_SAMPLE, name: "put name", description: undefined });
    assert.equal(put.status, 201, put.text);
    const after = obj((await a.get(`${DEFS}/${id}`)).json);
    assert.equal(after.name, "put name");
    assert.equal(after.description, undefined);
    // DELETE through the audiences API deletes the definition.
    const del = await adobe("DELETE", `${AUD}/${id}`);
    assert.equal(del.status, 204);
    assert.equal(del.text, "");
    assert.equal((await a.get(`${DEFS}/${id}`)).status, 404);
  });

  test("dependencies and dependents follow inSegment; a referenced audience cannot be deleted", async () => {
    const parent = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-parent" })).json);
    const child = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-child", expression: { type: "PQL", format: "pql/text", value: `inSegment("${parent.id as string}")` } })).json);
    assert.deepEqual(child.dependencies, [parent.id]);
    assert.deepEqual(obj((await a.get(`${AUD}/${parent.id as string}`)).json).dependents, [child.id]);
    const listed = (await listAll(a, "&property=name==aud-parent"))[0]!;
    assert.deepEqual(listed.dependents, [child.id]);
    const del = await a.delete(`${AUD}/${parent.id as string}`);
    assert.equal(del.status, 400);
    assert.deepEqual(errorOf(del.json), { status: 400, code: "UPAPI-113631-403", title: "The audience cannot be deleted." });
    assert.equal((await a.get(`${AUD}/${parent.id as string}`)).status, 200);
  });
});

describe("lifecycle", () => {
  test("draft, published, inactive: transitions, refused ones, and what is evaluated", async () => {
    const draft = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-draft", lifecycleState: "draft" })).json);
    assert.equal(draft.lifecycleState, "draft");
    // A child of a draft cannot be published.
    const child = await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-child-of-draft", expression: { type: "PQL", format: "pql/text", value: `inSegment("${draft.id as string}")` } });
    assert.equal(child.status, 400);
    assert.deepEqual(errorOf(child.json), {
      status: 400, code: "UPAPI-113434-400",
      title: `There is a problem in audience validation. A published audience cannot reference audiences that are not published: ${draft.id as string}.`,
    });
    assert.equal((await listAll(a, "&property=name==aud-child-of-draft")).length, 0, "nothing stored");

    /** The definitions a "*" batch job evaluated (the job's per-definition `metrics.evaluation`). */
    const batchJob = async (): Promise<string[]> => {
      const job = await a.post(JOBS, { segments: [{ segmentId: "*" }] });
      assert.equal(job.status, 200, job.text);
      for (let i = 0; i < 200; i++) {
        const j = obj((await a.get(`${JOBS}/${obj(job.json).id as string}`)).json);
        if (j.status === "SUCCEEDED") return Object.keys(obj(obj(j.metrics).evaluation));
        assert.ok(j.status !== "FAILED", JSON.stringify(j));
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("the job did not finish");
    };
    const first = await batchJob();
    assert.ok(first.length > 0, "published audiences are evaluated");
    assert.ok(!first.includes(draft.id as string), "a draft is not evaluated");

    const published = await a.patch(`${AUD}/${draft.id as string}`, [{ op: "add", path: "/lifecycleState", value: "published" }]);
    assert.equal(published.status, 201, published.text);
    assert.ok((await batchJob()).includes(draft.id as string));

    const back = await a.patch(`${AUD}/${draft.id as string}`, [{ op: "add", path: "/lifecycleState", value: "draft" }]);
    assert.equal(back.status, 400);
    assert.equal(errorOf(back.json).title, "There is a problem in audience validation. A published audience cannot return to draft.");

    const deleted = await a.patch(`${AUD}/${draft.id as string}`, [{ op: "add", path: "/lifecycleState", value: "deleted" }]);
    assert.equal(deleted.status, 400);
    assert.deepEqual(errorOf(deleted.json), {
      status: 400, code: "UPAPI-113434-400",
      title: "There is a problem in audience validation. lifecycle field can not be modified to Delete using Patch operation",
    });

    // A published child keeps its parent from going inactive.
    const kid = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-kid", expression: { type: "PQL", format: "pql/text", value: `inSegment("${draft.id as string}")` } })).json);
    const inactive = await a.patch(`${AUD}/${draft.id as string}`, [{ op: "replace", path: "/lifecycleState", value: "inactive" }]);
    assert.equal(inactive.status, 400);
    assert.equal(errorOf(inactive.json).title, `There is a problem in audience validation. The audience cannot become inactive while published audiences depend on it: ${kid.id as string}.`);
    assert.equal(obj((await a.get(`${AUD}/${draft.id as string}`)).json).lifecycleState, "published", "nothing changed");

    const kidOff = await a.patch(`${AUD}/${kid.id as string}`, [{ op: "replace", path: "/lifecycleState", value: "inactive" }]);
    assert.equal(kidOff.status, 201, kidOff.text);
    const ids = await batchJob();
    assert.ok(!ids.includes(kid.id as string), "an inactive audience is not evaluated");
    assert.ok(ids.includes(draft.id as string));
    const create = await a.post(AUD, { ...PLATFORM_SAMPLE, name: "aud-deleted", lifecycleState: "deleted" });
    assert.equal(create.status, 400);
    assert.equal(errorOf(create.json).title, "There is a problem in audience validation. Cannot set lifecycleState as deleted");
  });
});

describe("external audiences", () => {
  let datasetId: string;
  before(async () => {
    const ds = await a.post("/data/foundation/catalog/dataSets", { name: "upload", schemaRef: { id: PROFILE_CLASS, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] } });
    assert.equal(ds.status, 201, ds.text);
    datasetId = String(arr(ds.json)[0]).split("/").pop()!;
  });

  test("a custom upload audience is created, listed with the definitions, and is not a definition", async () => {
    const defsBefore = obj(obj((await a.get(`${DEFS}?limit=1`)).json).page).totalCount;
    const r = await adobe("POST", AUD, { name: "Uploaded VIPs", description: "from the CRM", type: "ExternalSegment", audienceId: "crm-vip", originName: "CUSTOM_UPLOAD", datasetId, labels: ["core/C1"] });
    assert.equal(r.status, 201, r.text);
    for (const [k, v] of Object.entries({ audienceId: "crm-vip", namespace: "CustomerAudienceUpload", type: "ExternalSegment", originName: "CUSTOM_UPLOAD", lifecycleState: "published", datasetId, createdBy: "static-token" })) {
      assert.equal(r.json[k], v, k);
    }
    assert.notEqual(r.json.id, "crm-vip");
    assert.equal(obj(obj((await a.get(`${DEFS}?limit=1`)).json).page).totalCount, defsBefore, "no definition was created");
    const found = await listAll(a, "&property=audienceId==crm-vip");
    assert.deepEqual(found.map((x) => x.id), [r.json.id]);
    assert.deepEqual((await listAll(a, "&property=namespace==CustomerAudienceUpload")).map((x) => x.id), [r.json.id]);

    const dup = await a.post(AUD, { name: "again", type: "ExternalSegment", audienceId: "crm-vip" });
    assert.equal(dup.status, 409);
    assert.equal(errorOf(dup.json).title, "An audience with namespace CustomerAudienceUpload and audienceId crm-vip already exists in sandbox 'prod'.");
    // Another sandbox may use the same key.
    assert.equal((await client(h.url, { sandbox: "dev" }).post(AUD, { name: "dev copy", type: "ExternalSegment", audienceId: "crm-vip" })).status, 201);

    const put = await adobe("PUT", `${AUD}/${r.json.id as string}`, { name: "Uploaded VIPs 2", audienceId: "crm-vip", namespace: "CustomerAudienceUpload", type: "ExternalSegment", lifecycleState: "inactive", datasetId });
    assert.equal(put.status, 201, put.text);
    assert.equal(put.json.name, "Uploaded VIPs 2");
    assert.equal(put.json.description, undefined);
    assert.deepEqual(put.json.labels, []);
    const ns = await a.put(`${AUD}/${r.json.id as string}`, { name: "x", namespace: "AAM" });
    assert.equal(ns.status, 400);
    assert.deepEqual(errorOf(ns.json), { status: 400, code: "UPAPI-113434-400", title: "There is a problem in audience validation. Namespace is immutable field." });
    assert.equal(obj((await a.get(`${AUD}/${r.json.id as string}`)).json).name, "Uploaded VIPs 2", "nothing changed");
  });

  test("refused: an unknown dataset, a Platform namespace, an expression; nothing stored", async () => {
    const before = (await listAll(a)).length;
    const cases: [Record<string, unknown>, number, string, string][] = [
      [{ name: "n", type: "ExternalSegment", audienceId: "x1", datasetId: "no-such-dataset" }, 400, "UPLIB-101554-503", "Dataset no-such-dataset cannot be retrieved from Catalog: it does not exist in sandbox 'prod'."],
      [{ name: "n", type: "ExternalSegment", audienceId: "x2", namespace: "AEPSegments" }, 400, "UPAPI-113434-400", "There is a problem in audience validation. The namespace AEPSegments is reserved for Platform audiences."],
      [{ name: "n", type: "ExternalSegment", audienceId: "x3", expression: PLATFORM_SAMPLE.expression }, 400, "UPAPI-113434-400", "There is a problem in audience validation. An external audience has no expression: its members are set by ingestion."],
      [{ name: "n", type: "Bogus" }, 400, "UPAPI-113434-400", 'There is a problem in audience validation. type must be SegmentDefinition or ExternalSegment, not "Bogus".'],
      [{ name: "n", type: "ExternalSegment", originName: "AUDIENCE_ORCHESTRATION" }, 400, "UPAPI-113434-400", "There is a problem in audience validation. namespace is a mandatory field of an external audience."],
      [{ type: "SegmentDefinition", expression: PLATFORM_SAMPLE.expression }, 400, "UPAPI-113434-400", "There is a problem in audience validation. name is a mandatory field."],
    ];
    for (const [body, status, code, title] of cases) {
      const r = await a.post(AUD, body);
      assert.equal(r.status, status, JSON.stringify(body));
      assert.deepEqual(errorOf(r.json), { status, code, title });
    }
    const wrongType = await a.post(AUD, { name: 42 });
    assert.equal(wrongType.status, 400);
    const malformed = await fetch(h.url + AUD, { method: "POST", headers: ADOBE_HEADERS, body: '{"name": "x",' });
    assert.equal(malformed.status, 400);
    assert.equal((await listAll(a)).length, before, "nothing was stored");
  });

  test("members arrive by ingestion under the audience's namespace; segmentMembership.ups cannot be ingested", async () => {
    const msg = (entity: Record<string, unknown>) => ({
      header: { schemaRef: { id: PROFILE_CLASS, contentType: "application/vnd.adobe.xed-full+json;version=1" }, datasetId },
      body: { xdmMeta: { schemaRef: { id: PROFILE_CLASS } }, xdmEntity: entity },
    });
    const when = "2026-11-20T10:00:00Z";
    const ok = await a.post("/collection/upload-inlet?syncValidation=true", msg({
      identityMap: { Email: [{ id: "vip@example.com", primary: true }] },
      segmentMembership: { CustomerAudienceUpload: { "crm-vip": { status: "realized", lastQualificationTime: when } } },
    }));
    assert.equal(ok.status, 200, ok.text);
    const ups = await a.post("/collection/upload-inlet?syncValidation=true", msg({
      identityMap: { Email: [{ id: "ups@example.com", primary: true }] }, segmentMembership: { ups: { x: { status: "realized" } } },
    }));
    assert.equal(ups.status, 400);
    assert.match(ups.text, /segmentMembership\.ups is maintained by the segmentation service/);
    const bad = await a.post("/collection/upload-inlet?syncValidation=true", msg({
      identityMap: { Email: [{ id: "bad@example.com", primary: true }] }, segmentMembership: { CustomerAudienceUpload: { "crm-vip": { status: "maybe" } } },
    }));
    assert.equal(bad.status, 400);
    assert.match(bad.text, /SEGMENT_MEMBERSHIP_INVALID|status "realized" or "exited"/);

    const entity = async (id: string) => a.get(`/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${encodeURIComponent(id)}&entityIdNS=Email`);
    const got = await entity("vip@example.com");
    assert.equal(got.status, 200, got.text);
    const sm = obj(obj(obj(Object.values(obj(got.json))[0]).entity).segmentMembership);
    assert.deepEqual(sm.CustomerAudienceUpload, { "crm-vip": { status: "realized", lastQualificationTime: when } });
    assert.ok("ups" in sm);
    assert.equal((await entity("ups@example.com")).status, 404, "the refused record was not stored");
    assert.equal((await entity("bad@example.com")).status, 404, "the refused record was not stored");
  });
});

describe("list, bulk-get, tenants", () => {
  test("filters, sort and paging with Adobe's envelope", async () => {
    for (const n of ["Zeta list", "alpha list", "Mid LIST"]) assert.equal((await a.post(AUD, { ...PLATFORM_SAMPLE, name: n, description: `about ${n}` })).status, 201);
    const names = (await listAll(a, "&name=LIST&sort=name:asc")).map((x) => x.name);
    assert.deepEqual(names, ["Mid LIST", "Zeta list", "alpha list"], "case-insensitive contains; code-point order");
    assert.deepEqual((await listAll(a, "&description=about%20zeta")).map((x) => x.name), ["Zeta list"]);
    assert.equal((await listAll(a, "&entityType=_xom.context.account")).length, 0);
    const page = await a.get(`${AUD}?name=list&sort=name:desc&start=1&limit=1`);
    const body = obj(page.json);
    assert.deepEqual(arr(body.children).map((x) => obj(x).name), ["Zeta list"]);
    assert.deepEqual(body._page, { totalCount: 3, totalPages: 3, sortField: "name", sort: "desc", pageSize: 1, limit: 1, start: 1, next: 2 });
    assert.equal(obj(obj(body._links).next).href, "@/audiences?start=2&limit=1&sort=name%3Adesc&name=list&totalCount=3");
    const last = obj((await a.get(`${AUD}?name=list&start=2&limit=1`)).json);
    assert.deepEqual(last._links, {});
    assert.equal(obj(last._page).next, undefined);
    for (const [q, msg] of [["sort=bogus:asc", 'Invalid sort "bogus:asc"'], ["property=name", 'Invalid property "name"'], ["limit=0", "Invalid request: querystring limit must be >= 1"]] as const) {
      const r = await a.get(`${AUD}?${q}`);
      assert.equal(r.status, 400, q);
      assert.ok(String(obj(r.json).title).includes(msg), `${q}: ${r.text}`);
    }
  });

  test("aepp's getAudiences loop (limit and entityType always sent, start = _page.next until it is absent) reads every audience once", async () => {
    const total = obj(obj((await a.get(`${AUD}?limit=1`)).json)._page).totalCount as number;
    assert.ok(total > 5);
    const seen: string[] = [];
    let res = obj((await a.get(`${AUD}?limit=2&entityType=_xdm.context.profile`)).json);
    seen.push(...arr(res.children).map((c) => obj(c).id as string));
    for (let next = obj(res._page).next ?? 0; next !== 0; next = obj(res._page).next ?? 0) {
      res = obj((await a.get(`${AUD}?limit=2&entityType=_xdm.context.profile&start=${String(next)}`)).json);
      seen.push(...arr(res.children).map((c) => obj(c).id as string));
    }
    assert.equal(seen.length, total);
    assert.equal(new Set(seen).size, total);
    // aepp's PLATFORM_AUDIENCE_DICT carries ttlInDays.
    const created = await adobe("POST", AUD, { ...PLATFORM_SAMPLE, name: "aepp sample", ttlInDays: 60 });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.ttlInDays, 60);
    // aepp's EXTERNAL_AUDIENCE_DICT (its createAudience takes either): a custom upload audience; ttlInDays arrives as a string.
    const external = await adobe("POST", AUD, {
      name: "Sample external audience", description: "A sample version of an external audience",
      fields: [{ name: "ppid", type: "string", identityNs: "email" }, { name: "list_id", type: "string", labels: ["core/C2", "custom/deep"] }],
      sourceSpec: { params: { path: "activation/sample-source/example.csv", type: "file", sourceType: "Cloud Storage", baseConnectionId: "1d1d4bc5-b527-46a3-9863-530246a61b2b" } },
      ttlInDays: "40", labels: ["core/C1"], audienceType: "people", originName: "CUSTOM_UPLOAD",
    });
    assert.equal(external.status, 201, external.text);
    for (const [k, v] of Object.entries({ type: "ExternalSegment", originName: "CUSTOM_UPLOAD", namespace: "CustomerAudienceUpload", ttlInDays: 40, audienceId: external.json.id })) {
      assert.deepEqual(external.json[k], v, k);
    }
  });

  test("bulk-get mixes kinds and reports missing ids; counts and none-found are refused", async () => {
    const p = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "bulk-p" })).json);
    const e = obj((await a.post(AUD, { name: "bulk-e", type: "ExternalSegment", audienceId: "bulk-e" })).json);
    const r = await adobe("POST", `${AUD}/bulk-get`, { ids: [{ id: p.id }, { id: e.id }, { id: "missing-1" }] });
    assert.equal(r.status, 207, r.text);
    const results = obj(r.json.results);
    assert.equal(obj(results[p.id as string]).type, "SegmentDefinition");
    assert.equal(obj(results[e.id as string]).type, "ExternalSegment");
    assert.deepEqual(obj(obj(results["missing-1"]).errors), { 404: [{ code: 404, message: "Not found." }] });
    const none = await a.post(`${AUD}/bulk-get`, { ids: [{ id: "m1" }, { id: "m2" }] });
    assert.equal(none.status, 404);
    assert.deepEqual(errorOf(none.json), { status: 404, code: "UPAPI-113000-404", title: "The entity m1,m2 is not found." });
    for (const n of [0, 101]) {
      const bad = await a.post(`${AUD}/bulk-get`, { ids: Array.from({ length: n }, (_, i) => ({ id: `i${i}` })) });
      assert.equal(bad.status, 400);
      assert.equal(errorOf(bad.json).title, "The number of requested IDs is invalid. Cannot be 0 or exceed 100.");
    }
  });

  test("another organization reads, changes and deletes nothing of this one's", async () => {
    const p = obj((await a.post(AUD, { ...PLATFORM_SAMPLE, name: "tenant-p" })).json);
    const e = obj((await a.post(AUD, { name: "tenant-e", type: "ExternalSegment", audienceId: "tenant-e" })).json);
    for (const id of [p.id as string, e.id as string]) {
      const got = await b.get(`${AUD}/${id}`);
      assert.equal(got.status, 404);
      assert.deepEqual(errorOf(got.json), { status: 404, code: "UPAPI-113430-404", title: `The audience entity ${id} is not found. Use a valid entity and try again.` });
      assert.equal((await b.put(`${AUD}/${id}`, { name: "stolen" })).status, 404);
      assert.equal((await b.patch(`${AUD}/${id}`, [{ op: "add", path: "/name", value: "stolen" }])).status, 404);
      assert.equal((await b.delete(`${AUD}/${id}`)).status, 404);
      assert.equal((await b.post(`${AUD}/bulk-get`, { ids: [{ id }] })).status, 404);
      const mine = obj((await a.get(`${AUD}/${id}`)).json);
      assert.ok(mine.name === "tenant-p" || mine.name === "tenant-e", "unchanged");
    }
    assert.ok(!(await listAll(b)).some((x) => x.id === p.id || x.id === e.id));
    assert.equal((await a.delete(`${AUD}/${e.id as string}`)).status, 204);
    assert.equal((await a.delete(`${AUD}/${e.id as string}`)).status, 404);
  });
});
