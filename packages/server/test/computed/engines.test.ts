/**
 * A definition that reads a computed attribute (`_<TENANT_ID>.ComputedAttributes.<name>`) gets
 * the same members by streaming, edge and batch-job evaluation, equal to the reference
 * (computed/values.ts) over the events sent, and explain agrees with each. A reference to an
 * attribute that does not exist or holds no value is refused, nothing stored.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, EVENT_CLASS, PROFILE_CLASS, arr, client, definitionBody, obj, profileDataset, runSegmentJob, startHarness, xdmMessage, type Client, type Harness } from "../helpers/server-harness.js";
import { computeValue, referenceDefinition } from "../../src/computed/values.js";

const HOUR = 3_600_000;
const CA = "/data/core/ca/attributes";
const TENANT = "_aaaaaaaaaaaaaaaaaaaaaaaa";

/** Purchases of each profile: [hours ago, priceTotal]. 12 hours of lookback. */
const PEOPLE: Record<string, [number, number][]> = {
  "ann@example.com": [[2, 80], [10, 80]],
  "bob@example.com": [[11, 80]],
  "cat@example.com": [[1, 150], [13, 200]],
  "dan@example.com": [],
  "eve@example.com": [[3, 60], [5, 30]],
  "fay@example.com": [[6, 101]],
};

const SPEND = { expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)' }, duration: { count: 12, unit: "HOURS" } } as const;

let h: Harness;
let a: Client;
const events = new Map<string, Record<string, unknown>[]>();
let now = 0;

async function definition(name: string, pql: string, methods: { continuous: boolean; synchronous: boolean; batch: boolean }): Promise<string> {
  const evaluationInfo = { batch: { enabled: methods.batch }, continuous: { enabled: methods.continuous }, synchronous: { enabled: methods.synchronous } };
  const d = await a.post(DEFS, definitionBody(name, pql, { evaluationInfo }));
  assert.equal(d.status, 200, d.text);
  return obj(d.json).id as string;
}

describe("definitions over computed attributes in every engine", () => {
  let live = "";
  let batch = "";
  const edgeAnswers = new Map<string, Set<string>>();

  before(async () => {
    h = await startHarness("ca-engines");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_CLASS);
    const eventsDs = await profileDataset(a, "web", EVENT_CLASS);
    const ca = await a.post(CA, { name: "spend12h", displayName: "Spend, 12 hours", description: "", ...SPEND, status: "NEW" });
    assert.equal(ca.status, 200, ca.text);
    const pql = `${TENANT}.ComputedAttributes.spend12h > 100`;
    const e = await a.post("/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: pql } });
    assert.deepEqual(obj(e.json).eligible, { batch: true, continuous: true, synchronous: true }, e.text);
    live = await definition("spend over 100 (live)", pql, { batch: false, continuous: true, synchronous: true });
    batch = await definition("spend over 100 (batch)", pql, { batch: true, continuous: false, synchronous: false });

    now = Date.now();
    for (const [email, purchases] of Object.entries(PEOPLE)) {
      const identityMap = { Email: [{ id: email, primary: true }] };
      const r = await a.post("/collection/ca?syncValidation=true", xdmMessage(profiles, PROFILE_CLASS, { identityMap, person: { name: { firstName: email } } }));
      assert.equal(r.status, 200, r.text);
      const mine = purchases.map(([hours, price], i) => ({ _id: `${email}-${i}`, eventType: "commerce.purchases", commerce: { order: { priceTotal: price } }, timestamp: new Date(now - hours * HOUR).toISOString() }));
      events.set(email, mine);
      for (const body of mine) {
        const s = await a.post("/collection/ca?syncValidation=true", xdmMessage(eventsDs, EVENT_CLASS, { ...body, identityMap }));
        assert.equal(s.status, 200, s.text);
      }
    }
    await h.server.app.edge!.flush();
    await runSegmentJob(a);

    const ds = await a.post("/data/core/edge/datastreams", { name: "ca", eventDatasetId: eventsDs });
    assert.equal(ds.status, 201, ds.text);
    const dataStreamId = obj(ds.json).id as string;
    for (const email of Object.keys(PEOPLE)) {
      let segments = new Set<string>();
      // The first request brings the profile to the location; the second is answered with it.
      for (let round = 0; round < 2; round++) {
        const r = await fetch(`${h.url}/ee/v2/interact?dataStreamId=${encodeURIComponent(dataStreamId)}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ event: { xdm: { identityMap: { Email: [{ id: email, primary: true }] }, eventType: "test.ping" } } }),
        });
        const body = (await r.json()) as { handle: { type: string; payload: { segments?: { id: string }[] }[] }[] };
        assert.equal(r.status, 200, JSON.stringify(body));
        const pull = body.handle.find((x) => x.type === "activation:pull")!;
        segments = new Set(pull.payload.flatMap((p) => (p.segments ?? []).map((s) => s.id)));
        await h.server.app.edge!.flush();
      }
      edgeAnswers.set(email, segments);
    }
  });
  after(async () => h.close());

  test("streaming, edge and the batch job agree with the reference; explain agrees with each", async () => {
    const def = referenceDefinition(SPEND);
    let members = 0;
    for (const email of Object.keys(PEOPLE)) {
      const expected = (computeValue(def, events.get(email)!, Date.now()) as number) > 100;
      if (expected) members++;
      for (const [id, engine] of [[live, "streaming"], [batch, "batch"]] as const) {
        const r = await a.get(`${DEFS}/${id}/explain?entityId=${encodeURIComponent(email)}&entityIdNS=Email`);
        assert.equal(r.status, 200, r.text);
        const x = obj(r.json);
        const m = obj(x.membership);
        assert.equal(x.result, expected, `${engine} / ${email}: explain`);
        assert.equal(m.status === "realized", expected, `${engine} / ${email}: membership ${String(m.status)} ${JSON.stringify(m.history)}`);
        if (expected) assert.ok(arr(m.history).some((t) => engine === "batch" ? obj(t).source === "batch" : obj(t).source !== "batch"), `${engine} / ${email}: ${JSON.stringify(m.history)}`);
      }
      assert.equal(edgeAnswers.get(email)!.has(live), expected, `edge / ${email}`);
    }
    assert.equal(members, 3, "ann, cat and fay spent over 100 in 12 hours");
  });

  test("the entities API shows the values under the tenant's ComputedAttributes field group", async () => {
    const def = referenceDefinition(SPEND);
    for (const email of Object.keys(PEOPLE)) {
      const r = await a.get(`/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${encodeURIComponent(email)}&entityIdNS=Email`);
      assert.equal(r.status, 200, r.text);
      const [view] = Object.values(obj(r.json));
      const entity = obj(obj(view).entity);
      assert.deepEqual(obj(entity[TENANT]).ComputedAttributes, { spend12h: computeValue(def, events.get(email)!, Date.now()) }, email);
      assert.deepEqual(obj(entity.person).name, { firstName: email }, "the profile's own fields stay");
    }
    const bulk = await a.post("/data/core/ups/access/entities", { schema: { name: "_xdm.context.profile" }, identities: [{ entityId: "ann@example.com", entityIdNS: { code: "Email" } }] });
    assert.equal(bulk.status, 200, bulk.text);
    const [one] = Object.values(obj(bulk.json));
    assert.deepEqual(obj(obj(obj(one).entity)[TENANT]).ComputedAttributes, { spend12h: 160 });
  });

  test("a reference to an attribute that does not exist or holds no value: 400, nothing stored", async () => {
    const before = (obj((await a.get(`${DEFS}?limit=100`)).json).segments as unknown[]).length;
    const draft = await a.post(CA, { name: "draftOne", displayName: "d", description: "", ...SPEND, status: "DRAFT" });
    assert.equal(draft.status, 200);
    const cases: [string, string][] = [
      [`${TENANT}.ComputedAttributes.nothing > 1`, "The expression reads computed attribute 'nothing', which does not exist in this sandbox"],
      [`${TENANT}.ComputedAttributes.draftOne > 1`, "The expression reads computed attribute 'draftOne', which is DRAFT: only NEW, PROCESSING and PROCESSED attributes hold values"],
    ];
    for (const [pql, message] of cases) {
      const r = await a.post(DEFS, definitionBody(`bad ${pql}`, pql));
      assert.equal(r.status, 400, r.text);
      assert.equal(obj(r.json).title, message);
      assert.equal(String(obj(r.json).type).split("/").pop(), "SEGMENTD-PQL-400");
    }
    assert.equal((obj((await a.get(`${DEFS}?limit=100`)).json).segments as unknown[]).length, before);
  });

  test("a published attribute is evaluated over the stored profiles: PROCESSED, with lastEvaluationTs and the profiles with a value", async () => {
    const r = await a.post(CA, { name: "spendLater", displayName: "Spend, 12 hours", description: "", ...SPEND, status: "NEW" });
    assert.equal(r.status, 200, r.text);
    assert.equal(obj(r.json).status, "NEW");
    await h.server.app.computed!.processor!.idle();
    const g = obj((await a.get(`${CA}/${obj(r.json).id as string}`)).json);
    assert.equal(g.status, "PROCESSED");
    assert.ok(Date.parse(g.lastEvaluationTs as string) >= now, String(g.lastEvaluationTs));
    // Everyone but dan bought in the last 12 hours.
    assert.deepEqual(g.evaluation, { profilesEvaluated: 6, profilesTotal: 6, profilesWithValue: 5 });
    // The one created before the profiles were sent was evaluated too (over the profiles stored by then).
    const first = arr(obj((await a.get(`${CA}?property=name=spend12h`)).json).computedAttributes).map(obj)[0]!;
    assert.equal(first.status, "PROCESSED");
    assert.equal(typeof first.lastEvaluationTs, "string");
  });

  test("explain names the events contributing to a computed attribute's value and when they leave the lookback", async () => {
    const r = await a.get(`${DEFS}/${live}/explain?entityId=${encodeURIComponent("ann@example.com")}&entityIdNS=Email`);
    assert.equal(r.status, 200, r.text);
    const [x] = arr(obj(r.json).computedAttributes).map(obj);
    const ann = events.get("ann@example.com")!;
    const leaves = (ts: unknown) => new Date(Date.parse(ts as string) + 12 * HOUR + 1).toISOString();
    assert.deepEqual(x, {
      name: "spend12h",
      path: `${TENANT}.ComputedAttributes.spend12h`,
      status: "PROCESSED",
      function: "SUM",
      duration: { count: 12, unit: "HOURS" },
      value: 160,
      contributing: 2,
      events: [ann[0]!, ann[1]!].map((e) => ({ _id: e._id, eventType: "commerce.purchases", timestamp: e.timestamp, value: 80, leavesAt: leaves(e.timestamp) })),
      oldestLeavesAt: leaves(ann[1]!.timestamp),
    });
    const dan = await a.get(`${DEFS}/${live}/explain?entityId=${encodeURIComponent("dan@example.com")}&entityIdNS=Email`);
    assert.deepEqual(arr(obj(dan.json).computedAttributes).map(obj).map((c) => [c.value, c.contributing, c.events, c.oldestLeavesAt]), [[0, 0, [], null]]);
  });

  test("drafts read computed attributes as a save does: explain, preview, builder estimate and edit impact", async () => {
    const pql = (min: number) => `${TENANT}.ComputedAttributes.spend12h > ${min}`;
    for (const [email, expected] of [["cat@example.com", true], ["dan@example.com", false]] as const) {
      const r = await a.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: pql(100) }, entityId: email, entityIdNS: "Email" });
      assert.equal(r.status, 200, r.text);
      assert.equal(obj(r.json).result, expected, email);
      assert.equal(arr(obj(r.json).computedAttributes).map(obj)[0]!.value, email === "cat@example.com" ? 150 : 0);
    }
    const p = await a.post("/data/core/ups/preview", { predicateExpression: pql(100), predicateType: "pql/text", graphType: "none" });
    assert.equal(p.status, 201, p.text);
    let estimate: Record<string, unknown> = {};
    for (let i = 0; ; i++) {
      estimate = obj((await a.get(`/data/core/ups/estimate/${obj(p.json).previewId as string}`)).json);
      if (estimate.state === "RESULT_READY") break;
      assert.ok(estimate.state !== "FAILED" && i < 200, JSON.stringify(estimate));
      await new Promise((res) => setTimeout(res, 25));
    }
    assert.equal(estimate.profilesMatchedSoFar, 3, JSON.stringify(estimate));
    const b = await a.post("/data/core/ups/segment/builder/estimate", { expressions: [pql(100), pql(120)], graphType: "none" });
    assert.equal(b.status, 200, b.text);
    assert.deepEqual(arr(obj(b.json).estimates).map((e) => obj(e).profilesMatchedSoFar), [3, 2]);
    const imp = await a.post(`${DEFS}/${batch}/impact`, { expression: { type: "PQL", format: "pql/text", value: pql(120) }, sampleSize: 100 });
    assert.equal(imp.status, 200, imp.text);
    assert.deepEqual([obj(obj(imp.json).before).qualified, obj(obj(imp.json).after).qualified], [3, 2]);
    // A draft naming an attribute that does not exist is refused as a save is.
    const missing = `${TENANT}.ComputedAttributes.nothing > 1`;
    for (const r of [
      await a.post("/data/core/ups/preview", { predicateExpression: missing, predicateType: "pql/text", graphType: "none" }),
      await a.post("/data/core/ups/segment/builder/estimate", { expressions: [missing] }),
      await a.post(`${DEFS}/explain`, { expression: { type: "PQL", format: "pql/text", value: missing }, entityId: "cat@example.com", entityIdNS: "Email" }),
    ]) {
      assert.equal(r.status, 400, r.text);
      assert.equal(obj(r.json).title, "The expression reads computed attribute 'nothing', which does not exist in this sandbox");
      assert.equal(String(obj(r.json).type).split("/").pop(), "SEGMENTD-PQL-400");
    }
  });

  test("disabling an attribute saved definitions read: 422 naming them, nothing changed; once none reads it, DISABLED", async () => {
    const list = arr(obj((await a.get(`${CA}?property=name=spend12h`)).json).computedAttributes).map(obj);
    const id = list[0]!.id as string;
    const r = await a.patch(`${CA}/${id}`, { status: "DISABLED" });
    assert.equal(r.status, 422, r.text);
    assert.equal(String(obj(r.json).type).split("/").pop(), "SEGMENTD-CA-IN-USE-422");
    assert.equal(obj(r.json).title,
      `Computed attribute 'spend12h' cannot be disabled: 2 saved segment definitions read it: 'spend over 100 (live)' (${live}), 'spend over 100 (batch)' (${batch}). Remove it from those definitions first`);
    assert.equal(obj((await a.get(`${CA}/${id}`)).json).status, "PROCESSED");
    // spendLater is read by no definition (the ones above name spend12h only).
    const later = arr(obj((await a.get(`${CA}?property=name=spendLater`)).json).computedAttributes).map(obj)[0]!;
    const d = await a.patch(`${CA}/${later.id as string}`, { status: "DISABLED" });
    assert.equal(d.status, 200, d.text);
    assert.equal(obj(d.json).status, "DISABLED");
    // Once the definitions no longer read it, spend12h can be disabled too.
    for (const def of [live, batch]) assert.equal((await a.delete(`${DEFS}/${def}`)).status, 200);
    const ok = await a.patch(`${CA}/${id}`, { status: "DISABLED" });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(obj(ok.json).status, "DISABLED");
  });
});
