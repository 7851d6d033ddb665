/**
 * Previews, builder estimates, edit impact and a computed attribute's first count over the worker fleet (#44), the protocol end to end
 * over a real nats-server and PostgreSQL: the hub's FleetReadsClient and two workers answering
 * over their shards (each its own store connection). The merged sample counts and comparisons
 * equal the in-process ones over every profile (inSegment reading stored memberships included);
 * a partition held by two workers counts once; a partition no one held is asked for again once a
 * worker holds it; a worker's error reaches the hub with its status, code and message.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { parse } from "@segmentd/pql";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { evaluateJob } from "../../src/batch/engine/evaluate-job.js";
import { mergeComparisons, mergeCounts, mergeSamples } from "../../src/batch/previews/fleet-reads.js";
import { statusOverrides } from "../../src/batch/columnar/snapshot.js";
import { qualifyOnSnapshot } from "../../src/batch/engine/columnar-engine.js";
import { compareEdit, type ImpactSide } from "../../src/batch/previews/impact-service.js";
import { inSegmentMemberPids, previewPolicy, sampleOnSnapshot, type SampleCount } from "../../src/batch/previews/preview-service.js";
import { WorkerShard } from "../../src/batch/shards/worker-shard.js";
import { FleetReadsClient, serveShardReads } from "../../src/cluster/fleet-reads.js";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { partitionFunction } from "../../src/cluster/partitions.js";
import { defaultConfig } from "../../src/platform/config.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import { NO_MERGE_POLICY } from "../../src/profiles/types.js";
import { EvaluationBudget } from "../../src/services/evaluation-budget.js";
import { ApiError } from "../../src/services/errors.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { definition, PDG, populate, SCOPE } from "../batch/fixtures.js";
import { NOW } from "../batch/pql-gen.js";
import { dropTestSchema, testDatabaseUrl } from "../helpers/test-store.js";

const PARTITIONS = 4;
const schema = `t_fleet_reads_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
const AGE = "person.age > 20";
const BUYERS = 'xEvent[eventType = "purchase"].count() > 0';

describe("previews, estimates and edit impact over the worker fleet (NATS + PostgreSQL)", { timeout: 120_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  let hubStore: PostgresProfileStore;
  let tenants: TenantDirectory;
  let hub: NatsConnection;
  const conns: NatsConnection[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  const errors: unknown[] = [];
  /** The workers the hub counts as alive (their lease heartbeats, here set by the test). */
  let live = new Set<string>();

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-fleet-reads-"));
    server = await startNatsServer({ dir, domain: "hub" });
    hubStore = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
    await populate(hubStore, 300, 45);
    // Stored memberships of d0 (what inSegment reads), written as an in-process job writes them.
    const d0 = definition("d0", AGE, { excludeOptOut: false, policy: { ...NO_MERGE_POLICY, id: "none" } });
    const out = await evaluateJob(hubStore, SCOPE, [d0], { now: NOW, snapshots: new SnapshotCache() });
    await hubStore.applyMembershipSets(SCOPE, out.memberships, { source: "batch", at: NOW });
    const config = defaultConfig();
    config.organizations = [{ id: SCOPE.orgId, sandboxes: [{ name: SCOPE.sandboxName, type: "production", default: true }] }];
    tenants = new TenantDirectory(config);
    hub = await nats();
  });
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    live = new Set();
  });
  after(async () => {
    for (const c of conns) await c.close().catch(() => {});
    await hubStore.close();
    await dropTestSchema(schema);
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  async function nats(): Promise<NatsConnection> {
    const nc = await connect({ servers: server.url });
    conns.push(nc);
    return nc;
  }

  /** A worker answering reads over its shard of `held`. */
  async function worker(id: string, held: number[], o: { tenants?: TenantDirectory } = {}) {
    const store = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
    const shard = new WorkerShard({ store, partitions: PARTITIONS, held, partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, PARTITIONS) });
    const unserve = await serveShardReads({ nc: await nats(), shard, tenants: o.tenants ?? tenants, workerId: id, partitions: PARTITIONS, onError: (e) => errors.push(e) });
    live.add(id);
    closers.push(async () => {
      unserve();
      await shard.close();
      await store.close();
    });
    return shard;
  }

  const client = (o: { idleMs?: number; deadlineMs?: number } = {}) => new FleetReadsClient({ nc: hub, partitions: PARTITIONS, liveWorkers: async () => live, ...o });
  /** The all-in-one's count: the resident snapshot of the whole store. */
  async function inProcessSample(text: string, graphType: "none" | "pdg", fraction: number, keep: number): Promise<SampleCount> {
    const q = parse(text);
    const snap = await new SnapshotCache().get(hubStore, SCOPE, previewPolicy(graphType), { events: true });
    return sampleOnSnapshot(snap, q, fraction, NOW, await inSegmentMemberPids(hubStore, SCOPE, q), keep, new EvaluationBudget(defaultConfig().limits, { deadline: false }), null);
  }
  const sorted = (r: SampleCount) => ({ ...r, members: [...r.members].sort((a, b) => a.profileId.localeCompare(b.profileId)) });

  it("a preview's and the builder's sample counts equal the in-process ones; the edit impact's groups too", async () => {
    await worker("wa", [0, 1]);
    await worker("wb", [2, 3]);
    const texts = [AGE, BUYERS, `(${AGE}) and (${BUYERS})`, 'inSegment("d0") and homeAddress.countryCode = "US"'];
    for (const [graphType, fraction] of [["none", 1], ["pdg", 1], ["none", 0.5]] as const) {
      const answers = await client().read(SCOPE, { kind: "sample", graphType, expressions: texts, fraction, keepMembers: 10_000, now: NOW });
      assert.deepEqual([...answers.keys()].sort(), [0, 1, 2, 3]);
      const merged = mergeSamples(answers, texts.length, 10_000);
      for (const [i, t] of texts.entries()) {
        const ref = await inProcessSample(t, graphType, fraction, 10_000);
        assert.ok(i === 3 || ref.matched > 0, `${t} has members`);
        assert.deepEqual(sorted(merged[i]!), sorted(ref), `${t} (${graphType}, ${fraction})`);
      }
    }
    // Members kept: at most the preview's number, by partition.
    const few = mergeSamples(await client().read(SCOPE, { kind: "sample", graphType: "none", expressions: [AGE], fraction: 1, keepMembers: 7, now: NOW }), 1, 7);
    assert.equal(few[0]!.members.length, 7);

    const side = (text: string, excludeOptOut = true): ImpactSide => ({ query: parse(text), text, policy: NO_MERGE_POLICY, mergePolicyId: "none", excludeOptOut });
    for (const [b, a] of [[side(AGE), side(BUYERS)], [side(AGE), side(AGE, false)], [side(AGE), { ...side(AGE), policy: PDG }]] as const) {
      const ref = await compareEdit(hubStore, new SnapshotCache(), SCOPE, b, a, NOW, 1_000);
      const wire = (s: ImpactSide) => ({ text: s.text, policy: s.policy, excludeOptOut: s.excludeOptOut });
      const merged = mergeComparisons(await client().read(SCOPE, { kind: "compare", before: wire(b), after: wire(a), now: NOW, wanted: 1_000 }), 1_000);
      const ids = (g: { sample: { profileId: string }[] }) => g.sample.map((s) => s.profileId).sort();
      assert.deepEqual(
        { profiles: merged.profiles, before: merged.before, after: merged.after, enter: [merged.enter.count, merged.enter.pids.sort()], leave: [merged.leave.count, merged.leave.pids.sort()], stay: [merged.stay.count, merged.stay.pids.sort()] },
        { profiles: ref.profiles, before: ref.before, after: ref.after, enter: [ref.enter.count, ids(ref.enter)], leave: [ref.leave.count, ids(ref.leave)], stay: [ref.stay.count, ids(ref.stay)] },
        `${b.text} → ${a.text}`,
      );
    }
    // A computed attribute's first evaluation: profiles and those qualifying (opted-out ones included).
    for (const [text, policy] of [[BUYERS, NO_MERGE_POLICY], [AGE, PDG]] as const) {
      const snap = await new SnapshotCache().get(hubStore, SCOPE, policy, { events: true });
      const qual = await qualifyOnSnapshot(null, snap, parse(text), NOW, statusOverrides(snap, new Map()), false, new EvaluationBudget(defaultConfig().limits, { deadline: false }));
      const merged = mergeCounts(await client().read(SCOPE, { kind: "count", text, policy, now: NOW }));
      assert.deepEqual(merged, { profiles: snap.profileCount, qualifying: qual.reduce((x, y) => x + y, 0) }, `count of ${text}`);
      assert.ok(merged.qualifying > 0 && merged.qualifying < merged.profiles);
    }
    assert.deepEqual(errors, []);
  });

  it("a partition held by two workers counts once; one no worker held is asked for again once a worker holds it", async () => {
    await worker("wa", [0, 1, 2]);
    const b = await worker("wb", [2]);
    const ref = await inProcessSample(AGE, "none", 1, 0);
    // Partition 3 is nobody's: the read waits, asks again, and ends once wb holds it.
    const reading = client().read(SCOPE, { kind: "sample", graphType: "none", expressions: [AGE], fraction: 1, keepMembers: 0, now: NOW });
    await new Promise((r) => setTimeout(r, 1_500));
    await b.hold([2, 3]);
    const merged = mergeSamples(await reading, 1, 0);
    assert.deepEqual(merged[0], ref);
    assert.deepEqual(errors, []);
  });

  it("a worker's error reaches the hub (an API error with its status and code); no worker alive ends the read", async () => {
    // The worker's sandbox limits stop the evaluation at once: its 503 is the read's, as in process.
    const tight = defaultConfig();
    tight.organizations = [{ id: SCOPE.orgId, sandboxes: [{ name: SCOPE.sandboxName, type: "production", default: true, limits: { evaluationDeadlineMs: 0 } }] }];
    await worker("wa", [0, 1, 2, 3], { tenants: new TenantDirectory(tight) });
    await assert.rejects(client().read(SCOPE, { kind: "sample", graphType: "none", expressions: [AGE], fraction: 1, keepMembers: 0, now: NOW }), (e: ApiError) => {
      assert.ok(e instanceof ApiError, String(e));
      assert.equal(e.status, 503);
      assert.equal(e.code, "SEGMENTD-EVALUATION-BUDGET-503");
      assert.match(e.message, /^Evaluation stopped at its deadline of 0 ms \(limits\.evaluationDeadlineMs\) after \d+ profile evaluations; retry later or narrow the expression$/);
      return true;
    });
    // Text that is not PQL (the hub parses before it asks; a worker refuses it all the same).
    await assert.rejects(client().read(SCOPE, { kind: "sample", graphType: "none", expressions: ["person.age >"], fraction: 1, keepMembers: 0, now: NOW }), (e: Error) => e.message.startsWith("worker wa: "));
    for (const c of closers.splice(0).reverse()) await c();
    live = new Set();

    const bare = defaultConfig();
    bare.organizations = [{ id: "OTHER@AdobeOrg", sandboxes: [{ name: "prod", type: "production", default: true }] }];
    await worker("wc", [0, 1, 2, 3], { tenants: new TenantDirectory(bare) });
    await assert.rejects(client().read(SCOPE, { kind: "sample", graphType: "none", expressions: [AGE], fraction: 1, keepMembers: 0, now: NOW }), { message: `worker wc: sandbox prod of ${SCOPE.orgId} is not configured on worker wc` });
    for (const c of closers.splice(0).reverse()) await c();
    live = new Set();

    await assert.rejects(client({ idleMs: 300 }).read(SCOPE, { kind: "sample", graphType: "none", expressions: [AGE], fraction: 1, keepMembers: 0, now: NOW }), {
      message: `no worker is running: with batch.onWorkers, previews, estimates and edit impact are evaluated by \`segmentd worker\` processes (${PARTITIONS} of ${PARTITIONS} partitions not answered)`,
    });
    assert.deepEqual(errors, []);
  });
});
