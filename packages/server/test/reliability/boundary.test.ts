/**
 * Issue #22's "what was seen", at the boundary: each hostile input is a 4xx that names the
 * limit, decided before anything is stored or any quota consumed, on both stores; another
 * tenant's requests in the same test still succeed and its data is unchanged.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { BODY_LIMITS, RECORD_LIMITS } from "../../src/platform/limits.js";
import { OPERATOR_TOKEN, ORG_B, TOKEN_B, client, obj, arr, startHarness, type Client, type Harness } from "../helpers/server-harness.js";

const CATALOG = "/data/foundation/catalog/dataSets";
const PROFILE_SCHEMA = "https://ns.adobe.com/xdm/context/profile";
const EVENT_SCHEMA = "https://ns.adobe.com/xdm/context/experienceevent";
const WO = "/data/core/hygiene/workorder";
const QUOTA = "/data/core/hygiene/quota";

let h: Harness;
let a: Client;
let b: Client;
const ds: Record<string, string> = {};

async function dataset(c: Client, name: string, schema: string): Promise<string> {
  const r = await c.post(CATALOG, {
    name, schemaRef: { id: schema, contentType: "application/vnd.adobe.xed+json;version=1" },
    tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
  });
  assert.equal(r.status, 201, r.text);
  return (arr(r.json)[0] as string).replace("@/dataSets/", "");
}

function message(datasetId: string, xdmEntity: unknown, schema = PROFILE_SCHEMA): Record<string, unknown> {
  return { header: { datasetId, schemaRef: { id: schema } }, body: { xdmEntity } };
}

function profile(id: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { identityMap: { ECID: [{ id, primary: true }] }, person: { name: { firstName: id } }, ...extra };
}

function nested(levels: number, leaf: unknown = 1): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < levels; i++) v = { n: v };
  return v;
}

/** The profile of an ECID, or the status when there is none. */
async function readProfile(c: Client, id: string): Promise<Record<string, unknown> | number> {
  const r = await c.get(`/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${id}&entityIdNS=ECID`);
  if (r.status !== 200) return r.status;
  return obj(Object.values(obj(r.json))[0]);
}

/** Org B streams a record and reads it back: the other tenant keeps being served. */
async function otherTenantServed(tag: string): Promise<void> {
  const id = `b-${tag}`;
  const w = await b.post(`/collection/conn-b?syncValidation=true`, message(ds.b!, profile(id)));
  assert.equal(w.status, 200, w.text);
  const p = await readProfile(b, id);
  assert.notEqual(typeof p, "number", `org B's profile ${id} must be readable`);
}

function errorOf(r: { json: unknown }): { code: string; message: string } {
  const groups = Object.values(obj(obj(r.json).errors));
  const item = arr(groups[0])[0] as { code: string; message: string };
  return { code: item.code, message: item.message };
}

before(async () => {
  h = await startHarness("boundary");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
  ds.a = await dataset(a, "profiles-a", PROFILE_SCHEMA);
  ds.aEvents = await dataset(a, "events-a", EVENT_SCHEMA);
  ds.b = await dataset(b, "profiles-b", PROFILE_SCHEMA);
  const seed = await b.post(`/collection/conn-b?syncValidation=true`, message(ds.b, profile("b-seed")));
  assert.equal(seed.status, 200, seed.text);
});
after(async () => h.close());

test("a record nested 2,200 levels is refused (the body's depth limit), one nested 100 levels per record (RECORD_TOO_DEEP); neither is stored", async () => {
  const r = await a.post(`/collection/conn-a?syncValidation=true`, message(ds.a!, profile("deep", { deep: nested(2_200) })));
  assert.equal(r.status, 400, r.text);
  assert.deepEqual(errorOf(r), { code: "SEGMENTD-LIMIT-DEPTH-400", message: `Request body nests deeper than the limit of ${BODY_LIMITS.maxDepth} levels` });
  const r100 = await a.post(`/collection/conn-a?syncValidation=true`, message(ds.a!, profile("deep", { deep: nested(100) })));
  assert.equal(r100.status, 400, r100.text);
  const [e] = arr(obj(obj(r100.json).report).errors) as Array<{ code: string; message: string; path: string }>;
  const at = `deep${".n".repeat(RECORD_LIMITS.maxDepth - 1)}`;
  assert.deepEqual(e, { index: 0, code: "RECORD_TOO_DEEP", path: at, message: `record 0: The value at ${at} nests deeper than the limit of ${RECORD_LIMITS.maxDepth} levels` });
  assert.equal(await readProfile(a, "deep"), 404);
  // Exactly at the limit is accepted (the root object is level 1).
  const ok = await a.post(`/collection/conn-a?syncValidation=true`, message(ds.a!, profile("at-limit", { deep: nested(RECORD_LIMITS.maxDepth - 1) })));
  assert.equal(ok.status, 200, ok.text);
  await otherTenantServed("deep");
  assert.equal((await a.get("/readyz")).status, 200);
});

test("a batch of streamed records: the ones holding NUL or a lone surrogate are refused one by one, the good ones are stored", async () => {
  const body = JSON.stringify({ messages: [message(ds.a!, profile("good-1")), message(ds.a!, profile("nul", { note: "x\u0000y" })), message(ds.a!, profile("lone", { note: "\ud800" })), message(ds.a!, profile("good-2"))] })
    // JSON.stringify writes a lone surrogate as its \ud800 escape already; NUL too (\u0000).
    .replace("x\\u0000y", "x\\u0000y");
  const r = await a.post("/collection/batch/conn-a", body);
  assert.equal(r.status, 207, r.text);
  const responses = arr(obj(r.json).responses) as Array<{ status?: number; errors?: Array<{ code: string; message: string }> }>;
  assert.equal(responses[0]!.status, undefined);
  assert.equal(responses[3]!.status, undefined);
  assert.equal(responses[1]!.status, 400);
  assert.deepEqual(responses[1]!.errors!.map((e) => [e.code, e.message]), [["UNSTORABLE_STRING", "record 1: The string at note contains NUL (\\u0000) and cannot be stored"]]);
  assert.equal(responses[2]!.status, 400);
  assert.deepEqual(responses[2]!.errors!.map((e) => [e.code, e.message]), [["UNSTORABLE_STRING", "record 2: The string at note contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored"]]);
  assert.notEqual(typeof (await readProfile(a, "good-1")), "number");
  assert.notEqual(typeof (await readProfile(a, "good-2")), "number");
  assert.equal(await readProfile(a, "nul"), 404);
  assert.equal(await readProfile(a, "lone"), 404);
  // One streamed record with a lone surrogate: 400 with the record's error (was 500 on PostgreSQL).
  const one = await a.post(`/collection/conn-a?syncValidation=true`, message(ds.a!, profile("lone-2", { note: "a\udc00" })));
  assert.equal(one.status, 400, one.text);
  assert.equal((arr(obj(obj(one.json).report).errors)[0] as { code: string }).code, "UNSTORABLE_STRING");
  await otherTenantServed("strings");
});

test("JSON nested 5,000 levels is a 400 naming the depth limit on every route that takes a body; nothing stored", async () => {
  const deep = "[".repeat(5_000) + "]".repeat(5_000);
  const routes: Array<[string, string]> = [
    ["POST", "/collection/conn-a"],
    ["POST", "/collection/batch/conn-a"],
    ["POST", "/ee/v2/interact?dataStreamId=none"],
    ["POST", WO],
    ["POST", "/data/core/ups/segment/definitions"],
    ["POST", "/data/core/ups/preview"],
    ["POST", "/data/core/ups/segment/jobs"],
  ];
  for (const [method, path] of routes) {
    const r = await a.call(method, path, `{"x":${deep}}`);
    assert.equal(r.status, 400, `${method} ${path}: ${r.text.slice(0, 300)}`);
    assert.deepEqual(errorOf(r), { code: "SEGMENTD-LIMIT-DEPTH-400", message: `Request body nests deeper than the limit of ${BODY_LIMITS.maxDepth} levels` }, path);
  }
  // A body of 400 levels passes the body check and is refused by the record limit (64) instead.
  const r = await a.post(`/collection/conn-a?syncValidation=true`, `{"header":{"datasetId":"${ds.a}"},"body":{"xdmEntity":{"identityMap":{"ECID":[{"id":"x"}]},"d":${"[".repeat(400)}${"]".repeat(400)}}}}`);
  assert.equal(r.status, 400, r.text);
  assert.equal((arr(obj(obj(r.json).report).errors)[0] as { code: string }).code, "RECORD_TOO_DEEP");
  const wo = await a.get(WO);
  assert.equal(wo.status, 200, wo.text);
  assert.equal(obj(obj(wo.json).page ?? {}).totalCount ?? arr(obj(wo.json).results ?? []).length, 0);
  await otherTenantServed("deep-json");
});

test("numbers beyond a double, over-long strings and query values are 400s that name the limit", async () => {
  const big = await a.post("/data/core/ups/segment/definitions", '{"name":"n","schema":{"name":"_xdm.context.profile"},"expression":{"type":"PQL","format":"pql/text","value":"a = 1"},"ttlInDays":1e309}');
  assert.equal(big.status, 400, big.text);
  assert.deepEqual(errorOf(big), { code: "SEGMENTD-LIMIT-NUMBER-400", message: "Request body: The number at $.ttlInDays is outside the range of a double-precision number" });
  const lone = await a.post("/data/core/ups/segment/definitions", '{"name":"\\ud800","schema":{"name":"_xdm.context.profile"},"expression":{"type":"PQL","format":"pql/text","value":"a = 1"}}');
  assert.equal(lone.status, 400, lone.text);
  assert.deepEqual(errorOf(lone), { code: "SEGMENTD-UNSTORABLE-STRING-400", message: "Request body: The string at $.name contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored" });
  const longQuery = await a.get(`/data/core/ups/segment/definitions?name=${"q".repeat(5_000)}`);
  assert.equal(longQuery.status, 400, longQuery.text);
  assert.deepEqual(errorOf(longQuery), { code: "SEGMENTD-LIMIT-QUERY-400", message: "Query parameter 'name' is 5000 characters long, over the limit of 4096" });
  const nulQuery = await a.get(`/data/core/ups/segment/definitions?name=a%00b`);
  assert.equal(nulQuery.status, 400, nulQuery.text);
  assert.deepEqual(errorOf(nulQuery), { code: "SEGMENTD-UNSTORABLE-STRING-400", message: "Query parameter 'name' contains NUL (\\u0000)" });
  const defs = await a.get("/data/core/ups/segment/definitions");
  assert.equal(obj(obj(defs.json).page).totalCount, 0);
  await otherTenantServed("numbers");
});

test("a work order whose fieldUpdates nest past a record's depth is refused before any quota is consumed", async () => {
  const before = await client(h.url, { sandbox: null }).get(QUOTA);
  assert.equal(before.status, 200, before.text);
  const order = {
    action: "update_identity", datasetId: ds.a, displayName: "deep update",
    identities: [{ namespace: { code: "ECID" }, id: "good-1" }],
    fieldUpdates: { set: { "person.note": nested(100) } },
  };
  const r = await a.post(WO, order);
  assert.equal(r.status, 400, r.text);
  const body = obj(r.json);
  assert.deepEqual(body, { error_code: "400001", message: `fieldUpdates.set['person.note']: the value, at its path, nests deeper than a record's limit of ${RECORD_LIMITS.maxDepth} levels` });
  const afterQ = await client(h.url, { sandbox: null }).get(QUOTA);
  assert.deepEqual(afterQ.json, before.json, "no quota consumed");
  const list = await a.get(WO);
  assert.equal(JSON.stringify(list.json).includes("deep update"), false, "no work order stored");
  await otherTenantServed("workorder");
});

test("POST /preview holds the expression to the definitions' 64 KB limit (was accepted with 201 and then FAILED)", async () => {
  const expr = `person.name.firstName = "${"x".repeat(70 * 1024)}"`;
  const r = await a.post("/data/core/ups/preview", { predicateExpression: expr, predicateType: "pql/text", predicateModel: "_xdm.context.profile" });
  assert.equal(r.status, 400, r.text);
  assert.deepEqual(errorOf(r), { code: "SEGMENTD-LIMIT-400", message: `predicateExpression is ${Buffer.byteLength(expr)} bytes; the limit is 65536 bytes` });
  const ok = await b.post("/data/core/ups/preview", { predicateExpression: 'person.name.firstName = "b-seed"', predicateType: "pql/text", predicateModel: "_xdm.context.profile" });
  assert.equal(ok.status, 201, ok.text);
});

test("edge interact: an event holding a lone surrogate is a 400 and never forwarded; the events around it reach the hub", async () => {
  const dsr = await a.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: ds.aEvents });
  assert.equal(dsr.status, 201, dsr.text);
  const path = `/ee/v2/interact?dataStreamId=${obj(dsr.json).id as string}`;
  const event = (who: string, note: string) =>
    `{"event":{"xdm":{"identityMap":{"ECID":[{"id":"${who}","primary":true}]},"eventType":"web.pageview","timestamp":"${new Date(Date.now() - 1000).toISOString()}","note":"${note}"}}}`;
  assert.equal((await a.post(path, event("edge-before", "fine"))).status, 200);
  const bad = await a.post(path, event("edge-lone", "x\\ud800y"));
  assert.equal(bad.status, 400, bad.text);
  assert.deepEqual(errorOf(bad), { code: "SEGMENTD-UNSTORABLE-STRING-400", message: "Request body: The string at $.event.xdm.note contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored" });
  assert.equal((await a.post(path, event("edge-after", "fine"))).status, 200);
  // The forwarder writes in order: once the later event is on the hub, the refused one would be too.
  const deadline = Date.now() + 10_000;
  while (typeof (await readProfile(a, "edge-after")) === "number" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.notEqual(typeof (await readProfile(a, "edge-before")), "number");
  assert.notEqual(typeof (await readProfile(a, "edge-after")), "number");
  assert.equal(await readProfile(a, "edge-lone"), 404);
  // Refused at the boundary, so nothing for the forwarder to dead-letter; operators can look.
  const op = client(h.url, { token: OPERATOR_TOKEN, org: null, sandbox: null, apiKey: null });
  const letters = await op.get("/admin/edge/dead-letters");
  assert.equal(letters.status, 200, letters.text);
  assert.deepEqual(letters.json, { total: 0, deadLetters: [] });
  assert.equal((await a.get("/admin/edge/dead-letters")).status, 403);
  assert.match((await a.get("/metrics")).text, /^segmentd_edge_dead_letters_total 0$/m);
  await otherTenantServed("edge");
});

test("like: a 30,000-character pattern is refused when the definition is checked; a 256-character one evaluated on a 90,000-character attribute answers at once", async () => {
  const long = `person.note like "%${"a".repeat(30_000)}b"`;
  const r = await a.post("/data/core/ups/segment/definitions", { name: "long like", schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: long } });
  assert.equal(r.status, 400, r.text.slice(0, 500));
  const item = arr(obj(obj(r.json).errors)["400"])[0] as { code: string; message: string };
  assert.equal(obj(r.json).type, "https://ns.adobe.com/aep/errors/SEGMENTD-PQL-400");
  assert.equal(item.code, "PQL_LIKE_TOO_LARGE");
  assert.match(item.message, /The 'like' pattern is 30002 characters long; at most 256 are allowed/);
  // The longest pattern allowed, built to be slow for a backtracking matcher, in a continuous definition.
  const worst = `person.note like "%${"a_".repeat(126)}b%"`;
  const d = await a.post("/data/core/ups/segment/definitions", {
    name: "worst like", schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: worst },
    evaluationInfo: { batch: { enabled: true }, continuous: { enabled: true }, synchronous: { enabled: false } },
  });
  assert.equal(d.status, 200, d.text.slice(0, 500));
  const started = performance.now();
  const w = await a.post(`/collection/conn-a?syncValidation=true`, message(ds.a!, profile("long-note", { person: { note: "a".repeat(90_000) } })));
  const ms = performance.now() - started;
  assert.equal(w.status, 200, w.text);
  // Generous for a loaded CI machine; the two-pointer matcher took seconds here.
  assert.ok(ms < 1_000, `streaming ingest with the like definition took ${ms.toFixed(0)} ms`);
  await otherTenantServed("like");
  assert.equal((await a.delete(`/data/core/ups/segment/definitions/${obj(d.json).id as string}`)).status, 200);
});

test("a batch file holding the 2,200-level record: that record is refused (RECORD_TOO_DEEP), the others apply on COMPLETE; a JSON upload nested 5,000 levels is a 400", async () => {
  const batch = await a.post("/data/foundation/import/batches", { datasetId: ds.a, inputFormat: { format: "json" } });
  assert.equal(batch.status, 201, batch.text);
  const id = obj(batch.json).id as string;
  const files = `/data/foundation/import/batches/${id}/datasets/${ds.a!}/files`;
  const lines = [profile("file-good-1"), profile("file-deep", { deep: nested(2_200) }), profile("file-good-2")].map((r) => JSON.stringify(r)).join("\n");
  const up = await a.put(`${files}/part-0.ndjson`, lines, { "content-type": "application/x-ndjson" });
  assert.equal(up.status, 200, up.text);
  const body = obj(up.json);
  assert.deepEqual([body.recordsRead, body.recordsStaged, body.failedRecordCount], [3, 2, 1]);
  assert.equal((arr(body.errors)[0] as { code: string; recordIndex: number }).code, "RECORD_TOO_DEEP");
  assert.equal((arr(body.errors)[0] as { code: string; recordIndex: number }).recordIndex, 1);
  const json = await a.put(`${files}/part-1.json`, `{"x":${"[".repeat(5_000)}${"]".repeat(5_000)}}`, { "content-type": "application/json" });
  assert.equal(json.status, 400, json.text);
  assert.deepEqual(errorOf(json), { code: "SEGMENTD-LIMIT-DEPTH-400", message: `Request body nests deeper than the limit of ${BODY_LIMITS.maxDepth} levels` });
  const done = await a.post(`/data/foundation/import/batches/${id}?action=COMPLETE`);
  assert.equal(done.status, 200, done.text);
  assert.equal(obj(done.json).status, "success");
  assert.notEqual(typeof (await readProfile(a, "file-good-1")), "number");
  assert.notEqual(typeof (await readProfile(a, "file-good-2")), "number");
  assert.equal(await readProfile(a, "file-deep"), 404);
  await otherTenantServed("file");
});
