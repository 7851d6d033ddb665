// Both profile stores (SEGMENTD_TEST_STORE; the embedded run checks the worker and the direct
// store): applyMembershipTargets, a backfill's set-based chunk write, leaves exactly what
// applyMembershipChanges leaves for the same changes without `from` — memberships, members,
// counts and the transition log, entry by entry — over rounds that mix entries, exits,
// re-entries, profiles already at their target and exits of profiles never members, dense and
// sparse ids. A round applied twice writes nothing the second time (no transition doubled), and
// bad targets are refused with exact errors, writing nothing.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MAX_SET_PROFILE_ID, type MembershipTargets } from "../../src/profiles/membership-sets.js";
import type { MembershipChange, ProfileStore } from "../../src/profiles/store.js";
import type { MembershipStatus, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore, type TestStoreKind } from "./test-store.js";

const T0 = Date.UTC(2026, 10, 1);
/** Written with applyMembershipChanges (no `from`). */
const BY_CHANGES: TenantScope = { orgId: "targets@AdobeOrg", sandboxName: "changes" };
/** Written with applyMembershipTargets. */
const BY_TARGETS: TenantScope = { orgId: "targets@AdobeOrg", sandboxName: "targets" };

type Round = Map<number, MembershipStatus>;

function targetsOf(def: string, round: Round): MembershipTargets {
  const pick = (s: MembershipStatus) => Float64Array.from([...round].filter(([, x]) => x === s).map(([p]) => p));
  return { definitionId: def, realized: pick("realized"), exited: pick("exited") };
}

/** The same round as changes without `from`, by ascending profile id (the order targets record transitions in). */
function changesOf(def: string, round: Round, at: number): MembershipChange[] {
  return [...round].sort((a, b) => a[0] - b[0]).map(([p, status]) => ({ profileId: String(p), definitionId: def, status, source: "backfill" as const, at }));
}

/** What the read methods return for the definition and profiles. */
async function state(store: ProfileStore, scope: TenantScope, def: string, pids: readonly number[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { count: await store.countMembers(scope, def) };
  for (const status of ["realized", "exited"] as const) out[`members ${status}`] = await store.listMembers(scope, def, { status, limit: 100_000 });
  out["transitions"] = await store.listTransitions(scope, { definitionId: def, limit: 100_000 });
  for (const p of pids) out[`profile ${p}`] = await store.getMemberships(scope, String(p));
  return out;
}

/** A deterministic generator (the rounds are the same on every run). */
function rand(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

const kinds: TestStoreKind[] = STORE_KIND === "postgres" ? ["postgres"] : ["embedded", "embedded-direct"];

for (const kind of kinds) {
  describe(`applyMembershipTargets (${kind})`, () => {
    let ts: TestStore;
    let store: ProfileStore;
    before(() => { ts = openTestStore(kind); store = ts.store; });
    after(async () => { await ts.cleanup(); });

    it("leaves what applyMembershipChanges without `from` leaves, transition for transition, over six rounds", async () => {
      const r = rand(7);
      // Dense ids (1–3,000: range reads) and sparse ones (every 997th up to 3M: point reads).
      const pool = [...Array.from({ length: 3000 }, (_, i) => i + 1), ...Array.from({ length: 3000 }, (_, i) => 3001 + i * 997)];
      const def = "t-d1";
      let expected = 0;
      for (let k = 0; k < 6; k++) {
        const round: Round = new Map();
        for (const p of pool) if (r() < 0.4) round.set(p, r() < 0.6 ? "realized" : "exited");
        const at = T0 + k * 1000;
        const transitions = await store.applyMembershipChanges(BY_CHANGES, changesOf(def, round, at));
        const set = await store.applyMembershipTargets(BY_TARGETS, targetsOf(def, round), { source: "backfill", at });
        // The set names exactly the transitions applyMembershipChanges recorded.
        const kindOf = (t: { from: MembershipStatus | null; to: MembershipStatus }) => (t.to === "exited" ? "exited" : t.from === null ? "entered" : "reentered");
        for (const name of ["entered", "reentered", "exited"] as const) {
          assert.deepEqual(Array.from(set[name]), transitions.filter((t) => kindOf(t) === name).map((t) => Number(t.profileId)).sort((a, b) => a - b), `round ${k}: ${name}`);
        }
        assert.equal(set.definitionId, def);
        expected += transitions.length;
        const sample = pool.filter((_, i) => i % 97 === 0);
        assert.deepEqual(await state(store, BY_TARGETS, def, sample), await state(store, BY_CHANGES, def, sample), `round ${k}`);
        if (k > 1) assert.ok(set.entered.length > 0 && set.reentered.length > 0 && set.exited.length > 0, `round ${k} has every kind: ${set.entered.length}, ${set.reentered.length}, ${set.exited.length}`);
      }
      // Not only equal: a log with every transition, none doubled or lost (each profile's chain links up).
      const log = await store.listTransitions(BY_TARGETS, { definitionId: def, limit: 100_000 });
      assert.equal(log.length, expected);
      const last = new Map<string, MembershipStatus>();
      for (const t of log) {
        assert.equal(t.from, last.get(t.profileId) ?? null, `profile ${t.profileId}: from ${String(t.from)}`);
        assert.notEqual(t.to, t.from);
        assert.equal(t.source, "backfill");
        last.set(t.profileId, t.to);
      }
    });

    it("a sparse list over a large audience decides as applyMembershipChanges", async () => {
      const def = "t-d-large";
      // Ids from 1,000,001: the other tests' profiles keep no membership of this one.
      const B = 1_000_000;
      const audience = Array.from({ length: 10_000 }, (_, i) => ({ profileId: String(B + i + 1), definitionId: def, status: "realized" as const, source: "batch" as const, at: T0 }));
      for (const sc of [BY_CHANGES, BY_TARGETS]) assert.equal((await store.applyMembershipChanges(sc, audience)).length, 10_000);
      // Every 20th id to 12,000: members told to stay and to leave, and ids above the audience.
      const round: Round = new Map();
      for (let p = 7; p <= 12_000; p += 20) round.set(B + p, p % 40 === 7 ? "exited" : "realized");
      const at = T0 + 60_000;
      const transitions = await store.applyMembershipChanges(BY_CHANGES, changesOf(def, round, at));
      const set = await store.applyMembershipTargets(BY_TARGETS, targetsOf(def, round), { source: "backfill", at });
      assert.deepEqual(Array.from(set.exited), transitions.filter((t) => t.to === "exited").map((t) => Number(t.profileId)).sort((a, b) => a - b));
      assert.deepEqual(Array.from(set.entered), transitions.filter((t) => t.to === "realized").map((t) => Number(t.profileId)).sort((a, b) => a - b));
      assert.equal(set.exited.length, 250, "the listed members told to leave");
      assert.equal(set.entered.length, 50, "the listed ids above the audience");
      assert.equal(set.reentered.length, 0);
      const sample = [7, 27, 47, 9_987, 10_007, 10_027, 11_987].map((p) => B + p);
      assert.deepEqual(await state(store, BY_TARGETS, def, sample), await state(store, BY_CHANGES, def, sample));
    });

    it("the same targets again write nothing: no transition doubled, qualification times kept", async () => {
      const def = "t-again";
      const t = (): MembershipTargets => ({ definitionId: def, realized: Float64Array.of(11, 12, 400_000), exited: Float64Array.of(13, 14) });
      await store.applyMembershipTargets(BY_TARGETS, { definitionId: def, realized: Float64Array.of(13), exited: new Float64Array(0) }, { source: "backfill", at: T0 });
      const first = await store.applyMembershipTargets(BY_TARGETS, t(), { source: "backfill", at: T0 + 1 });
      assert.deepEqual([Array.from(first.entered), Array.from(first.reentered), Array.from(first.exited)], [[11, 12, 400_000], [], [13]]);
      const before = await state(store, BY_TARGETS, def, [11, 13, 14]);
      const second = await store.applyMembershipTargets(BY_TARGETS, t(), { source: "backfill", at: T0 + 2 });
      assert.deepEqual([second.entered.length, second.reentered.length, second.exited.length], [0, 0, 0]);
      assert.deepEqual(await state(store, BY_TARGETS, def, [11, 13, 14]), before);
      // 14 was never a member: its exit is no transition and no row.
      assert.deepEqual(await store.getMemberships(BY_TARGETS, "14"), []);
      assert.equal((before["transitions"] as unknown[]).length, 5);
    });

    it("empty targets write nothing", async () => {
      const set = await store.applyMembershipTargets(BY_TARGETS, { definitionId: "t-none", realized: new Float64Array(0), exited: new Float64Array(0) }, { source: "backfill", at: T0 });
      assert.deepEqual([set.definitionId, set.entered.length, set.reentered.length, set.exited.length], ["t-none", 0, 0, 0]);
      assert.deepEqual(await store.listTransitions(BY_TARGETS, { definitionId: "t-none" }), []);
    });

    describe("bad targets: exact errors, nothing written", () => {
      const bad = async (targets: MembershipTargets, name: string, message: string, opts = { source: "backfill" as const, at: T0 }) => {
        await assert.rejects(store.applyMembershipTargets(BY_TARGETS, targets, opts), (e: unknown) => e instanceof Error && e.name === name && e.message === message);
        assert.deepEqual(await store.countMembers(BY_TARGETS, "t-bad"), { realized: 0, exited: 0 });
      };
      const of = (realized: number[], exited: number[] = []): MembershipTargets => ({ definitionId: "t-bad", realized: Float64Array.from(realized), exited: Float64Array.from(exited) });

      it("a profile id that is not an integer from 1 to 2^48", async () => {
        await bad(of([1, 2.5]), "RangeError", "membership targets t-bad: realized profile id 2.5 is not an integer from 1 to 2^48");
        await bad(of([1], [0]), "RangeError", "membership targets t-bad: exited profile id 0 is not an integer from 1 to 2^48");
        await bad(of([MAX_SET_PROFILE_ID + 1]), "RangeError", "membership targets t-bad: realized profile id 281474976710657 is not an integer from 1 to 2^48");
      });

      it("a profile listed twice, in one list or in both", async () => {
        await bad(of([3, 3]), "RangeError", "membership targets t-bad: profile 3 is listed twice");
        await bad(of([3, 5], [5]), "RangeError", "membership targets t-bad: profile 5 is listed twice");
      });

      it("a list that is not a Float64Array, no definition, a bad source or time", async () => {
        await bad({ definitionId: "t-bad", realized: [1] as unknown as Float64Array, exited: new Float64Array(0) }, "TypeError", "membership targets t-bad: realized is not a Float64Array");
        await bad({ definitionId: "", realized: Float64Array.of(1), exited: new Float64Array(0) }, "TypeError", "membership targets: no definitionId");
        await bad(of([1]), "RangeError", "membership targets: unknown source \"nightly\"", { source: "nightly" as "backfill", at: T0 });
        await bad(of([1]), "RangeError", "membership targets: at 1.5 is not an integer (epoch ms)", { source: "backfill", at: 1.5 });
      });
    });
  });
}
