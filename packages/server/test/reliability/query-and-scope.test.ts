/**
 * Issue #22, items 5 (query parameters) and 8 (sandbox scope), over real HTTP
 * on the store SEGMENTD_TEST_STORE picks.
 *
 * Numeric query parameters: "1e309" used to pass the querystring schemas as
 * Infinity (Ajv takes it for an integer) and reach SQLite ("datatype
 * mismatch") or PostgreSQL as a 500. Every bound is now in the schema, so the
 * answer is the usual 400 naming the parameter and the bound, before any store
 * is called, identically on both stores; the largest allowed values still work.
 *
 * Sandbox scope: a request naming the `dev` sandbox used to read, rename,
 * update and cancel `prod` work orders and dataset expirations of its org by id.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ORG_B, TOKEN_B, arr, client, obj, startHarness, type Client, type Harness, type Res } from "../helpers/server-harness.js";

const CATALOG = "/data/foundation/catalog/dataSets";
const JOBS = "/data/core/ups/segment/jobs";
const SCHEDULES = "/data/core/ups/config/schedules";
const DEFS = "/data/core/ups/segment/definitions";
const MPS = "/data/core/ups/config/mergePolicies";
const EXPORTS = "/data/core/ups/export/jobs";
const PREVIEWS = "/data/core/ups/preview";
const TTL = "/data/core/hygiene/ttl";
const WO = "/data/core/hygiene/workorder";
const BAD_QUERY = "UPLIB-101206-500";
const MAX_OFFSET = 1_000_000_000;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** The service's usual 400 for a querystring schema violation, with exactly one problem. */
function assertQueryError(r: Res, param: string, problem: string, what: string): void {
  assert.equal(r.status, 400, `${what}: ${r.text.slice(0, 300)}`);
  const body = obj(r.json);
  const message = `querystring ${param} ${problem}`;
  assert.equal(typeof body.requestId, "string", what);
  assert.deepEqual({ ...body, requestId: undefined }, {
    requestId: undefined,
    errors: { "400": [{ code: BAD_QUERY, message, field: param }] },
    type: `https://ns.adobe.com/aep/errors/${BAD_QUERY}`,
    title: `Invalid request: ${message}`,
    status: 400,
  }, what);
}

describe("numeric query parameters are bounded: a 400 naming the parameter and bound, on both stores", () => {
  let h: Harness;
  let a: Client;
  let b: Client;
  before(async () => {
    h = await startHarness("query-bounds");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
  });
  after(async () => h.close());

  const cases: Array<[string, string, string]> = [
    // The three routes of the issue, with 1e309 (Infinity once coerced) and 1e21 (an integer past 2^53).
    [`${CATALOG}?start=1e309`, "start", `must be <= ${MAX_OFFSET}`],
    [`${CATALOG}?start=1e21`, "start", `must be <= ${MAX_OFFSET}`],
    [`${CATALOG}?start=-1e309`, "start", "must be >= 0"],
    [`${CATALOG}?limit=1e309`, "limit", "must be <= 100"],
    [`${CATALOG}?start=0.5`, "start", "must be integer"],
    [`${JOBS}?start=1e309`, "start", `must be <= ${MAX_OFFSET}`],
    [`${JOBS}?start=1000000001`, "start", `must be <= ${MAX_OFFSET}`],
    [`${JOBS}?limit=1e309`, "limit", `must be <= ${MAX_SAFE}`],
    [`${JOBS}?limit=NaN`, "limit", "must be integer"],
    [`${SCHEDULES}?start=1e309`, "start", `must be <= ${MAX_OFFSET}`],
    [`${SCHEDULES}?limit=1e309`, "limit", `must be <= ${MAX_SAFE}`],
    [`${SCHEDULES}?start=-1`, "start", "must be >= 0"],
    // The other numeric query parameters.
    [`${DEFS}?start=1e309`, "start", `must be <= ${MAX_OFFSET}`],
    [`${DEFS}?page=1e309`, "page", "must be <= 1000000"],
    [`${DEFS}?page=1000001`, "page", "must be <= 1000000"],
    [`${DEFS}?limit=1e309`, "limit", `must be <= ${MAX_SAFE}`],
    [`${MPS}?version=1e309`, "version", "must be <= 2147483647"],
    [`${MPS}?version=2147483648`, "version", "must be <= 2147483647"],
    [`${MPS}?version=-1`, "version", "must be >= 0"],
    [`${MPS}?limit=1e309`, "limit", `must be <= ${MAX_SAFE}`],
    [`${EXPORTS}?limit=1e309`, "limit", `must be <= ${MAX_SAFE}`],
    [`${PREVIEWS}/no-such-preview?offset=1e309`, "offset", `must be <= ${MAX_OFFSET}`],
    [`${PREVIEWS}/no-such-preview?limit=1001`, "limit", "must be <= 1000"],
  ];

  it("refuses out-of-range, non-finite and non-integer values; another org's request in the same test succeeds", async () => {
    const created = await a.post(CATALOG, { name: "kept", schemaClass: "profile" });
    assert.equal(created.status, 201);
    for (const [path, param, problem] of cases) assertQueryError(await a.get(path), param, problem, path);
    // Org B, and org A itself, are still served; org A's dataset is still there and nothing else appeared.
    const other = await b.get(`${CATALOG}?start=0&limit=10`);
    assert.equal(other.status, 200);
    assert.deepEqual(other.json, {});
    const mine = await a.get(CATALOG);
    assert.equal(mine.status, 200);
    assert.deepEqual(Object.values(obj(mine.json)).map((d) => obj(d).name), ["kept"]);
    assert.equal((await b.get(JOBS)).status, 200);
    assert.equal((await b.get(SCHEDULES)).status, 200);
  });

  it("accepts the largest allowed values on every store: empty pages, limits clamped to the page size", async () => {
    const ok: Array<[string, (json: unknown) => void]> = [
      [`${CATALOG}?start=${MAX_OFFSET}&limit=100`, (j) => assert.deepEqual(j, {})],
      [`${JOBS}?start=${MAX_OFFSET}&limit=${MAX_SAFE}`, (j) => assert.deepEqual(arr(obj(j).children), [])],
      [`${SCHEDULES}?start=${MAX_OFFSET}&limit=${MAX_SAFE}`, (j) => assert.deepEqual(arr(obj(j).children), [])],
      [`${DEFS}?start=${MAX_OFFSET}&limit=${MAX_SAFE}`, (j) => assert.deepEqual(obj(obj(j).page).limit, 100)],
      [`${DEFS}?page=1000000&limit=100`, (j) => assert.deepEqual(obj(obj(j).page).start, 100_000_000)],
      [`${MPS}?version=2147483647&limit=${MAX_SAFE}`, (j) => assert.deepEqual(arr(obj(j).children), [])],
      [`${EXPORTS}?limit=${MAX_SAFE}`, (j) => assert.deepEqual(arr(obj(j).records), [])],
    ];
    for (const [path, check] of ok) {
      const r = await a.get(path);
      assert.equal(r.status, 200, `${path}: ${r.text.slice(0, 300)}`);
      check(r.json);
    }
  });
});

describe("hygiene resources by id stay in the sandbox the request names, on both stores", () => {
  let h: Harness;
  let prod: Client;
  let dev: Client;
  let orgWide: Client;
  let b: Client;
  let ttlId = "";
  let datasetId = "";
  let workorderId = "";

  const datasetOf = (r: Res): string => String(arr(r.json)[0]).replace("@/dataSets/", "");

  before(async () => {
    h = await startHarness("sandbox-scope");
    prod = client(h.url);
    dev = client(h.url, { sandbox: "dev" });
    orgWide = client(h.url, { sandbox: null });
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    datasetId = datasetOf(await prod.post(CATALOG, { name: "expiring", schemaClass: "profile" }));
    const ttl = await prod.post(TTL, { datasetId, displayName: "prod expiry", description: "keep", expiry: "2030-01-01" });
    assert.equal(ttl.status, 201, ttl.text);
    ttlId = String(obj(ttl.json).ttlId);
    const crm = datasetOf(await prod.post(CATALOG, { name: "crm", schemaClass: "profile" }));
    const wo = await prod.post(WO, { action: "delete_identity", datasetId: crm, displayName: "prod order", description: "keep", identities: [{ namespace: { code: "email" }, id: "ann@x.com" }] });
    assert.equal(wo.status, 200, wo.text);
    workorderId = String(obj(wo.json).workorderId);
  });
  after(async () => h.close());

  it("a dev request cannot read, update or cancel a prod dataset expiration (by ttlId or datasetId): 404, unchanged", async () => {
    const before = await prod.get(`${TTL}/${ttlId}`);
    assert.equal(before.status, 200);
    for (const id of [ttlId, datasetId]) {
      const notFound = { error_code: "404003", message: `Dataset expiration configuration ${id} not found.` };
      const read = await dev.get(`${TTL}/${id}`);
      assert.equal(read.status, 404, read.text);
      assert.deepEqual(read.json, notFound);
      const update = await dev.put(`${TTL}/${id}`, { displayName: "hijacked", expiry: "2031-01-01" });
      assert.equal(update.status, 404, update.text);
      assert.deepEqual(update.json, notFound);
      const cancel = await dev.delete(`${TTL}/${id}`);
      assert.equal(cancel.status, 404, cancel.text);
      assert.deepEqual(cancel.json, notFound);
    }
    // Unchanged, still pending, still the dataset's only active expiration; prod and an org-wide request read it.
    const after = await prod.get(`${TTL}/${ttlId}`);
    assert.deepEqual(after.json, before.json);
    assert.equal(obj(after.json).status, "pending");
    assert.deepEqual((await orgWide.get(`${TTL}/${ttlId}`)).json, before.json);
    // Org B never sees it, and is still served.
    assert.equal((await b.get(`${TTL}/${ttlId}`)).status, 404);
    assert.equal((await b.get(TTL)).status, 200);
  });

  it("a dev request cannot read or rename a prod work order: 404, unchanged", async () => {
    const notFound = { error_code: "404003", message: `Work order ${workorderId} not found.` };
    for (const path of [`${WO}/${workorderId}`, `${WO}/${workorderId}/`]) {
      const read = await dev.get(path);
      assert.equal(read.status, 404, read.text);
      assert.deepEqual(read.json, notFound);
      const rename = await dev.put(path, { name: "hijacked", description: "by dev" });
      assert.equal(rename.status, 404, rename.text);
      assert.deepEqual(rename.json, notFound);
    }
    const after = await prod.get(`${WO}/${workorderId}`);
    assert.equal(after.status, 200);
    assert.equal(obj(after.json).displayName, "prod order");
    assert.equal(obj(after.json).description, "keep");
    assert.equal(obj((await orgWide.get(`${WO}/${workorderId}`)).json).displayName, "prod order");
    // The prod request itself may rename it.
    const renamed = await prod.put(`${WO}/${workorderId}`, { name: "renamed in prod" });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(obj(renamed.json).displayName, "renamed in prod");
    assert.equal((await b.get(`${WO}/${workorderId}`)).status, 404);
    assert.equal((await b.get(WO)).status, 200);
  });
});
