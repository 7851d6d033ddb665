/**
 * BatchEdgeProjection (batch/jobs/edge-projection.ts) on its own: of a job's sets, only the
 * definitions edge evaluation reads (edge ones and, transitively, what they name with inSegment)
 * and only the profiles a location holds are projected — a million changed profiles cost one pass
 * over their typed arrays, not a read each; a failing chunk is tried again, and one that keeps
 * failing is logged, never thrown at the job. A job the worker fleet wrote is read back from the
 * store's transition log (the held profiles' transitions of the job's instant).
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { BatchEdgeProjection, type EdgeProjectionTarget } from "../../src/batch/jobs/edge-projection.js";
import type { MembershipSet } from "../../src/profiles/membership-sets.js";
import { openTestStore } from "../profiles/test-store.js";
import type { TenantContext } from "../../src/services/tenancy.js";
import type { DefinitionRecord, MetadataStore } from "../../src/stores/types.js";

const SCOPE = { orgId: "ORG@AdobeOrg", sandboxId: "sb", sandboxName: "prod" };
const TENANT = { ...SCOPE, sandbox: { sandboxId: "sb", sandboxName: "prod" } } as unknown as TenantContext;

/** edge → (inSegment) mid → (inSegment) gold; "other" is a batch audience no edge definition reads. */
function metadata(): MetadataStore {
  const rec = (id: string, synchronous: boolean, references: string[]) => ({ definition: { id, evaluationInfo: { synchronous: { enabled: synchronous } } }, references }) as unknown as DefinitionRecord;
  const all = [rec("edge", true, ["mid"]), rec("mid", false, ["gold"]), rec("gold", false, []), rec("other", false, [])];
  return {
    definitions: {
      list: async (_s: unknown, q: { filters: { synchronous?: boolean }; offset: number }) => ({ items: q.offset > 0 ? [] : all.filter((r) => q.filters.synchronous !== true || r.definition.evaluationInfo.synchronous.enabled), total: 0 }),
      getMany: async (_s: unknown, ids: string[]) => new Map(all.filter((r) => ids.includes(r.definition.id)).map((r) => [r.definition.id, r])),
    },
  } as unknown as MetadataStore;
}

function set(definitionId: string, exited: number[], entered: number[] = []): MembershipSet {
  return { definitionId, entered: Float64Array.from(entered), reentered: new Float64Array(0), exited: Float64Array.from(exited) };
}

function target(held: string[] | null, failFirst = 0): EdgeProjectionTarget & { calls: string[][] } {
  let fails = failFirst;
  const calls: string[][] = [];
  return {
    calls,
    heldProfileIds: async () => (held === null ? null : new Set(held)),
    project: async (_t, ids) => {
      if (fails-- > 0) throw new Error("location unreachable");
      calls.push([...ids].sort());
      return ids.length;
    },
  };
}

describe("a batch job's projection to the edge locations", () => {
  test("only held profiles of definitions edge evaluation reads (transitively), over a million changes", async () => {
    const t = target(["7", "999999", "12", "abc"]);
    const p = new BatchEdgeProjection({ metadata: metadata(), edge: t, tenantOf: () => TENANT });
    const million = Array.from({ length: 1_000_000 }, (_, i) => i + 1);
    p.jobWritten(SCOPE, [set("gold", million), set("other", [12]), set("mid", [], [12])]);
    await p.idle();
    // 7 and 999999 left gold, 12 entered mid; "other" is read by no edge definition; "abc" changed in none.
    assert.deepEqual(t.calls, [["12", "7", "999999"]]);
    assert.equal(p.projected, 3);
  });

  test("nothing is projected when no location holds a changed profile, or no edge definition reads the sets", async () => {
    const none = target([]);
    const p = new BatchEdgeProjection({ metadata: metadata(), edge: none, tenantOf: () => TENANT });
    p.jobWritten(SCOPE, [set("gold", [1, 2])]);
    const unread = target(["1"]);
    const q = new BatchEdgeProjection({ metadata: metadata(), edge: unread, tenantOf: () => TENANT });
    q.jobWritten(SCOPE, [set("other", [1])]);
    await Promise.all([p.idle(), q.idle()]);
    assert.deepEqual([none.calls, unread.calls], [[], []]);
  });

  test("a chunk that fails is tried again; chunks are bounded", async () => {
    const t = target(["1", "2", "3", "4", "5"], 2);
    const errors: unknown[] = [];
    const p = new BatchEdgeProjection({ metadata: metadata(), edge: t, tenantOf: () => TENANT, chunkSize: 2, retryMs: 1, logger: { info: () => {}, error: (o: unknown) => errors.push(o) } });
    p.jobWritten(SCOPE, [set("gold", [1, 2, 3, 4, 5])]);
    await p.idle();
    assert.deepEqual(t.calls, [["1", "2"], ["3", "4"], ["5"]]);
    assert.equal(errors.length, 2);
  });

  test("a location that cannot list what it holds is offered every changed profile", async () => {
    const t = target(null);
    const p = new BatchEdgeProjection({ metadata: metadata(), edge: t, tenantOf: () => TENANT });
    p.jobWritten(SCOPE, [set("gold", [3, 1], [2])]);
    await p.idle();
    assert.deepEqual(t.calls, [["1", "2", "3"]]);
  });

  test("a fleet job (#44): the held profiles' transitions of the job's instant are read back from the store", async () => {
    const ts = openTestStore();
    try {
      const AT = Date.UTC(2026, 10, 1);
      await ts.store.applyMembershipSets(SCOPE, [set("gold", [], [7, 12, 50]), set("other", [], [13])], { source: "batch", at: AT });
      // Another job's instant, and a streaming change at the job's instant: neither is this job's.
      await ts.store.applyMembershipSets(SCOPE, [set("gold", [], [13])], { source: "batch", at: AT + 5 });
      await ts.store.applyMembershipSets(SCOPE, [set("mid", [], [14])], { source: "streaming", at: AT });
      const held = target(["7", "12", "13", "14", "abc"]);
      const p = new BatchEdgeProjection({ metadata: metadata(), edge: held, transitions: ts.store, tenantOf: () => TENANT, chunkSize: 1 });
      p.fleetJobWritten(SCOPE, ["gold", "mid", "other"], AT);
      const unlisted = target(null);
      const q = new BatchEdgeProjection({ metadata: metadata(), edge: unlisted, transitions: ts.store, tenantOf: () => TENANT });
      q.fleetJobWritten(SCOPE, ["gold", "mid", "other"], AT);
      // A job of definitions no edge definition reads projects nothing.
      const unread = target(["13"]);
      const r = new BatchEdgeProjection({ metadata: metadata(), edge: unread, transitions: ts.store, tenantOf: () => TENANT });
      r.fleetJobWritten(SCOPE, ["other"], AT);
      await Promise.all([p.idle(), q.idle(), r.idle()]);
      assert.deepEqual(held.calls.flat().sort(), ["12", "7"]);
      assert.deepEqual(unlisted.calls.flat().sort(), ["12", "50", "7"]);
      assert.deepEqual(unread.calls, []);
    } finally {
      await ts.cleanup();
    }
  });

  test("a projection that keeps failing is logged, never thrown at the job", async () => {
    const t = target(["1"], 100);
    const errors: string[] = [];
    const p = new BatchEdgeProjection({ metadata: metadata(), edge: t, tenantOf: () => TENANT, attempts: 2, retryMs: 1, logger: { info: () => {}, error: (_o: unknown, msg?: string) => errors.push(String(msg)) } });
    p.jobWritten(SCOPE, [set("gold", [1])]);
    await p.idle();
    assert.deepEqual(errors, ["batch job: projecting a chunk to the edge locations failed; trying again", "batch job: projection to the edge locations failed"]);
  });
});
