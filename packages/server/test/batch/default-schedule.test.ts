/**
 * Every sandbox's default daily schedule (#39, item 1), over real HTTP with the test clock
 * (`POST /admin/clock` moves it and runs the scheduler's pass): a batch audience saved without
 * any schedule call is evaluated once the daily time has passed; the schedule is listed with its
 * next run, can be turned off, moved, replaced or deleted; it is created once per sandbox, across
 * restarts and two services racing; `batch.defaultSchedule` sets its time or turns it off.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createLogger, ManualClock, startServer, type RunningServer } from "../../src/index.js";
import { JobService } from "../../src/batch/jobs/job-service.js";
import { ScheduleService, type ScheduleView } from "../../src/batch/schedules/schedule-service.js";
import { openBatchRepository } from "../../src/batch/store/open.js";
import { applyConfigFile, defaultConfig, ConfigError, loadConfig } from "../../src/platform/config.js";
import { DEFS, OPERATOR_TOKEN, ORG_A, ORG_B, PROFILE_CLASS, TOKEN_B, client, definitionBody, obj, profileDataset, testConfig, xdmMessage, type Client } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
const HOUR = 3600_000;
const SCHEDULES = "/data/core/ups/config/schedules";
const JOBS = "/data/core/ups/segment/jobs";

interface Page { _page: { totalCount: number }; children: ScheduleView[] }

async function start(store: TestStoreHandle, clock: ManualClock, patch: Parameters<typeof testConfig>[1] = () => {}): Promise<RunningServer> {
  // The server's own default (testConfig turns the daily schedule off for the other suites).
  const config = testConfig(store, (c) => {
    delete c.batch;
    patch(c);
  });
  return startServer(config, { logger: createLogger("silent"), store: await store.open(), testClock: clock });
}

describe("the default daily schedule", () => {
  let store: TestStoreHandle;
  let server: RunningServer;
  let a: Client;
  let operator: Client;
  const clock = new ManualClock(T0);
  /** Moves the test clock to `at` through the API (which runs the scheduler's pass). */
  const moveTo = async (at: number) => {
    const r = await operator.post("/admin/clock", { advanceMs: at - clock.now() });
    assert.equal(r.status, 200, r.text);
  };
  const jobs = async (c: Client = a) => (obj((await c.get(`${JOBS}?limit=100`)).json).children as Array<{ id: string; status: string; source: string; properties?: Record<string, unknown>; metrics: { segmentedProfileCounter?: Record<string, number> } }>);
  const settled = async (c: Client = a) => {
    for (let i = 0; ; i++) {
      const all = await jobs(c);
      if (all.every((j) => j.status === "SUCCEEDED" || j.status === "FAILED")) return all;
      assert.ok(i < 400, JSON.stringify(all));
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  before(async () => {
    store = await createTestStore("default-schedule");
    server = await start(store, clock);
    a = client(server.url);
    operator = client(server.url, { token: OPERATOR_TOKEN, apiKey: null, org: null, sandbox: null });
    const crm = await profileDataset(a, "crm", PROFILE_CLASS);
    for (let i = 0; i < 12; i++) {
      const entity = { identityMap: { Email: [{ id: `p${i}@example.com`, primary: true }] }, homeAddress: { countryCode: i % 3 === 0 ? "US" : "FR" } };
      const r = await a.post("/collection/default-schedule?syncValidation=true", xdmMessage(crm, PROFILE_CLASS, entity));
      assert.equal(r.status, 200, r.text);
    }
  });
  after(async () => {
    await server?.close();
    await store?.dispose();
  });

  it("evaluates a batch audience saved without any schedule call once the daily time has passed", async () => {
    const def = await a.post(DEFS, definitionBody("US customers", 'homeAddress.countryCode = "US"'));
    assert.equal(def.status, 200, def.text);
    const id = obj(def.json).id as string;
    // Nobody has listed schedules in this sandbox: the scheduler's pass alone must find its daily run.
    await moveTo(Date.UTC(2026, 10, 22, 0, 59, 59));
    assert.deepEqual(await jobs(), [], "not before 01:00 UTC");
    await moveTo(Date.UTC(2026, 10, 22, 1, 0, 0));
    const [job, ...more] = await settled();
    assert.deepEqual(more, []);
    assert.equal(job!.status, "SUCCEEDED");
    assert.equal(job!.source, "scheduler");
    assert.equal(job!.metrics.segmentedProfileCounter?.[id], 4);
    // Its run is recorded against the default schedule, listed with the next one.
    const list = obj((await a.get(SCHEDULES)).json) as unknown as Page;
    assert.equal(list._page.totalCount, 1);
    const s = list.children[0]!;
    assert.equal(job!.properties?.scheduleId, s.id);
    assert.deepEqual({ name: s.name, type: s.type, segments: s.properties.segments, schedule: s.schedule, state: s.state, nextRunTime: s.nextRunTime }, {
      name: "profile-default", type: "batch_segmentation", segments: ["*"], schedule: "0 0 1 * * ?", state: "active", nextRunTime: "2026-11-23T01:00:00.000Z",
    });
    assert.deepEqual(obj((await a.get(`${SCHEDULES}/${s.id}`)).json), s);
  });

  it("another organization's sandbox has its own, and cannot see this one", async () => {
    const b = client(server.url, { token: TOKEN_B, org: ORG_B });
    const mine = (obj((await a.get(SCHEDULES)).json) as unknown as Page).children[0]!;
    const theirs = obj((await b.get(SCHEDULES)).json) as unknown as Page;
    assert.equal(theirs._page.totalCount, 1);
    assert.notEqual(theirs.children[0]!.id, mine.id);
    assert.equal((await b.get(`${SCHEDULES}/${mine.id}`)).status, 404);
    assert.equal((await b.patch(`${SCHEDULES}/${mine.id}`, [{ op: "replace", path: "/state", value: "inactive" }])).status, 404);
    assert.equal((obj((await a.get(`${SCHEDULES}/${mine.id}`)).json) as unknown as ScheduleView).state, "active");
  });

  it("turned off with PATCH it does not run; moved to 03:30 it runs then", async () => {
    const s = (obj((await a.get(SCHEDULES)).json) as unknown as Page).children[0]!;
    assert.equal((await a.patch(`${SCHEDULES}/${s.id}`, [{ op: "replace", path: "/state", value: "inactive" }])).status, 204);
    assert.equal((obj((await a.get(`${SCHEDULES}/${s.id}`)).json) as unknown as ScheduleView).nextRunTime, null);
    const before = (await jobs()).length;
    await moveTo(Date.UTC(2026, 10, 23, 2, 0, 0));
    assert.equal((await settled()).length, before, "off: no run at 01:00");
    assert.equal((await a.patch(`${SCHEDULES}/${s.id}`, [{ op: "add", path: "/state", value: "active" }, { op: "add", path: "/schedule", value: "0 30 3 * * ?" }])).status, 204);
    assert.equal((obj((await a.get(`${SCHEDULES}/${s.id}`)).json) as unknown as ScheduleView).nextRunTime, "2026-11-23T03:30:00.000Z");
    await moveTo(Date.UTC(2026, 10, 23, 3, 30, 0));
    assert.equal((await settled()).length, before + 1);
  });

  it("is not created again on restart, nor after it was deleted", async () => {
    const s = (obj((await a.get(SCHEDULES)).json) as unknown as Page).children[0]!;
    await server.close();
    server = await start(store, clock);
    a = client(server.url);
    operator = client(server.url, { token: OPERATOR_TOKEN, apiKey: null, org: null, sandbox: null });
    const again = obj((await a.get(SCHEDULES)).json) as unknown as Page;
    assert.deepEqual(again.children.map((c) => [c.id, c.schedule]), [[s.id, "0 30 3 * * ?"]]);
    assert.equal((await a.delete(`${SCHEDULES}/${s.id}`)).status, 204);
    await server.close();
    server = await start(store, clock);
    a = client(server.url);
    operator = client(server.url, { token: OPERATOR_TOKEN, apiKey: null, org: null, sandbox: null });
    assert.equal((obj((await a.get(SCHEDULES)).json) as unknown as Page)._page.totalCount, 0);
    const before = (await jobs()).length;
    await moveTo(clock.now() + 48 * HOUR);
    assert.equal((await settled()).length, before, "deleted: no daily run");
  });

  it("an explicit POST replaces the default schedule; a second POST is refused as before", async () => {
    // The dev sandbox of org A still has its untouched default.
    const dev = client(server.url, { sandbox: "dev" });
    const def = (obj((await dev.get(SCHEDULES)).json) as unknown as Page).children[0]!;
    assert.equal(def.name, "profile-default");
    const mine = await dev.post(SCHEDULES, { name: "nightly", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 0 4 * * ?", state: "active" });
    assert.equal(mine.status, 200, mine.text);
    const list = obj((await dev.get(SCHEDULES)).json) as unknown as Page;
    assert.deepEqual(list.children.map((c) => [c.name, c.schedule]), [["nightly", "0 0 4 * * ?"]]);
    assert.equal((await dev.get(`${SCHEDULES}/${def.id}`)).status, 404);
    const second = await dev.post(SCHEDULES, { name: "again", type: "batch_segmentation", properties: { segments: ["*"] } });
    assert.equal(second.status, 400);
    assert.equal((obj(second.json).errors as Record<string, Array<{ code: string; message: string }>>)["400"]![0]!.message, `This sandbox already has a batch segmentation schedule (${obj(mine.json).id as string}); update or delete it`);
  });
});

describe("created once per sandbox, whoever asks first", () => {
  it("two services over the same store racing on a fresh sandbox make one schedule with one id", async () => {
    const store = await createTestStore("default-schedule-race");
    try {
      const config = testConfig(store);
      const clock = new ManualClock(T0);
      const repoA = openBatchRepository(config);
      const repoB = openBatchRepository(config);
      const services = [repoA, repoB].map((repo) => new ScheduleService(repo, {} as JobService, clock, undefined, { defaultCron: "0 0 1 * * ?" }));
      const ctx = { orgId: ORG_A, sandbox: { sandboxId: "sb-race", sandboxName: "prod", type: "production" as const, default: true } };
      await Promise.all([services[0]!.ensureDefault(ctx), services[1]!.ensureDefault(ctx), services[0]!.list(ctx, 0, 10), services[1]!.list(ctx, 0, 10)]);
      const [x, y] = await Promise.all(services.map((s) => s.list(ctx, 0, 10)));
      assert.equal(x!.total, 1);
      assert.deepEqual(y!.items.map((s) => s.id), x!.items.map((s) => s.id));
      await repoA.close();
      await repoB.close();
    } finally {
      await store.dispose();
    }
  });
});

describe("batch.defaultSchedule", () => {
  it("false: no default schedule; a cron sets its time; bad values are refused naming the key", async () => {
    const store = await createTestStore("default-schedule-config");
    const clock = new ManualClock(T0);
    const off = await start(store, clock, (c) => {
      c.batch = { defaultSchedule: false };
    });
    try {
      assert.equal((obj((await client(off.url).get(SCHEDULES)).json) as unknown as Page)._page.totalCount, 0);
    } finally {
      await off.close();
    }
    const store2 = await createTestStore("default-schedule-config2");
    const six = await start(store2, clock, (c) => {
      c.batch = { defaultSchedule: "0 15 6 * * ?" };
    });
    try {
      const s = (obj((await client(six.url).get(SCHEDULES)).json) as unknown as Page).children[0]!;
      assert.deepEqual([s.schedule, s.nextRunTime], ["0 15 6 * * ?", "2026-11-22T06:15:00.000Z"]);
    } finally {
      await six.close();
      await store.dispose();
      await store2.dispose();
    }
    assert.deepEqual(applyConfigFile(defaultConfig(), { batch: { defaultSchedule: false } }, "f.json").batch, { defaultSchedule: false });
    assert.throws(() => applyConfigFile(defaultConfig(), { batch: { defaultSchedule: 3 } }, "f.json"), new ConfigError('f.json: batch.defaultSchedule must be a Quartz cron expression (e.g. "0 0 1 * * ?") or false'));
    assert.throws(() => applyConfigFile(defaultConfig(), { batch: { daily: true } }, "f.json"), new ConfigError('f.json: unknown key "batch.daily"'));
    assert.deepEqual(loadConfig({ env: { SEGMENTD_BATCH_DEFAULT_SCHEDULE: "off" }, cwd: "/nonexistent-dir" }).batch, { defaultSchedule: false });
    assert.throws(() => new ScheduleService({} as never, {} as JobService, clock, undefined, { defaultCron: "0 0 25 * * ?" }), /^Error: batch.defaultSchedule "0 0 25 \* \* \?": Invalid hours value "25" \(allowed 0-23\)$/);
  });
});
