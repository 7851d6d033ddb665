/**
 * The engine's typed-array output (engine/membership-output.ts) and the bulk write's planning
 * helpers (profiles/membership-sets.ts): growth past the initial capacity, conversion to
 * changes, row order and the JSON text SQLite parses.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MembershipSetBuilder, membershipChangesOf, membershipWrites } from "../../src/batch/engine/membership-output.js";
import { jsonIntegers, MAX_SET_PROFILE_ID, pidMajorCodes, planMembershipSets, setGroups, transitionCounts } from "../../src/profiles/membership-sets.js";

const AT = Date.UTC(2026, 10, 21);

describe("membership output", () => {
  it("a builder keeps every id past its initial capacity, per kind, and finishes to exact lengths", () => {
    const b = new MembershipSetBuilder("d");
    for (let i = 1; i <= 1000; i++) (i % 3 === 0 ? b.exited : i % 3 === 1 ? b.entered : b.reentered).push(i);
    assert.equal(b.size, 1000);
    const set = b.finish();
    assert.equal(set.definitionId, "d");
    assert.deepEqual([set.entered.length, set.reentered.length, set.exited.length], [334, 333, 333]);
    assert.deepEqual([set.entered[0], set.entered[333], set.reentered[332], set.exited[332]], [1, 1000, 998, 999]);
    assert.equal(membershipWrites([set, set]), 2000);
  });

  it("as changes: set by set, by ascending profile id, with `from` per kind", () => {
    const sets = [
      { definitionId: "b", entered: Float64Array.of(9, 2), reentered: Float64Array.of(5), exited: Float64Array.of(3) },
      { definitionId: "a", entered: Float64Array.of(1), reentered: new Float64Array(0), exited: new Float64Array(0) },
    ];
    assert.deepEqual(membershipChangesOf(sets, AT, "streaming").map((c) => `${c.definitionId}/${c.profileId} ${c.from}->${c.status} ${c.source} ${c.at}`), [
      `b/2 null->realized streaming ${AT}`, `b/3 realized->exited streaming ${AT}`, `b/5 exited->realized streaming ${AT}`,
      `b/9 null->realized streaming ${AT}`, `a/1 null->realized streaming ${AT}`,
    ]);
  });
});

describe("membership set planning", () => {
  const set = (definitionId: string, entered: number[], exited: number[] = []) =>
    ({ definitionId, entered: Float64Array.from(entered), reentered: new Float64Array(0), exited: Float64Array.from(exited) });

  it("codes each profile as pid * 4 + kind in ascending order and counts transitions", () => {
    const planned = planMembershipSets([set("d", [7, 3], [5])], { source: "batch", at: AT });
    assert.deepEqual(Array.from(planned[0]!.codes), [12, 22, 28]);
    assert.deepEqual(transitionCounts(planned), { realized: 2, exited: 1 });
  });

  it("rows profile-major: the counting sort (dense ids) and the sort (sparse ids) give the same order", () => {
    const dense = planMembershipSets([set("a", [1, 2, 4], [3]), set("b", [2, 3])], { source: "batch", at: AT });
    const { codes, modulus } = pidMajorCodes(dense, 0, 2);
    assert.equal(modulus, 4);
    // pid * 4 + 2 * set + exited: (1,a) (2,a) (2,b) (3,a exited) (3,b) (4,a)
    assert.deepEqual(Array.from(codes), [4, 8, 10, 13, 14, 16]);
    const sparse = planMembershipSets([set("a", [1, 2 ** 40]), set("b", [2, 2 ** 40])], { source: "batch", at: AT });
    assert.deepEqual(Array.from(pidMajorCodes(sparse, 0, 2).codes), [4, 10, 2 ** 42, 2 ** 42 + 2]);
  });

  it("groups sets so that every row code stays exact in a double", () => {
    const small = planMembershipSets(Array.from({ length: 40 }, (_, i) => set(`d${i}`, [1000])), { source: "batch", at: AT });
    assert.deepEqual(setGroups(small), [{ first: 0, count: 40 }]);
    const large = planMembershipSets(Array.from({ length: 40 }, (_, i) => set(`d${i}`, [MAX_SET_PROFILE_ID])), { source: "batch", at: AT });
    // 2^53 / (2^48 + 1) / 2 → 15 sets per group.
    assert.deepEqual(setGroups(large), [{ first: 0, count: 15 }, { first: 15, count: 15 }, { first: 30, count: 10 }]);
    for (const g of setGroups(large)) {
      const { codes } = pidMajorCodes(large, g.first, g.count);
      assert.ok(codes.every((c) => Number.isSafeInteger(c)));
    }
  });

  it("writes JSON integer arrays, including numbers above 2^31 and empty ranges", () => {
    const codes = Float64Array.of(0, 7, 10, 2147483647, 2147483648, 4 * MAX_SET_PROFILE_ID + 3, 2 ** 53 - 1);
    assert.equal(jsonIntegers(codes, 0, codes.length).toString(), `[0,7,10,2147483647,2147483648,${4 * MAX_SET_PROFILE_ID + 3},${2 ** 53 - 1}]`);
    assert.equal(jsonIntegers(codes, 1, 3).toString(), "[7,10]");
    assert.equal(jsonIntegers(codes, 2, 2).toString(), "[]");
  });
});
