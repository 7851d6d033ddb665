// One conformance suite for both profile stores: SEGMENTD_TEST_STORE picks
// embedded (default) or postgres.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { parseRecordFile } from "../../src/profiles/record-files.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { StoreError, type ProfileStore, type ScannedProfile } from "../../src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
const B: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 1);
const pdgTs: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const noneTs: MergePolicySpec = { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
const ecid = (id: string) => ({ namespace: "ecid", id });
const email = (id: string) => ({ namespace: "email", id });

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

async function collect(it: AsyncIterable<ScannedProfile[]>): Promise<ScannedProfile[][]> {
  const out: ScannedProfile[][] = [];
  for await (const chunk of it) out.push(chunk);
  return out;
}

function pageView(id: string, ecidValue: string, at: number): JsonObject {
  return { _id: id, timestamp: new Date(at).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: ecidValue, primary: true }] } };
}

describe(`profile store conformance (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  before(() => { ts = openTestStore(); store = ts.store; });
  after(async () => { await ts.cleanup(); });

  describe("datasets", () => {
    it("creates, gets, lists newest first and isolates sandboxes", async () => {
      const d1 = await store.createDataset(A, { name: "CRM", schemaClass: "profile", profileEnabled: true }, T0);
      const d2 = await store.createDataset(A, { id: "web-events", name: "Web", schemaClass: "experienceevent", profileEnabled: true }, T0 + 1);
      assert.match(d1.id, /^[0-9a-f]{24}$/);
      assert.deepEqual(await store.getDataset(A, d1.id), d1);
      assert.equal(d2.imsOrg, A.orgId);
      assert.deepEqual((await store.listDatasets(A)).map((d) => d.id).slice(0, 2), ["web-events", d1.id]);
      assert.equal(await store.getDataset(B, d1.id), null);
      assert.deepEqual(await store.listDatasets(B), []);
      await assert.rejects(store.createDataset(A, { id: "web-events", name: "again", schemaClass: "profile" }, T0),
        (e: unknown) => e instanceof StoreError && e.code === "DATASET_EXISTS" && e.message === "dataset web-events already exists");
    });

    it("refuses to ingest into another sandbox's dataset", async () => {
      const d = await store.createDataset(A, { name: "iso", schemaClass: "profile", profileEnabled: true }, T0);
      await assert.rejects(ingestRecords(store, B, d.id, rec({ identityMap: { ECID: [{ id: "iso" }] } }), { now: T0 }),
        (e: unknown) => e instanceof StoreError && e.code === "DATASET_NOT_FOUND" && e.message === `dataset ${d.id} does not exist in sandbox dev`);
      assert.equal(await store.findProfileId(A, ecid("iso")), null);
      assert.equal(await store.findProfileId(B, ecid("iso")), null);
    });
  });

  describe("merge policies over real stored data", () => {
    let crm: string, web: string, ev: string;
    before(async () => {
      crm = (await store.createDataset(A, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      web = (await store.createDataset(A, { name: "web profile", schemaClass: "profile", profileEnabled: true }, T0)).id;
      ev = (await store.createDataset(A, { name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      // CRM knows the email and the ECID together (stitching); web knows the ECID only, and is newer.
      const r1 = await ingestRecords(store, A, crm, rec({
        identityMap: { Email: [{ id: "ann@x.com", primary: true }], ECID: [{ id: "E-ann" }] },
        person: { name: { firstName: "Ann", lastName: "Lee" } }, loyalty: { tier: "gold", points: 10 },
        _repo: { modifyDate: new Date(T0 + 1000).toISOString() },
      }), { now: T0 + 5000 });
      assert.deepEqual(r1.failed, []);
      await ingestRecords(store, A, web, rec({
        identityMap: { ECID: [{ id: "E-ann", primary: true }] }, person: { name: { firstName: "Annie" } }, homeAddress: { city: "Lyon" },
        _repo: { modifyDate: new Date(T0 + 2000).toISOString() },
      }), { now: T0 + 5000 });
      await ingestRecords(store, A, ev, rec(pageView("pv-1", "E-ann", T0 + 10), pageView("pv-2", "E-ann", T0 + 20),
        { ...pageView("em-1", "x", T0 + 30), identityMap: { Email: [{ id: "ann@x.com" }] }, eventType: "directMarketing.emailOpened" }), { now: T0 + 5000 });
    });

    it("pdg stitches the CRM and web fragments into one profile", async () => {
      const p = await store.getProfile(A, email("ann@x.com"), pdgTs);
      assert.ok(p);
      assert.deepEqual(p.sources, [crm, web].sort());
      assert.deepEqual(p.entity["person"], { name: { firstName: "Annie", lastName: "Lee" } });
      assert.deepEqual(p.identities, [ecid("E-ann"), email("ann@x.com")]);
      assert.equal(p.profileId, await store.findProfileId(A, ecid("E-ann")));
    });

    it("none returns only the looked-up identity's own fragments", async () => {
      const byEmail = await store.getProfile(A, email("ann@x.com"), noneTs);
      const byEcid = await store.getProfile(A, ecid("E-ann"), noneTs);
      assert.deepEqual(byEmail?.entity["person"], { name: { firstName: "Ann", lastName: "Lee" } });
      assert.equal(byEcid?.entity["loyalty"], undefined);
      assert.deepEqual(byEcid?.entity["person"], { name: { firstName: "Annie" } });
    });

    it("dataSetPrecedence lets the listed dataset win over the newer one", async () => {
      const p = await store.getProfile(A, ecid("E-ann"), { identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order: [crm, web] } });
      assert.deepEqual(p?.entity["person"], { name: { firstName: "Ann", lastName: "Lee" } });
      assert.deepEqual(p?.entity["homeAddress"], { city: "Lyon" });
    });

    it("events follow the graph under pdg and the identity under none", async () => {
      const all = await store.getEvents(A, ecid("E-ann"), pdgTs);
      assert.deepEqual(all.events.map((e) => e.eventId), ["pv-1", "pv-2", "em-1"]);
      const own = await store.getEvents(A, ecid("E-ann"), noneTs);
      assert.deepEqual(own.events.map((e) => e.eventId), ["pv-1", "pv-2"]);
      assert.equal(all.next, null);
    });

    it("pages events by time range and cursor, both directions", async () => {
      const p1 = await store.getEvents(A, email("ann@x.com"), pdgTs, { limit: 2, order: "desc" });
      assert.deepEqual(p1.events.map((e) => e.eventId), ["em-1", "pv-2"]);
      assert.ok(p1.next);
      const p2 = await store.getEvents(A, email("ann@x.com"), pdgTs, { limit: 2, order: "desc", cursor: p1.next });
      assert.deepEqual(p2.events.map((e) => e.eventId), ["pv-1"]);
      assert.equal(p2.next, null);
      const ranged = await store.getEvents(A, email("ann@x.com"), pdgTs, { startTime: T0 + 20, endTime: T0 + 30 });
      assert.deepEqual(ranged.events.map((e) => e.eventId), ["pv-2"]);
      await assert.rejects(store.getEvents(A, email("ann@x.com"), pdgTs, { cursor: "garbage" }),
        (e: unknown) => e instanceof StoreError && e.code === "INVALID_CURSOR");
    });

    it("reads events as they were at a mark of the events stored (eventsStoredThrough)", async () => {
      await ingestRecords(store, A, ev, rec(pageView("mk-1", "E-mark", T0 + 10)), { now: T0 + 7000 });
      const mark = await store.eventsStoredThrough();
      assert.ok(mark > 0);
      // Stored after the mark, backdated before the other: left out at the mark, there after it.
      await ingestRecords(store, A, ev, rec(pageView("mk-0", "E-mark", T0 + 5)), { now: T0 + 7001 });
      const later = await store.eventsStoredThrough();
      assert.ok(later > mark, `${later} > ${mark}`);
      assert.deepEqual((await store.getEvents(A, ecid("E-mark"), pdgTs, { storedThrough: mark })).events.map((e) => e.eventId), ["mk-1"]);
      assert.deepEqual((await store.getEvents(A, ecid("E-mark"), pdgTs, { storedThrough: later })).events.map((e) => e.eventId), ["mk-0", "mk-1"]);
      assert.deepEqual((await store.getEvents(A, ecid("E-mark"), pdgTs)).events.map((e) => e.eventId), ["mk-0", "mk-1"]);
      assert.equal(await store.eventsStoredThrough(), later, "reads do not move it");
    });

    it("a retried event is stored once", async () => {
      const r = await ingestRecords(store, A, ev, rec(pageView("pv-1", "E-ann", T0 + 10)), { now: T0 + 6000 });
      assert.equal(r.duplicates, 1);
      assert.equal((await store.getEvents(A, ecid("E-ann"), pdgTs)).events.length, 3);
    });

    it("is invisible from another sandbox", async () => {
      assert.equal(await store.getProfile(B, ecid("E-ann"), pdgTs), null);
      assert.deepEqual((await store.getEvents(B, ecid("E-ann"), pdgTs)).events, []);
    });
  });

  describe("stitching across batches", () => {
    it("merges two stored graphs into the older id and moves their events and memberships", async () => {
      const ds = (await store.createDataset(A, { name: "stitch", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const evs = (await store.createDataset(A, { name: "stitch events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      await ingestRecords(store, A, ds, rec({ identityMap: { ECID: [{ id: "S1" }] }, a: 1 }), { now: T0 });
      await ingestRecords(store, A, ds, rec({ identityMap: { CRMID: [{ id: "C1" }] }, b: 2 }), { now: T0 });
      await ingestRecords(store, A, evs, rec(pageView("s-ev", "S1", T0)), { now: T0 });
      const older = (await store.findProfileId(A, ecid("S1")))!;
      const newer = (await store.findProfileId(A, { namespace: "crmid", id: "C1" }))!;
      assert.ok(Number(older) < Number(newer));
      await store.applyMembershipChanges(A, [{ profileId: newer, definitionId: "seg-x", status: "realized", source: "streaming", at: T0 }]);
      const r = await ingestRecords(store, A, ds, rec({ identityMap: { CRMID: [{ id: "C1", primary: true }], ECID: [{ id: "S1" }] } }), { now: T0 + 1 });
      assert.deepEqual(r.profileIds, [older]);
      assert.equal(await store.findProfileId(A, { namespace: "crmid", id: "C1" }), older);
      const p = await store.getProfile(A, { namespace: "crmid", id: "C1" }, pdgTs);
      assert.equal(p?.entity["a"], 1);
      assert.equal(p?.entity["b"], 2);
      assert.deepEqual(p?.entity["segmentMembership"], { ups: { "seg-x": { status: "realized", lastQualificationTime: new Date(T0).toISOString() } } });
      assert.deepEqual((await store.getEvents(A, { namespace: "crmid", id: "C1" }, pdgTs)).events.map((e) => e.eventId), ["s-ev"]);
      assert.deepEqual(await store.getMemberships(A, newer), []);
    });

    it("tells the profile each record went to, in the records' order (storedPids)", async () => {
      const ds = (await store.createDataset(A, { name: "pids", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const evs = (await store.createDataset(A, { name: "pids events", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      await ingestRecords(store, A, ds, rec({ identityMap: { ECID: [{ id: "P1" }] } }, { identityMap: { ECID: [{ id: "P2" }] } }), { now: T0 });
      const p1 = (await store.findProfileId(A, ecid("P1")))!;
      const p2 = (await store.findProfileId(A, ecid("P2")))!;
      // Known identities only (the embedded store's cached path), then a new identity and a link (the stitching path).
      const known = await ingestRecords(store, A, evs, rec(pageView("pid-1", "P2", T0), pageView("pid-2", "P1", T0), pageView("pid-3", "P2", T0)), { now: T0 });
      assert.deepEqual(Array.from(known.storedPids ?? []), [p2, p1, p2].map(Number));
      const linking = { ...pageView("pid-5", "P1", T0), identityMap: { ECID: [{ id: "P1", primary: true }, { id: "P2" }] } };
      const mixed = await ingestRecords(store, A, evs, rec(pageView("pid-4", "P3", T0), linking, pageView("pid-6", "P2", T0)), { now: T0 });
      const p3 = (await store.findProfileId(A, ecid("P3")))!;
      const merged = (await store.findProfileId(A, ecid("P2")))!;
      assert.equal(merged, await store.findProfileId(A, ecid("P1")));
      assert.deepEqual(Array.from(mixed.storedPids ?? []), [p3, merged, merged].map(Number));
      // A dataset outside profiles stores records under no profile.
      const lake = (await store.createDataset(A, { name: "pids lake", schemaClass: "experienceevent", profileEnabled: false }, T0)).id;
      assert.equal((await ingestRecords(store, A, lake, rec(pageView("pid-7", "P1", T0)), { now: T0 })).storedPids, undefined);
    });

    it("refuses links beyond the graph cap and reports them", async () => {
      const ds = (await store.createDataset(A, { name: "cap", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ id: `cap-${from + i}` }));
      await ingestRecords(store, A, ds, rec({ identityMap: { ECID: ids(3) } }), { now: T0, limits: { maxIdentitiesPerGraph: 3 } });
      const r = await ingestRecords(store, A, ds, rec({ identityMap: { ECID: [{ id: "cap-0", primary: true }, { id: "cap-9" }] } }), { now: T0, limits: { maxIdentitiesPerGraph: 3 } });
      assert.deepEqual(r.refusedLinks, [{ index: 0, identity: ecid("cap-9"), code: "IDENTITY_GRAPH_LIMIT",
        message: "identity ecid:cap-9 was not linked: the identity graph would have 4 identities, more than the limit of 3" }]);
      assert.equal(await store.findProfileId(A, ecid("cap-9")), null);
      assert.equal((await store.graphIdentities(A, (await store.findProfileId(A, ecid("cap-0")))!)).length, 3);
    });
  });

  describe("bad input", () => {
    it("keeps good records of a mixed file and reports each bad one, nothing else changed", async () => {
      const ds = (await store.createDataset(A, { name: "mixed", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      const file = [
        JSON.stringify(pageView("ok-1", "M1", T0)),
        "{not json",
        JSON.stringify({ _id: "no-identity", timestamp: T0 }),
        JSON.stringify({ ...pageView("big", "M2", T0), blob: "x".repeat(11_000) }),
        JSON.stringify(pageView("ok-2", "M1", T0 + 1)),
      ].join("\n");
      const parsed = parseRecordFile(file, "ndjson");
      const before = await store.countProfiles(A);
      const r = await ingestRecords(store, A, ds, parsed.records, { now: T0, priorErrors: parsed.errors, extraRead: parsed.errors.length });
      assert.equal(r.received, 5);
      assert.equal(r.accepted, 2);
      assert.deepEqual(r.failed.map((e) => [e.index, e.code]), [[1, "MALFORMED_JSON"], [2, "IDENTITY_MISSING"], [3, "RECORD_TOO_LARGE"]]);
      assert.equal(await store.countProfiles(A), before + 1, "only M1's profile was created");
      assert.equal(await store.findProfileId(A, ecid("M2")), null);
      assert.deepEqual((await store.getEvents(A, ecid("M1"), pdgTs)).events.map((e) => e.eventId), ["ok-1", "ok-2"]);
    });

    it("rejects records of the wrong class per record", async () => {
      const ds = (await store.createDataset(A, { name: "profiles only", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const r = await ingestRecords(store, A, ds, rec(pageView("wrong", "W1", T0), { identityMap: { ECID: [{ id: "W2" }] } }), { now: T0 });
      assert.deepEqual(r.failed.map((e) => e.code), ["WRONG_DATASET_CLASS"]);
      assert.equal(await store.findProfileId(A, ecid("W1")), null);
      assert.notEqual(await store.findProfileId(A, ecid("W2")), null);
    });
  });

  describe("ingestion batches", () => {
    it("accounts files, counts and per-record failures, then closes", async () => {
      const ds = (await store.createDataset(A, { name: "batch", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const b = await store.createBatch(A, ds, T0);
      assert.equal(b.status, "loading");
      const f = parseRecordFile(JSON.stringify([{ identityMap: { ECID: [{ id: "B1" }] } }, { identityMap: {} }, 7]), "json");
      await ingestRecords(store, A, ds, f.records, { now: T0 + 1, batch: { id: b.id, file: "part-1.json" } });
      await store.setBatchStatus(A, b.id, "success", T0 + 2);
      const got = await store.getBatch(A, b.id);
      assert.ok(got);
      assert.equal(got.status, "success");
      assert.equal(got.completed, T0 + 2);
      assert.deepEqual([got.recordsRead, got.recordsWritten, got.recordsFailed], [3, 1, 2]);
      assert.deepEqual(got.files, ["part-1.json"]);
      assert.deepEqual(got.errors.map((e) => [e.index, e.code, e.file]), [[1, "IDENTITY_MISSING", "part-1.json"], [2, "RECORD_NOT_OBJECT", "part-1.json"]]);
      assert.deepEqual((await store.listBatches(A, { datasetId: ds })).map((x) => x.id), [b.id]);
      assert.equal(await store.getBatch(B, b.id), null);
      await assert.rejects(ingestRecords(store, A, ds, f.records, { now: T0 + 3, batch: { id: b.id } }),
        (e: unknown) => e instanceof StoreError && e.code === "BATCH_NOT_OPEN");
      assert.equal((await store.getBatch(A, b.id))?.recordsRead, 3, "the refused append changed nothing");
    });

    it("keeps records of a dataset that is not profile-enabled out of profiles", async () => {
      const ds = (await store.createDataset(A, { name: "lake", schemaClass: "profile", profileEnabled: false }, T0)).id;
      const r = await ingestRecords(store, A, ds, rec({ identityMap: { ECID: [{ id: "L1" }] } }), { now: T0 });
      assert.equal(r.accepted, 1);
      assert.equal(await store.findProfileId(A, ecid("L1")), null);
    });
  });

  describe("scan, memberships and hygiene (own sandbox)", () => {
    const S: TenantScope = { orgId: "org2", sandboxName: "scan" };
    let prof: string, evs: string;
    before(async () => {
      prof = (await store.createDataset(S, { name: "p", schemaClass: "profile", profileEnabled: true }, T0)).id;
      evs = (await store.createDataset(S, { name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      const profiles = Array.from({ length: 25 }, (_, i) => ({ identityMap: { ECID: [{ id: `P${i}`, primary: true }], ...(i === 0 ? { Email: [{ id: "p0@x.com" }] } : {}) },
        loyalty: { points: i }, ...(i === 3 ? { consents: { marketing: { preferred: "n" } } } : {}) }));
      await ingestRecords(store, S, prof, rec(...profiles), { now: T0 });
      await ingestRecords(store, S, evs, rec(...Array.from({ length: 50 }, (_, i) => pageView(`e${i}`, `P${i % 25}`, T0 + i * 1000))), { now: T0 });
      await ingestRecords(store, S, prof, rec({ identityMap: { Email: [{ id: "p0@x.com", primary: true }] }, person: { name: { firstName: "Zero" } } }), { now: T0 });
    });

    it("scans every profile once, in chunks, with its events", async () => {
      const chunks = await collect(store.scanProfiles(S, pdgTs, { chunkSize: 10 }));
      assert.deepEqual(chunks.map((c) => c.length), [10, 10, 5]);
      const all = chunks.flat();
      assert.equal(new Set(all.map((p) => p.profileId)).size, 25);
      const p0 = all.find((p) => p.identities.some((i) => i.id === "P0"))!;
      assert.equal((p0.entity["person"] as { name: { firstName: string } }).name.firstName, "Zero");
      assert.deepEqual(p0.events.map((e) => e.eventId), ["e0", "e25"]);
      assert.equal(all.filter((p) => p.optedOut).length, 1);
      const since = (await collect(store.scanProfiles(S, pdgTs, { eventsSince: T0 + 25_000 }))).flat();
      assert.equal(since.reduce((n, p) => n + p.events.length, 0), 25);
      const noEvents = (await collect(store.scanProfiles(S, pdgTs, { events: false }))).flat();
      assert.equal(noEvents.reduce((n, p) => n + p.events.length, 0), 0);
    });

    it("scans only the listed profiles, in scan order, as the full scan yields them", async () => {
      const full = (await collect(store.scanProfiles(S, pdgTs))).flat();
      const byId = new Map(full.map((p) => [p.profileId, p]));
      const wanted = [full[17]!.profileId, full[3]!.profileId, full[9]!.profileId, full[3]!.profileId];
      const chunks = await collect(store.scanProfiles(S, pdgTs, { profileIds: [...wanted, "999999999", "not-a-pid", "-1", "1e3"], chunkSize: 2 }));
      assert.deepEqual(chunks.map((c) => c.length), [2, 1]);
      const listed = chunks.flat();
      assert.deepEqual(listed.map((p) => p.profileId), [full[3]!.profileId, full[9]!.profileId, full[17]!.profileId]);
      for (const p of listed) assert.deepEqual(p, byId.get(p.profileId));
      const noEvents = (await collect(store.scanProfiles(S, pdgTs, { profileIds: wanted, events: false }))).flat();
      assert.equal(noEvents.reduce((n, p) => n + p.events.length, 0), 0);
      assert.deepEqual(await collect(store.scanProfiles(S, pdgTs, { profileIds: [] })), []);
      assert.deepEqual(await collect(store.scanProfiles({ ...S, sandboxName: "other-sandbox" }, pdgTs, { profileIds: wanted })), []);
      const none = (await collect(store.scanProfiles(S, noneTs, { profileIds: [full[0]!.profileId] }))).flat();
      assert.deepEqual(none, (await collect(store.scanProfiles(S, noneTs))).flat().filter((p) => p.profileId === full[0]!.profileId));
    });

    it("under policy none, scans one entry per identity with data", async () => {
      const all = (await collect(store.scanProfiles(S, noneTs))).flat();
      assert.equal(all.length, 26);
      const zero = all.filter((p) => p.profileId === all.find((x) => x.identity?.id === "P0")!.profileId);
      assert.deepEqual(zero.map((p) => p.identity), [ecid("P0"), email("p0@x.com")]);
      assert.equal(zero[1]!.events.length, 0);
    });

    it("records membership changes and transitions", async () => {
      const p1 = (await store.findProfileId(S, ecid("P1")))!;
      const p2 = (await store.findProfileId(S, ecid("P2")))!;
      const t = await store.applyMembershipChanges(S, [
        { profileId: p1, definitionId: "d1", status: "realized", source: "batch", at: T0 },
        { profileId: p2, definitionId: "d1", status: "realized", source: "streaming", at: T0 + 1 },
        { profileId: p2, definitionId: "d2", status: "exited", source: "batch", at: T0 + 1 },
      ]);
      assert.deepEqual(t.map((x) => [x.profileId, x.definitionId, x.from, x.to]), [[p1, "d1", null, "realized"], [p2, "d1", null, "realized"]]);
      const again = await store.applyMembershipChanges(S, [
        { profileId: p1, definitionId: "d1", status: "realized", source: "batch", at: T0 + 5 },
        { profileId: p2, definitionId: "d1", status: "exited", source: "edge", at: T0 + 6 },
      ]);
      assert.deepEqual(again, [{ profileId: p2, definitionId: "d1", from: "realized", to: "exited", source: "edge", at: new Date(T0 + 6).toISOString() }]);
      assert.deepEqual(await store.countMembers(S, "d1"), { realized: 1, exited: 1 });
      assert.deepEqual((await store.listMembers(S, "d1")).map((m) => m.profileId), [p1]);
      assert.deepEqual((await store.listTransitions(S, { definitionId: "d1", sources: ["streaming", "edge"] })).map((x) => x.to), ["realized", "exited"]);
      assert.deepEqual((await store.listTransitions(S, { since: T0 + 2 })).length, 1);
      const prof1 = await store.getProfile(S, ecid("P1"), pdgTs);
      assert.deepEqual(prof1?.entity["segmentMembership"], { ups: { d1: { status: "realized", lastQualificationTime: new Date(T0).toISOString() } } });
      assert.deepEqual(await store.listTransitions(A, { definitionId: "d1" }), []);
    });

    it("appends with changes decided ahead, applying them only when every record landed as decided", async () => {
      const D: TenantScope = { orgId: "org2", sandboxName: "decided" };
      const ds = await store.createDataset(D, { name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0);
      await ingestRecords(store, D, ds.id, rec(pageView("q1-0", "Q1", T0), pageView("q2-0", "Q2", T0)), { now: T0 });
      const p1 = (await store.findProfileId(D, ecid("Q1")))!;
      const p2 = (await store.findProfileId(D, ecid("Q2")))!;
      const valid = (values: JsonObject[]) => values.map((v, i) => {
        const r = validateRecord(v, i, ds);
        assert.ok(r.ok);
        return r.record;
      });
      const opts = { ingestedAt: T0, maxIdentitiesPerGraph: 50 };
      // Q1's event decided for p1, a new visitor's with no expectation: applied with the append.
      const ok = await store.appendDecided(D, ds.id, valid([pageView("q1-1", "Q1", T0 + 1), pageView("n-1", "NEW", T0 + 1)]), opts,
        { expect: Float64Array.from([Number(p1), NaN]), changes: [{ profileId: p1, definitionId: "dd", status: "realized", source: "streaming", at: T0 + 1, from: null }] });
      assert.deepEqual(ok.transitions?.map((t) => [t.profileId, t.definitionId, t.from, t.to]), [[p1, "dd", null, "realized"]]);
      assert.equal(ok.append.events, 2);
      assert.deepEqual(Array.from(ok.append.recordPids!).map(String), [p1, (await store.findProfileId(D, ecid("NEW")))!]);
      // Q2's event decided for a profile it does not belong to: stored, the changes not applied.
      const wrong = await store.appendDecided(D, ds.id, valid([pageView("q2-1", "Q2", T0 + 2)]), opts,
        { expect: Float64Array.from([Number(p1)]), changes: [{ profileId: p1, definitionId: "dd", status: "exited", source: "streaming", at: T0 + 2 }] });
      assert.equal(wrong.transitions, null);
      assert.equal(wrong.append.events, 1);
      assert.deepEqual(Array.from(wrong.append.recordPids!).map(String), [p2]);
      assert.deepEqual((await store.getEvents(D, ecid("Q2"), pdgTs)).events.map((e) => e.eventId), ["q2-0", "q2-1"]);
      assert.deepEqual(await store.countMembers(D, "dd"), { realized: 1, exited: 0 });
      assert.deepEqual((await store.listTransitions(D, { definitionId: "dd" })).map((t) => [t.profileId, t.to]), [[p1, "realized"]]);
    });

    it("updates fields on the records of given identities", async () => {
      const r = await store.updateFields(S, { datasetId: prof, identities: [ecid("P5"), ecid("P6")], set: { "loyalty.tier": "silver" }, remove: ["loyalty.points"] });
      assert.equal(r.updated, 2);
      assert.deepEqual((await store.getProfile(S, ecid("P5"), pdgTs))?.entity["loyalty"], { tier: "silver" });
      assert.deepEqual((await store.getProfile(S, ecid("P7"), pdgTs))?.entity["loyalty"], { points: 7 });
      const evUpd = await store.updateFields(S, { datasetId: evs, identities: [ecid("P5")], remove: ["web"] });
      assert.equal(evUpd.updated, 0, "page views carry no web field: nothing to remove");
      const evSet = await store.updateFields(S, { datasetId: evs, identities: [ecid("P5")], set: { "web.webPageDetails.name": "redacted" } });
      assert.equal(evSet.updated, 2);
    });

    it("deletes by identity in one dataset, then everywhere", async () => {
      const pid = (await store.findProfileId(S, ecid("P8")))!;
      const one = await store.deleteByIdentities(S, [ecid("P8")], [evs]);
      assert.deepEqual([one.fragments, one.events, one.identities, one.profileIds], [0, 2, 0, [pid]]);
      assert.ok(await store.getProfile(S, ecid("P8"), pdgTs));
      const all = await store.deleteByIdentities(S, [ecid("P8"), ecid("nobody")], "ALL");
      assert.deepEqual([all.fragments, all.events, all.identities], [1, 0, 1]);
      assert.equal(await store.getProfile(S, ecid("P8"), pdgTs), null);
      assert.equal(await store.countProfiles(S), 24);
    });

    it("deletes a dataset's records, then the dataset", async () => {
      const r = await store.deleteDatasetRecords(S, evs);
      assert.equal(r.events, 48, "50 events minus the 2 of P8 deleted before");
      assert.deepEqual((await store.getEvents(S, ecid("P1"), pdgTs)).events, []);
      const d = await store.deleteDataset(S, prof);
      assert.equal(d?.fragments, 25, "25 ECID fragments + the p0@x.com fragment - P8");
      assert.equal(await store.getDataset(S, prof), null);
      assert.equal(await store.deleteDataset(S, prof), null);
      await assert.rejects(store.deleteDatasetRecords(S, prof), (e: unknown) => e instanceof StoreError && e.code === "DATASET_NOT_FOUND");
    });
  });

  describe("export reads: profileDataTimes and listLakeRecords", () => {
    const X: TenantScope = { orgId: "org4", sandboxName: "exports" };
    let prof: string, evs: string, lake: string;
    before(async () => {
      prof = (await store.createDataset(X, { name: "p", schemaClass: "profile", profileEnabled: true }, T0)).id;
      evs = (await store.createDataset(X, { name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      lake = (await store.createDataset(X, { name: "export", schemaClass: "profile", profileEnabled: false }, T0)).id;
      // The record's own _repo.modifyDate is not its ingestion time.
      await ingestRecords(store, X, prof, rec({ identityMap: { ECID: [{ id: "F1" }] }, a: 1, _repo: { modifyDate: new Date(T0 - 9999).toISOString() } }), { now: T0 + 1000 });
      await ingestRecords(store, X, prof, rec({ identityMap: { ECID: [{ id: "F1" }] }, b: 2 }), { now: T0 + 5000 });
      await ingestRecords(store, X, evs, rec(pageView("x-1", "F1", T0 + 7), pageView("x-2", "EV", T0 + 10), pageView("x-3", "EV", T0 + 20)), { now: T0 + 6000 });
      await ingestRecords(store, X, lake, rec(...["L1", "L2", "L3"].map((id, i) => ({ identityMap: { ECID: [{ id }] }, n: i }))), { now: T0 });
    });

    it("answers the newest fragment ingestion time and event timestamp per profile id, in order", async () => {
      const f1 = (await store.findProfileId(X, ecid("F1")))!;
      const ev = (await store.findProfileId(X, ecid("EV")))!;
      assert.deepEqual(await store.profileDataTimes(X, [ev, f1, "999999", f1]), [
        { lastFragmentIngestedAt: null, lastEventAt: T0 + 20 },
        { lastFragmentIngestedAt: T0 + 5000, lastEventAt: T0 + 7 },
        { lastFragmentIngestedAt: null, lastEventAt: null },
        { lastFragmentIngestedAt: T0 + 5000, lastEventAt: T0 + 7 },
      ]);
      assert.deepEqual(await store.profileDataTimes(X, []), []);
      assert.deepEqual(await store.profileDataTimes(B, [f1]), [{ lastFragmentIngestedAt: null, lastEventAt: null }], "another sandbox sees nothing");
    });

    it("lists the sandbox's profile ids ascending, page by page, one per identity graph", async () => {
      const f1 = (await store.findProfileId(X, ecid("F1")))!;
      const ev = (await store.findProfileId(X, ecid("EV")))!;
      // F1 (two fragments) and EV (events only) are one graph each; lake records make no profile.
      const expected = [f1, ev].sort((a, b) => Number(a) - Number(b));
      assert.deepEqual(await store.listProfileIds(X), expected);
      const first = await store.listProfileIds(X, { limit: 1 });
      assert.deepEqual(first, [expected[0]]);
      assert.deepEqual(await store.listProfileIds(X, { afterProfileId: first[0]!, limit: 1 }), [expected[1]]);
      assert.deepEqual(await store.listProfileIds(X, { afterProfileId: expected[1]! }), []);
      assert.deepEqual(await store.listProfileIds({ orgId: "org4", sandboxName: "nobody" }), [], "another sandbox lists nothing");
    });

    it("lists profile ids in numeric order across a change of digit count (pages chained by the last id)", async () => {
      // Profiles until the ids of this sandbox span a power of ten: "10" sorts before "9" as text.
      const Y: TenantScope = { orgId: "org4", sandboxName: "digits" };
      const ds = (await store.createDataset(Y, { name: "p", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const profile = (i: number) => ({ identityMap: { ECID: [{ id: `D${i}` }] } });
      await ingestRecords(store, Y, ds, rec(profile(0)), { now: T0 });
      const first = Number((await store.findProfileId(Y, ecid("D0")))!);
      const wanted = 10 ** String(first).length - first + 3;
      assert.ok(wanted <= 20_000, `the first id ${first} is within reach of the next power of ten`);
      for (let i = 1; i < wanted; i += 5_000) {
        await ingestRecords(store, Y, ds, rec(...Array.from({ length: Math.min(5_000, wanted - i) }, (_, k) => profile(i + k))), { now: T0 });
      }
      const all = await store.listProfileIds(Y, { limit: 100_000 });
      assert.equal(all.length, wanted);
      assert.ok(all.every((id, k) => k === 0 || Number(id) > Number(all[k - 1])), "ascending as numbers");
      assert.ok(String(all[0]).length < String(all[all.length - 1]).length, "the ids change digit count");
      const paged: string[] = [];
      for (let after: string | undefined; ;) {
        const page = await store.listProfileIds(Y, after === undefined ? { limit: 7 } : { afterProfileId: after, limit: 7 });
        paged.push(...page);
        if (page.length < 7) break;
        after = page[page.length - 1];
      }
      assert.deepEqual(paged, all);
    });

    it("lists a lake dataset's records in write order, page by page, in its sandbox only", async () => {
      const first = await store.listLakeRecords(X, lake, { limit: 2 });
      assert.deepEqual(first.map((r) => r.body["n"]), [0, 1]);
      assert.deepEqual(first[0]!.body["identityMap"], { ECID: [{ id: "L1" }] });
      const rest = await store.listLakeRecords(X, lake, { afterSeq: first[1]!.seq });
      assert.deepEqual(rest.map((r) => r.body["n"]), [2]);
      assert.ok(rest[0]!.seq > first[1]!.seq);
      assert.deepEqual(await store.listLakeRecords(X, prof), [], "profile-enabled records are not lake records");
      assert.deepEqual(await store.listLakeRecords(B, lake), []);
      assert.deepEqual(await store.listLakeRecords(X, "unknown"), []);
    });
  });

  it("a failed first write of a new sandbox does not lose that sandbox's later writes", async () => {
    const C: TenantScope = { orgId: "org3", sandboxName: "fresh" };
    await assert.rejects(store.append(C, "missing", [], { ingestedAt: T0, maxIdentitiesPerGraph: 50 }), (e: unknown) => e instanceof StoreError && e.code === "DATASET_NOT_FOUND");
    const d = await store.createDataset(C, { name: "after failure", schemaClass: "profile" }, T0);
    const again = ts.reopen();
    try {
      assert.equal((await again.getDataset(C, d.id))?.name, "after failure");
    } finally {
      await again.close();
    }
  });

  it("reopened store sees every acknowledged write", async () => {
    const again = ts.reopen();
    try {
      assert.ok(await again.getProfile(A, email("ann@x.com"), pdgTs));
      assert.equal((await again.getEvents(A, ecid("E-ann"), pdgTs)).events.length, 3);
    } finally {
      await again.close();
    }
  });
});
