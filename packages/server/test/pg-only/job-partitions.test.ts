/**
 * The batch fan-out's fenced write on PostgreSQL (#44): a job's partition — its memberships,
 * transitions and report — is written once whoever evaluates it. A second writer of the same part
 * (the next owner after a crash, a slow former owner), two at once, an invalid set or id, or a
 * part of another tenant's job: nothing written twice, nothing of anyone else's touched.
 * PostgreSQL only (workers share it): this folder runs in `npm run test:pg`, not in `npm test`.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import type { JobPartitionWrite, MembershipSet } from "../../src/profiles/store.js";
import { pgStoreForSuite } from "../helpers/test-store.js";

const A = { orgId: "JOBA@AdobeOrg", sandboxName: "prod" };
const B = { orgId: "JOBB@AdobeOrg", sandboxName: "prod" };
const AT = Date.UTC(2026, 11, 1);

const set = (definitionId: string, entered: number[], exited: number[] = []): MembershipSet => ({
  definitionId, entered: Float64Array.from(entered), reentered: new Float64Array(0), exited: Float64Array.from(exited),
});
const part = (scope: typeof A, jobId: string, partition: number, sets: MembershipSet[], report: unknown, worker = "w1", at = AT): JobPartitionWrite => ({ scope, jobId, partition, worker, sets, at, report });

describe("job partitions (PostgreSQL)", () => {
  const pgStore = pgStoreForSuite("t_job_parts");
  let store: PostgresProfileStore;
  before(() => (store = pgStore()));

  const members = async (scope: typeof A, def: string) => Array.from(await store.listMemberPids(scope, def, "realized")).sort((a, b) => a - b);

  it("writes a part's memberships, transitions and report together; the same part again writes nothing", async () => {
    assert.equal(await store.applyJobPartition(part(A, "job-1", 3, [set("d1", [10, 11, 12]), set("d2", [11])], { d1: { qualified: 3 } })), true);
    assert.deepEqual(await members(A, "d1"), [10, 11, 12]);
    assert.deepEqual(await members(A, "d2"), [11]);
    const t = await store.listTransitions(A, {});
    assert.equal(t.length, 4);
    assert.deepEqual(new Set(t.map((x) => `${x.source} ${x.at} ${x.to}`)), new Set([`batch ${new Date(AT).toISOString()} realized`]));
    assert.deepEqual(await store.jobPartitionReports(A, "job-1"), [{ partition: 3, worker: "w1", transitions: 4, report: { d1: { qualified: 3 } } }]);

    // The partition's next owner evaluated it again (another verdict): the first write stands.
    assert.equal(await store.applyJobPartition(part(A, "job-1", 3, [set("d1", [], [10])], { d1: { qualified: 2 } }, "w2")), false);
    assert.deepEqual(await members(A, "d1"), [10, 11, 12]);
    assert.equal((await store.listTransitions(A, {})).length, 4);
    assert.deepEqual((await store.jobPartitionReports(A, "job-1")).map((r) => [r.partition, r.worker]), [[3, "w1"]]);
  });

  it("of two writers of the same part at once, exactly one writes", async () => {
    const before = (await store.listTransitions(A, {})).length;
    const results = await Promise.all([
      store.applyJobPartition(part(A, "job-2", 5, [set("d3", [20, 21])], { n: 1 }, "w1")),
      store.applyJobPartition(part(A, "job-2", 5, [set("d3", [20, 21, 22])], { n: 2 }, "w2")),
    ]);
    assert.deepEqual(results.filter(Boolean).length, 1);
    const winner = results[0] ? "w1" : "w2";
    assert.deepEqual(await members(A, "d3"), winner === "w1" ? [20, 21] : [20, 21, 22]);
    assert.equal((await store.listTransitions(A, {})).length, before + (winner === "w1" ? 2 : 3));
    assert.deepEqual((await store.jobPartitionReports(A, "job-2")).map((r) => r.worker), [winner]);
  });

  it("a job's parts are its tenant's: another tenant's part of the same job id and partition is its own", async () => {
    assert.equal(await store.applyJobPartition(part(B, "job-1", 3, [set("d1", [99])], { b: true })), true);
    assert.deepEqual(await members(B, "d1"), [99]);
    assert.deepEqual(await members(A, "d1"), [10, 11, 12]);
    assert.deepEqual((await store.jobPartitionReports(B, "job-1")).map((r) => r.report), [{ b: true }]);
    assert.deepEqual((await store.jobPartitionReports(A, "job-1")).map((r) => r.report), [{ d1: { qualified: 3 } }]);
    assert.deepEqual(await store.jobPartitionReports({ orgId: "NONE@AdobeOrg", sandboxName: "prod" }, "job-1"), []);
  });

  it("refuses an invalid part before anything is written: a job id, a partition, a set", async () => {
    const before = { t: (await store.listTransitions(A, {})).length, r: await store.jobPartitionReports(A, "job-9") };
    await assert.rejects(store.applyJobPartition(part(A, "job 9; DROP", 1, [set("d1", [1])], {})), { name: "RangeError", message: 'job partition: job id "job 9; DROP" is not one' });
    await assert.rejects(store.applyJobPartition(part(A, "job-9", -1, [set("d1", [1])], {})), { name: "RangeError", message: "job partition: partition -1 is not one" });
    await assert.rejects(store.applyJobPartition(part(A, "job-9", 1, [set("d1", [1.5])], {})), RangeError);
    await assert.rejects(store.applyJobPartition(part(A, "job-9", 1, [set("d1", [1])], {}, "w1", 1.5)), { name: "RangeError", message: "membership sets: at 1.5 is not an integer (epoch ms)" });
    assert.equal((await store.listTransitions(A, {})).length, before.t);
    assert.deepEqual(await store.jobPartitionReports(A, "job-9"), before.r);
    // Nothing claimed: the part can still be written.
    assert.equal(await store.applyJobPartition(part(A, "job-9", 1, [set("d1", [1])], {})), true);
  });

  it("a part without changes is still recorded (its counters count)", async () => {
    assert.equal(await store.applyJobPartition(part(A, "job-3", 0, [], { d1: { qualified: 0 } })), true);
    assert.deepEqual(await store.jobPartitionReports(A, "job-3"), [{ partition: 0, worker: "w1", transitions: 0, report: { d1: { qualified: 0 } } }]);
    assert.equal(await store.applyJobPartition(part(A, "job-3", 0, [], {})), false);
  });

  it("a job given up has its unwritten partitions closed: nothing of it is written afterwards, what was written stays", async () => {
    assert.equal(await store.applyJobPartition(part(A, "gone", 1, [set("g1", [70])], { g1: { qualified: 1 } })), true);
    assert.equal(await store.closeJobPartitions(A, "gone", 4, AT), 3);
    assert.equal(await store.applyJobPartition(part(A, "gone", 2, [set("g1", [71])], {}, "w2")), false);
    assert.deepEqual(await members(A, "g1"), [70]);
    assert.deepEqual((await store.jobPartitionReports(A, "gone")).map((r) => [r.partition, r.worker, r.transitions]), [[0, "", 0], [1, "w1", 1], [2, "", 0], [3, "", 0]]);
    assert.equal(await store.closeJobPartitions(A, "gone", 4, AT), 0, "closed once");
    // Another tenant's job of the same id is its own.
    assert.equal(await store.applyJobPartition(part(B, "gone", 2, [set("g1", [72])], {})), true);
    await assert.rejects(store.closeJobPartitions(A, "bad id!", 4, AT), RangeError);
    await assert.rejects(store.closeJobPartitions(A, "gone", 0, AT), RangeError);
  });

  it("prunes the rows of a sandbox's jobs older than an instant, and only that sandbox's", async () => {
    const WEEK = 7 * 24 * 3_600_000;
    assert.equal(await store.applyJobPartition(part(A, "old-1", 0, [], {}, "w1", AT - WEEK - 1)), true);
    assert.equal(await store.applyJobPartition(part(A, "old-1", 1, [], {}, "w1", AT - WEEK - 1)), true);
    assert.equal(await store.applyJobPartition(part(A, "recent", 0, [], {}, "w1", AT - WEEK)), true);
    assert.equal(await store.applyJobPartition(part(B, "old-b", 0, [], {}, "w1", AT - WEEK - 1)), true);
    assert.equal(await store.pruneJobPartitions(A, AT - WEEK), 2);
    assert.deepEqual(await store.jobPartitionReports(A, "old-1"), []);
    assert.equal((await store.jobPartitionReports(A, "recent")).length, 1);
    assert.equal((await store.jobPartitionReports(B, "old-b")).length, 1, "another tenant's rows stay");
    assert.equal(await store.pruneJobPartitions({ orgId: "NOBODY@AdobeOrg", sandboxName: "prod" }, AT), 0);
  });
});
