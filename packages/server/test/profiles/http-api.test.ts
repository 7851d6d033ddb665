// Acceptance 1 and 2 over real HTTP: ingest by batch and by stream, read merged
// profiles and events back under both graph types and both attribute merges,
// and send bad input.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { call, startProfileServer, type HttpHarness } from "./http-harness.js";
import { STORE_KIND } from "./test-store.js";

type Obj = Record<string, unknown>;
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
const EVENT_CLASS = "https://ns.adobe.com/xdm/context/experienceevent";

function idFromRef(json: unknown): string {
  const ref = (json as string[])[0]!;
  return ref.replace("@/dataSets/", "");
}

function msg(datasetId: string, entity: Obj, schemaId = EVENT_CLASS): Obj {
  return { header: { schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed-full+json;version=1" }, datasetId }, body: { xdmMeta: { schemaRef: { id: schemaId } }, xdmEntity: entity } };
}

describe(`profile data plane over HTTP (${STORE_KIND})`, () => {
  let h: HttpHarness;
  let crm: string, web: string, events: string;
  const T = Date.UTC(2026, 10, 20);

  before(async () => {
    h = await startProfileServer();
    const mk = async (name: string, cls: string, enabled = true) => {
      const r = await call(h.url, "POST", "/data/foundation/catalog/dataSets", { name, schemaRef: { id: cls, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: [`enabled:${enabled}`] } });
      assert.equal(r.status, 201, r.text);
      return idFromRef(r.json);
    };
    crm = await mk("CRM", PROFILE_CLASS);
    web = await mk("Web profile", PROFILE_CLASS);
    events = await mk("Events", EVENT_CLASS);
    h.policies.set("pdg-ts", { id: "pdg-ts", identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    h.policies.set("pdg-crm-first", { id: "pdg-crm-first", identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order: [crm, web] } });
    h.policies.set("none-ts", { id: "none-ts", identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } });
  });
  after(async () => { await h.close(); });

  it("lists and gets datasets in Catalog's keyed shape, per sandbox", async () => {
    const list = await call(h.url, "GET", "/data/foundation/catalog/dataSets");
    assert.equal(list.status, 200);
    assert.deepEqual(Object.keys(list.json as Obj).sort(), [crm, web, events].sort());
    const one = await call(h.url, "GET", `/data/foundation/catalog/dataSets/${events}`);
    assert.equal(((one.json as Obj)[events] as Obj)["schemaClass"], "experienceevent");
    assert.deepEqual(((one.json as Obj)[events] as Obj)["tags"], { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] });
    const dev = await call(h.url, "GET", `/data/foundation/catalog/dataSets/${events}`, undefined, { sandbox: "dev" });
    assert.equal(dev.status, 404);
  });

  it("ingests a batch file, keeps good records, reports bad ones per record", async () => {
    const b = await call(h.url, "POST", "/data/foundation/import/batches", { datasetId: crm, inputFormat: { format: "json" } });
    assert.equal(b.status, 201, b.text);
    const batchId = (b.json as Obj)["id"] as string;
    const lines = [
      { identityMap: { Email: [{ id: "ann@x.com", primary: true }], ECID: [{ id: "E-ann" }] }, person: { name: { firstName: "Ann", lastName: "Lee" } }, _repo: { modifyDate: new Date(T).toISOString() } },
      { person: { name: { firstName: "Nobody" } } },
      { identityMap: { ECID: [{ id: "E-big" }] }, blob: "x".repeat(120_000) },
      { _id: "e", timestamp: T, eventType: "commerce.purchases", identityMap: { ECID: [{ id: "E-wrong" }] } },
    ].map((x) => JSON.stringify(x));
    lines.splice(2, 0, "{broken");
    const up = await call(h.url, "PUT", `/data/foundation/import/batches/${batchId}/datasets/${crm}/files/part-0.ndjson`, undefined, { raw: lines.join("\n") });
    assert.equal(up.status, 200, up.text);
    assert.deepEqual((up.json as Obj)["errors"], [
      { code: "IDENTITY_MISSING", description: "record has no identity: send an identityMap with at least one id", recordIndex: 1 },
      { code: "MALFORMED_JSON", description: (((up.json as Obj)["errors"] as Obj[])[1]!)["description"], recordIndex: 2 },
      { code: "RECORD_TOO_LARGE", description: (((up.json as Obj)["errors"] as Obj[])[2]!)["description"], recordIndex: 3 },
      { code: "WRONG_DATASET_CLASS", description: `record has eventType, an experience event field, but dataset ${crm} holds profile records`, recordIndex: 4, path: "eventType" },
    ]);
    assert.match((((up.json as Obj)["errors"] as Obj[])[2]!)["description"] as string, /limit for a profile record is 102400 bytes/);
    const done = await call(h.url, "POST", `/data/foundation/import/batches/${batchId}?action=COMPLETE`);
    assert.equal(done.status, 200, done.text);
    const status = await call(h.url, "GET", `/data/foundation/catalog/batches/${batchId}`);
    const s = (status.json as Obj)[batchId] as Obj;
    assert.equal(s["status"], "success");
    assert.deepEqual(s["metrics"], { recordsRead: 5, recordsWritten: 1, failedRecordCount: 4 });
    assert.equal((s["errors"] as Obj[]).length, 4);
    assert.equal((await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-big&entityIdNS=ECID&mergePolicyId=pdg-ts")).status, 404);
  });

  it("refuses a whole malformed JSON file as one error, and a batch of another sandbox", async () => {
    const b = await call(h.url, "POST", "/data/foundation/import/batches", { datasetId: web });
    const batchId = (b.json as Obj)["id"] as string;
    const up = await call(h.url, "PUT", `/data/foundation/import/batches/${batchId}/datasets/${web}/files/bad.json`, undefined, { raw: "[{\"identityMap\": " });
    assert.equal(up.status, 200);
    assert.equal((((up.json as Obj)["errors"] as Obj[])[0]!)["code"], "MALFORMED_FILE");
    const other = await call(h.url, "POST", "/data/foundation/import/batches", { datasetId: web }, { sandbox: "dev" });
    assert.equal(other.status, 404);
    assert.equal((other.json as Obj)["title"], `dataset ${web} does not exist in sandbox dev`);
    const upOther = await call(h.url, "PUT", `/data/foundation/import/batches/${batchId}/datasets/${web}/files/x.json`, undefined, { raw: "{}", sandbox: "dev" });
    assert.equal(upOther.status, 404);
    const complete = await call(h.url, "POST", `/data/foundation/import/batches/${batchId}?action=COMPLETE`);
    assert.equal((complete.json as Obj)["status"], "failed", "nothing was written");
  });

  it("streams single and batched messages, acknowledging only stored ones", async () => {
    const one = await call(h.url, "POST", `/collection/conn-1?syncValidation=true`, msg(web, {
      identityMap: { ECID: [{ id: "E-ann", primary: true }] }, person: { name: { firstName: "Annie" } }, homeAddress: { city: "Lyon" },
      _repo: { modifyDate: new Date(T + 1000).toISOString() },
    }, PROFILE_CLASS));
    assert.equal(one.status, 200, one.text);
    assert.equal((one.json as Obj)["inletId"], "conn-1");
    const messages = [
      msg(events, { _id: "pv-1", timestamp: new Date(T + 10).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: "E-ann" }] } }),
      msg(events, { _id: "no-ts", eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: "E-ann" }] } }),
      msg(events, { _id: "em-1", timestamp: new Date(T + 20).toISOString(), eventType: "directMarketing.emailOpened", identityMap: { Email: [{ id: "ann@x.com" }] } }),
      msg(crm, { _id: "x", timestamp: T, identityMap: { ECID: [{ id: "E-ann" }] } }),
      { nope: true },
    ];
    const batch = await call(h.url, "POST", "/collection/batch/conn-1", { messages });
    assert.equal(batch.status, 207, batch.text);
    const responses = (batch.json as Obj)["responses"] as Obj[];
    assert.deepEqual(responses.map((r) => r["status"] ?? 200), [200, 400, 200, 400, 400]);
    assert.equal(responses[1]!["message"], "an experience event needs a timestamp (ISO-8601 date-time with zone, or epoch milliseconds)");
    assert.equal(responses[3]!["message"], `record declares class experienceevent but dataset ${crm} holds profile records`);
    const invalid = await call(h.url, "POST", `/collection/conn-1?syncValidation=true`, msg(events, { _id: "z", timestamp: "later", identityMap: { ECID: [{ id: "E-ann" }] } }));
    assert.equal(invalid.status, 400);
    const otherSandbox = await call(h.url, "POST", `/collection/conn-1`, msg(events, { _id: "o", timestamp: T, identityMap: { ECID: [{ id: "E-o" }] } }), { sandbox: "dev" });
    assert.equal(otherSandbox.status, 404);
  });

  it("shows the difference between identity graph types", async () => {
    const none = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-ann&entityIdNS=ECID&mergePolicyId=none-ts");
    const pdg = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-ann&entityIdNS=ECID&mergePolicyId=pdg-ts");
    assert.equal(pdg.status, 200, pdg.text);
    const n = Object.values(none.json as Obj)[0] as Obj;
    const p = Object.values(pdg.json as Obj)[0] as Obj;
    assert.deepEqual((n["entity"] as Obj)["person"], { name: { firstName: "Annie" } });
    assert.deepEqual((p["entity"] as Obj)["person"], { name: { firstName: "Annie", lastName: "Lee" } });
    assert.deepEqual(p["sources"], [crm, web].sort());
    assert.deepEqual(n["sources"], [web]);
    assert.deepEqual(p["mergePolicy"], { id: "pdg-ts" });
    // Without mergePolicyId and without a default: AEP's fallback, no stitching.
    const fallback = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=ann@x.com&entityIdNS=Email");
    assert.deepEqual(((Object.values(fallback.json as Obj)[0] as Obj)["entity"] as Obj)["homeAddress"], undefined);
  });

  it("shows the difference between attribute merge types", async () => {
    const ts = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=ann@x.com&entityIdNS=email&mergePolicyId=pdg-ts&fields=person.name.firstName,homeAddress");
    const dsp = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=ann@x.com&entityIdNS=email&mergePolicyId=pdg-crm-first&fields=person.name.firstName,homeAddress");
    assert.deepEqual((Object.values(ts.json as Obj)[0] as Obj)["entity"], { person: { name: { firstName: "Annie" } }, homeAddress: { city: "Lyon" } });
    assert.deepEqual((Object.values(dsp.json as Obj)[0] as Obj)["entity"], { person: { name: { firstName: "Ann" } }, homeAddress: { city: "Lyon" } });
    const unknown = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=ann@x.com&entityIdNS=email&mergePolicyId=nope");
    assert.equal(unknown.status, 404);
  });

  it("lists a profile's events by graph, with paging and time range", async () => {
    const base = "/data/core/ups/access/entities?schema.name=_xdm.context.experienceevent&relatedSchema.name=_xdm.context.profile&relatedEntityId=E-ann&relatedEntityIdNS=ECID";
    const pdg = await call(h.url, "GET", `${base}&mergePolicyId=pdg-ts&limit=1&orderby=-timestamp`);
    assert.equal(pdg.status, 200, pdg.text);
    const page1 = pdg.json as Obj;
    assert.deepEqual((page1["children"] as Obj[]).map((c) => c["entityId"]), ["em-1"]);
    const next = ((page1["_links"] as Obj)["next"] as Obj)["href"] as string;
    const page2 = await call(h.url, "GET", `/data/core/ups${next.replace(/^\/entities/, "/access/entities")}`);
    assert.deepEqual(((page2.json as Obj)["children"] as Obj[]).map((c) => c["entityId"]), ["pv-1"]);
    const none = await call(h.url, "GET", `${base}&mergePolicyId=none-ts`);
    assert.deepEqual(((none.json as Obj)["children"] as Obj[]).map((c) => c["entityId"]), ["pv-1"]);
    const ranged = await call(h.url, "GET", `${base}&mergePolicyId=pdg-ts&startTime=${T + 15}&endTime=${T + 100}`);
    assert.deepEqual(((ranged.json as Obj)["children"] as Obj[]).map((c) => c["entityId"]), ["em-1"]);
    const bad = await call(h.url, "GET", `${base}&mergePolicyId=pdg-ts&start=garbage`);
    assert.equal(bad.status, 400);
  });

  it("answers unknown identities, missing parameters and missing auth with clear errors", async () => {
    const missing = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=nobody&entityIdNS=ECID&mergePolicyId=pdg-ts");
    assert.equal(missing.status, 404);
    const noNs = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-ann");
    assert.equal(noNs.status, 400);
    assert.equal((noNs.json as Obj)["title"], "entityId and entityIdNS are required to look up a profile");
    const r = await fetch(`${h.url}/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-ann&entityIdNS=ECID`);
    assert.equal(r.status, 403);
    assert.deepEqual(await r.json(), { error_code: "403010", message: "Oauth token is missing" });
  });

  it("deletes a dataset with its records", async () => {
    const del = await call(h.url, "DELETE", `/data/foundation/catalog/dataSets/${web}`);
    assert.equal(del.status, 200);
    const none = await call(h.url, "GET", "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=E-ann&entityIdNS=ECID&mergePolicyId=none-ts");
    assert.equal(none.status, 200, "E-ann still has its own events");
    assert.equal(((Object.values(none.json as Obj)[0] as Obj)["entity"] as Obj)["homeAddress"], undefined);
    assert.equal((await call(h.url, "DELETE", `/data/foundation/catalog/dataSets/${web}`)).status, 404);
  });
});
