// An append looks up the profile of every identity it mentions: after a graph
// merge, an identity deletion, a rolled-back append or a write by another
// connection, the next event must land on the profile the database holds now
// (regression guard for any caching of identity → profile in the append path).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { StoreError, type ProfileStore } from "../../src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
const T0 = Date.UTC(2026, 10, 1);
const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const ecid = (id: string) => ({ namespace: "ecid", id });
const crm = (id: string) => ({ namespace: "crmid", id });
const rec = (...values: unknown[]) => values.map((value, index) => ({ index, value }));
const ev = (id: string, ecidValue: string): JsonObject =>
  ({ _id: id, timestamp: new Date(T0).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: ecidValue, primary: true }] } });

describe(`append path after identities moved (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  let events: string, crmDs: string;
  before(async () => {
    ts = openTestStore();
    store = ts.store;
    events = (await store.createDataset(A, { name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
    crmDs = (await store.createDataset(A, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  });
  after(async () => { await ts.cleanup(); });

  const eventIds = async (identity: { namespace: string; id: string }) =>
    (await store.getEvents(A, identity, pdg)).events.map((e) => e.eventId).sort();

  it("an event after a graph merge lands on the surviving profile", async () => {
    await ingestRecords(store, A, crmDs, rec({ identityMap: { CRMID: [{ id: "C1", primary: true }] } }), { now: T0 });
    await ingestRecords(store, A, events, rec(ev("m1", "M1")), { now: T0 });
    const older = await store.findProfileId(A, crm("C1"));
    assert.notEqual(older, await store.findProfileId(A, ecid("M1")));
    // Links M1 to C1: M1's (newer) graph merges into C1's.
    await ingestRecords(store, A, crmDs, rec({ identityMap: { CRMID: [{ id: "C1", primary: true }], ECID: [{ id: "M1" }] } }), { now: T0 + 1 });
    const r = await ingestRecords(store, A, events, rec(ev("m2", "M1")), { now: T0 + 2 });
    assert.deepEqual(r.profileIds, [older]);
    assert.equal(await store.findProfileId(A, ecid("M1")), older);
    assert.deepEqual(await eventIds(crm("C1")), ["m1", "m2"]);
  });

  it("an event for an identity deleted everywhere starts a new profile", async () => {
    await ingestRecords(store, A, events, rec(ev("d1", "D1")), { now: T0 });
    const before = await store.findProfileId(A, ecid("D1"));
    await store.deleteByIdentities(A, [ecid("D1")], "ALL");
    assert.equal(await store.findProfileId(A, ecid("D1")), null);
    const r = await ingestRecords(store, A, events, rec(ev("d2", "D1")), { now: T0 });
    const now = await store.findProfileId(A, ecid("D1"));
    assert.notEqual(now, null);
    assert.notEqual(now, before, "the deleted graph is gone; a new one holds the identity");
    assert.deepEqual(r.profileIds, [now]);
    assert.deepEqual(await eventIds(ecid("D1")), ["d2"]);
  });

  it("an append that rolled back leaves nothing behind for the next one", async () => {
    const count = await store.countProfiles(A);
    await assert.rejects(ingestRecords(store, A, events, rec(ev("r1", "R1")), { now: T0, batch: { id: "no-such-batch" } }),
      (e: unknown) => e instanceof StoreError && e.code === "BATCH_NOT_FOUND");
    assert.equal(await store.findProfileId(A, ecid("R1")), null);
    const r = await ingestRecords(store, A, events, rec(ev("r2", "R1")), { now: T0 });
    const pid = await store.findProfileId(A, ecid("R1"));
    assert.notEqual(pid, null, "the identity was stored by the second append");
    assert.deepEqual(r.profileIds, [pid]);
    assert.equal(await store.countProfiles(A), count + 1);
    assert.deepEqual(await eventIds(ecid("R1")), ["r2"]);
  });

  it("an event after another connection merged the graph lands on the surviving profile", async () => {
    await ingestRecords(store, A, crmDs, rec({ identityMap: { CRMID: [{ id: "X1", primary: true }] } }), { now: T0 });
    await ingestRecords(store, A, events, rec(ev("x1", "X9")), { now: T0 });
    const older = await store.findProfileId(A, crm("X1"));
    const other = ts.reopen();
    try {
      await ingestRecords(other, A, crmDs, rec({ identityMap: { CRMID: [{ id: "X1", primary: true }], ECID: [{ id: "X9" }] } }), { now: T0 + 1 });
    } finally {
      await other.close();
    }
    const r = await ingestRecords(store, A, events, rec(ev("x2", "X9")), { now: T0 + 2 });
    assert.deepEqual(r.profileIds, [older]);
    assert.deepEqual(await eventIds(crm("X1")), ["x1", "x2"]);
  });
});
