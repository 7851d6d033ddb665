// Pipelined bulk ingestion (ingest-pipeline.ts): chunk n+1 is validated and handed
// to the store while chunk n is being written; results come back in order, each
// only once its append has resolved (durable). Mechanics on a scripted store, then
// the semantics (stitching, dedup, per-record errors across chunks) on the real
// store of the run (SEGMENTD_TEST_STORE).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { IngestResult } from "../../src/profiles/ingest.js";
import { ingestChunks, type RecordChunk } from "../../src/profiles/ingest-pipeline.js";
import { StoreError, type AppendResult, type ProfileStore } from "../../src/profiles/store.js";
import type { Dataset, JsonObject, TenantScope, ValidRecord } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
const T0 = Date.UTC(2026, 10, 1);

function pageView(id: string, ...ids: Array<[string, string]>): JsonObject {
  const identityMap: Record<string, Array<{ id: string; primary?: boolean }>> = {};
  ids.forEach(([ns, id], i) => { (identityMap[ns] ??= []).push(i === 0 ? { id, primary: true } : { id }); });
  return { _id: id, timestamp: new Date(T0).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap };
}
const chunk = (...values: unknown[]): RecordChunk => values.map((value, index) => ({ index, value }));

const DATASET: Dataset = { id: "ds1", name: "events", schemaClass: "experienceevent", profileEnabled: true, identityFields: [], imsOrg: A.orgId, sandboxName: A.sandboxName, created: T0, updated: T0 };

/** A store whose appends settle when the test says so; records every call in order. */
function scriptedStore() {
  const log: string[] = [];
  const appends: Array<{ records: readonly ValidRecord[]; resolve: (r: AppendResult) => void; reject: (e: unknown) => void }> = [];
  const store = {
    async getDataset(_scope: TenantScope, id: string) { log.push(`getDataset ${id}`); return id === DATASET.id ? DATASET : null; },
    append(_scope: TenantScope, _ds: string, records: readonly ValidRecord[]) {
      log.push(`append ${records.map((r) => r.eventId).join(",")}`);
      return new Promise<AppendResult>((resolve, reject) => appends.push({ records, resolve, reject }));
    },
  } as unknown as ProfileStore;
  const ok = (n: number): AppendResult => ({ fragments: 0, events: n, duplicates: 0, lakeOnly: 0, refusedLinks: [], profileIds: [] });
  return { store, log, appends, ok };
}

const tick = () => new Promise((r) => setImmediate(r));
/** The event ids a pipeline step reports as stored. */
const stored = (step: IteratorResult<IngestResult>) => (step.value as IngestResult).stored.map((r) => r.eventId);

describe("ingestChunks: pipeline mechanics", () => {
  it("hands chunk n+1 to the store before chunk n is durable, and yields results in order only once durable", async () => {
    const { store, log, appends, ok } = scriptedStore();
    const it = ingestChunks(store, A, "ds1", [chunk(pageView("a", ["ECID", "1"])), chunk(pageView("b", ["ECID", "2"])), chunk(pageView("c", ["ECID", "3"]))], { now: T0 })[Symbol.asyncIterator]();
    const first = it.next();
    for (let i = 0; i < 5; i++) await tick();
    assert.deepEqual(log, ["getDataset ds1", "append a", "append b"], "depth 2: the second chunk is handed over while the first is written");
    let settled = false;
    void first.then(() => { settled = true; });
    await tick();
    assert.equal(settled, false, "no result before the first append resolved");
    appends[1]!.resolve(ok(1));
    await tick();
    assert.equal(settled, false, "the second chunk's result waits behind the first");
    appends[0]!.resolve(ok(1));
    const r0 = await first;
    assert.equal(r0.done, false);
    assert.deepEqual(stored(r0), ["a"]);
    const r1 = it.next();
    for (let i = 0; i < 5; i++) await tick();
    assert.deepEqual(log.slice(3), ["append c"]);
    assert.deepEqual(stored(await r1), ["b"]);
    appends[2]!.resolve(ok(1));
    assert.deepEqual(stored(await it.next()), ["c"]);
    assert.equal((await it.next()).done, true);
  });

  it("depth 1 waits for each chunk before validating the next", async () => {
    const { store, log, appends, ok } = scriptedStore();
    const it = ingestChunks(store, A, "ds1", [chunk(pageView("a", ["ECID", "1"])), chunk(pageView("b", ["ECID", "2"]))], { now: T0, depth: 1 })[Symbol.asyncIterator]();
    const first = it.next();
    for (let i = 0; i < 5; i++) await tick();
    assert.deepEqual(log, ["getDataset ds1", "append a"]);
    appends[0]!.resolve(ok(1));
    await first;
    const second = it.next();
    for (let i = 0; i < 5; i++) await tick();
    assert.deepEqual(log, ["getDataset ds1", "append a", "append b"]);
    appends[1]!.resolve(ok(1));
    await second;
  });

  it("throws a failed chunk's error in its turn, after the chunks handed over behind it have settled", async () => {
    const { store, appends, ok } = scriptedStore();
    const it = ingestChunks(store, A, "ds1", [chunk(pageView("a", ["ECID", "1"])), chunk(pageView("b", ["ECID", "2"])), chunk(pageView("c", ["ECID", "3"]))], { now: T0 })[Symbol.asyncIterator]();
    const first = it.next();
    for (let i = 0; i < 5; i++) await tick();
    appends[0]!.resolve(ok(1));
    await first;
    const second = it.next();
    for (let i = 0; i < 5; i++) await tick();
    assert.equal(appends.length, 3);
    appends[1]!.reject(new StoreError("DATASET_NOT_FOUND", "gone"));
    let done = false;
    const failed = assert.rejects(second, { name: "StoreError", message: "gone" }).then(() => { done = true; });
    for (let i = 0; i < 5; i++) await tick();
    assert.equal(done, false, "the third chunk is still being written: the error waits for it");
    appends[2]!.resolve(ok(1));
    await failed;
    assert.equal((await it.next()).done, true, "the pipeline ends after an error");
  });

  it("awaits the chunks in flight when the caller stops early", async () => {
    const { store, appends, ok } = scriptedStore();
    const gen = ingestChunks(store, A, "ds1", [chunk(pageView("a", ["ECID", "1"])), chunk(pageView("b", ["ECID", "2"])), chunk(pageView("c", ["ECID", "3"]))], { now: T0 });
    const first = gen.next();
    for (let i = 0; i < 5; i++) await tick();
    appends[0]!.resolve(ok(1));
    await first;
    for (let i = 0; i < 5; i++) await tick();
    let returned = false;
    const ret = gen.return(undefined).then(() => { returned = true; });
    for (let i = 0; i < 5; i++) await tick();
    assert.equal(returned, false, "return() waits for the chunk already handed over");
    appends[1]!.resolve(ok(1));
    await ret;
    assert.equal(appends.length, 2, "no further chunk is handed over after the caller stopped");
  });

  it("refuses a depth that is not a positive integer and an unknown dataset, before any append", async () => {
    const { store, log } = scriptedStore();
    for (const depth of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(ingestChunks(store, A, "ds1", [], { now: T0, depth }).next(), { name: "RangeError", message: `depth must be a positive integer, got ${depth}` });
    }
    await assert.rejects(ingestChunks(store, A, "nope", [chunk(pageView("a", ["ECID", "1"]))], { now: T0 }).next(),
      (e: unknown) => e instanceof StoreError && e.code === "DATASET_NOT_FOUND" && e.message === "dataset nope does not exist in sandbox prod");
    assert.deepEqual(log, ["getDataset nope"]);
  });
});

describe(`ingestChunks on the store (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  let events: string;
  before(async () => {
    ts = openTestStore();
    store = ts.store;
    events = (await store.createDataset(A, { name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
  });
  after(async () => { await ts.cleanup(); });

  it("stitches, deduplicates and reports bad records across chunks exactly as one append after another", async () => {
    const chunks = [
      chunk(pageView("p1", ["ECID", "E1"], ["Email", "x@example.com"]), { _id: "bad-1", identityMap: { ECID: [{ id: "E9" }] } }, pageView("p2", ["ECID", "E2"])),
      chunk(pageView("p3", ["CRMID", "C1"], ["Email", "x@example.com"]), pageView("p1", ["ECID", "E1"]), 42),
      chunk(pageView("p4", ["ECID", "E2"], ["CRMID", "C1"])),
    ];
    const results = [];
    for await (const r of ingestChunks(store, A, events, chunks, { now: T0 })) {
      results.push(r);
      // Acknowledged means stored: the chunk's events are readable as soon as its result arrives.
      for (const rec of r.stored) assert.notEqual(await store.findProfileId(A, rec.primary), null);
    }
    assert.deepEqual(results.map((r) => [r.received, r.accepted, r.duplicates]), [[3, 2, 0], [3, 2, 1], [1, 1, 0]]);
    assert.deepEqual(results.map((r) => r.failed.map((f) => [f.index, f.code])), [[[1, "EVENT_TIMESTAMP_MISSING"]], [[2, "RECORD_NOT_OBJECT"]], []]);
    const pid = await store.findProfileId(A, { namespace: "ecid", id: "E1" });
    for (const i of [{ namespace: "crmid", id: "C1" }, { namespace: "email", id: "x@example.com" }, { namespace: "ecid", id: "E2" }]) {
      assert.equal(await store.findProfileId(A, i), pid, `${i.namespace}:${i.id} joined the graph through later chunks`);
    }
    const page = await store.getEvents(A, { namespace: "ecid", id: "E1" }, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    assert.deepEqual(page.events.map((e) => e.eventId).sort(), ["p1", "p2", "p3", "p4"], "p1 stored once");
  });
});
