// Both profile stores (SEGMENTD_TEST_STORE; the embedded run checks the worker and the direct
// store): applyMembershipSets, a batch job's bulk write, leaves exactly what applyMembershipChanges
// leaves for the same changes with `from` (memberships, members, counts, member ids, transitions),
// for every kind of change, over several jobs; and refuses bad sets with exact errors, writing nothing.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MAX_SET_PROFILE_ID } from "../../src/profiles/membership-sets.js";
import type { MembershipChange, MembershipSet, ProfileStore } from "../../src/profiles/store.js";
import type { MembershipStatus, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore, type TestStoreKind } from "./test-store.js";

const T0 = Date.UTC(2026, 10, 1);
/** Written with applyMembershipChanges. */
const BY_CHANGES: TenantScope = { orgId: "sets@AdobeOrg", sandboxName: "changes" };
/** Written with applyMembershipSets. */
const BY_SETS: TenantScope = { orgId: "sets@AdobeOrg", sandboxName: "sets" };

interface SetSpec {
  def: string;
  entered?: number[];
  reentered?: number[];
  exited?: number[];
}

function toSets(specs: readonly SetSpec[]): MembershipSet[] {
  return specs.map((s) => ({ definitionId: s.def, entered: Float64Array.from(s.entered ?? []), reentered: Float64Array.from(s.reentered ?? []), exited: Float64Array.from(s.exited ?? []) }));
}

/** The same job as changes with `from`: set by set, by ascending profile id (the order sets record transitions in). */
function toChanges(specs: readonly SetSpec[], at: number): MembershipChange[] {
  return specs.flatMap((s) => {
    const rows: Array<[number, MembershipStatus, MembershipStatus | null]> = [
      ...(s.entered ?? []).map((p): [number, MembershipStatus, MembershipStatus | null] => [p, "realized", null]),
      ...(s.reentered ?? []).map((p): [number, MembershipStatus, MembershipStatus | null] => [p, "realized", "exited"]),
      ...(s.exited ?? []).map((p): [number, MembershipStatus, MembershipStatus | null] => [p, "exited", "realized"]),
    ];
    rows.sort((a, b) => a[0] - b[0]);
    return rows.map(([p, status, from]) => ({ profileId: String(p), definitionId: s.def, status, source: "batch" as const, at, from }));
  });
}

/** Everything the read methods return for the definitions and profiles, tenant left out. */
async function state(store: ProfileStore, scope: TenantScope, defs: readonly string[], pids: readonly number[]): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const d of defs) {
    out[`count ${d}`] = await store.countMembers(scope, d);
    for (const status of ["realized", "exited"] as const) {
      const ids = await store.listMemberIds(scope, d, status);
      // The numeric read (batch jobs) lists the same profiles in the same order.
      assert.deepEqual(Array.from(await store.listMemberPids(scope, d, status)), ids.map(Number), `listMemberPids ${d} ${status}`);
      out[`ids ${d} ${status}`] = ids;
      out[`members ${d} ${status}`] = await store.listMembers(scope, d, { status, limit: 100_000 });
    }
    out[`transitions ${d}`] = await store.listTransitions(scope, { definitionId: d, limit: 100_000 });
  }
  for (const p of pids) out[`profile ${p}`] = await store.getMemberships(scope, String(p));
  out["transitions"] = await store.listTransitions(scope, { limit: 100_000 });
  return out;
}

/** Applies each job both ways and checks the stores agree after every job; returns the final state. */
async function sameBothWays(store: ProfileStore, jobs: ReadonlyArray<{ at: number; sets: SetSpec[] }>, pids: readonly number[]): Promise<Record<string, unknown>> {
  const defs = [...new Set(jobs.flatMap((j) => j.sets.map((s) => s.def)))];
  let last: unknown;
  for (const job of jobs) {
    const transitions = await store.applyMembershipChanges(BY_CHANGES, toChanges(job.sets, job.at));
    const counts = await store.applyMembershipSets(BY_SETS, toSets(job.sets), { source: "batch", at: job.at });
    assert.deepEqual(counts, { realized: transitions.filter((t) => t.to === "realized").length, exited: transitions.filter((t) => t.to === "exited").length });
    const a = await state(store, BY_CHANGES, defs, pids);
    last = await state(store, BY_SETS, defs, pids);
    assert.deepEqual(last, a);
  }
  return last as Record<string, unknown>;
}

const kinds: TestStoreKind[] = STORE_KIND === "postgres" ? ["postgres"] : ["embedded", "embedded-direct"];

for (const kind of kinds) {
  describe(`applyMembershipSets (${kind})`, () => {
    let ts: TestStore;
    let store: ProfileStore;
    before(() => { ts = openTestStore(kind); store = ts.store; });
    after(async () => { await ts.cleanup(); });

    it("leaves what applyMembershipChanges leaves: entries, exits, re-entries, over three jobs", async () => {
      const final = await sameBothWays(store, [
        { at: T0, sets: [{ def: "s-d1", entered: [1, 2, 3, 5] }, { def: "s-d2", entered: [2, 4] }] },
        // Unsorted lists (the sort path) and a definition left out of the job.
        { at: T0 + 10, sets: [{ def: "s-d1", entered: [9, 7], exited: [5, 2] }, { def: "s-d3", entered: [4] }] },
        // Every kind in one set, and an exit and re-entry of d2.
        { at: T0 + 20, sets: [{ def: "s-d1", reentered: [5, 2], exited: [3], entered: [6] }, { def: "s-d2", reentered: [], exited: [2], entered: [1] }] },
      ], [1, 2, 3, 4, 5, 6, 7, 9]);
      // Not only equal: the expected rows, so an empty result on both sides cannot pass.
      assert.deepEqual(final["ids s-d1 realized"], ["1", "2", "5", "6", "7", "9"]);
      assert.deepEqual(final["ids s-d1 exited"], ["3"]);
      assert.deepEqual(final["count s-d2"], { realized: 2, exited: 1 });
      assert.deepEqual(final["profile 2"], [
        { profileId: "2", definitionId: "s-d1", status: "realized", lastQualificationTime: new Date(T0 + 20).toISOString() },
        { profileId: "2", definitionId: "s-d2", status: "exited", lastQualificationTime: new Date(T0 + 20).toISOString() },
      ]);
      assert.deepEqual((final["transitions s-d1"] as Array<{ profileId: string; from: string | null; to: string }>).filter((t) => t.profileId === "2").map((t) => `${t.from}->${t.to}`),
        ["null->realized", "realized->exited", "exited->realized"]);
      const last = (final["transitions"] as Array<{ profileId: string; definitionId: string; at: string }>).filter((t) => t.at === new Date(T0 + 20).toISOString());
      assert.deepEqual(last.map((t) => `${t.definitionId}/${t.profileId}`), ["s-d1/2", "s-d1/3", "s-d1/5", "s-d1/6", "s-d2/1", "s-d2/2"]);
    });

    it("writes many rows, sparse and very large profile ids the same way", async () => {
      const many = Array.from({ length: 70_000 }, (_, i) => 2 * i + 1);
      const sparse = [1, 1_000_000_007, 2 ** 40, MAX_SET_PROFILE_ID];
      // 20 sets with an id of 2^48: more sets than one row code holds, written in several groups.
      const wide = Array.from({ length: 20 }, (_, i): SetSpec => ({ def: `w-${String(i).padStart(2, "0")}`, entered: i % 2 === 0 ? [1, MAX_SET_PROFILE_ID] : [MAX_SET_PROFILE_ID] }));
      const final = await sameBothWays(store, [
        { at: T0, sets: [{ def: "m-many", entered: many }, { def: "m-sparse", entered: sparse }, ...wide] },
        { at: T0 + 1, sets: [{ def: "m-many", exited: many.filter((p) => p % 3 === 0) }, { def: "m-sparse", exited: [2 ** 40] }, ...wide.map((w) => ({ def: w.def, exited: [MAX_SET_PROFILE_ID] }))] },
      ], [1, MAX_SET_PROFILE_ID]);
      assert.equal((final["ids m-many realized"] as string[]).length, 70_000 - many.filter((p) => p % 3 === 0).length);
      assert.deepEqual(final["ids m-sparse realized"], ["1", "1000000007", String(MAX_SET_PROFILE_ID)]);
      assert.equal((final[`profile ${MAX_SET_PROFILE_ID}`] as Array<{ status: string }>).filter((m) => m.status === "exited").length, 20);
      // m-many, m-sparse and the ten even w- sets (the first test's s- memberships share the store).
      assert.equal((final["profile 1"] as Array<{ definitionId: string }>).filter((m) => !m.definitionId.startsWith("s-")).length, 12);
    });

    it("the worker store takes arrays that own their buffer (detached) and copies views; the others leave both", async () => {
      const none = () => new Float64Array(0);
      const whole = Float64Array.of(501, 502);
      const backing = Float64Array.of(0, 503, 504, 0);
      const view = new Float64Array(backing.buffer, 8, 2);
      await store.applyMembershipSets(BY_SETS, [{ definitionId: "t-whole", entered: whole, reentered: none(), exited: none() }, { definitionId: "t-view", entered: view, reentered: none(), exited: none() }], { source: "batch", at: T0 });
      assert.equal(whole.length, kind === "embedded" ? 0 : 2);
      assert.deepEqual(Array.from(view), [503, 504]);
      assert.deepEqual(Array.from(backing), [0, 503, 504, 0]);
      assert.deepEqual(await store.listMemberIds(BY_SETS, "t-whole", "realized"), ["501", "502"]);
      assert.deepEqual(await store.listMemberIds(BY_SETS, "t-view", "realized"), ["503", "504"]);
    });

    it("an empty job writes nothing and resolves with zero counts", async () => {
      assert.deepEqual(await store.applyMembershipSets(BY_SETS, toSets([{ def: "e-none" }]), { source: "batch", at: T0 }), { realized: 0, exited: 0 });
      assert.deepEqual(await store.applyMembershipSets(BY_SETS, [], { source: "batch", at: T0 }), { realized: 0, exited: 0 });
      assert.deepEqual(await store.listTransitions(BY_SETS, { definitionId: "e-none" }), []);
      const none = await store.listMemberPids(BY_SETS, "e-none", "realized");
      assert.ok(none instanceof Float64Array);
      assert.equal(none.length, 0);
    });

    describe("bad sets: exact errors, nothing written", () => {
      const bad = async (sets: MembershipSet[], name: string, message: string, opts = { source: "batch" as const, at: T0 }) => {
        await assert.rejects(store.applyMembershipSets(BY_SETS, sets, opts), (e: unknown) => e instanceof Error && e.name === name && e.message === message);
        assert.deepEqual(await store.countMembers(BY_SETS, "b-ok"), { realized: 0, exited: 0 });
        assert.deepEqual(await store.countMembers(BY_SETS, "b-bad"), { realized: 0, exited: 0 });
      };
      const ok = (): MembershipSet => toSets([{ def: "b-ok", entered: [1, 2] }])[0]!;

      it("a profile id that is not an integer, zero, negative or above 2^48", async () => {
        await bad([ok(), toSets([{ def: "b-bad", entered: [1.5] }])[0]!], "RangeError", "membership set b-bad: entered profile id 1.5 is not an integer from 1 to 2^48");
        await bad([ok(), toSets([{ def: "b-bad", exited: [0] }])[0]!], "RangeError", "membership set b-bad: exited profile id 0 is not an integer from 1 to 2^48");
        await bad([ok(), toSets([{ def: "b-bad", reentered: [-3] }])[0]!], "RangeError", "membership set b-bad: reentered profile id -3 is not an integer from 1 to 2^48");
        await bad([ok(), toSets([{ def: "b-bad", entered: [NaN] }])[0]!], "RangeError", "membership set b-bad: entered profile id NaN is not an integer from 1 to 2^48");
        await bad([ok(), toSets([{ def: "b-bad", entered: [MAX_SET_PROFILE_ID + 1] }])[0]!], "RangeError", "membership set b-bad: entered profile id 281474976710657 is not an integer from 1 to 2^48");
      });

      it("a profile listed twice in a set (one kind or two), or a definition with two sets", async () => {
        await bad([ok(), toSets([{ def: "b-bad", entered: [4, 4] }])[0]!], "RangeError", "membership set b-bad: profile 4 is listed twice");
        await bad([ok(), toSets([{ def: "b-bad", entered: [3, 9], exited: [9] }])[0]!], "RangeError", "membership set b-bad: profile 9 is listed twice");
        await bad([ok(), toSets([{ def: "b-ok", entered: [3] }])[0]!], "RangeError", "membership sets: definition b-ok has two sets");
      });

      it("lists that are not Float64Arrays, a bad source or time", async () => {
        await bad([ok(), { definitionId: "b-bad", entered: [1] as unknown as Float64Array, reentered: new Float64Array(0), exited: new Float64Array(0) }],
          "TypeError", "membership set b-bad: entered is not a Float64Array");
        await bad([ok()], "RangeError", "membership sets: unknown source \"nightly\"", { source: "nightly" as "batch", at: T0 });
        await bad([ok()], "RangeError", "membership sets: at 1.5 is not an integer (epoch ms)", { source: "batch", at: 1.5 });
      });
    });
  });
}
