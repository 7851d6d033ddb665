/**
 * Segment definitions over real HTTP: create/get/PATCH/DELETE, bulk-get,
 * conversion, eligibility, validation errors and tenant isolation. Runs on the
 * store SEGMENTD_TEST_STORE selects.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, ORG_A, ORG_B, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const PROFILE_ONLY = 'homeAddress.countryCode = "US"';
const IGNORE_YEAR = "person.birthDate.getMonth() = currentMonth()";

let h: Harness;
let a: Client; // org A, prod
let aDev: Client; // org A, dev
let b: Client; // org B, prod

before(async () => {
  h = await startHarness("defs", {
    patch: (c) => {
      c.organizations[0]!.sandboxes[1]!.limits = { definitions: 4, streaming: 2, edge: 1, expressionBytes: 2048 };
      c.bodyLimitBytes = 64 * 1024;
    },
  });
  a = client(h.url);
  aDev = client(h.url, { sandbox: "dev" });
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
});
after(async () => h.close());

async function count(c: Client): Promise<number> {
  const r = await c.get(DEFS + "?limit=1");
  assert.equal(r.status, 200);
  return obj(obj(r.json).page).totalCount as number;
}

function upsError(json: unknown, status: number, code: string): { title: string; items: Record<string, unknown>[] } {
  const body = obj(json);
  assert.equal(body.status, status);
  assert.equal(body.type, `https://ns.adobe.com/aep/errors/${code}`);
  assert.equal(typeof body.requestId, "string");
  const items = arr(obj(body.errors)[String(status)]).map(obj);
  assert.ok(items.length > 0);
  return { title: body.title as string, items };
}

describe("create", () => {
  test("returns 200 with server-filled fields and X-Location", async () => {
    const before = Date.now();
    const r = await a.post(DEFS, definitionBody("create-basic", PROFILE_ONLY, { description: "d" }));
    assert.equal(r.status, 200);
    const d = obj(r.json);
    assert.match(d.id as string, /^[0-9a-f-]{36}$/);
    assert.equal(d.imsOrgId, ORG_A);
    assert.deepEqual(obj(d.sandbox).sandboxName, "prod");
    assert.equal(obj(d.sandbox).type, "production");
    assert.equal(obj(d.sandbox).default, true);
    assert.equal(d.profileInstanceId, "ups");
    assert.equal(typeof d.mergePolicyId, "string");
    assert.deepEqual(d.dataGovernancePolicy, { excludeOptOut: true });
    // A missing evaluationInfo means batch only.
    assert.deepEqual(d.evaluationInfo, { batch: { enabled: true }, continuous: { enabled: false }, synchronous: { enabled: false } });
    assert.deepEqual(d.expression, { type: "PQL", format: "pql/text", value: PROFILE_ONLY });
    assert.ok((d.creationTime as number) >= before && (d.creationTime as number) <= Date.now());
    assert.equal(d.updateTime, d.creationTime);
    assert.equal(d.updateEpoch, Math.floor((d.updateTime as number) / 1000));
    const cls = obj(d.classification);
    assert.equal(cls.queryType, "profile-only");
    assert.equal(cls.synchronous, true);
    assert.equal(cls.mergePolicyActiveOnEdge, true);
    assert.equal(r.headers.get("x-location"), `${h.url}${DEFS}/${d.id}`);
    const g = await a.get(`${DEFS}/${d.id}`);
    assert.equal(g.status, 200);
    assert.deepEqual(g.json, d);
  });

  test("accepts pql/json and returns the expression as submitted", async () => {
    const conv = await a.post("/data/core/ups/segment/conversion", definitionBody("conv", PROFILE_ONLY));
    assert.equal(conv.status, 200);
    const json = obj(obj(conv.json).expression);
    assert.equal(json.format, "pql/json");
    const r = await a.post(DEFS, { ...definitionBody("from-json"), expression: json });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(obj(r.json).expression, json);
    assert.equal(obj(obj(r.json).classification).queryType, "profile-only");
  });

  test("edge create of an eligible expression works; an ineligible one is 400 with reasons and nothing is stored", async () => {
    const edge = { evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } } };
    const ok = await a.post(DEFS, definitionBody("edge-ok", PROFILE_ONLY, edge));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(obj(obj(ok.json).evaluationInfo).synchronous && obj(obj(obj(ok.json).evaluationInfo).synchronous).enabled, true);
    const n = await count(a);
    const bad = await a.post(DEFS, definitionBody("edge-bad", IGNORE_YEAR, edge));
    assert.equal(bad.status, 400);
    const e = upsError(bad.json, 400, "SEGMENTD-ELIGIBILITY-400");
    assert.ok(e.items.every((i) => i.method === "synchronous"));
    assert.ok(e.items.some((i) => /edge \(synchronous\)/.test(i.message as string)), JSON.stringify(e.items));
    const streaming = await a.post(DEFS, definitionBody("stream-bad", IGNORE_YEAR, { evaluationInfo: { continuous: { enabled: true } } }));
    assert.equal(streaming.status, 400);
    assert.ok(upsError(streaming.json, 400, "SEGMENTD-ELIGIBILITY-400").items.every((i) => i.method === "continuous"));
    assert.equal(await count(a), n);
  });

  test("edge is refused when the merge policy is not active on edge", async () => {
    const mp = await a.post("/data/core/ups/config/mergePolicies", {
      name: "not-on-edge", schema: { name: "_xdm.context.profile" }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" },
    });
    assert.equal(mp.status, 200, mp.text);
    const id = obj(mp.json).id as string;
    const n = await count(a);
    const r = await a.post(DEFS, definitionBody("edge-wrong-mp", PROFILE_ONLY, { mergePolicyId: id, evaluationInfo: { synchronous: { enabled: true } } }));
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "SEGMENTD-ELIGIBILITY-400");
    assert.equal(e.items.length, 1);
    assert.equal(e.items[0]!.message, `edge (synchronous): merge policy '${id}' is not active on edge; edge evaluation needs the sandbox's active-on-edge merge policy`);
    assert.equal(await count(a), n);
    // The same policy is fine for batch.
    const batch = await a.post(DEFS, definitionBody("batch-other-mp", PROFILE_ONLY, { mergePolicyId: id }));
    assert.equal(batch.status, 200);
    assert.equal(obj(batch.json).mergePolicyId, id);
    assert.equal(obj(obj(batch.json).classification).mergePolicyActiveOnEdge, false);
  });

  test("invalid PQL is 400 listing every diagnostic with its position", async () => {
    const n = await count(a);
    const r = await a.post(DEFS, definitionBody("bad-pql", 'homeAddress.countryCode = "US" and\n  age >'));
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "SEGMENTD-PQL-400");
    const d = e.items[0]!;
    assert.equal(d.line, 2);
    assert.equal(typeof d.column, "number");
    assert.match(d.message as string, /^line 2, column \d+: /);
    assert.equal(await count(a), n);
  });

  test("duplicate name in a sandbox is 422; the same name in another sandbox or org is fine", async () => {
    assert.equal((await a.post(DEFS, definitionBody("dup"))).status, 200);
    const r = await a.post(DEFS, definitionBody("dup"));
    assert.equal(r.status, 422);
    const e = upsError(r.json, 422, "SEGMENTD-DUPLICATE-422");
    assert.equal(e.title, `A segment definition named "dup" already exists in sandbox 'prod'. To update it, use PATCH.`);
    assert.equal((await aDev.post(DEFS, definitionBody("dup"))).status, 200);
    assert.equal((await b.post(DEFS, definitionBody("dup"))).status, 200);
  });

  test("malformed JSON is 400 in the UPS shape and stores nothing", async () => {
    const n = await count(a);
    const r = await a.post(DEFS, '{"name": "x", ');
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "UPLIB-101206-500");
    assert.match(e.title, /^Malformed JSON in request body: /);
    assert.equal(await count(a), n);
  });

  test("wrong types are 400 naming each field", async () => {
    const n = await count(a);
    const r = await a.post(DEFS, { name: 42, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: 7 } });
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "UPLIB-101206-500");
    const fields = e.items.map((i) => i.field).sort();
    assert.deepEqual(fields, ["expression.value", "name"]);
    assert.equal(e.items.find((i) => i.field === "name")!.message, "name must be string");
    const missing = await a.post(DEFS, { schema: { name: "x" } });
    assert.equal(missing.status, 400);
    assert.deepEqual(upsError(missing.json, 400, "UPLIB-101206-500").items.map((i) => i.field).sort(), ["expression", "name"]);
    assert.equal(await count(a), n);
  });

  test("a body over the limit is 413; an expression over the sandbox limit is 400", async () => {
    const n = await count(a);
    const big = await a.post(DEFS, definitionBody("big", `name = "${"x".repeat(70 * 1024)}"`));
    assert.equal(big.status, 413);
    upsError(big.json, 413, "SEGMENTD-BODY-TOO-LARGE-413");
    assert.equal(await count(a), n);
    const long = await aDev.post(DEFS, definitionBody("long-expr", `name = "${"x".repeat(3000)}"`));
    assert.equal(long.status, 400);
    assert.match(upsError(long.json, 400, "SEGMENTD-LIMIT-400").title, /^expression\.value is 30\d\d bytes; the limit is 2048 bytes$/);
  });

  test("hostile PQL gets a 4xx and the service keeps serving", async () => {
    for (const value of ["(".repeat(5000), "not ".repeat(3000) + "a", '"'.repeat(3), "a.".repeat(30000) + "b = ", "\u0000\uffff"]) {
      const r = await a.post(DEFS, definitionBody(`hostile-${value.length}`, value));
      assert.ok(r.status >= 400 && r.status < 500, `status ${r.status} for ${value.slice(0, 20)}`);
    }
    const nul = await a.post(DEFS, definitionBody("nul\u0000name"));
    assert.equal(nul.status, 400);
    assert.equal(upsError(nul.json, 400, "UPLIB-101206-500").title, "Request body must not contain NUL (\\u0000) characters");
    assert.equal((await a.get("/healthz")).status, 200);
  });
});

describe("tenant isolation", () => {
  test("another org's or sandbox's id is 404 and nothing changes", async () => {
    const r = await a.post(DEFS, definitionBody("isolated"));
    const d = obj(r.json);
    const path = `${DEFS}/${d.id}`;
    for (const other of [b, aDev]) {
      const g = await other.get(path);
      assert.equal(g.status, 404);
      assert.equal(upsError(g.json, 404, "SEGMENTD-NOT-FOUND-404").title, `Segment definition with id '${d.id}' was not found`);
      assert.doesNotMatch(g.text, /isolated/);
      assert.equal((await other.patch(path, definitionBody("hijack"))).status, 404);
      assert.equal((await other.delete(path)).status, 404);
      const bulk = await other.post(`${DEFS}/bulk-get`, { ids: [{ id: d.id }] });
      assert.equal(bulk.status, 404);
      assert.doesNotMatch(bulk.text, /isolated/);
    }
    const again = await a.get(path);
    assert.deepEqual(again.json, d);
  });
});

describe("PATCH (whole-object overwrite)", () => {
  test("replaces the definition, keeps id/creationTime, advances update times", async () => {
    const c = obj((await a.post(DEFS, definitionBody("patch-me", PROFILE_ONLY, { description: "old" }))).json);
    await new Promise((r) => setTimeout(r, 5));
    const r = await a.patch(`${DEFS}/${c.id}`, { ...c, name: "patched", description: undefined, expression: { type: "PQL", format: "pql/text", value: 'age > 30' }, creationTime: 0, updateTime: 0, updateEpoch: 0 });
    assert.equal(r.status, 200, r.text);
    const p = obj(r.json);
    assert.equal(p.id, c.id);
    assert.equal(p.name, "patched");
    assert.equal(p.description, undefined);
    assert.equal(p.creationTime, c.creationTime);
    assert.ok((p.updateTime as number) > (c.updateTime as number));
    assert.equal(r.headers.get("x-location"), `${h.url}${DEFS}/${c.id}`);
    assert.deepEqual((await a.get(`${DEFS}/${c.id}`)).json, p);
  });

  test("id, imsOrgId and sandbox are immutable", async () => {
    const c = obj((await a.post(DEFS, definitionBody("immutable"))).json);
    const r = await a.patch(`${DEFS}/${c.id}`, { ...c, id: "other", imsOrgId: ORG_B, sandbox: { ...obj(c.sandbox), sandboxName: "dev" } });
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "SEGMENTD-IMMUTABLE-400");
    assert.deepEqual(e.items.map((i) => i.field), ["id", "imsOrgId", "sandbox.sandboxName"]);
    assert.deepEqual((await a.get(`${DEFS}/${c.id}`)).json, c);
  });

  test("renaming onto another definition's name is 422; unknown id is 404", async () => {
    await a.post(DEFS, definitionBody("taken"));
    const c = obj((await a.post(DEFS, definitionBody("renamer"))).json);
    const r = await a.patch(`${DEFS}/${c.id}`, { ...c, name: "taken" });
    assert.equal(r.status, 422);
    assert.equal(obj((await a.get(`${DEFS}/${c.id}`)).json).name, "renamer");
    assert.equal((await a.patch(`${DEFS}/00000000-0000-0000-0000-000000000000`, definitionBody("x"))).status, 404);
  });
});

describe("inSegment references", () => {
  test("delete is refused while referenced, naming the dependents; allowed afterwards", async () => {
    const base = obj((await a.post(DEFS, definitionBody("base-seg", PROFILE_ONLY))).json);
    const dep1 = obj((await a.post(DEFS, definitionBody("dep-1", `inSegment("${base.id}")`))).json);
    const dep2 = obj((await a.post(DEFS, definitionBody("dep-2", `inSegment("${base.id}") and age > 3`))).json);
    assert.equal(obj(dep1.classification).queryType, "segment-of-segments");
    const r = await a.delete(`${DEFS}/${base.id}`);
    assert.equal(r.status, 400);
    const e = upsError(r.json, 400, "UPAPI-113631-403");
    const expected = [dep1.id as string, dep2.id as string].sort();
    assert.deepEqual(e.items[0]!.dependents, expected);
    assert.match(e.title, new RegExp(expected.join("|")));
    assert.equal((await a.get(`${DEFS}/${base.id}`)).status, 200);
    assert.equal((await a.delete(`${DEFS}/${dep1.id}`)).status, 200);
    assert.equal((await a.delete(`${DEFS}/${dep2.id}`)).status, 200);
    const ok = await a.delete(`${DEFS}/${base.id}`);
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.json, { status: true, message: `Segment definition with id '${base.id}' has been deleted` });
    assert.equal((await a.get(`${DEFS}/${base.id}`)).status, 404);
    assert.equal((await a.delete(`${DEFS}/${base.id}`)).status, 404);
  });

  test("a reference to a missing definition is fine for batch, never for edge", async () => {
    const batch = await a.post(DEFS, definitionBody("ghost-ref", 'inSegment("no-such-definition")'));
    assert.equal(batch.status, 200);
    const cls = obj(obj(batch.json).classification);
    assert.equal(cls.synchronous, false);
    assert.ok(arr(cls.reasons).length > 0);
    const edge = await a.post(DEFS, definitionBody("ghost-ref-edge", 'inSegment("no-such-definition")', { evaluationInfo: { synchronous: { enabled: true } } }));
    assert.equal(edge.status, 400);
    upsError(edge.json, 400, "SEGMENTD-ELIGIBILITY-400");
  });

  test("a PATCH that creates an inSegment cycle is rejected", async () => {
    const x = obj((await a.post(DEFS, definitionBody("cyc-x", PROFILE_ONLY))).json);
    const y = obj((await a.post(DEFS, definitionBody("cyc-y", `inSegment("${x.id}")`))).json);
    const r = await a.patch(`${DEFS}/${x.id}`, { ...x, expression: { type: "PQL", format: "pql/text", value: `inSegment("${y.id}")` } });
    assert.equal(r.status, 400);
    assert.equal(upsError(r.json, 400, "SEGMENTD-PQL-400").title, `inSegment cycle: ${x.id} -> ${y.id} -> ${x.id}`);
    const self = await a.patch(`${DEFS}/${x.id}`, { ...x, expression: { type: "PQL", format: "pql/text", value: `inSegment("${x.id}")` } });
    assert.equal(self.status, 400);
    assert.deepEqual((await a.get(`${DEFS}/${x.id}`)).json, x);
  });
});

describe("bulk-get", () => {
  test("0 or 101 ids are 400 UPAPI-113015-400", async () => {
    for (const n of [0, 101]) {
      const r = await a.post(`${DEFS}/bulk-get`, { ids: Array.from({ length: n }, (_, i) => ({ id: `id-${i}` })) });
      assert.equal(r.status, 400);
      assert.equal(upsError(r.json, 400, "UPAPI-113015-400").title, `The number of ids must be between 1 and 100 (got ${n})`);
    }
  });

  test("207 with per-id errors for unknown ids; 404 when none exist", async () => {
    const d = obj((await a.post(DEFS, definitionBody("bulk-1"))).json);
    const r = await a.post(`${DEFS}/bulk-get`, { ids: [{ id: d.id }, { id: "nope" }] }, { "content-type": "" });
    assert.equal(r.status, 207);
    const results = obj(obj(r.json).results);
    assert.deepEqual(results[d.id as string], d);
    assert.deepEqual(obj(results.nope).errors, { "404": [{ code: 404, message: "Not found." }] });
    const none = await a.post(`${DEFS}/bulk-get`, { ids: [{ id: "nope" }, { id: "nada" }] });
    assert.equal(none.status, 404);
    assert.equal(upsError(none.json, 404, "UPAPI-113000-404").title, "No segment definitions found for ids: nope,nada");
  });
});

describe("conversion and eligibility", () => {
  test("pql/text → pql/json → pql/text round-trips to canonical text; nothing is stored", async () => {
    const n = await count(a);
    const r1 = await a.post("/data/core/ups/segment/conversion", definitionBody("c1", PROFILE_ONLY));
    assert.equal(r1.status, 200);
    const j = obj(r1.json);
    assert.equal(j.imsOrgId, ORG_A);
    assert.equal(obj(j.expression).format, "pql/json");
    JSON.parse(obj(j.expression).value as string);
    const r2 = await a.post("/data/core/ups/segment/conversion", { ...definitionBody("c1"), expression: j.expression });
    assert.equal(r2.status, 200);
    assert.deepEqual(obj(r2.json).expression, { type: "PQL", format: "pql/text", value: PROFILE_ONLY });
    const bad = await a.post("/data/core/ups/segment/conversion", definitionBody("c2", "a = "));
    assert.equal(bad.status, 400);
    upsError(bad.json, 400, "SEGMENTD-PQL-400");
    assert.equal(await count(a), n);
  });

  test("eligibility reports diagnostics, classification and the merge-policy verdict", async () => {
    const n = await count(a);
    const ok = await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: PROFILE_ONLY } });
    assert.equal(ok.status, 200);
    const o = obj(ok.json);
    assert.equal(o.valid, true);
    assert.deepEqual(o.eligible, { batch: true, continuous: true, synchronous: true });
    assert.equal(obj(o.classification).queryType, "profile-only");
    assert.equal(obj(o.mergePolicy).isActiveOnEdge, true);
    const iy = obj((await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: IGNORE_YEAR } })).json);
    assert.equal(obj(iy.eligible).synchronous, false);
    assert.ok(arr(obj(iy.reasons).synchronous).length > 0);
    const bad = obj((await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: "a = " } })).json);
    assert.equal(bad.valid, false);
    assert.equal(obj(arr(bad.diagnostics)[0]).line, 1);
    assert.equal(await count(a), n);
  });
});

describe("limits", () => {
  test("per-sandbox definition, streaming and edge limits are enforced with clear errors", async () => {
    const edge = { evaluationInfo: { synchronous: { enabled: true } } };
    const stream = { evaluationInfo: { continuous: { enabled: true } } };
    assert.equal((await aDev.post(DEFS, definitionBody("l-edge-1", PROFILE_ONLY, edge))).status, 200);
    const e2 = await aDev.post(DEFS, definitionBody("l-edge-2", PROFILE_ONLY, edge));
    assert.equal(e2.status, 400);
    assert.equal(upsError(e2.json, 400, "SEGMENTD-LIMIT-400").title, "Sandbox 'dev' already has the maximum of 1 edge segment definitions");
    assert.equal((await aDev.post(DEFS, definitionBody("l-stream-1", PROFILE_ONLY, stream))).status, 200);
    const s2 = await aDev.post(DEFS, definitionBody("l-stream-2", PROFILE_ONLY, stream));
    assert.equal(s2.status, 400);
    assert.equal(upsError(s2.json, 400, "SEGMENTD-LIMIT-400").title, "Sandbox 'dev' already has the maximum of 2 streaming segment definitions (edge ones included)");
    // "dup" was created in dev earlier in this file when the tests run in order; fill up to 4 either way.
    for (let i = 0; (await count(aDev)) < 4; i++) assert.equal((await aDev.post(DEFS, definitionBody(`fill-${i}`))).status, 200);
    const over = await aDev.post(DEFS, definitionBody("one-too-many"));
    assert.equal(over.status, 400);
    assert.equal(upsError(over.json, 400, "SEGMENTD-LIMIT-400").title, "Sandbox 'dev' already has the maximum of 4 segment definitions");
    assert.equal(await count(aDev), 4);
  });
});

describe("events", () => {
  test("committed writes publish definition.changed on the bus; refused ones publish nothing", async () => {
    const seen: string[] = [];
    const off = h.server.bus.subscribe("definition.changed", (e) => {
      seen.push(`${e.change}:${e.definitionId}:${e.tenant.orgId}`);
    });
    try {
      const d = obj((await a.post(DEFS, definitionBody("evented"))).json);
      await a.post(DEFS, definitionBody("evented")); // 422: nothing published
      await a.patch(`${DEFS}/${d.id}`, { ...d, description: "changed" });
      await a.delete(`${DEFS}/${d.id}`);
      assert.deepEqual(seen, [`created:${d.id}:${ORG_A}`, `updated:${d.id}:${ORG_A}`, `deleted:${d.id}:${ORG_A}`]);
    } finally {
      off();
    }
  });
});
