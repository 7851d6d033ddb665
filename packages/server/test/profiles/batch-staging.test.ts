// Batch ingestion stages a batch's records until COMPLETE (AEP: a batch's data
// is not visible before it succeeded) and ABORT drops them: on the store (both
// kinds, SEGMENTD_TEST_STORE) and over real HTTP.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeStaged, encodeStaged } from "../../src/profiles/batch-staging.js";
import { ingestRecords, stageRecords } from "../../src/profiles/ingest.js";
import { StoreError, type ProfileStore, type ScannedProfile } from "../../src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { call, ORG, startProfileServer, type HttpHarness } from "./http-harness.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

type Obj = Record<string, unknown>;
const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
const B: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 1);
const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const ecid = (id: string) => ({ namespace: "ecid", id });

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

function pageView(id: string, ecidValue: string, at: number): JsonObject {
  return { _id: id, timestamp: new Date(at).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: ecidValue, primary: true }] } };
}

/** Everything a tenant's profiles hold, for "nothing else changed" checks. */
async function snapshot(store: ProfileStore, scope: TenantScope): Promise<{ count: number; profiles: ScannedProfile[] }> {
  const profiles: ScannedProfile[] = [];
  for await (const chunk of store.scanProfiles(scope, pdg, { chunkSize: 100 })) profiles.push(...chunk);
  return { count: await store.countProfiles(scope), profiles };
}

const isStoreError = (code: string, message: string) => (e: unknown) => e instanceof StoreError && e.code === code && e.message === message;

describe("staged record encoding", () => {
  it("round-trips a validated record, parsing the body only when read", () => {
    const target = { id: "ds", schemaClass: "experienceevent" as const, identityFields: [{ path: "crmId", namespace: "CRMID" }] };
    const v = validateRecord({ ...pageView("enc-1", "E-enc", T0), crmId: "C-9", note: "é\u2028" }, 7, target);
    if (!v.ok) throw new Error(JSON.stringify(v.errors));
    const e = encodeStaged(v.record);
    assert.equal(e.body, v.record.json);
    const back = decodeStaged(e.meta, e.body, "experienceevent");
    assert.equal(typeof Object.getOwnPropertyDescriptor(back, "body")?.get, "function", "the body is parsed on first read");
    assert.deepEqual({ ...back, body: undefined }, { ...v.record, body: undefined });
    assert.deepEqual(back.primary, ecid("E-enc"));
    assert.deepEqual(back.identities, [ecid("E-enc"), { namespace: "crmid", id: "C-9" }]);
    assert.deepEqual(back.body, v.record.body);
  });
});

describe(`batch staging on the store (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  let events: string, crm: string;
  before(async () => {
    ts = openTestStore();
    store = ts.store;
    events = (await store.createDataset(A, { name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
    crm = (await store.createDataset(A, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
    // Data that exists before any batch: it must come out of every batch test unchanged.
    await ingestRecords(store, A, events, rec(pageView("old-1", "S-old", T0), pageView("old-2", "S-old", T0 + 1)), { now: T0 });
    await ingestRecords(store, A, crm, rec({ identityMap: { ECID: [{ id: "S-old", primary: true }] }, person: { name: { firstName: "Old" } } }), { now: T0 });
  });
  after(async () => { await ts.cleanup(); });

  it("keeps staged records out of profiles until COMPLETE, then applies them with dedup and stitching", async () => {
    const initial = await snapshot(store, A);
    const b = await store.createBatch(A, events, T0);
    const staged = await stageRecords(store, A, events, { id: b.id, file: "f1.ndjson" },
      rec(pageView("s-1", "S-new", T0 + 10), pageView("old-1", "S-old", T0), { _id: "bad", identityMap: { ECID: [{ id: "S-x" }] } }, pageView("s-1", "S-new", T0 + 10)),
      { now: T0 + 1 });
    assert.equal(staged.staged, 3);
    assert.deepEqual(staged.failed.map((e) => [e.index, e.code]), [[2, "EVENT_TIMESTAMP_MISSING"]]);
    const loading = await store.getBatch(A, b.id);
    assert.deepEqual([loading?.status, loading?.recordsRead, loading?.recordsWritten, loading?.recordsFailed, loading?.files], ["loading", 4, 0, 1, ["f1.ndjson"]]);
    assert.equal(await store.findProfileId(A, ecid("S-new")), null, "staged records are not visible");
    assert.deepEqual(await snapshot(store, A), initial);

    const done = await store.completeBatch(A, b.id, { ingestedAt: T0 + 2, maxIdentitiesPerGraph: 50 });
    assert.deepEqual([done.batch.status, done.batch.recordsRead, done.batch.recordsWritten, done.batch.recordsFailed, done.batch.completed], ["success", 4, 3, 1, T0 + 2]);
    assert.deepEqual(done.refusedLinks, []);
    // The profiles written to, each once (streaming evaluation follows them).
    assert.deepEqual([...done.profileIds].sort(), [await store.findProfileId(A, ecid("S-new")), await store.findProfileId(A, ecid("S-old"))].sort());
    // The retried old-1 and the repeated s-1 are duplicates: counted as written, stored once.
    assert.deepEqual((await store.getEvents(A, ecid("S-new"), pdg)).events.map((e) => e.eventId), ["s-1"]);
    assert.deepEqual((await store.getEvents(A, ecid("S-old"), pdg)).events.map((e) => e.eventId), ["old-1", "old-2"]);
    assert.equal(await store.countProfiles(A), initial.count + 1);
    await assert.rejects(store.completeBatch(A, b.id, { ingestedAt: T0 + 3, maxIdentitiesPerGraph: 50 }),
      isStoreError("BATCH_NOT_OPEN", `batch ${b.id} is success; only a loading batch can be completed`));
    await assert.rejects(store.abortBatch(A, b.id, T0 + 3), isStoreError("BATCH_NOT_OPEN", `batch ${b.id} is success; only a loading batch can be aborted`));
  });

  it("stitches and applies the guardrail exactly across the files of one batch", async () => {
    const b = await store.createBatch(A, crm, T0);
    const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ id: `g-${from + i}` }));
    await stageRecords(store, A, crm, { id: b.id, file: "a.json" }, rec({ identityMap: { ECID: ids(3) } }), { now: T0, limits: { maxIdentitiesPerGraph: 3 } });
    await stageRecords(store, A, crm, { id: b.id, file: "b.json" }, rec({ identityMap: { ECID: [{ id: "g-0", primary: true }, { id: "g-9" }] }, a: 1 }), { now: T0, limits: { maxIdentitiesPerGraph: 3 } });
    const done = await store.completeBatch(A, b.id, { ingestedAt: T0 + 5, maxIdentitiesPerGraph: 3 });
    assert.deepEqual(done.refusedLinks, [{ index: 0, identity: ecid("g-9"), code: "IDENTITY_GRAPH_LIMIT",
      message: "identity ecid:g-9 was not linked: the identity graph would have 4 identities, more than the limit of 3" }]);
    assert.equal(await store.findProfileId(A, ecid("g-9")), null);
    const pid = await store.findProfileId(A, ecid("g-2"));
    assert.notEqual(pid, null);
    assert.deepEqual((await store.graphIdentities(A, pid!)).map((i) => i.id), ["g-0", "g-1", "g-2"]);
    assert.equal((await store.getProfile(A, ecid("g-1"), pdg))?.entity["a"], 1);
    assert.deepEqual([done.batch.status, done.batch.recordsWritten, done.batch.files], ["success", 2, ["a.json", "b.json"]]);
  });

  it("ABORT drops the staged records: nothing reaches profiles and the batch is closed", async () => {
    const initial = await snapshot(store, A);
    const b = await store.createBatch(A, events, T0);
    await stageRecords(store, A, events, { id: b.id, file: "x.ndjson" }, rec(pageView("ab-1", "S-ab", T0), pageView("old-2", "S-old", T0 + 1)), { now: T0 + 1 });
    const aborted = await store.abortBatch(A, b.id, T0 + 7);
    assert.deepEqual([aborted.status, aborted.completed, aborted.updated, aborted.recordsRead, aborted.recordsWritten], ["aborted", T0 + 7, T0 + 7, 2, 0]);
    assert.equal(await store.findProfileId(A, ecid("S-ab")), null);
    assert.deepEqual(await snapshot(store, A), initial);
    await assert.rejects(store.completeBatch(A, b.id, { ingestedAt: T0 + 8, maxIdentitiesPerGraph: 50 }),
      isStoreError("BATCH_NOT_OPEN", `batch ${b.id} is aborted; only a loading batch can be completed`));
    await assert.rejects(store.abortBatch(A, b.id, T0 + 8), isStoreError("BATCH_NOT_OPEN", `batch ${b.id} is aborted; only a loading batch can be aborted`));
    await assert.rejects(stageRecords(store, A, events, { id: b.id }, rec(pageView("ab-2", "S-ab", T0)), { now: T0 + 9 }),
      isStoreError("BATCH_NOT_OPEN", `batch ${b.id} is aborted; only a loading batch can be added to`));
    assert.deepEqual(await snapshot(store, A), initial, "the refused calls changed nothing");
    assert.deepEqual(await store.getBatch(A, b.id), aborted);
  });

  it("refuses unknown batches and batches of another sandbox, changing nothing", async () => {
    const initial = await snapshot(store, A);
    const b = await store.createBatch(A, events, T0);
    await stageRecords(store, A, events, { id: b.id }, rec(pageView("iso-1", "S-iso", T0)), { now: T0 });
    await assert.rejects(store.abortBatch(A, "nope", T0), isStoreError("BATCH_NOT_FOUND", "batch nope does not exist in sandbox prod"));
    await assert.rejects(store.abortBatch(B, b.id, T0), isStoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox dev`));
    await assert.rejects(store.completeBatch(B, b.id, { ingestedAt: T0, maxIdentitiesPerGraph: 50 }), isStoreError("BATCH_NOT_FOUND", `batch ${b.id} does not exist in sandbox dev`));
    assert.equal((await store.getBatch(A, b.id))?.status, "loading");
    assert.deepEqual(await snapshot(store, A), initial);
    assert.equal((await store.completeBatch(A, b.id, { ingestedAt: T0 + 1, maxIdentitiesPerGraph: 50 })).batch.recordsWritten, 1);
    assert.notEqual(await store.findProfileId(A, ecid("S-iso")), null);
  });

  it("counts duplicates exactly across multi-row insert boundaries (250 events, 100 per statement)", async () => {
    await ingestRecords(store, A, events, rec(pageView("m-99", "S-multi", T0), pageView("m-100", "S-multi", T0), pageView("m-199", "S-multi", T0)), { now: T0 });
    const list = Array.from({ length: 250 }, (_, k) => pageView(k === 150 ? "m-10" : `m-${k}`, k % 2 === 0 ? "S-multi" : "S-multi2", T0 + k));
    const r = await ingestRecords(store, A, events, rec(...list), { now: T0 });
    assert.deepEqual([r.received, r.accepted, r.duplicates, r.failed.length], [250, 250, 4, 0]);
    const ids = async (id: string) => {
      const out: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.getEvents(A, ecid(id), { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } }, { limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
        out.push(...page.events.map((e) => e.eventId));
        cursor = page.next ?? undefined;
      } while (cursor !== undefined);
      return out;
    };
    const stored = [...await ids("S-multi"), ...await ids("S-multi2")];
    assert.equal(stored.length, 3 + 246);
    assert.equal(new Set(stored).size, stored.length, "each _id stored once");
    // The first copy wins: m-10 keeps its own record (S-multi, T0 + 10), not the later one at k = 150.
    const m10 = (await store.getEvents(A, ecid("S-multi"), pdg, { startTime: T0 + 10, endTime: T0 + 11 })).events;
    assert.deepEqual(m10.map((e) => e.eventId), ["m-10"]);
    assert.deepEqual((await store.getEvents(A, ecid("S-multi"), pdg, { startTime: T0 + 150, endTime: T0 + 151 })).events, []);
  });

  it("a completed batch survives a reopen; an aborted batch's records never appear", async () => {
    const kept = await store.createBatch(A, events, T0);
    const dropped = await store.createBatch(A, events, T0);
    await stageRecords(store, A, events, { id: kept.id }, rec(pageView("r-1", "S-keep", T0)), { now: T0 });
    await stageRecords(store, A, events, { id: dropped.id }, rec(pageView("r-2", "S-drop", T0)), { now: T0 });
    await store.completeBatch(A, kept.id, { ingestedAt: T0, maxIdentitiesPerGraph: 50 });
    await store.abortBatch(A, dropped.id, T0);
    const again = ts.reopen();
    try {
      assert.notEqual(await again.findProfileId(A, ecid("S-keep")), null);
      assert.equal(await again.findProfileId(A, ecid("S-drop")), null);
      assert.equal((await again.getBatch(A, dropped.id))?.status, "aborted");
    } finally {
      await again.close();
    }
  });
});

describe(`batch ABORT over HTTP (${STORE_KIND})`, () => {
  let h: HttpHarness;
  let events: string;
  const PROFILE = "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityIdNS=ECID&mergePolicyId=pdg&entityId=";

  const upsError = (r: { status: number; json: unknown }, status: number, code: string, title: string) => {
    assert.equal(r.status, status);
    const body = r.json as Obj;
    assert.equal(body["status"], status);
    assert.equal(body["title"], title);
    assert.equal(body["type"], `https://ns.adobe.com/aep/errors/${code}`);
    assert.deepEqual(body["errors"], { [String(status)]: [{ code, message: title }] });
  };
  const newBatch = async (): Promise<string> => {
    const b = await call(h.url, "POST", "/data/foundation/import/batches", { datasetId: events, inputFormat: { format: "json" } });
    assert.equal(b.status, 201, b.text);
    return (b.json as Obj)["id"] as string;
  };
  const upload = (batchId: string, lines: JsonObject[]) =>
    call(h.url, "PUT", `/data/foundation/import/batches/${batchId}/datasets/${events}/files/part-0.ndjson`, undefined, { raw: lines.map((l) => JSON.stringify(l)).join("\n") });
  const state = async () => ({ count: await h.ts.store.countProfiles({ orgId: ORG, sandboxName: "prod" }),
    kept: (await call(h.url, "GET", `${PROFILE}H-kept`)).text });

  before(async () => {
    h = await startProfileServer();
    h.policies.set("pdg", { id: "pdg", identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    const r = await call(h.url, "POST", "/data/foundation/catalog/dataSets", { name: "Events", schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent", contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] } });
    assert.equal(r.status, 201, r.text);
    events = ((r.json as string[])[0]!).replace("@/dataSets/", "");
    const id = await newBatch();
    assert.equal((await upload(id, [pageView("k-1", "H-kept", T0)])).status, 200);
    assert.equal((await call(h.url, "POST", `/data/foundation/import/batches/${id}?action=COMPLETE`)).status, 200);
  });
  after(async () => { await h.close(); });

  it("an uploaded batch is invisible until COMPLETE", async () => {
    const id = await newBatch();
    const up = await upload(id, [pageView("v-1", "H-visible", T0)]);
    assert.equal(up.status, 200, up.text);
    assert.deepEqual(up.json, { file: "part-0.ndjson", recordsRead: 1, recordsStaged: 1, failedRecordCount: 0, errors: [] });
    assert.equal((await call(h.url, "GET", `${PROFILE}H-visible`)).status, 404);
    const done = await call(h.url, "POST", `/data/foundation/import/batches/${id}?action=COMPLETE`);
    assert.equal(done.status, 200, done.text);
    assert.equal((done.json as Obj)["status"], "success");
    assert.deepEqual((done.json as Obj)["metrics"], { recordsRead: 1, recordsWritten: 1, failedRecordCount: 0 });
    assert.equal((await call(h.url, "GET", `${PROFILE}H-visible`)).status, 200);
  });

  it("ABORT ends the batch aborted, its records never in profiles, nothing else changed", async () => {
    const id = await newBatch();
    assert.equal((await upload(id, [pageView("a-1", "H-aborted", T0), pageView("k-1", "H-kept", T0)])).status, 200);
    const initial = await state();
    const r = await call(h.url, "POST", `/data/foundation/import/batches/${id}?action=ABORT`);
    assert.equal(r.status, 200, r.text);
    assert.equal((r.json as Obj)["id"], id);
    assert.equal((r.json as Obj)["status"], "aborted");
    assert.equal((r.json as Obj)["completed"], h.clock.t);
    assert.deepEqual((r.json as Obj)["metrics"], { recordsRead: 2, recordsWritten: 0, failedRecordCount: 0 });
    const status = await call(h.url, "GET", `/data/foundation/catalog/batches/${id}`);
    assert.equal(((status.json as Obj)[id] as Obj)["status"], "aborted");
    assert.equal((await call(h.url, "GET", `${PROFILE}H-aborted`)).status, 404);
    assert.deepEqual(await state(), initial);
    const late = await upload(id, [pageView("a-2", "H-aborted", T0)]);
    upsError(late, 400, "SEGMENTD-BAD-REQUEST-400", `batch ${id} is aborted; only a loading batch can be added to`);
    assert.deepEqual(await state(), initial);
  });

  it("answers exact 4xx for aborting a completed, aborted or unknown batch and for an unknown action", async () => {
    const done = await newBatch();
    await upload(done, [pageView("c-1", "H-done", T0)]);
    assert.equal((await call(h.url, "POST", `/data/foundation/import/batches/${done}?action=COMPLETE`)).status, 200);
    const aborted = await newBatch();
    assert.equal((await call(h.url, "POST", `/data/foundation/import/batches/${aborted}?action=abort`)).status, 200, "the action is case-insensitive");
    const initial = await state();
    upsError(await call(h.url, "POST", `/data/foundation/import/batches/${done}?action=ABORT`), 400, "SEGMENTD-BAD-REQUEST-400", `Batch ${done} is already success`);
    upsError(await call(h.url, "POST", `/data/foundation/import/batches/${aborted}?action=ABORT`), 400, "SEGMENTD-BAD-REQUEST-400", `Batch ${aborted} is already aborted`);
    upsError(await call(h.url, "POST", `/data/foundation/import/batches/${aborted}?action=COMPLETE`), 400, "SEGMENTD-BAD-REQUEST-400", `Batch ${aborted} is already aborted`);
    upsError(await call(h.url, "POST", "/data/foundation/import/batches/0123456789abcdef01234567?action=ABORT"), 404, "SEGMENTD-NOT-FOUND-404", "Batch with id '0123456789abcdef01234567' was not found");
    const open = await newBatch();
    upsError(await call(h.url, "POST", `/data/foundation/import/batches/${open}?action=ABORT`, undefined, { sandbox: "dev" }), 404, "SEGMENTD-NOT-FOUND-404", `Batch with id '${open}' was not found`);
    upsError(await call(h.url, "POST", `/data/foundation/import/batches/${open}?action=DELETE`), 400, "SEGMENTD-BAD-REQUEST-400", "Unsupported batch action \"DELETE\": use action=COMPLETE or action=ABORT");
    assert.equal((((await call(h.url, "GET", `/data/foundation/catalog/batches/${open}`)).json as Obj)[open] as Obj)["status"], "loading");
    assert.equal((((await call(h.url, "GET", `/data/foundation/catalog/batches/${done}`)).json as Obj)[done] as Obj)["status"], "success");
    assert.equal((await call(h.url, "GET", `${PROFILE}H-done`)).status, 200, "the completed batch's data is untouched");
    assert.deepEqual(await state(), initial);
  });
});
