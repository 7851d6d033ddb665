/**
 * Worker shards (issue #44): a worker's columnar snapshot holds exactly the profiles of the
 * partitions it holds; the evaluations of a job over the shards of workers holding every partition
 * together give the members, transitions and counters of one evaluation over all profiles
 * (segments of segments included), before and after memberships are stored and data changes; a
 * shard is refreshed with only its partitions' changed profiles; a partition that moves is read by
 * the shard it came to and masked in the one it left, without a rebuild; a restart with the same
 * held partitions loads the shard from its file and refreshes it (no listing, no full scan), one
 * with other partitions builds it. Runs on the embedded store (unit) and PostgreSQL (pg).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import type { Snapshot } from "../../src/batch/columnar/snapshot.js";
import { evaluateJob, type DefinitionCounters, type EvaluationOutcome } from "../../src/batch/engine/evaluate-job.js";
import { WorkerShard, type ShardSource } from "../../src/batch/shards/worker-shard.js";
import { partitionFunction } from "../../src/cluster/partitions.js";
import { defaultConfig } from "../../src/platform/config.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ScanOptions } from "../../src/profiles/store.js";
import { TenantDirectory, type TenantContext } from "../../src/services/tenancy.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";
import { NOW } from "./pql-gen.js";
import { PDG, SCOPE, populate, segmentOfSegmentsDefinitions, type Population } from "./fixtures.js";

const PARTITIONS = 4;
const DEFS = segmentOfSegmentsDefinitions();

/** Transitions of an outcome, as comparable rows. */
function transitions(outcomes: Iterable<Pick<EvaluationOutcome, "memberships">>): string[] {
  const rows: string[] = [];
  for (const o of outcomes) {
    for (const m of o.memberships) {
      for (const [kind, list] of [["entered", m.entered], ["reentered", m.reentered], ["exited", m.exited]] as const) for (const pid of list) rows.push(`${m.definitionId} ${kind} ${pid}`);
    }
  }
  return rows.sort();
}

function counters(outcomes: Iterable<Pick<EvaluationOutcome, "counters">>): Record<string, Omit<DefinitionCounters, "byNamespace">> {
  const out: Record<string, Omit<DefinitionCounters, "byNamespace">> = {};
  for (const o of outcomes) {
    for (const [id, c] of o.counters) {
      const t = (out[id] ??= { qualified: 0, realized: 0, existing: 0, exited: 0 });
      t.qualified += c.qualified;
      t.realized += c.realized;
      t.existing += c.existing;
      t.exited += c.exited;
    }
  }
  return out;
}

describe("worker shards", () => {
  let ts: TestStore;
  let pop: Population;
  let dir: string;
  let tenant: TenantContext;
  let partitionOf: (id: string) => number;
  let full: SnapshotCache;

  before(async () => {
    ts = openTestStore();
    pop = await populate(ts.store, 60, 44);
    dir = mkdtempSync(path.join(tmpdir(), "segmentd-shards-"));
    const config = defaultConfig();
    config.organizations = [{ id: SCOPE.orgId, sandboxes: [{ name: SCOPE.sandboxName, type: "production", default: true }] }];
    tenant = new TenantDirectory(config).resolve(SCOPE.orgId, SCOPE.sandboxName)!;
    partitionOf = partitionFunction(tenant.sandbox.sandboxId, PARTITIONS);
    full = new SnapshotCache({});
  });
  after(async () => {
    await full.close();
    await ts.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  const warnings: string[] = [];
  const shardOver = (store: ShardSource, worker: string, held: number[]) =>
    new WorkerShard({ store, partitions: PARTITIONS, held, dir: path.join(dir, worker), storeIdentity: ts.location, partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, PARTITIONS), onWarning: (m) => warnings.push(m) });
  const idsOf = (snap: Snapshot) => {
    const ids: string[] = [];
    for (let g = 0; g < snap.ordinals; g++) if (snap.isLive(g)) ids.push(snap.profileIdOf(g));
    return ids.sort();
  };
  const ofPartitions = (ids: Iterable<string>, held: number[]) => [...ids].filter((id) => held.includes(partitionOf(id))).sort();

  it("holds its partitions' profiles, and two workers' evaluations of a job give one evaluation over every profile", async () => {
    const a = shardOver(ts.store, "a", [0, 1]);
    const b = shardOver(ts.store, "b", [2, 3]);
    try {
      const whole = await full.get(ts.store, SCOPE, PDG, { events: true });
      const every = idsOf(whole);
      for (const [shard, held] of [[a, [0, 1]], [b, [2, 3]]] as const) {
        const snap = await shard.snapshot(tenant, PDG, { events: true });
        assert.deepEqual(idsOf(snap), ofPartitions(every, [...held]), `the shard of ${held.join(", ")}`);
        assert.ok(snap.profileCount > 0);
        assert.equal(shard.stats(tenant, PDG)?.mode, "built");
        assert.deepEqual(shard.heldPartitions(), held);
      }

      const one = await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW, snapshots: full });
      const split = [await a.evaluate(tenant, DEFS, { now: NOW }), await b.evaluate(tenant, DEFS, { now: NOW })];
      assert.deepEqual(transitions(split), transitions([one]));
      assert.deepEqual(counters(split), counters([one]));
      for (const [o, held] of [[split[0]!, [0, 1]], [split[1]!, [2, 3]]] as const) {
        for (const m of o.memberships) for (const pid of [...m.entered, ...m.reentered, ...m.exited]) assert.ok((held as readonly number[]).includes(partitionOf(String(pid))));
      }
      assert.ok(transitions([one]).some((t) => t.startsWith("d2 entered")), "the segment of segments has members");

      // Stored, then data changes: a new profile, and one moved out of d0; again equal.
      await ts.store.applyMembershipSets(SCOPE, one.memberships, { source: "batch", at: NOW });
      const moved = await ingestRecords(ts.store, SCOPE, pop.crm, [
        { index: 0, value: { identityMap: { ECID: [{ id: "P-new", primary: true }] }, person: { age: 40 }, tier: "changed" } },
        { index: 1, value: { identityMap: { ECID: [{ id: "P0", primary: true }] }, person: { age: 1 } } },
      ], { now: NOW });
      const changed = Array.from(moved.storedPids!, String);
      assert.equal(new Set(changed).size, 2);
      const two = await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 1, snapshots: full });
      const again = [await a.evaluate(tenant, DEFS, { now: NOW + 1 }), await b.evaluate(tenant, DEFS, { now: NOW + 1 })];
      assert.deepEqual(transitions(again), transitions([two]));
      assert.deepEqual(counters(again), counters([two]));
      assert.ok(transitions([two]).length > 0, "the second job moves memberships");
      for (const [shard, held] of [[a, [0, 1]], [b, [2, 3]]] as const) {
        const mine = changed.filter((id) => (held as readonly number[]).includes(partitionOf(id))).length;
        const s = shard.stats(tenant, PDG)!;
        assert.equal(s.mode, mine > 0 ? "incremental" : "unchanged", `the shard of ${held.join(", ")}`);
        assert.equal(s.changed, mine, "only its partitions' changed profiles are read");
      }
      await Promise.all([a.idle(), b.idle()]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("loads the shard from its file after a restart with the same partitions and refreshes it: no listing of the sandbox, no full scan; other partitions build", async () => {
    const calls = { listProfileIds: 0, fullScans: 0, scannedIds: 0 };
    const counted = new Proxy(ts.store, {
      get(target, key) {
        if (key === "listProfileIds") calls.listProfileIds++;
        if (key === "scanProfiles") {
          return (scope: typeof SCOPE, policy: typeof PDG, opts: ScanOptions = {}) => {
            if (opts.profileIds === undefined) calls.fullScans++;
            else calls.scannedIds += opts.profileIds.length;
            return target.scanProfiles(scope, policy, opts);
          };
        }
        const v: unknown = Reflect.get(target, key, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }) as ShardSource;
    // The first test's shards wrote their files (builds; an incremental refresh writes none): a new process finds them.
    const a = shardOver(counted, "a", [0, 1]);
    const b = shardOver(counted, "b", [2, 3]);
    try {
      const whole = await full.get(ts.store, SCOPE, PDG, { events: true });
      let held = 0;
      for (const shard of [a, b]) {
        held += (await shard.snapshot(tenant, PDG, { events: true })).profileCount;
        assert.equal(shard.stats(tenant, PDG)?.mode, "loaded");
      }
      assert.equal(held, whole.profileCount);
      // The two profiles changed since the builds are read again, nothing else.
      assert.deepEqual(calls, { listProfileIds: 0, fullScans: 0, scannedIds: 2 });
      const out = [await a.evaluate(tenant, DEFS, { now: NOW + 1 }), await b.evaluate(tenant, DEFS, { now: NOW + 1 })];
      assert.deepEqual(transitions(out), transitions([await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 1, snapshots: full })]));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    // Worker a's files, under another held set: ignored (they hold other profiles), the shard built.
    warnings.length = 0;
    const other = shardOver(ts.store, "a", [0, 1, 2]);
    try {
      const snap = await other.snapshot(tenant, PDG, { events: true });
      assert.equal(other.stats(tenant, PDG)?.mode, "built");
      assert.deepEqual(idsOf(snap), ofPartitions(idsOf(await full.get(ts.store, SCOPE, PDG, { events: true })), [0, 1, 2]));
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /ignored \(written for another profile store\)/);
    } finally {
      await other.close();
    }
  });

  it("a partition that moves is read by the shard it comes to and masked in the one it leaves, without a rebuild", async () => {
    const a = shardOver(ts.store, "move-a", [0, 1]);
    const b = shardOver(ts.store, "move-b", [2, 3]);
    try {
      await a.snapshot(tenant, PDG, { events: true });
      await b.snapshot(tenant, PDG, { events: true });
      const every = idsOf(await full.get(ts.store, SCOPE, PDG, { events: true }));
      const movedCount = ofPartitions(every, [2]).length;
      assert.ok(movedCount > 0, "partition 2 holds profiles");
      await Promise.all([a.hold([0, 1, 2]), b.hold([3])]);
      assert.deepEqual(a.heldPartitions(), [0, 1, 2]);
      const sa = await a.snapshot(tenant, PDG, { events: true });
      const sb = await b.snapshot(tenant, PDG, { events: true });
      assert.deepEqual(idsOf(sa), ofPartitions(every, [0, 1, 2]));
      assert.deepEqual(idsOf(sb), ofPartitions(every, [3]));
      for (const shard of [a, b]) assert.deepEqual([shard.stats(tenant, PDG)?.mode, shard.stats(tenant, PDG)?.changed], ["incremental", movedCount], "the moved partition's profiles only");

      const one = await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 2, snapshots: full });
      const split = [await a.evaluate(tenant, DEFS, { now: NOW + 2 }), await b.evaluate(tenant, DEFS, { now: NOW + 2 })];
      assert.deepEqual(counters(split), counters([one]));
      assert.deepEqual(transitions(split), transitions([one]));

      // And back: b takes partition 2 again.
      await Promise.all([a.hold([0, 1]), b.hold([2, 3])]);
      assert.deepEqual(idsOf(await a.snapshot(tenant, PDG, { events: true })), ofPartitions(every, [0, 1]));
      assert.deepEqual(idsOf(await b.snapshot(tenant, PDG, { events: true })), ofPartitions(every, [2, 3]));
      assert.deepEqual(counters([await a.evaluate(tenant, DEFS, { now: NOW + 2 }), await b.evaluate(tenant, DEFS, { now: NOW + 2 })]), counters([one]));
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("splits its outcome by partition: each part is what a shard of that partition alone gives, on every back end, and the parts sum to the totals", async () => {
    const all = shardOver(ts.store, "split", [0, 1, 2, 3]);
    const alone = [0, 1, 2, 3].map((p) => shardOver(ts.store, `alone-${p}`, [p]));
    try {
      const out = await all.evaluate(tenant, DEFS, { now: NOW + 3 });
      assert.deepEqual([...out.byPartition.keys()], [0, 1, 2, 3]);
      assert.ok(transitions([out]).length > 0 && counters([out])["d0"]!.qualified > 0, "the job has members and changes");
      for (let p = 0; p < PARTITIONS; p++) {
        const part = out.byPartition.get(p)!;
        const own = await alone[p]!.evaluate(tenant, DEFS, { now: NOW + 3 });
        assert.deepEqual(transitions([part]), transitions([own]), `partition ${p}'s changes`);
        assert.deepEqual(part.counters, own.counters, `partition ${p}'s counters (namespaces included)`);
        assert.deepEqual([...own.byPartition.keys()], [p]);
        assert.equal(part.profiles, own.totalProfiles, `partition ${p}'s profiles`);
        assert.deepEqual(part.profilesByPolicy, own.profilesByPolicy, `partition ${p}'s entries per merge policy`);
        assert.ok(part.profiles > 0);
      }
      assert.equal([...out.byPartition.values()].reduce((a, x) => a + x.profiles, 0), out.totalProfiles);
      for (const [policy, n] of Object.entries(out.profilesByPolicy)) assert.equal([...out.byPartition.values()].reduce((a, x) => a + x.profilesByPolicy[policy]!, 0), n, `entries of ${policy}`);
      assert.deepEqual(counters(out.byPartition.values()), counters([out]));
      assert.deepEqual(transitions(out.byPartition.values()), transitions([out]));
      // The scan-per-job back end splits alike (the engine's own option; the shard always runs columnar).
      const split = { partitions: [0, 1, 2, 3], of: partitionOf };
      const js = await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 3, backend: "js", split });
      for (const [p, part] of js.byPartition!) {
        assert.deepEqual(transitions([part]), transitions([out.byPartition.get(p)!]), `js: partition ${p}`);
        assert.deepEqual(part.counters, out.byPartition.get(p)!.counters, `js: partition ${p}'s counters`);
        assert.equal(part.profiles, out.byPartition.get(p)!.profiles, `js: partition ${p}'s profiles`);
        assert.deepEqual(part.profilesByPolicy, out.byPartition.get(p)!.profilesByPolicy, `js: partition ${p}'s entries per merge policy`);
      }
      // A profile of a partition not asked for is refused, not counted somewhere.
      await assert.rejects(evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 3, backend: "js", split: { partitions: [0, 1], of: partitionOf } }), /^Error: profile \d+ is in partition [23], which this evaluation does not hold$/);
      await assert.rejects(evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 3, snapshots: full, split: { partitions: [0, 1], of: partitionOf } }), /^Error: profile \d+ is in partition [23], which this evaluation does not hold$/);
    } finally {
      await Promise.all([all.close(), ...alone.map((a) => a.close())]);
    }
  });

  it("refuses partitions that are not of the split", async () => {
    assert.throws(() => shardOver(ts.store, "x", [0, PARTITIONS]), { name: "RangeError", message: "partition 4 is not one of 0…3" });
    const a = shardOver(ts.store, "x", [0]);
    try {
      assert.throws(() => a.hold([-1]), { name: "RangeError", message: "partition -1 is not one of 0…3" });
      assert.deepEqual(a.heldPartitions(), [0]);
    } finally {
      await a.close();
    }
  });
});
