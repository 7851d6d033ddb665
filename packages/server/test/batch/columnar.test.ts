/**
 * The columnar back end: the snapshot builder (columns, CSR events, mixed
 * types, exact row objects, identityGraph none), its agreement with the
 * language package's reference layout, incremental refresh after appends,
 * deletes and graph merges (equal to a fresh full build), and the columnar
 * engine's member sets equal to `evaluate` profile by profile on demo data for
 * every query type.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { rowColumnarData, type Column, type ColumnarTable } from "@segmentd/pql";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { PackedStrings } from "../../src/batch/columnar/packed-strings.js";
import { openSnapshotFile, readSnapshotPart, writeSnapshotFile } from "../../src/batch/columnar/snapshot-file.js";
import { buildSnapshot, PartBuilder, SNAPSHOT_SCAN_CHUNK } from "../../src/batch/columnar/snapshot.js";
import { evaluateJob } from "../../src/batch/engine/evaluate-job.js";
import { membershipChangesOf } from "../../src/batch/engine/membership-output.js";
import { DEMO_DATASETS, demoEvents, demoProfiles } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { MembershipChange, ScannedProfile } from "../../src/profiles/store.js";
import { NO_MERGE_POLICY, type JsonObject, type MergePolicySpec } from "../../src/profiles/types.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";
import { NOW, eventArb, profileArb } from "./pql-gen.js";
import { PDG, SCOPE, definition, scannedEntry, populate, referenceMembers, type Population } from "./fixtures.js";
import { columnValues, dumpSnapshot } from "../helpers/snapshot-dump.js";

const entry = scannedEntry;

const values = (col: Column | undefined, length: number): unknown[] => columnValues(col, length, (v) => plain(v ?? null));

/** A JSON value with plain prototypes (generated objects may have none). */
function plain(v: unknown): unknown {
  return v === undefined ? undefined : (JSON.parse(JSON.stringify(v)) as unknown);
}

function pathsOf(t: ColumnarTable): string[] {
  return ((t as unknown as { columnPaths(): string[] }).columnPaths() ?? []).slice().sort();
}

describe("columnar snapshot builder", () => {
  it("flattens rows into typed, dictionary and mixed columns, events in CSR order, and rebuilds exact row objects", () => {
    const profiles: JsonObject[] = [
      { person: { age: 30, vip: true, name: "ann" }, a: 1, n: null, empty: {}, "dotted.key": 5, segmentMembership: { ups: { x: { status: "realized" } }, other: { y: { status: "realized" } } } },
      { person: { age: null, vip: false, name: "bob" }, a: "x", n: 3, allNull: null },
      { person: { name: "ann" }, a: [1, 2], tags: ["t"], nested: { deep: { v: 1.5 } } },
    ];
    const events: JsonObject[][] = [
      [
        { eventType: "view", timestamp: "2026-11-20T10:00:00.000Z", value: 2 },
        { eventType: "buy", timestamp: "2026-11-19T10:00:00.000Z", value: 7, meta: {} },
      ],
      [],
      [
        { eventType: "view", timestamp: "not a time" },
        { eventType: "view", timestamp: "2026-11-18T10:00:00Z", value: "x" },
      ],
    ];
    const b = new PartBuilder();
    profiles.forEach((p, i) => b.add(entry(String(i + 1), p, events[i])));
    const part = b.finish();
    const data = part.data();
    const t = data.profiles;
    assert.equal(t.length, 3);
    assert.deepEqual(t.column("person.age"), { kind: "number", values: Float64Array.from([30, NaN, NaN]) });
    assert.deepEqual(t.column("person.vip"), { kind: "boolean", values: Int8Array.from([1, 0, -1]) });
    const name = t.column("person.name");
    assert.equal(name?.kind, "string");
    assert.deepEqual(values(name, 3), ["ann", "bob", "ann"]);
    assert.deepEqual(name?.kind === "string" ? name.dict : null, ["ann", "bob"], "one dictionary entry per distinct value");
    assert.deepEqual(t.column("a"), { kind: "mixed", values: [1, "x", [1, 2]] });
    assert.deepEqual(t.column("n"), { kind: "number", values: Float64Array.from([NaN, 3, NaN]) }, "null is no value in a typed column");
    assert.deepEqual(t.column("allNull"), { kind: "mixed", values: [undefined, null, undefined] });
    assert.equal(t.column("person"), undefined);
    assert.ok(t.hasChildren("person") && t.hasChildren("nested.deep") && !t.hasChildren("a"));
    assert.equal(t.column("dotted.key"), undefined, "keys with a dot have no column");
    // The stored ups is not kept (statuses are supplied per job); other namespaces are.
    assert.equal(t.column("segmentMembership.ups.x.status"), undefined);
    assert.ok(!t.hasChildren("segmentMembership.ups"));
    assert.deepEqual(values(t.column("segmentMembership.other.y.status"), 3), ["realized", null, null]);
    // Events: CSR, oldest first per profile, unreadable timestamps last.
    assert.deepEqual([...data.eventStart], [0, 2, 2, 4]);
    assert.deepEqual([...data.eventTime], [Date.parse("2026-11-19T10:00:00.000Z"), Date.parse("2026-11-20T10:00:00.000Z"), Date.parse("2026-11-18T10:00:00Z"), NaN]);
    assert.deepEqual(values(data.events.column("eventType"), 4), ["buy", "view", "view", "view"]);
    assert.deepEqual(values(data.events.column("timestamp"), 4), ["2026-11-19T10:00:00.000Z", "2026-11-20T10:00:00.000Z", "2026-11-18T10:00:00Z", "not a time"]);
    assert.deepEqual(data.events.column("value"), { kind: "mixed", values: [7, 2, "x", undefined] });
    // Row objects are rebuilt exactly (but for the stored ups).
    const { ups: _ups, ...otherNamespaces } = profiles[0]!["segmentMembership"] as JsonObject;
    assert.deepEqual(data.profile(0), { ...profiles[0], segmentMembership: otherNamespaces });
    assert.deepEqual(data.profile(1), profiles[1]);
    assert.deepEqual(data.profile(2), profiles[2]);
    assert.deepEqual([0, 1, 2, 3].map((r) => data.event(r)), [events[0]![1], events[0]![0], events[2]![1], events[2]![0]]);
  });

  it("derives canonical event timestamps from eventTime and keeps them readable", () => {
    const b = new PartBuilder();
    b.add(entry("1", {}, [{ timestamp: "2026-11-20T10:00:00.000Z" }, { timestamp: "2026-11-21T10:00:00.000Z" }]));
    b.add(entry("2", {}, [{ other: 1 }]));
    const data = b.finish().data();
    assert.deepEqual(values(data.events.column("timestamp"), 3), ["2026-11-20T10:00:00.000Z", "2026-11-21T10:00:00.000Z", null]);
    assert.deepEqual(data.event(2), { other: 1 });
    assert.deepEqual(data.event(0), { timestamp: "2026-11-20T10:00:00.000Z" });
  });

  it("keeps rare columns as (row, value) pairs and expands them on first use", () => {
    const b = new PartBuilder();
    for (let i = 0; i < 40; i++) b.add(entry(String(i), i === 7 ? { rare: 5, rareText: "x", rareFlag: true, rareMixed: [1] } : i === 9 ? { rare: null, common: i } : { common: i }));
    const part = b.finish();
    for (const p of ["rare", "rareText", "rareFlag", "rareMixed"]) assert.equal(part.profiles.stored(p)?.kind, "sparse", p);
    assert.equal(part.profiles.stored("common")?.kind, "number", "a column with values in most rows is dense");
    const data = part.data();
    assert.deepEqual(values(data.profiles.column("rare"), 40), Array.from({ length: 40 }, (_, i) => (i === 7 ? 5 : null)));
    assert.deepEqual(values(data.profiles.column("rareText"), 40), Array.from({ length: 40 }, (_, i) => (i === 7 ? "x" : null)));
    assert.deepEqual(values(data.profiles.column("rareFlag"), 40), Array.from({ length: 40 }, (_, i) => (i === 7 ? true : null)));
    assert.equal(data.profiles.column("rareMixed")?.kind, "mixed");
    assert.deepEqual(data.profile(7), { rare: 5, rareText: "x", rareFlag: true, rareMixed: [1] });
    assert.deepEqual(data.profile(9), { rare: null, common: 9 });
    assert.deepEqual(data.profile(8), { common: 8 });
  });

  it("supplies inSegment status columns per evaluation without changing the snapshot", () => {
    const b = new PartBuilder();
    b.add(entry("1", { a: 1 }));
    b.add(entry("2", { a: 2 }));
    const part = b.finish();
    const col: Column = { kind: "string", codes: Int32Array.from([-1, 0]), dict: ["realized"] };
    const data = part.data(new Map([["segmentMembership.ups.seg.status", col]]));
    assert.equal(data.profiles.column("segmentMembership.ups.seg.status"), col);
    assert.ok(data.profiles.hasChildren("segmentMembership.ups.seg"));
    assert.deepEqual(data.profile(1), { a: 2, segmentMembership: { ups: { seg: { status: "realized" } } } });
    assert.equal(part.data().profiles.column("segmentMembership.ups.seg.status"), undefined);
  });

  it("agrees with the language package's reference layout on generated data of every JSON kind", () => {
    const rows = fc.sample(fc.record({ profile: profileArb, events: fc.array(eventArb, { maxLength: 5 }) }), { numRuns: 120, seed: 21 });
    const ref = rowColumnarData(rows.map((r) => ({ profile: r.profile, events: r.events })));
    // Also with string columns that stop de-duplicating at once (what events' _id do at scale).
    for (const rawStringsAfter of [undefined, 1]) {
      const b = new PartBuilder(rawStringsAfter === undefined ? {} : { rawStringsAfter });
      rows.forEach((r, i) => b.add(entry(String(i), r.profile as JsonObject, r.events as JsonObject[])));
      const mine = b.finish().data();
      assert.deepEqual([...mine.eventStart], [...ref.eventStart]);
      assert.deepEqual([...mine.eventTime], [...ref.eventTime], "the same timestamp reading as PQL");
      for (const table of ["profiles", "events"] as const) {
        const a = mine[table];
        const r = ref[table];
        assert.deepEqual(pathsOf(a), pathsOf(r), table);
        for (const p of pathsOf(r)) {
          assert.equal(a.column(p)?.kind, r.column(p)?.kind, `${table} ${p}`);
          assert.deepEqual(values(a.column(p), a.length), values(r.column(p), r.length), `${table} ${p}`);
          const parts = p.split(".");
          for (let k = 1; k < parts.length; k++) assert.equal(a.hasChildren(parts.slice(0, k).join(".")), r.hasChildren(parts.slice(0, k).join(".")));
        }
      }
      for (let i = 0; i < rows.length; i++) assert.deepEqual(mine.profile(i), plain(ref.profile(i)));
      for (let e = 0; e < ref.events.length; e++) assert.deepEqual(mine.event(e), plain(ref.event(e)));
    }
  });
});

const dump = dumpSnapshot;

describe("snapshot lookups and caching", () => {
  it("locates numeric profile ids through the dense index, exactly (no other spelling of a number)", () => {
    const b = new PartBuilder();
    for (const id of ["7", "3", "12"]) b.add(entry(id, { a: 1 }));
    const part = b.finish();
    assert.deepEqual(["3", "7", "12", "13", "007", "7.0", " 7", "-1", "x", ""].map((id) => part.ordinalOf(id)), [1, 0, 2, -1, -1, -1, -1, -1, -1, -1]);
    // Ids that are not all canonical integers: the map lookup.
    const m = new PartBuilder();
    for (const id of ["7", "007", "abc"]) m.add(entry(id, { a: 1 }));
    const mixed = m.finish();
    assert.deepEqual(["7", "007", "abc", "7.0"].map((id) => mixed.ordinalOf(id)), [0, 1, 2, -1]);
  });

  it("an unchanged refresh keeps the base's expanded columns (shared base not released)", async () => {
    const ts = openTestStore();
    try {
      await populate(ts.store, 12, 3);
      const cache = new SnapshotCache();
      const first = await cache.get(ts.store, SCOPE, PDG, { events: true });
      // Columns expanded on first use (sparse, JSON): not the stored object itself.
      const tables = [first.base.profiles, first.base.events];
      const expanded = tables.flatMap((t) => t.columnPaths().filter((p) => t.column(p) !== t.stored(p)).map((p) => [t, p, t.column(p)] as const));
      assert.ok(expanded.length > 0, "the data has columns expanded on first use");
      const second = await cache.get(ts.store, SCOPE, PDG, { events: true });
      assert.equal(cache.stats(SCOPE, PDG)!.mode, "unchanged");
      assert.equal(second.base, first.base);
      for (const [t, p, col] of expanded) assert.equal(t.column(p), col, `${p}: the same expanded column, not re-expanded`);
    } finally {
      await ts.cleanup();
    }
  });

  it("reports each definition's evaluation time (bench --explain)", async () => {
    const ts = openTestStore();
    try {
      await populate(ts.store, 12, 3);
      const defs = ["person.age > 20", 'xEvent[eventType = "purchase"].count() > 0'].map((q, i) => definition(`t${i}`, q));
      const o = await evaluateJob(ts.store, SCOPE, defs, { now: NOW, snapshots: new SnapshotCache() });
      assert.deepEqual(Object.keys(o.definitionMs ?? {}).sort(), ["t0", "t1"]);
      for (const ms of Object.values(o.definitionMs!)) assert.ok(ms >= 0 && Number.isFinite(ms));
    } finally {
      await ts.cleanup();
    }
  });

  it("packs mostly distinct strings (raw columns) as bytes, exactly: Latin-1, wider characters, empty", () => {
    const ids = ["a-1", "", "é-ÿ", "日本-2", "😀", "a-1", "x\u0000y", "plain-7"];
    const packed = new PackedStrings();
    ids.forEach((t, k) => assert.equal(packed.push(t), k));
    packed.trim();
    assert.deepEqual(ids.map((_, k) => packed.at(k)), ids);
    const b = new PartBuilder({ rawStringsAfter: 1 });
    b.add(entry("1", { a: 1 }, ids.map((_id, k) => ({ _id, n: k }))));
    const part = b.finish();
    const stored = part.events.stored("_id");
    assert.ok(stored !== undefined && stored.kind === "strings" && stored.texts instanceof PackedStrings, "a raw column keeps packed texts");
    const data = part.data();
    assert.deepEqual(ids.map((_, r) => data.event(r)["_id"]), ids);
    assert.deepEqual(values(data.events.column("_id"), ids.length), ids);
  });

  it("packs a mostly distinct JSON column (an identityMap distinct on every event) without a dictionary, and reads it back exactly, also from a file", async () => {
    const maps = Array.from({ length: 50 }, (_, k) => (k % 10 === 9 ? null : [{ id: `ecid-${k % 40}`, primary: k % 2 === 0, note: k === 3 ? "日本" : "é" }]));
    for (const rawStringsAfter of [4, undefined]) {
      const b = new PartBuilder(rawStringsAfter === undefined ? {} : { rawStringsAfter });
      b.add(entry("1", { a: 1 }, maps.map((ECID, n) => ({ n, identityMap: { ECID } }))));
      const part = b.finish();
      const stored = part.events.stored("identityMap.ECID");
      assert.ok(stored !== undefined && stored.kind === "json", `dense JSON column: ${stored?.kind}`);
      assert.equal(stored.texts instanceof PackedStrings, rawStringsAfter !== undefined, "packed once mostly distinct, a dictionary otherwise");
      // Codes before the switch index the packed list in the same order: every value reads back.
      const data = part.data();
      assert.deepEqual(maps.map((_, r) => (data.event(r)["identityMap"] as { ECID: unknown }).ECID), maps);
      assert.deepEqual(values(data.events.column("identityMap.ECID"), maps.length), maps);
      const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-json-packed-"));
      try {
        const file = path.join(dir, "s.snapshot");
        await writeSnapshotFile(file, { key: "k", store: null, version: 1, withEvents: true, policy: PDG }, part);
        const back = await readSnapshotPart(await openSnapshotFile(file));
        const read = back.events.stored("identityMap.ECID");
        assert.ok(read !== undefined && read.kind === "json" && (read.texts instanceof PackedStrings) === (rawStringsAfter !== undefined), "kept as written");
        assert.deepEqual(values(back.data().events.column("identityMap.ECID"), maps.length), maps);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });

  it("counts a run of equal rows once: a profile's events repeating its identityMap pack, a few values repeating across profiles stay a dictionary", () => {
    const b = new PartBuilder({ rawStringsAfter: 4 });
    const expected: Array<{ ECID: unknown; page: string; kind: string }> = [];
    for (let p = 0; p < 30; p++) {
      const ECID = [{ id: `ecid-${p}`, primary: true }];
      const events = Array.from({ length: 6 }, (_, k) => ({ n: k, identityMap: { ECID }, page: `page-of-${p}`, kind: k % 2 === 0 ? "view" : "click" }));
      b.add(entry(String(p + 1), { a: p }, events));
      for (const e of events) expected.push({ ECID, page: e.page, kind: e.kind });
    }
    const part = b.finish();
    const ecid = part.events.stored("identityMap.ECID");
    assert.ok(ecid !== undefined && ecid.kind === "json" && ecid.texts instanceof PackedStrings, `30 runs of 6 equal texts: packed (${ecid?.kind})`);
    assert.equal(ecid.texts.length, 30, "a text per run, not per row");
    const page = part.events.stored("page");
    assert.ok(page !== undefined && page.kind === "strings", `a string per profile: packed (${page?.kind})`);
    const kind = part.events.stored("kind");
    assert.ok(kind !== undefined && kind.kind === "string", `two values alternating: a dictionary (${kind?.kind})`);
    const data = part.data();
    assert.deepEqual(expected.map((_, r) => (data.event(r)["identityMap"] as { ECID: unknown }).ECID), expected.map((e) => e.ECID));
    assert.deepEqual(values(data.events.column("page"), expected.length), expected.map((e) => e.page));
    assert.deepEqual(values(data.events.column("kind"), expected.length), expected.map((e) => e.kind));
  });

  it("scans in small chunks whatever the job's chunk size (less promoted garbage while building)", async () => {
    const ts = openTestStore();
    try {
      await populate(ts.store, 12, 3);
      const sizes: number[] = [];
      const store = new Proxy(ts.store, {
        get(target, prop, receiver) {
          if (prop === "scanProfiles") {
            return (scope: typeof SCOPE, policy: MergePolicySpec, o: { chunkSize?: number; events?: boolean }) => {
              sizes.push(o.chunkSize ?? -1);
              return target.scanProfiles(scope, policy, o);
            };
          }
          const v = Reflect.get(target, prop, receiver) as unknown;
          return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      await buildSnapshot(store, SCOPE, PDG, { events: true, chunkSize: 100_000 });
      await buildSnapshot(store, SCOPE, PDG, { events: true, chunkSize: 5 });
      assert.deepEqual(sizes, [SNAPSHOT_SCAN_CHUNK, 5]);
      assert.ok(SNAPSHOT_SCAN_CHUNK <= 1000);
    } finally {
      await ts.cleanup();
    }
  });
});

describe("columnar snapshots over a profile store", () => {
  let ts: TestStore;
  let pop: Population;
  before(async () => {
    ts = openTestStore();
    pop = await populate(ts.store, 40, 9);
    // Two profiles with a second identity of their own (identityGraph none: two entries each).
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { Email: [{ id: "p1@x.com", primary: true }], ECID: [{ id: "P1" }] }, tier: "email-only" } },
      { index: 1, value: { identityMap: { Email: [{ id: "p2@x.com", primary: true }], ECID: [{ id: "P2" }] }, tier: "email-only" } },
    ], { now: NOW - 900 });
  });
  after(async () => {
    await ts.cleanup();
  });

  it("holds exactly what the store's scan yields, for pdg and for identityGraph none", async () => {
    for (const policy of [PDG, NO_MERGE_POLICY] as MergePolicySpec[]) {
      const snap = await buildSnapshot(ts.store, SCOPE, policy, { events: true, chunkSize: 7 });
      const scanned: ScannedProfile[] = [];
      for await (const chunk of ts.store.scanProfiles(SCOPE, policy)) scanned.push(...chunk);
      const part = snap.base;
      assert.equal(part.rows, scanned.length);
      assert.equal(snap.profileCount, new Set(scanned.map((s) => s.profileId)).size);
      const data = part.data();
      scanned.forEach((s, r) => {
        assert.equal(part.profileIds[part.rowOrdinal[r]!], s.profileId);
        const { ups: _ups, ...rest } = ((s.entity["segmentMembership"] ?? {}) as JsonObject);
        const entity = { ...s.entity };
        if (Object.keys(rest).length > 0) entity["segmentMembership"] = rest;
        else delete entity["segmentMembership"];
        assert.deepEqual(data.profile(r), entity);
        assert.deepEqual(part.identitiesOf(r).sort(), s.identities.map((i) => `${i.namespace}:${i.id}`).sort());
        assert.equal(part.optedOut[r], s.optedOut ? 1 : 0);
        const evs = [];
        for (let e = data.eventStart[r]!; e < data.eventStart[r + 1]!; e++) evs.push(data.event(e));
        assert.deepEqual(evs, s.events.map((e) => e.body));
      });
      if (policy.identityGraph.type === "none") assert.equal(part.rows, snap.profileCount + 2, "one entry per identity with data of its own");
    }
  });

  it("refreshes incrementally after appends, deletes and graph merges, equal to a fresh build", async () => {
    const cache = new SnapshotCache({ maxOverlayShare: 1 });
    for (const policy of [PDG, NO_MERGE_POLICY] as MergePolicySpec[]) await cache.get(ts.store, SCOPE, policy, { events: true });
    const t = NOW - 500;
    // Appends: new events of P3, a new profile, an attribute update of P4.
    await ingestRecords(ts.store, SCOPE, pop.web, [
      { index: 0, value: { _id: "refresh-e1", timestamp: new Date(NOW - 3_600_000).toISOString(), eventType: "purchase", value: 9, identityMap: { ECID: [{ id: "P3", primary: true }] } } },
    ], { now: t });
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { ECID: [{ id: "NEW1", primary: true }] }, person: { age: 44 }, _repo: { modifyDate: new Date(t).toISOString() } } },
      { index: 1, value: { identityMap: { ECID: [{ id: "P4", primary: true }] }, tier: "changed", _repo: { modifyDate: new Date(t).toISOString() } } },
    ], { now: t });
    // A graph merge: P5 and P6 become one profile.
    await ingestRecords(ts.store, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { ECID: [{ id: "P5", primary: true }, { id: "P6" }] }, merged: true, _repo: { modifyDate: new Date(t).toISOString() } } },
    ], { now: t });
    // A delete: P7 disappears.
    await ts.store.deleteByIdentities(SCOPE, [{ namespace: "ecid", id: "P7" }], "ALL");
    const p5 = await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: "P5" });
    for (const policy of [PDG, NO_MERGE_POLICY] as MergePolicySpec[]) {
      const before = cache.stats(SCOPE, policy);
      assert.equal(before?.mode, "built");
      const refreshed = await cache.get(ts.store, SCOPE, policy, { events: true });
      const st = cache.stats(SCOPE, policy)!;
      assert.equal(st.mode, "incremental", "changed profiles re-read, not a rebuild");
      assert.ok(st.changed >= 4, `changed profiles: ${st.changed}`);
      const fresh = await buildSnapshot(ts.store, SCOPE, policy, { events: true });
      assert.deepEqual(dump(refreshed), dump(fresh));
      assert.equal(refreshed.profileCount, fresh.profileCount);
      assert.ok(refreshed.locate(p5!) >= 0);
      const again = await cache.get(ts.store, SCOPE, policy, { events: true });
      assert.equal(cache.stats(SCOPE, policy)!.mode, "unchanged");
      assert.deepEqual(dump(again), dump(fresh));
    }
    // Jobs on the refreshed snapshot equal jobs on a fresh one, and evaluate.
    const defs = ['person.age > 20', 'xEvent[eventType = "purchase"].count() > 0', "merged = true", 'tier = "changed"'].map((q, i) => definition(`r${i}`, q, { excludeOptOut: false }));
    const cached = await evaluateJob(ts.store, SCOPE, defs, { now: NOW, snapshots: cache });
    for (const d of defs) {
      const want = await referenceMembers(ts.store, d.query, { excludeOptOut: false });
      assert.deepEqual(new Set(membershipChangesOf(cached.memberships, NOW).filter((c) => c.definitionId === d.id).map((c) => c.profileId)), want, d.id);
    }
  });

  it("rebuilds when the overlay would exceed its share of the profiles", async () => {
    const cache = new SnapshotCache({ maxOverlayShare: 0 });
    await cache.get(ts.store, SCOPE, PDG, { events: true });
    const many = Array.from({ length: 300 }, (_, i) => ({ index: i, value: { identityMap: { ECID: [{ id: `BULK${i}`, primary: true }] }, person: { age: i } } }));
    await ingestRecords(ts.store, SCOPE, pop.crm, many, { now: NOW - 100 });
    const snap = await cache.get(ts.store, SCOPE, PDG, { events: true });
    assert.equal(cache.stats(SCOPE, PDG)!.mode, "rebuilt");
    assert.equal(snap.overlay.ordinals, 0);
    assert.deepEqual(dump(snap), dump(await buildSnapshot(ts.store, SCOPE, PDG, { events: true })));
  });
});

describe("columnar engine on demo data", () => {
  let ts: TestStore;
  const DEMO_NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
  const QUERIES: Record<string, string> = {
    profileOnly: 'homeAddress.countryCode = "US" and loyalty.tier in ["gold", "platinum"]',
    numbers: "loyalty.points >= 1000 and loyalty.points < 4000",
    strings: 'person.name.firstName.startsWith("A") or homeAddress.city.contains("on")',
    regex: 'personalEmail.address.matches("^customer1")',
    dates: 'person.birthDate < "1970-01-01"',
    dateFunctions: "person.birthDate.getMonth() = currentMonth()",
    occursOnProfile: "loyalty.joinDate occurs < 365 days before now",
    arithmetic: "loyalty.points / 2 + 10 > 1500",
    nulls: "mobilePhone.number.isNotNull() and person.name.middleName.isNull()",
    identityMap: "identityMap.CRMID.id.isNotNull() or identityMap.crmid.id.isNotNull()",
    singleEvent: 'chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.productViews") WHEN(< 23 hours before now)])',
    singleEventWithProfile: 'loyalty.points > 1000 and chain(xEvent, timestamp, [A: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 3 days before now)])',
    multipleEvents: 'chain(xEvent, timestamp, [A: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 7 days before now), B: WHAT(eventType = "commerce.productViews") WHEN(< 7 days before now)])',
    counts: 'xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() >= 2',
    sums: 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal) > 300',
    aggregateOver: '(sum X.commerce.order.priceTotal over X from xEvent where X.eventType = "commerce.purchases") > 500',
    negation: 'not (exists X from xEvent : X.eventType = "directMarketing.emailOpened")',
    arrays: 'xEvent[productListItems.SKU.intersects(["SKU-1000", "SKU-1001", "SKU-1002"])].count() > 0',
    timestampsAsText: 'xEvent[timestamp > "2026-11-14T00:00:00Z" and eventType = "commerce.productListAdds"].count() > 0',
    calendar: "xEvent[timestamp occurs this month].count() > 3",
    storedMembership: 'inSegment("stored-outside") and loyalty.tier = "silver"',
    inJob: 'inSegment("profileOnly") or inSegment("counts")',
  };

  before(async () => {
    ts = openTestStore();
    const p = (await ts.store.createDataset(SCOPE, DEMO_DATASETS.profiles, DEMO_NOW)).id;
    const e = (await ts.store.createDataset(SCOPE, DEMO_DATASETS.events, DEMO_NOW)).id;
    const demo = { profiles: 150, events: 1500, now: DEMO_NOW, seed: 8 };
    await ingestRecords(ts.store, SCOPE, p, [...demoProfiles(demo)].map((value, index) => ({ index, value })), { now: DEMO_NOW - 10_000 });
    await ingestRecords(ts.store, SCOPE, e, [...demoEvents(demo)].map((value, index) => ({ index, value })), { now: DEMO_NOW - 10_000 });
    // A definition outside the job with stored members (every third profile).
    const changes: MembershipChange[] = [];
    let k = 0;
    for await (const chunk of ts.store.scanProfiles(SCOPE, PDG, { events: false })) {
      for (const s of chunk) if (k++ % 3 === 0) changes.push({ profileId: s.profileId, definitionId: "stored-outside", status: "realized", source: "batch", at: DEMO_NOW - 5000 });
    }
    await ts.store.applyMembershipChanges(SCOPE, changes);
  });
  after(async () => {
    await ts.cleanup();
  });

  it("every query type: member sets equal evaluate profile by profile (pdg and none)", async () => {
    for (const policy of [PDG, { ...NO_MERGE_POLICY, id: "mp-none" }]) {
      const defs = Object.entries(QUERIES).map(([id, q]) => definition(id, q, { policy }));
      const out = await evaluateJob(ts.store, SCOPE, defs, { now: DEMO_NOW, backend: "columnar" });
      const expected = new Map<string, Set<string>>();
      let nonEmpty = 0;
      for (const d of defs) {
        const members = d.id === "inJob" ? new Map([["profileOnly", expected.get("profileOnly")!], ["counts", expected.get("counts")!]]) : undefined;
        const want = await referenceMembers(ts.store, d.query, { excludeOptOut: true, policy, now: DEMO_NOW, ...(members === undefined ? {} : { members }) });
        expected.set(d.id, want);
        const got = new Set(membershipChangesOf(out.memberships, DEMO_NOW).filter((c) => c.definitionId === d.id && c.status === "realized").map((c) => c.profileId));
        assert.deepEqual(got, want, `${policy.identityGraph.type}: ${d.id}: ${QUERIES[d.id]}`);
        assert.equal(out.counters.get(d.id)!.qualified, want.size);
        if (want.size > 0) nonEmpty++;
      }
      // Without stitching, attributes (CRMID) and events (ECID, Email) sit on different entries: some audiences are empty.
      if (policy.identityGraph.type === "pdg") assert.ok(nonEmpty >= Object.keys(QUERIES).length - 3, `most demo audiences are non-empty (${nonEmpty})`);
      assert.ok((out.columnarDefinitions ?? []).includes("profileOnly"));
    }
  });

  it("a second job sees this job's stored statuses: existing, exited, and `from` set for the store", async () => {
    const cache = new SnapshotCache();
    const d = definition("adults-demo", 'loyalty.tier = "gold"', { excludeOptOut: false });
    const first = await evaluateJob(ts.store, SCOPE, [d], { now: DEMO_NOW, snapshots: cache });
    // As changes (copied before the write: the worker store detaches the arrays it is given).
    const firstChanges = membershipChangesOf(first.memberships, DEMO_NOW);
    assert.ok(firstChanges.length > 2 && firstChanges.every((c) => c.from === null && c.status === "realized"));
    assert.equal(first.writes, firstChanges.length);
    await ts.store.applyMembershipSets(SCOPE, first.memberships, { source: "batch", at: DEMO_NOW });
    const leaving = firstChanges[0]!.profileId;
    const crm = (await ts.store.graphIdentities(SCOPE, leaving)).find((i) => i.namespace === "crmid")!;
    const ds = (await ts.store.listDatasets(SCOPE)).find((x) => x.schemaClass === "profile")!.id;
    await ingestRecords(ts.store, SCOPE, ds, [{ index: 0, value: { identityMap: { CRMID: [{ id: crm.id, primary: true }] }, loyalty: { tier: "bronze" }, _repo: { modifyDate: new Date(DEMO_NOW).toISOString() } } }], { now: DEMO_NOW });
    const second = await evaluateJob(ts.store, SCOPE, [d], { now: DEMO_NOW + 1000, snapshots: cache });
    assert.equal(cache.stats(SCOPE, PDG)?.mode, "incremental");
    assert.deepEqual(membershipChangesOf(second.memberships, DEMO_NOW + 1000).map((c) => [c.profileId, c.status, c.from]), [[leaving, "exited", "realized"]]);
    const c = second.counters.get(d.id)!;
    assert.deepEqual([c.realized, c.existing, c.exited], [0, firstChanges.length - 1, 1]);
    await ts.store.applyMembershipSets(SCOPE, second.memberships, { source: "batch", at: DEMO_NOW + 1000 });
    // Back to gold: realized again, from exited.
    await ingestRecords(ts.store, SCOPE, ds, [{ index: 0, value: { identityMap: { CRMID: [{ id: crm.id, primary: true }] }, loyalty: { tier: "gold" }, _repo: { modifyDate: new Date(DEMO_NOW + 1).toISOString() } } }], { now: DEMO_NOW + 1 });
    const third = await evaluateJob(ts.store, SCOPE, [d], { now: DEMO_NOW + 2000, snapshots: cache });
    assert.deepEqual(membershipChangesOf(third.memberships, DEMO_NOW + 2000).map((x) => [x.profileId, x.status, x.from]), [[leaving, "realized", "exited"]]);
  });
});
