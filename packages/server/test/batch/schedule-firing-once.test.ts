/**
 * A schedule fires exactly once per due time (issue #43): two scheduler passes over one database
 * (two hubs) create one job, and a pass after a crash between the job and the schedule's
 * `lastFiredAt` record creates none; a job created with an id that exists is refused as a duplicate.
 * Also `batch.scheduleTickMs`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/index.js";
import { DuplicateJobError, JobService } from "../../src/batch/jobs/job-service.js";
import type { JobRunner } from "../../src/batch/jobs/job-runner.js";
import { firingJobId, ScheduleService } from "../../src/batch/schedules/schedule-service.js";
import { openBatchRepository } from "../../src/batch/store/open.js";
import type { BatchRepository } from "../../src/batch/store/types.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { applyConfigFile, ConfigError, defaultConfig } from "../../src/platform/config.js";
import { ORG_A, testConfig } from "../helpers/server-harness.js";
import { createTestStore } from "../helpers/test-store.js";

const T0 = Date.UTC(2026, 10, 21, 12, 0, 30);
const CTX = { orgId: ORG_A, sandbox: { sandboxId: "sb-once", sandboxName: "prod", type: "production" as const, default: true } };
const SCOPE = { orgId: ORG_A, sandboxName: "prod" };

/** A hub's scheduler: its own repository connection and job service; enqueued jobs are counted, not run. */
function hub(repo: BatchRepository, clock: ManualClock, enqueued: string[]): { jobs: JobService; schedules: ScheduleService } {
  // "*" lists the sandbox's batch definitions: none here (the job is created all the same).
  const metadata = { definitions: { list: async () => ({ items: [], total: 0 }) } } as unknown as MetadataStore;
  const runner = { enqueue: async (_scope: unknown, id: string) => void enqueued.push(id) } as unknown as JobRunner;
  const jobs = new JobService(metadata, repo, runner, clock);
  return { jobs, schedules: new ScheduleService(repo, jobs, clock) };
}

async function jobIds(repo: BatchRepository): Promise<string[]> {
  return (await repo.list("segment-job", SCOPE, { direction: "asc", offset: 0, limit: 100 })).items.map((r) => r.id).sort();
}

describe("a schedule fires once per due time", () => {
  it("two hubs' passes at the same time create one job, with the id of the due time", async () => {
    const store = await createTestStore("schedule-once-race");
    const config = testConfig(store);
    const repos = [openBatchRepository(config), openBatchRepository(config)];
    try {
      const clock = new ManualClock(T0);
      const enqueued: string[] = [];
      const [a, b] = repos.map((r) => hub(r, clock, enqueued));
      const s = await a!.schedules.create(CTX, { name: "every minute", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 * * * * ?", state: "active" });
      assert.deepEqual(await Promise.all([a!.schedules.tick(), b!.schedules.tick()]), [[], []], "nothing due yet");
      clock.advance(40_000);
      const [x, y] = await Promise.all([a!.schedules.tick(), b!.schedules.tick()]);
      const due = Date.UTC(2026, 10, 21, 12, 1, 0);
      assert.deepEqual([...x!, ...y!], [firingJobId(s.id, due)]);
      assert.equal(a!.schedules.stats.alreadyFired + b!.schedules.stats.alreadyFired, 1);
      assert.deepEqual(await jobIds(repos[0]!), [firingJobId(s.id, due)]);
      assert.deepEqual(enqueued, [firingJobId(s.id, due)]);
      // Fired: the next passes before the next minute create nothing; the next minute, one more.
      assert.deepEqual([...(await a!.schedules.tick()), ...(await b!.schedules.tick())], []);
      clock.advance(60_000);
      const next = [...(await b!.schedules.tick()), ...(await a!.schedules.tick())];
      assert.deepEqual(next, [firingJobId(s.id, due + 60_000)]);
      assert.equal((await jobIds(repos[0]!)).length, 2);
    } finally {
      for (const r of repos) await r.close();
      await store.dispose();
    }
  });

  it("a pass after a crash between the job and lastFiredAt creates no second job, and moves lastFiredAt", async () => {
    const store = await createTestStore("schedule-once-crash");
    const config = testConfig(store);
    const repo = openBatchRepository(config);
    try {
      const clock = new ManualClock(T0);
      const enqueued: string[] = [];
      const h = hub(repo, clock, enqueued);
      const s = await h.schedules.create(CTX, { name: "every minute", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 * * * * ?", state: "active" });
      clock.advance(40_000);
      const due = Date.UTC(2026, 10, 21, 12, 1, 0);
      // The dead holder created the firing's job, then died before recording the firing.
      await h.jobs.create(CTX, { id: firingJobId(s.id, due), segmentIds: ["*"], source: "scheduler", requestId: "r1", properties: { scheduleId: s.id } });
      assert.deepEqual(await h.schedules.tick(), []);
      assert.equal(h.schedules.stats.alreadyFired, 1);
      assert.deepEqual(await jobIds(repo), [firingJobId(s.id, due)]);
      assert.equal((await h.schedules.get(CTX, s.id)).nextRunTime, "2026-11-21T12:02:00.000Z");
      assert.deepEqual(await h.schedules.tick(), []);
      assert.equal(h.schedules.stats.alreadyFired, 1, "lastFiredAt moved: the firing is not looked at again");
    } finally {
      await repo.close();
      await store.dispose();
    }
  });

  it("a job created with an id that exists: DuplicateJobError, nothing enqueued; another id is created", async () => {
    const store = await createTestStore("schedule-once-dup");
    const repo = openBatchRepository(testConfig(store));
    try {
      const enqueued: string[] = [];
      const { jobs } = hub(repo, new ManualClock(T0), enqueued);
      const input = { id: "11111111-2222-5333-8444-555555555555", segmentIds: ["*"], source: "scheduler" as const, requestId: "r" };
      assert.equal((await jobs.create(CTX, input)).id, input.id);
      await assert.rejects(jobs.create(CTX, input), (e: unknown) => e instanceof DuplicateJobError && e.message === "segment job 11111111-2222-5333-8444-555555555555 exists already");
      assert.deepEqual(enqueued, [input.id]);
      const { id: _taken, ...rest } = input;
      const other = await jobs.create(CTX, rest);
      assert.notEqual(other.id, input.id);
      assert.equal((await jobIds(repo)).length, 2);
    } finally {
      await repo.close();
      await store.dispose();
    }
  });
});

describe("batch.scheduleTickMs", () => {
  it("sets the scheduler's period; bad values are refused naming the key", () => {
    assert.deepEqual(applyConfigFile(defaultConfig(), { batch: { scheduleTickMs: 1000, defaultSchedule: false } }, "f.json").batch, { scheduleTickMs: 1000, defaultSchedule: false });
    for (const bad of [0, 99, 1.5, "1000", 86_400_001]) {
      assert.throws(() => applyConfigFile(defaultConfig(), { batch: { scheduleTickMs: bad } }, "f.json"), new ConfigError("f.json: batch.scheduleTickMs must be an integer from 100 to 86400000 (ms)"));
    }
  });
});
