// Both profile stores (SEGMENTD_TEST_STORE): the bulk membership write path
// (with and without the caller's `from`), listMemberIds, and the change feed
// (changesSince) fed by every data write path.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ChangeFeed } from "../../src/profiles/change-feed.js";
import { planMembershipChanges, type StoredStatuses } from "../../src/profiles/scan-assembly.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { StoreError, type MembershipChange, type ProfileStore } from "../../src/profiles/store.js";
import type { MembershipStatus, MembershipTransition, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const T0 = Date.UTC(2026, 10, 1);
const ecid = (id: string) => ({ namespace: "ecid", id });

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

function ch(profileId: string, definitionId: string, status: MembershipStatus, at: number, from?: MembershipStatus | null): MembershipChange {
  const c: MembershipChange = { profileId, definitionId, status, source: "batch", at };
  if (from !== undefined) c.from = from;
  return c;
}

/** A mixed script: new entries, no-op repeats, exits without membership, and several changes of one key in one call. */
function script(withFrom: boolean): MembershipChange[][] {
  const f = (v: MembershipStatus | null): MembershipStatus | null | undefined => (withFrom ? v : undefined);
  return [
    [ch("1", "d1", "realized", T0, f(null)), ch("2", "d1", "realized", T0, f(null)), ch("3", "d1", "exited", T0, f(null)),
      ch("1", "d2", "realized", T0, f(null)), ch("1", "d2", "exited", T0 + 1, f(null)), ch("1", "d2", "realized", T0 + 2, f(null))],
    [ch("1", "d1", "realized", T0 + 10, f("realized")), ch("2", "d1", "exited", T0 + 10, f("realized")), ch("3", "d1", "exited", T0 + 10, f(null)),
      ch("10", "d1", "realized", T0 + 10, f(null)), ch("1", "d2", "exited", T0 + 11, f("realized"))],
  ];
}

function comparable(ts: MembershipTransition[]): string[] {
  return ts.map((t) => `${t.profileId}/${t.definitionId} ${t.from}->${t.to} ${t.source} ${t.at}`);
}

describe(`bulk memberships, listMemberIds and change feed (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  before(() => { ts = openTestStore(); store = ts.store; });
  after(async () => { await ts.cleanup(); });

  describe("applyMembershipChanges", () => {
    const WITHOUT: TenantScope = { orgId: "orgM", sandboxName: "without" };
    const WITH: TenantScope = { orgId: "orgM", sandboxName: "with" };

    it("returns and records the same transitions with and without `from`", async () => {
      const calls = [script(false), script(true)];
      const results: MembershipTransition[][][] = [[], []];
      for (const [i, scope] of [WITHOUT, WITH].entries()) {
        for (const changes of calls[i]!) results[i]!.push(await store.applyMembershipChanges(scope, changes));
      }
      const expected = [
        ["1/d1 null->realized batch 2026-11-01T00:00:00.000Z", "2/d1 null->realized batch 2026-11-01T00:00:00.000Z",
          "1/d2 null->realized batch 2026-11-01T00:00:00.000Z", "1/d2 realized->exited batch 2026-11-01T00:00:00.001Z",
          "1/d2 exited->realized batch 2026-11-01T00:00:00.002Z"],
        ["2/d1 realized->exited batch 2026-11-01T00:00:00.010Z", "10/d1 null->realized batch 2026-11-01T00:00:00.010Z",
          "1/d2 realized->exited batch 2026-11-01T00:00:00.011Z"],
      ];
      assert.deepEqual(results[0]!.map(comparable), expected);
      assert.deepEqual(results[1]!.map(comparable), expected);
      for (const scope of [WITHOUT, WITH]) {
        assert.deepEqual(comparable(await store.listTransitions(scope)), expected.flat());
        assert.deepEqual(await store.countMembers(scope, "d1"), { realized: 2, exited: 1 });
        assert.deepEqual((await store.getMemberships(scope, "1")).map((m) => [m.definitionId, m.status, m.lastQualificationTime]),
          [["d1", "realized", "2026-11-01T00:00:00.000Z"], ["d2", "exited", "2026-11-01T00:00:00.011Z"]]);
        assert.deepEqual(await store.getMemberships(scope, "3"), [], "an exit without a membership stores nothing");
      }
    });

    it("trusts `from` and does not read the stored status", async () => {
      const S: TenantScope = { orgId: "orgM", sandboxName: "trust" };
      await store.applyMembershipChanges(S, [ch("5", "d", "realized", T0)]);
      // The caller claims there was no membership: recorded as an entry although one is stored.
      const t1 = await store.applyMembershipChanges(S, [ch("5", "d", "realized", T0 + 1, null)]);
      assert.deepEqual(comparable(t1), ["5/d null->realized batch 2026-11-01T00:00:00.001Z"]);
      // The caller claims it already exited: no transition, the stored realized stays.
      const t2 = await store.applyMembershipChanges(S, [ch("5", "d", "exited", T0 + 2, "exited")]);
      assert.deepEqual(t2, []);
      assert.deepEqual(await store.listMemberIds(S, "d", "realized"), ["5"]);
      assert.equal((await store.listTransitions(S)).length, 2);
    });

    it("writes tens of thousands of changes in one call, across statement chunks", async () => {
      const S: TenantScope = { orgId: "orgM", sandboxName: "large" };
      const N = 41_003;
      const enter: MembershipChange[] = [];
      for (let i = 0; i < N; i++) enter.push(ch(String((i % 4101) + 1), `def-${Math.floor(i / 4101)}`, "realized", T0, i % 2 === 0 ? null : undefined));
      const t1 = await store.applyMembershipChanges(S, enter);
      assert.equal(t1.length, N);
      assert.deepEqual(t1.slice(0, 2).map((t) => [t.profileId, t.definitionId, t.from, t.to]), [["1", "def-0", null, "realized"], ["2", "def-0", null, "realized"]]);
      assert.deepEqual([t1[N - 1]!.profileId, t1[N - 1]!.definitionId], ["4094", "def-9"]);
      const flip = enter.map((c, i) => ch(c.profileId, c.definitionId, i % 3 === 0 ? "exited" : "realized", T0 + 5, i % 2 === 0 ? "realized" : undefined));
      const t2 = await store.applyMembershipChanges(S, flip);
      const exits = enter.filter((_, i) => i % 3 === 0).length;
      assert.equal(t2.length, exits);
      assert.ok(t2.every((t) => t.from === "realized" && t.to === "exited"));
      const def0 = await store.countMembers(S, "def-0");
      assert.deepEqual(def0, { realized: 4101 - Math.ceil(4101 / 3), exited: Math.ceil(4101 / 3) });
      assert.equal((await store.listTransitions(S, { limit: 100_000 })).length, N + exits);
    });

    it("is one transaction: a failing change leaves nothing of the call", async () => {
      const S: TenantScope = { orgId: "orgM", sandboxName: "atomic" };
      const changes: MembershipChange[] = [];
      for (let i = 1; i <= 700; i++) changes.push(ch(String(i), "d", "realized", T0, null));
      changes.push(ch("not-a-number", "d", "realized", T0, null));
      await assert.rejects(store.applyMembershipChanges(S, changes));
      assert.deepEqual(await store.listMemberIds(S, "d", "realized"), []);
      assert.deepEqual(await store.listTransitions(S), []);
      const ok = await store.applyMembershipChanges(S, changes.slice(0, 3));
      assert.equal(ok.length, 3, "the store still writes after the failed call");
    });

    it("reads previous statuses right for dense and sparse profile ids (range scans and point lookups)", async () => {
      const A: TenantScope = { orgId: "orgM", sandboxName: "read-without" };
      const B: TenantScope = { orgId: "orgM", sandboxName: "read-with" };
      const model = new Map<string, MembershipStatus>();
      const statuses: MembershipStatus[] = ["realized", "exited"];
      for (let round = 0; round < 4; round++) {
        const plain: MembershipChange[] = [], told: MembershipChange[] = [];
        const expected: string[] = [];
        const next = new Map(model);
        // Dense ids (1..1200, a shifting subset), sparse ids (multiples of 7919) and a repeat of one key.
        const ids = [...Array.from({ length: 1200 }, (_, i) => i + 1).filter((p) => (p + round) % 4 !== 0), ...Array.from({ length: 600 }, (_, i) => (i + 1) * 7919), 5];
        for (const [n, p] of ids.entries()) {
          const def = p <= 1200 ? `d${Math.floor(p / 600) % 2}` : `d${n % 2}`;
          const status = statuses[(p * 31 + round * 7 + n) % 3 === 0 ? 1 : 0]!;
          const key = `${p}/${def}`;
          const from = next.get(key) ?? null;
          plain.push(ch(String(p), def, status, T0 + round));
          told.push(ch(String(p), def, status, T0 + round, from));
          if (from !== status && !(from === null && status === "exited")) {
            expected.push(`${p}/${def} ${from}->${status} batch ${new Date(T0 + round).toISOString()}`);
            next.set(key, status);
          }
        }
        assert.deepEqual(comparable(await store.applyMembershipChanges(A, plain)), expected, `round ${round} without from`);
        assert.deepEqual(comparable(await store.applyMembershipChanges(B, told)), expected, `round ${round} with from`);
        for (const [k, v] of next) model.set(k, v);
      }
      for (const scope of [A, B]) {
        for (const def of ["d0", "d1"]) {
          for (const status of statuses) {
            const want = [...model].filter(([k, v]) => k.endsWith(`/${def}`) && v === status).map(([k]) => Number(k.split("/")[0])).sort((x, y) => x - y).map(String);
            assert.deepEqual(await store.listMemberIds(scope, def, status), want, `${scope.sandboxName} ${def} ${status}`);
          }
        }
      }
    });

    it("a large call commits on its own: its failure leaves the writes queued with it intact, and theirs leave it intact", async () => {
      // The embedded store commits calls of 1000+ changes alone (no savepoint); smaller ones share a group.
      const S: TenantScope = { orgId: "orgM", sandboxName: "solo" };
      const big = (def: string, bad: boolean) => {
        const out: MembershipChange[] = [];
        for (let i = 1; i <= 2500; i++) out.push(ch(String(i), def, "realized", T0, null));
        if (bad) out.push(ch("x", def, "realized", T0, null));
        return out;
      };
      const results = await Promise.allSettled([
        store.applyMembershipChanges(S, [ch("1", "small-a", "realized", T0)]),
        store.applyMembershipChanges(S, big("big-bad", true)),
        store.applyMembershipChanges(S, [ch("1", "small-b", "realized", T0), ch("2", "small-b", "realized", T0)]),
        store.applyMembershipChanges(S, big("big-ok", false)),
        store.applyMembershipChanges(S, [ch("not-a-number", "small-c", "realized", T0)]),
        store.applyMembershipChanges(S, [ch("3", "small-d", "realized", T0)]),
      ]);
      assert.deepEqual(results.map((r) => r.status), ["fulfilled", "rejected", "fulfilled", "fulfilled", "rejected", "fulfilled"]);
      assert.deepEqual(await store.listMemberIds(S, "small-a", "realized"), ["1"]);
      assert.deepEqual(await store.listMemberIds(S, "big-bad", "realized"), []);
      assert.deepEqual(await store.listMemberIds(S, "small-b", "realized"), ["1", "2"]);
      assert.equal((await store.listMemberIds(S, "big-ok", "realized")).length, 2500);
      assert.deepEqual(await store.listMemberIds(S, "small-c", "realized"), []);
      assert.deepEqual(await store.listMemberIds(S, "small-d", "realized"), ["3"]);
      assert.equal((await store.listTransitions(S, { limit: 100_000 })).length, 1 + 2 + 2500 + 1);
    });
  });

  describe("listMemberIds", () => {
    it("lists every id with a status, in numeric order, in its own sandbox only", async () => {
      const S: TenantScope = { orgId: "orgL", sandboxName: "prod" };
      const O: TenantScope = { orgId: "orgL", sandboxName: "other" };
      await store.applyMembershipChanges(S, [ch("10", "d", "realized", T0), ch("2", "d", "realized", T0), ch("33", "d", "realized", T0), ch("4", "e", "realized", T0)]);
      await store.applyMembershipChanges(S, [ch("33", "d", "exited", T0 + 1)]);
      await store.applyMembershipChanges(O, [ch("7", "d", "realized", T0)]);
      assert.deepEqual(await store.listMemberIds(S, "d", "realized"), ["2", "10"]);
      assert.deepEqual(await store.listMemberIds(S, "d", "exited"), ["33"]);
      assert.deepEqual(await store.listMemberIds(S, "e", "exited"), []);
      assert.deepEqual(await store.listMemberIds(S, "nope", "realized"), []);
      assert.deepEqual(await store.listMemberIds(O, "d", "realized"), ["7"]);
      assert.deepEqual(await store.listMemberIds({ orgId: "orgL", sandboxName: "never-written" }, "d", "realized"), []);
    });
  });

  describe("changesSince", () => {
    const S: TenantScope = { orgId: "orgF", sandboxName: "prod" };
    const O: TenantScope = { orgId: "orgF", sandboxName: "dev" };
    let prof: string, evs: string, otherDs: string;
    const pid = async (id: string) => (await store.findProfileId(S, ecid(id)))!;
    const since = (v: number) => {
      const r = store.changesSince(S, v);
      assert.ok(r.profileIds !== null, "history is kept");
      return [...r.profileIds].sort((a, b) => Number(a) - Number(b));
    };

    before(async () => {
      prof = (await store.createDataset(S, { name: "p", schemaClass: "profile", profileEnabled: true }, T0)).id;
      evs = (await store.createDataset(S, { name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      otherDs = (await store.createDataset(O, { name: "p", schemaClass: "profile", profileEnabled: true }, T0)).id;
      await ingestRecords(store, S, prof, rec(...["A", "B", "C", "D", "E"].map((x) => ({ identityMap: { ECID: [{ id: x, primary: true }] }, loyalty: { points: 1 } }))), { now: T0 });
    });

    it("answers null when it cannot tell, an empty set when nothing changed", () => {
      const r = store.changesSince(S, null);
      assert.equal(r.profileIds, null);
      assert.equal(typeof r.version, "number");
      assert.deepEqual([...store.changesSince(S, r.version).profileIds!], []);
      assert.equal(store.changesSince(S, 0).profileIds, null, "a version from before this store was opened");
      assert.equal(store.changesSince(S, r.version + 1000).profileIds, null, "a version this store never handed out");
    });

    it("append: the touched graphs, visible as soon as the write resolves", async () => {
      const v = store.changesSince(S, null).version;
      await ingestRecords(store, S, prof, rec({ identityMap: { ECID: [{ id: "A", primary: true }] }, loyalty: { points: 2 } }), { now: T0 + 1 });
      const r = store.changesSince(S, v);
      assert.ok(r.version > v);
      assert.deepEqual(since(v), [await pid("A")]);
      await ingestRecords(store, S, evs, rec({ _id: "ev-1", timestamp: new Date(T0).toISOString(), eventType: "x", identityMap: { ECID: [{ id: "B", primary: true }] } }), { now: T0 + 2 });
      assert.deepEqual(since(v), [await pid("A"), await pid("B")].sort((a, b) => Number(a) - Number(b)));
      assert.deepEqual(since(r.version), [await pid("B")]);
    });

    it("append: a merge reports the surviving graph and the graph merged away", async () => {
      const c = await pid("C"), d = await pid("D");
      assert.notEqual(c, d);
      const v = store.changesSince(S, null).version;
      await ingestRecords(store, S, prof, rec({ identityMap: { ECID: [{ id: "C", primary: true }, { id: "D" }] } }), { now: T0 + 3 });
      const survivor = await pid("C");
      assert.equal(await pid("D"), survivor);
      const gone = survivor === c ? d : c;
      assert.deepEqual(since(v), [c, d].sort((a, b) => Number(a) - Number(b)));
      assert.ok(since(v).includes(gone));
    });

    it("membership writes do not count; other sandboxes' writes are not listed", async () => {
      const v = store.changesSince(S, null).version;
      await store.applyMembershipChanges(S, [ch(await pid("E"), "d", "realized", T0)]);
      assert.deepEqual(since(v), []);
      await ingestRecords(store, O, otherDs, rec({ identityMap: { ECID: [{ id: "E", primary: true }] } }), { now: T0 });
      assert.deepEqual(since(v), [], "a write in sandbox dev is not a change of sandbox prod");
      const o = store.changesSince(O, v);
      assert.deepEqual([...o.profileIds!], [(await store.findProfileId(O, ecid("E")))!]);
    });

    it("a failed write changes nothing", async () => {
      const v = store.changesSince(S, null).version;
      await assert.rejects(store.updateFields(S, { datasetId: "missing", identities: [ecid("A")], set: { x: 1 } }),
        (e: unknown) => e instanceof StoreError && e.code === "DATASET_NOT_FOUND");
      assert.equal(store.changesSince(S, null).version, v);
      assert.deepEqual(since(v), []);
    });

    it("updateFields", async () => {
      const v = store.changesSince(S, null).version;
      const r = await store.updateFields(S, { datasetId: prof, identities: [ecid("E")], set: { "loyalty.tier": "gold" } });
      assert.equal(r.updated, 1);
      assert.deepEqual(since(v), [await pid("E")]);
    });

    it("deleteByIdentities, in one dataset and everywhere (the removed graph is listed)", async () => {
      const b = await pid("B");
      const v = store.changesSince(S, null).version;
      await store.deleteByIdentities(S, [ecid("B")], [evs]);
      assert.deepEqual(since(v), [b]);
      const v2 = store.changesSince(S, null).version;
      await store.deleteByIdentities(S, [ecid("B")], "ALL");
      assert.equal(await store.findProfileId(S, ecid("B")), null);
      assert.deepEqual(since(v2), [b]);
    });

    it("deleteDatasetRecords and deleteDataset", async () => {
      await ingestRecords(store, S, evs, rec({ _id: "ev-2", timestamp: new Date(T0).toISOString(), eventType: "x", identityMap: { ECID: [{ id: "A", primary: true }] } }), { now: T0 + 4 });
      const v = store.changesSince(S, null).version;
      await store.deleteDatasetRecords(S, evs);
      assert.deepEqual(since(v), [await pid("A")]);
      const v2 = store.changesSince(S, null).version;
      const all = [await pid("A"), await pid("C"), await pid("E")].sort((a, b) => Number(a) - Number(b));
      await store.deleteDataset(S, prof);
      assert.deepEqual(since(v2), all);
      assert.deepEqual(since(v).length, 3);
    });

    it("a version of another store instance (a restart) is answered from the change log (change-log.test.ts)", async () => {
      const v = store.changesSince(S, null).version;
      const again = ts.reopen();
      try {
        await again.changesReady?.();
        assert.deepEqual([...again.changesSince(S, v).profileIds!], []);
        assert.equal(again.changesSince(S, 0).profileIds, null, "a version from before the log");
      } finally {
        await again.close();
      }
    });
  });
});

describe("planMembershipChanges", () => {
  it("chains repeated keys whether a definition's ids increase or not, and upserts each key once", () => {
    const changes = [
      ch("1", "d", "realized", T0, null), ch("2", "d", "realized", T0, null), ch("9", "e", "realized", T0, null), ch("3", "d", "realized", T0, null),
      // d's ids stop increasing: 2 again (its `from` is ignored: the earlier change set realized).
      ch("2", "d", "exited", T0 + 1, null), ch("1", "d", "realized", T0 + 1, "exited"), ch("2", "d", "realized", T0 + 2, null),
      // e keeps increasing after the other definition's repeats.
      ch("10", "e", "exited", T0, "realized"), ch("11", "e", "exited", T0, null),
    ];
    const stored: StoredStatuses = new Map([["d", new Map<number, MembershipStatus>([[3, "realized"]])]]);
    const plan = planMembershipChanges(changes, stored);
    assert.deepEqual(comparable(plan.transitions), [
      "1/d null->realized batch 2026-11-01T00:00:00.000Z", "2/d null->realized batch 2026-11-01T00:00:00.000Z",
      "9/e null->realized batch 2026-11-01T00:00:00.000Z", "3/d null->realized batch 2026-11-01T00:00:00.000Z",
      "2/d realized->exited batch 2026-11-01T00:00:00.001Z", "2/d exited->realized batch 2026-11-01T00:00:00.002Z",
      "10/e realized->exited batch 2026-11-01T00:00:00.000Z",
    ]);
    assert.deepEqual(plan.pids, [1, 2, 9, 3, 2, 2, 10]);
    const keys = plan.upserts.map((k) => `${plan.pids[k]}/${plan.transitions[k]!.definitionId} ${plan.transitions[k]!.to}`).sort();
    assert.deepEqual(keys, ["1/d realized", "10/e exited", "2/d realized", "3/d realized", "9/e realized"]);
  });
});

describe("ChangeFeed history cap", () => {
  it("answers null for a version older than the kept history", () => {
    const feed = new ChangeFeed(3, 1000);
    const v0 = feed.current;
    feed.record(new Map([["t", new Set(["1", "2"])]]));
    const v1 = feed.current;
    feed.record(new Map([["t", new Set(["3"])]]));
    assert.deepEqual([...feed.changesSince("t", v0).profileIds!].sort(), ["1", "2", "3"]);
    feed.record(new Map([["t", new Set(["4"])]]));
    assert.equal(feed.changesSince("t", v0).profileIds, null, "the first write's entries were evicted");
    assert.deepEqual([...feed.changesSince("t", v1).profileIds!].sort(), ["3", "4"]);
    assert.deepEqual([...feed.changesSince("u", v0).profileIds!], [], "another tenant has no history to lose");
    feed.record(new Map([["t", new Set<string>()]]));
    assert.equal(feed.current, v1 + 2, "a write that touched nothing does not advance the version");
  });
});
