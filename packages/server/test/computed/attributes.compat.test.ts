/**
 * Computed attributes against Adobe's profile.yaml (`npm run test:compat`; reads ../shared): every
 * operation of /ca/attributes as AEP documents it — the request bodies validated against the file's
 * request schemas, every success response against its response schema — through the statuses a
 * published attribute goes through (NEW → PROCESSED, DISABLED), one attribute per function and per
 * duration unit, the list's documented query parameters (the guide's own examples), and the error
 * statuses the file declares (404, 422 on delete, 400 on create; the file gives them no body).
 *
 * The list envelope is segmentd's (the guide's `computedAttributes` and `_page` with offset/limit/
 * count, where the file names `children` and `pageSize`: docs/aep-compatibility.md); each item is
 * validated against `computedAttributeResponse`, and `_page.totalCount` against the file.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import Ajv from "ajv";
import YAML from "yaml";
import { arr, client, obj, startHarness, type Client, type Harness, type Res } from "../helpers/server-harness.js";
import { REPO_ROOT } from "../helpers/spawn.js";

const SHARED = path.resolve(REPO_ROOT, "..", "shared", "reference", "adobe-openapi");
const ajv = new Ajv.default({ strict: false, allErrors: true, validateFormats: false });
ajv.addSchema({ ...(YAML.parse(readFileSync(path.join(SHARED, "profile.yaml"), "utf8")) as object), $id: "prof" });

const CA = "/data/core/ca/attributes";
const ptr = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");
const response = (p: string, method: string, status: number) => `prof#/paths/${ptr(p)}/${method}/responses/${status}/content/application~1json/schema`;
const CREATE = "prof#/components/schemas/createComputedAttribute";
const UPDATE = "prof#/components/schemas/updateComputedAttribute";
const ITEM = "prof#/components/schemas/computedAttributeResponse";

function check(ref: string, data: unknown, what: string): void {
  const validate = ajv.getSchema(ref);
  assert.ok(validate, `no schema at ${ref}`);
  assert.ok(validate(data), `${what} does not match ${ref}: ${JSON.stringify(validate.errors, null, 1)}`);
}

/** The file's example expression (a SUM with a `timestamp occurs` clause of its own), then one per function. */
const FILE_EXAMPLE = "xEvent[(commerce.checkouts.value > 0.0 or commerce.purchases.value > 1.0 or commerce.order.priceTotal >= 10.0) and (timestamp occurs <= 7 days before now)].sum(commerce.order.priceTotal)";
const ATTRS: Array<{ name: string; value: string; fn: string; duration: { count: number; unit: string } }> = [
  { name: "sampleComputedAttribute", value: FILE_EXAMPLE, fn: "SUM", duration: { count: 3, unit: "MONTHS" } },
  { name: "purchaseCount", value: 'xEvent[eventType = "commerce.purchases"].count()', fn: "COUNT", duration: { count: 24, unit: "HOURS" } },
  { name: "smallestOrder", value: "xEvent.min(commerce.order.priceTotal)", fn: "MIN", duration: { count: 7, unit: "DAYS" } },
  { name: "lastSeen", value: "xEvent.max(timestamp)", fn: "MAX", duration: { count: 4, unit: "WEEKS" } },
  {
    name: "lastPage", fn: "MOST_RECENT", duration: { count: 1, unit: "HOURS" },
    value: 'xEvent[eventType = "web.webpagedetails.pageViews"].topN(timestamp, 1).map({"timestamp": timestamp, "value": web.webPageDetails.name}).head()',
  },
  { name: "lastPages", value: "xEvent.topN(timestamp, 5).map(web.webPageDetails.name)", fn: "LIST", duration: { count: 1, unit: "MONTHS" } },
];

function body(a: (typeof ATTRS)[number], status: string): Record<string, unknown> {
  return {
    name: a.name, displayName: `Display ${a.name}`, description: `About ${a.name}`, keepCurrent: false,
    expression: { type: "PQL", format: "pql/text", value: a.value }, duration: a.duration, status,
  };
}

let h: Harness;
let c: Client;
before(async () => {
  h = await startHarness("ca-compat");
  c = client(h.url);
});
after(async () => h.close());

test("the schemas can fail: a create body without a duration, a response with a numeric status", () => {
  assert.equal(ajv.getSchema(CREATE)!({ name: "x", description: "", displayName: "x", expression: {}, status: "NEW" }), false);
  assert.equal(ajv.getSchema(CREATE)!({ ...body(ATTRS[0]!, "NEW"), status: "PROCESSED" }), false, "create takes DRAFT or NEW");
  assert.equal(ajv.getSchema(ITEM)!({ id: "x", status: 3 }), false);
});

test("create, get, PATCH and list answer profile.yaml's shapes through every status; one attribute per function and duration unit", async () => {
  const ids = new Map<string, string>();
  for (const [i, a] of ATTRS.entries()) {
    const req = body(a, i === 0 ? "DRAFT" : "NEW");
    check(CREATE, req, `${a.name}: the request`);
    const r = await c.post(CA, req);
    assert.equal(r.status, 200, `${a.name}: ${r.text}`);
    check(response("/ca/attributes", "post", 200), r.json, `create ${a.name}`);
    const ca = obj(r.json);
    assert.equal(obj(ca.mergeFunction).value, a.fn, a.name);
    assert.deepEqual(ca.duration, a.duration, a.name);
    ids.set(a.name, ca.id as string);
  }
  // The draft published, as AEP's guide does it: PATCH {status: NEW}.
  const publish = { status: "NEW" };
  check(UPDATE, publish, "the PATCH body");
  const patched = await c.patch(`${CA}/${ids.get("sampleComputedAttribute")!}`, publish);
  assert.equal(patched.status, 200, patched.text);
  check(response("/ca/attributes/{ATTRIBUTE_ID}", "patch", 200), patched.json, "patch DRAFT → NEW");

  // Each published one evaluated: PROCESSED with lastEvaluationTs, every answer in the file's shape.
  await h.server.app.computed!.processor!.idle();
  for (const [name, id] of ids) {
    let got: Res = await c.get(`${CA}/${id}`);
    for (let i = 0; i < 100 && obj(got.json).status !== "PROCESSED"; i++) {
      await h.server.app.computed!.processor!.idle();
      got = await c.get(`${CA}/${id}`);
    }
    assert.equal(got.status, 200, got.text);
    check(response("/ca/attributes/{ATTRIBUTE_ID}", "get", 200), got.json, `get ${name}`);
    assert.equal(obj(got.json).status, "PROCESSED", `${name}: ${got.text}`);
    assert.match(String(obj(got.json).lastEvaluationTs), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  }

  const disabled = await c.patch(`${CA}/${ids.get("lastPages")!}`, { status: "DISABLED" });
  assert.equal(disabled.status, 200, disabled.text);
  check(response("/ca/attributes/{ATTRIBUTE_ID}", "patch", 200), disabled.json, "patch → DISABLED");
  assert.equal(obj(disabled.json).status, "DISABLED");

  const list = await c.get(`${CA}?limit=40`);
  assert.equal(list.status, 200, list.text);
  const page = obj(obj(list.json)._page);
  check("prof#/components/schemas/listComputedAttributes/properties/_page/properties/totalCount", page.totalCount, "_page.totalCount");
  const items = arr(obj(list.json).computedAttributes);
  assert.equal(items.length, ATTRS.length);
  for (const x of items) check(ITEM, x, `list item ${String(obj(x).name)}`);
});

test("the list's query parameters as the guide writes them", async () => {
  const names = async (q: string): Promise<string[]> => {
    const r = await c.get(`${CA}?${q}`);
    assert.equal(r.status, 200, `${q}: ${r.text}`);
    return arr(obj(r.json).computedAttributes).map((x) => obj(x).name as string);
  };
  const all = ATTRS.map((a) => a.name);
  const byName = [...all].sort();
  // The guide's examples: limit=20, offset=5, sortBy=name, property=updateEpoch>=…, name!=…, status=contains(new,processing,disabled).
  assert.deepEqual(await names("sortBy=name"), byName);
  assert.deepEqual(await names("sortBy=-name"), [...byName].reverse());
  assert.deepEqual(await names("sortBy=name&limit=2&offset=1"), byName.slice(1, 3));
  assert.deepEqual(await names("sortBy=name&limit=20&offset=5"), byName.slice(5));
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("name!=lastSeen")}`), byName.filter((n) => n !== "lastSeen"));
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("updateEpoch>=1683669114845")}`), byName);
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("updateEpoch<=1683669114845")}`), []);
  assert.deepEqual(await names(`property=${encodeURIComponent("status=contains(new,processing,disabled)")}`), ["lastPages"]);
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("status=!contains(disabled)")}`), byName.filter((n) => n !== "lastPages"));
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("mergeFunction.value=contains(MIN,MAX)")}`), ["lastSeen", "smallestOrder"]);
  // profile.yaml's enum spells the creation filter createdEpoch.
  assert.deepEqual(await names(`sortBy=name&property=${encodeURIComponent("createdEpoch>=1683669114845")}`), byName);
  for (const s of ["status", "-status", "createEpoch", "-updateEpoch", "updateEpoch"]) assert.equal((await names(`sortBy=${s}`)).length, all.length, s);
  assert.deepEqual(await names("status=disabled"), ["lastPages"]);
  // profile.yaml's enum also names mergePolicy.value, which the guide does not and no attribute field holds.
  const policy = await c.get(`${CA}?property=${encodeURIComponent("mergePolicy.value=x")}`);
  assert.equal(policy.status, 400, policy.text);
  assert.match(String(obj(policy.json).title), /^Invalid property filter "mergePolicy\.value=x"/);
});

test("the error statuses profile.yaml declares: 404 on an unknown id, 422 deleting a published attribute, 400 on a duplicate name", async () => {
  const unknown = `${CA}/00000000-0000-4000-8000-000000000000`;
  for (const r of [await c.get(unknown), await c.patch(unknown, { status: "DISABLED" }), await c.delete(unknown)]) assert.equal(r.status, 404, r.text);
  const list = arr(obj((await c.get(`${CA}?property=name=lastSeen`)).json).computedAttributes);
  const id = obj(list[0]).id as string;
  assert.equal((await c.delete(`${CA}/${id}`)).status, 422, "a published attribute is disabled, not deleted");
  const dup = await c.post(CA, body(ATTRS[1]!, "NEW"));
  assert.equal(dup.status, 400);
  assert.equal(obj(dup.json).title, "Function with the same name already exists for the specified schema or definedOn");
  // A draft is deleted: 202 with the deleted attribute in the file's shape.
  const draft = await c.post(CA, body({ ...ATTRS[2]!, name: "draftToDelete" }, "DRAFT"));
  const del = await c.delete(`${CA}/${obj(draft.json).id as string}`);
  assert.equal(del.status, 202, del.text);
  check(response("/ca/attributes/{ATTRIBUTE_ID}", "delete", 202), del.json, "delete");
  assert.equal((await c.get(`${CA}/${obj(draft.json).id as string}`)).status, 404);
});
