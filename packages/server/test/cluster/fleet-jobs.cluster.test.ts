/**
 * Segment jobs across the worker fleet (#44), the protocol end to end over a real nats-server and
 * PostgreSQL, with the hub's FleetJobs and two workers' BatchParticipants (each its own store
 * connection and shard): the job's memberships, transitions and counters equal one evaluation
 * over every profile (segments of segments included); a worker that dies before writing has its
 * partitions written by the one that takes them over, each once; a worker's failure fails the job
 * with its reason; a cancelled job, or one withdrawn after its hub died, is written no further.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { evaluateJob, JobCancelledError, type EvaluationOutcome } from "../../src/batch/engine/evaluate-job.js";
import { WorkerShard } from "../../src/batch/shards/worker-shard.js";
import { announcement, batchJobBucket, failKey } from "../../src/cluster/batch-fanout.js";
import { BatchParticipant } from "../../src/cluster/batch-participant.js";
import { FleetJobs, JOB_PARTITIONS_KEPT_MS } from "../../src/cluster/fleet-jobs.js";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { partitionFunction } from "../../src/cluster/partitions.js";
import { defaultConfig } from "../../src/platform/config.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { populate, segmentOfSegmentsDefinitions, SCOPE, type Population } from "../batch/fixtures.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { NOW } from "../batch/pql-gen.js";
import { dropTestSchema, testDatabaseUrl } from "../helpers/test-store.js";

const PARTITIONS = 4;
const DEFS = segmentOfSegmentsDefinitions();
const schema = `t_fleet_jobs_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;

describe("segment jobs on the worker fleet (NATS + PostgreSQL)", { timeout: 120_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  let hubStore: PostgresProfileStore;
  let tenants: TenantDirectory;
  let kv: KV;
  let pop: Population;
  const conns: NatsConnection[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  const errors: unknown[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-fleet-jobs-"));
    server = await startNatsServer({ dir, domain: "hub" });
    hubStore = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
    pop = await populate(hubStore, 80, 44);
    const config = defaultConfig();
    config.organizations = [{ id: SCOPE.orgId, sandboxes: [{ name: SCOPE.sandboxName, type: "production", default: true }] }];
    tenants = new TenantDirectory(config);
    kv = await batchJobBucket(jetstream(await nats()));
  });
  // Each test's workers stop after it, whatever it asserted.
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
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

  /** A worker: its own store connection, shard and participant over the job bucket. */
  async function worker(id: string, held: number[], opts: { start?: boolean; tenants?: TenantDirectory } = {}) {
    const store = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
    const shard = new WorkerShard({ store, partitions: PARTITIONS, held, partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, PARTITIONS) });
    const participant = new BatchParticipant({ kv: await batchJobBucket(jetstream(await nats())), shard, store, tenants: opts.tenants ?? tenants, workerId: id, partitions: PARTITIONS, pollMs: 100, onError: (e) => errors.push(e) });
    if (opts.start !== false) participant.start();
    const stop = async () => {
      await participant.stop();
      await shard.close();
      await store.close();
    };
    closers.push(stop);
    return { participant, shard, stop };
  }

  /** Whether a key holds a value (a removed one reads as its delete marker). */
  const announced = async (key: string) => (await kv.get(key))?.operation === "PUT";
  const fleet = () => new FleetJobs({ kv, store: hubStore, partitions: PARTITIONS, pollMs: 50 });
  const job = (jobId: string, at: number, isCancelled = () => false) => ({ scope: SCOPE, jobId, at, definitions: DEFS, isCancelled, onProgress: () => {} });
  /** The reference: one evaluation over every profile, at the same instant, before the job writes. */
  const reference = (at: number): Promise<EvaluationOutcome> => evaluateJob(hubStore, SCOPE, DEFS, { now: at, snapshots: new SnapshotCache() });
  const transitionsAt = async (at: number) => (await hubStore.listTransitions(SCOPE, { limit: 10_000 })).filter((t) => t.at === new Date(at).toISOString()).map((t) => `${t.definitionId} ${t.from ?? "-"}→${t.to} ${t.profileId}`).sort();
  const expected = (o: EvaluationOutcome) => o.memberships.flatMap((m) => [
    ...Array.from(m.entered, (p) => `${m.definitionId} -→realized ${p}`),
    ...Array.from(m.reentered, (p) => `${m.definitionId} exited→realized ${p}`),
    ...Array.from(m.exited, (p) => `${m.definitionId} realized→exited ${p}`),
  ]).sort();

  it("two workers write a job's partitions: its transitions and counters are one evaluation's over every profile", async () => {
    await worker("wa", [0, 1]);
    await worker("wb", [2, 3]);
    // A part of a job of more than a week before: pruned when this job completes.
    assert.equal(await hubStore.applyJobPartition({ scope: SCOPE, jobId: "job-0", partition: 0, worker: "wa", sets: [], at: NOW - JOB_PARTITIONS_KEPT_MS - 1, report: {} }), true);
    const ref = await reference(NOW);
    assert.ok(ref.writes > 0 && ref.counters.get("d2")!.qualified > 0, "the job moves memberships, the segment of segments has members");
    const out = await fleet().run(job("job-1", NOW));
    assert.deepEqual(out.counters, ref.counters);
    assert.deepEqual(out.profilesByPolicy, ref.profilesByPolicy);
    assert.equal(out.totalProfiles, ref.totalProfiles);
    assert.equal(out.writes, ref.writes);
    assert.deepEqual(await transitionsAt(NOW), expected(ref));
    const reports = await hubStore.jobPartitionReports(SCOPE, "job-1");
    assert.deepEqual(reports.map((r) => [r.partition, r.worker]), [[0, "wa"], [1, "wa"], [2, "wb"], [3, "wb"]]);
    assert.equal(await announced("job-1"), false, "the announcement is withdrawn");
    assert.deepEqual(await hubStore.jobPartitionReports(SCOPE, "job-0"), [], "the week-old job's rows are pruned");
    // Data changes (a new profile, every other one leaving d0), read by the workers' shards from the change
    // feed; the second job sees the first one's memberships: only what changes since is written.
    await ingestRecords(hubStore, SCOPE, pop.crm, [
      { index: 0, value: { identityMap: { ECID: [{ id: "P-new", primary: true }] }, person: { age: 40 }, tier: "changed" } },
      ...Array.from({ length: pop.profiles }, (_, i) => ({ index: i + 1, value: { identityMap: { ECID: [{ id: `P${i}`, primary: true }] }, person: { age: 1 } } })),
    ], { now: NOW });
    const ref2 = await reference(NOW + 1);
    assert.ok(ref2.counters.get("d0")!.exited > 0 && ref2.counters.get("d0")!.realized > 0, "the second job moves profiles in and out");
    const out2 = await fleet().run(job("job-2", NOW + 1));
    assert.deepEqual(out2.counters, ref2.counters);
    assert.deepEqual(await transitionsAt(NOW + 1), expected(ref2));
    assert.deepEqual(errors, []);
  });

  it("a worker that dies before writing: the worker that takes its partitions over writes them, each once", async () => {
    const a = await worker("wa", [0, 1]);
    // wb holds 2 and 3 but never runs (killed before it read the job).
    await worker("wb", [2, 3], { start: false });
    const at = NOW + 10;
    const ref = await reference(at);
    const run = fleet().run(job("job-3", at));
    const until = Date.now() + 20_000;
    while ((await hubStore.jobPartitionReports(SCOPE, "job-3")).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual((await hubStore.jobPartitionReports(SCOPE, "job-3")).map((r) => r.partition), [0, 1]);
    // wb's leases expire; wa takes its partitions over.
    await a.participant.held([0, 1, 2, 3]);
    const out = await run;
    assert.deepEqual(out.counters, ref.counters);
    assert.deepEqual(await transitionsAt(at), expected(ref), "every change written once");
    assert.deepEqual((await hubStore.jobPartitionReports(SCOPE, "job-3")).map((r) => [r.partition, r.worker]), [[0, "wa"], [1, "wa"], [2, "wa"], [3, "wa"]]);
  });

  it("a job withdrawn after its hub died (recovery) is written no further: a worker that reads the bucket afterwards writes none of it", async () => {
    await worker("wa", [0, 1]);
    const late = await worker("wb", [2, 3], { start: false });
    const at = NOW + 60;
    // The hub announced the job and died: nothing waits on the reports.
    await kv.put("job-8", JSON.stringify(announcement({ jobId: "job-8", orgId: SCOPE.orgId, sandboxName: SCOPE.sandboxName, at, partitions: PARTITIONS, definitions: DEFS })));
    const until = Date.now() + 20_000;
    while ((await hubStore.jobPartitionReports(SCOPE, "job-8")).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual((await hubStore.jobPartitionReports(SCOPE, "job-8")).map((r) => r.partition), [0, 1]);
    // The restarted hub's recovery withdraws it (JobRunner.recover → FleetJobs.withdraw).
    await fleet().withdraw(SCOPE, "job-8");
    assert.equal(await announced("job-8"), false);
    // Its partitions not written are closed in the store: a worker still evaluating it writes none.
    assert.deepEqual((await hubStore.jobPartitionReports(SCOPE, "job-8")).map((r) => [r.partition, r.worker]), [[0, "wa"], [1, "wa"], [2, ""], [3, ""]]);
    assert.equal(await hubStore.applyJobPartition({ scope: SCOPE, jobId: "job-8", partition: 2, worker: "wb", sets: [], at, report: {} }), false);
    late.participant.start();
    await new Promise((r) => setTimeout(r, 600));
    late.participant.kick();
    await new Promise((r) => setTimeout(r, 600));
    assert.deepEqual((await hubStore.jobPartitionReports(SCOPE, "job-8")).map((r) => [r.partition, r.worker]), [[0, "wa"], [1, "wa"], [2, ""], [3, ""]], "partitions 2 and 3 are not written");
    assert.equal(late.participant.stats.evaluations, 0);
  });

  it("a worker's failure fails the job with its reason; a cancelled job is withdrawn and written no further", async () => {
    // A worker without the sandbox configured cannot evaluate it.
    const bare = defaultConfig();
    bare.organizations = [{ id: "OTHER@AdobeOrg", sandboxes: [{ name: "prod", type: "production", default: true }] }];
    await worker("wa", [0, 1, 2, 3], { tenants: new TenantDirectory(bare) });
    await assert.rejects(fleet().run(job("job-4", NOW + 20)), { message: `worker wa: sandbox prod of ${SCOPE.orgId} is not configured on worker wa` });
    const closed = [0, 1, 2, 3].map((partition) => ({ partition, worker: "", transitions: 0, report: { withdrawn: true } }));
    assert.deepEqual(await hubStore.jobPartitionReports(SCOPE, "job-4"), closed, "nothing written, every partition closed");
    assert.equal(await announced("job-4"), false);
    assert.equal(await announced(failKey("job-4")), false);
    for (const c of closers.splice(0).reverse()) await c();

    // No worker alive: the job fails after the idle time instead of waiting for ever; with one
    // alive (its heartbeat) but not writing, it keeps waiting.
    const lonely = new FleetJobs({ kv, store: hubStore, partitions: PARTITIONS, pollMs: 50, idleMs: 300, liveWorkers: async () => 0 });
    await assert.rejects(lonely.run(job("job-6", NOW + 40)), { message: `no worker is running: with batch.onWorkers, segment jobs are evaluated by \`segmentd worker\` processes (${PARTITIONS} of ${PARTITIONS} partitions not written)` });
    assert.equal(await announced("job-6"), false);
    let cancel = false;
    const patient = new FleetJobs({ kv, store: hubStore, partitions: PARTITIONS, pollMs: 50, idleMs: 300, liveWorkers: async () => 1 });
    const waiting = patient.run(job("job-7", NOW + 50, () => cancel));
    await new Promise((r) => setTimeout(r, 800));
    cancel = true;
    await assert.rejects(waiting, JobCancelledError);

    // Cancelled before any worker wrote: nothing written, the announcement gone.
    await worker("wb", [0, 1, 2, 3], { start: false });
    await assert.rejects(fleet().run(job("job-5", NOW + 30, () => true)), JobCancelledError);
    assert.equal(await announced("job-5"), false);
    assert.deepEqual(await hubStore.jobPartitionReports(SCOPE, "job-5"), closed);
    assert.deepEqual(await transitionsAt(NOW + 30), []);
  });
});
