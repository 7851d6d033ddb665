/**
 * The streaming workers' fenced write on PostgreSQL (#25 groundwork): a partition's membership
 * changes over several tenants and its new position commit together, only from the position the
 * writer read. A stale fence, a concurrent writer with the same fence, or a failing change leaves
 * every tenant's memberships and the position as they were. PostgreSQL only (workers share it):
 * this folder runs in `npm run test:pg`, not in `npm test`.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import type { MembershipChange } from "../../src/profiles/store.js";
import { pgStoreForSuite } from "../helpers/test-store.js";

const A = { orgId: "PARTA@AdobeOrg", sandboxName: "prod" };
const B = { orgId: "PARTB@AdobeOrg", sandboxName: "prod" };

const change = (profileId: string, definitionId: string, status: "realized" | "exited", at: number): MembershipChange => ({ profileId, definitionId, status, source: "streaming", at });

describe("partition writes (PostgreSQL)", () => {
  const pgStore = pgStoreForSuite("t_partitions");
  let store: PostgresProfileStore;
  before(() => (store = pgStore()));

  it("writes every tenant's changes and the new position together", async () => {
    assert.equal(await store.partitionPosition("pev.1"), 0);
    const r = await store.applyPartitionBatch({ partition: "pev.1", after: 0, through: 40 }, [
      { scope: A, changes: [change("1", "d1", "realized", 1000)] },
      { scope: B, changes: [change("2", "d1", "realized", 1000), change("3", "d2", "realized", 1000)] },
    ]);
    assert.equal(r.applied, true);
    assert.equal(r.position, 40);
    assert.deepEqual(r.transitions.map((t) => [t.scope.orgId, t.transitions.length]), [[A.orgId, 1], [B.orgId, 2]]);
    assert.equal(await store.partitionPosition("pev.1"), 40);
    assert.deepEqual((await store.getMemberships(A, "1")).map((m) => [m.definitionId, m.status]), [["d1", "realized"]]);
    assert.deepEqual((await store.getMemberships(B, "3")).map((m) => [m.definitionId, m.status]), [["d2", "realized"]]);
  });

  it("a stale fence (a redelivered batch, or a worker that lost its lease) writes nothing", async () => {
    const before = await store.listTransitions(A, {});
    const r = await store.applyPartitionBatch({ partition: "pev.1", after: 0, through: 40 }, [{ scope: A, changes: [change("1", "d1", "exited", 2000)] }]);
    assert.deepEqual(r, { applied: false, position: 40, transitions: [] });
    assert.deepEqual((await store.getMemberships(A, "1")).map((m) => m.status), ["realized"]);
    assert.deepEqual(await store.listTransitions(A, {}), before);
  });

  it("of two writers with the same fence, exactly one applies", async () => {
    const write = (profileId: string) => store.applyPartitionBatch({ partition: "pev.2", after: 0, through: 10 }, [{ scope: A, changes: [change(profileId, "d9", "realized", 3000)] }]);
    const [x, y] = await Promise.all([write("7"), write("8")]);
    assert.deepEqual([x.applied, y.applied].sort(), [false, true]);
    const written = (await store.listMembers(A, "d9")).map((m) => m.profileId);
    assert.deepEqual(written, [x.applied ? "7" : "8"]);
    assert.equal(await store.partitionPosition("pev.2"), 10);
  });

  it("a change the store refuses rolls the whole batch back, for every tenant and the position", async () => {
    const bTransitions = await store.listTransitions(B, {});
    await assert.rejects(store.applyPartitionBatch({ partition: "pev.1", after: 40, through: 50 }, [
      { scope: B, changes: [change("2", "d1", "exited", 4000)] },
      // Not a profile id the store can hold (int8): PostgreSQL refuses the statement.
      { scope: A, changes: [change("not-a-number", "d1", "realized", 4000)] },
    ]));
    assert.equal(await store.partitionPosition("pev.1"), 40);
    assert.deepEqual((await store.getMemberships(B, "2")).map((m) => m.status), ["realized"]);
    assert.deepEqual(await store.listTransitions(B, {}), bTransitions);
  });

  it("refuses a fence that does not move forward, before anything is written", async () => {
    await assert.rejects(store.applyPartitionBatch({ partition: "pev.1", after: 40, through: 40 }, []), /a partition fence moves forward: after 40, through 40/);
    assert.equal(await store.partitionPosition("pev.1"), 40);
  });
});
