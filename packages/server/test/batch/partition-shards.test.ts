/**
 * Batch shards (issue #44, first part): a partition's columnar snapshot holds exactly the
 * partition's profiles; a job's evaluation over every partition's shard gives the members,
 * transitions and counters of one evaluation over all profiles (segments of segments included),
 * before and after memberships are stored and data changes; a shard is refreshed with only its
 * partition's changed profiles; a restart loads each shard from its file and refreshes it — no
 * listing, no full scan. Runs on the embedded store (unit) and PostgreSQL (pg).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { evaluateJob, type DefinitionCounters, type EvaluationOutcome } from "../../src/batch/engine/evaluate-job.js";
import { PartitionShards, type ShardSource } from "../../src/batch/shards/partition-shards.js";
import { partitionFunction } from "../../src/cluster/partitions.js";
import { defaultConfig } from "../../src/platform/config.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ScanOptions } from "../../src/profiles/store.js";
import { TenantDirectory, type TenantContext } from "../../src/services/tenancy.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";
import { NOW } from "./pql-gen.js";
import { PDG, SCOPE, definition, populate, type Population } from "./fixtures.js";

const PARTITIONS = 4;
const ALL = [0, 1, 2, 3];
const DEFS = [
  definition("d0", "person.age > 20", { excludeOptOut: false }),
  definition("d1", 'xEvent[eventType = "purchase"].count() > 0', { excludeOptOut: false }),
  definition("d2", 'inSegment("d0") and inSegment("d1")', { excludeOptOut: false }),
  definition("d3", 'not inSegment("d1") or tier = "changed"', { excludeOptOut: false }),
];

/** Transitions of an outcome, as comparable rows. */
function transitions(outcomes: Iterable<EvaluationOutcome>): string[] {
  const rows: string[] = [];
  for (const o of outcomes) {
    for (const m of o.memberships) {
      for (const [kind, list] of [["entered", m.entered], ["reentered", m.reentered], ["exited", m.exited]] as const) for (const pid of list) rows.push(`${m.definitionId} ${kind} ${pid}`);
    }
  }
  return rows.sort();
}

function counters(outcomes: Iterable<EvaluationOutcome>): Record<string, Omit<DefinitionCounters, "byNamespace">> {
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

describe("partition shards", () => {
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

  const shardsOver = (store: ShardSource) => new PartitionShards({ store, partitions: PARTITIONS, dir, storeIdentity: ts.location, partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, PARTITIONS) });

  it("holds each partition's profiles in its shard, and evaluates a job as one evaluation over every profile does", async () => {
    const shards = shardsOver(ts.store);
    try {
      const whole = await full.get(ts.store, SCOPE, PDG, { events: true });
      const seen: string[] = [];
      for (const p of ALL) {
        const snap = await shards.snapshot(tenant, p, PDG, { events: true });
        for (const id of snap.base.profileIds) {
          assert.equal(partitionOf(id), p, `profile ${id} in partition ${p}'s shard`);
          seen.push(id);
        }
        assert.equal([...shards.stats(p).values()][0]?.mode, "built");
      }
      assert.deepEqual(seen.sort(), [...whole.base.profileIds].sort(), "the shards together hold every profile once");
      for (const p of ALL) assert.ok(seen.some((id) => partitionOf(id) === p), `partition ${p} holds profiles`);

      const one = await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW, snapshots: full });
      const split = await shards.evaluate(tenant, ALL, DEFS, { now: NOW });
      assert.deepEqual(transitions(split.values()), transitions([one]));
      assert.deepEqual(counters(split.values()), counters([one]));
      for (const [p, o] of split) for (const m of o.memberships) for (const pid of [...m.entered, ...m.reentered, ...m.exited]) assert.equal(partitionOf(String(pid)), p);
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
      const again = await shards.evaluate(tenant, ALL, DEFS, { now: NOW + 1 });
      assert.deepEqual(transitions(again.values()), transitions([two]));
      assert.deepEqual(counters(again.values()), counters([two]));
      assert.ok(transitions([two]).length > 0, "the second job moves memberships");
      const touched = new Set(changed.map(partitionOf));
      for (const p of ALL) {
        const s = [...shards.stats(p).values()][0]!;
        assert.equal(s.mode, touched.has(p) ? "incremental" : "unchanged", `partition ${p}`);
        if (touched.has(p)) assert.equal(s.changed, changed.filter((id) => partitionOf(id) === p).length, "only the partition's changed profiles are read");
      }
    } finally {
      await shards.close();
    }
  });

  it("loads each shard from its file after a restart and refreshes it with the profiles changed since: no listing of the sandbox, no scan of whole partitions", async () => {
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
    // The first shards wrote their files in the background: a new process finds them.
    const restarted = shardsOver(counted);
    try {
      const whole = await full.get(ts.store, SCOPE, PDG, { events: true });
      let held = 0;
      for (const p of ALL) {
        const snap = await restarted.snapshot(tenant, p, PDG, { events: true });
        held += snap.profileCount;
        assert.equal([...restarted.stats(p).values()][0]?.mode, "loaded", `partition ${p} loaded from its file`);
      }
      assert.equal(held, whole.profileCount);
      // The files are the builds' (an incremental refresh writes none): the two profiles changed since are read again, nothing else.
      assert.deepEqual(calls, { listProfileIds: 0, fullScans: 0, scannedIds: 2 });
      const out = await restarted.evaluate(tenant, ALL, DEFS, { now: NOW + 1 });
      assert.deepEqual(transitions(out.values()), transitions([await evaluateJob(ts.store, SCOPE, DEFS, { now: NOW + 1, snapshots: full })]));
      await assert.rejects(restarted.snapshot(tenant, PARTITIONS, PDG, { events: true }), /partition 4 is not one of 0…3/);
    } finally {
      await restarted.close();
    }
  });
});
