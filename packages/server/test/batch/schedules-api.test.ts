/**
 * Schedules over real HTTP: create / get / list / patch / delete, one batch
 * segmentation schedule per sandbox, validation errors with nothing stored,
 * and the scheduler running a job over all batch definitions when due.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "../../src/index.js";
import { demoProfile } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import type { SegmentJob } from "../../src/batch/jobs/segment-job.js";
import type { Schedule } from "../../src/batch/schedules/schedule-service.js";
import { ORG_A, call, startBatchHarness, type BatchHarness } from "./batch-harness.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const SCOPE: TenantScope = { orgId: ORG_A, sandboxName: "prod" };
const PATH = "/data/core/ups/config/schedules";

function errorOf(body: unknown): { code: string; message: string } {
  return (body as { errors: Record<string, Array<{ code: string; message: string }>> }).errors["400"]![0]!;
}

describe("schedules API and scheduler", () => {
  let h: BatchHarness & { store: TestStoreHandle };
  const clock = new ManualClock(NOW);
  const defs: string[] = [];

  before(async () => {
    h = await startBatchHarness("sched", { clock });
    const ds = (await h.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    await ingestRecords(h.profiles, SCOPE, ds, Array.from({ length: 40 }, (_, i) => ({ index: i, value: demoProfile(i, { now: NOW, seed: 9 }) })), { now: NOW });
    for (const [name, value] of [["gold", 'loyalty.tier = "gold"'], ["us", 'homeAddress.countryCode = "US"']] as const) {
      const r = await call(h, "POST", "/data/core/ups/segment/definitions", { name, expression: { type: "PQL", format: "pql/text", value }, schema: { name: "_xdm.context.profile" } });
      assert.equal(r.status, 200);
      defs.push((r.body as { id: string }).id);
    }
  });
  after(async () => {
    await h.close();
  });

  it("refuses invalid schedules and stores nothing", async () => {
    const cases: Array<[unknown, string, string]> = [
      [{ type: "batch_segmentation", properties: { segments: ["*"] } }, "SEGMENTD-BATCH-SCHEDULE-400", "name is required"],
      [{ name: "n", type: "export", properties: { segments: ["*"] } }, "SEGMENTD-BATCH-SCHEDULE-400", "type must be one of batch_segmentation"],
      [{ name: "n", type: "batch_segmentation", properties: {} }, "SEGMENTD-BATCH-SCHEDULE-400", 'properties.segments is required: a non-empty array of definition ids, or ["*"]'],
      [{ name: "n", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 0 25 * * ?" }, "SEGMENTD-BATCH-SCHEDULE-400", 'Invalid schedule "0 0 25 * * ?": Invalid hours value "25" (allowed 0-23)'],
      [{ name: "n", type: "batch_segmentation", properties: { segments: ["*"] }, state: "on" }, "SEGMENTD-BATCH-SCHEDULE-400", 'state must be "active" or "inactive"'],
    ];
    for (const [body, code, message] of cases) {
      const r = await call(h, "POST", PATH, body);
      assert.equal(r.status, 400, message);
      assert.deepEqual(errorOf(r.body), { code, message });
    }
    const list = await call(h, "GET", PATH);
    assert.equal((list.body as { _page: { totalCount: number } })._page.totalCount, 0);
  });

  it("creates, gets, lists and allows one batch segmentation schedule per sandbox", async () => {
    const r = await call(h, "POST", PATH, { name: "nightly", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 0 1 * * ?" });
    assert.equal(r.status, 200);
    const s = r.body as Schedule;
    assert.equal(s.state, "inactive", "inactive unless asked");
    assert.equal(s.createEpoch, NOW / 1000);
    assert.deepEqual((await call(h, "GET", `${PATH}/${s.id}`)).body, s);
    const list = (await call(h, "GET", PATH)).body as { _page: { totalCount: number }; children: Schedule[] };
    assert.equal(list._page.totalCount, 1);
    assert.equal(list.children[0]!.id, s.id);
    const second = await call(h, "POST", PATH, { name: "again", type: "batch_segmentation", properties: { segments: ["*"] } });
    assert.equal(second.status, 400);
    assert.deepEqual(errorOf(second.body), { code: "SEGMENTD-BATCH-SCHEDULE-EXISTS-400", message: `This sandbox already has a batch segmentation schedule (${s.id}); update or delete it` });
    const other = await call(h, "GET", `${PATH}/${s.id}`, undefined, "dev");
    assert.equal(other.status, 404);
  });

  it("an active schedule runs a job over all batch definitions when its cron fires (UTC)", async () => {
    const s = ((await call(h, "GET", PATH)).body as { children: Schedule[] }).children[0]!;
    assert.deepEqual(await h.schedules.tick(), [], "inactive: never fires");
    const p = await call(h, "PATCH", `${PATH}/${s.id}`, [{ op: "add", path: "/state", value: "active" }]);
    assert.equal(p.status, 204);
    clock.set(Date.UTC(2026, 10, 22, 0, 59, 59));
    assert.deepEqual(await h.schedules.tick(), [], "not yet 01:00 UTC");
    clock.set(Date.UTC(2026, 10, 22, 1, 0, 0));
    const fired = await h.schedules.tick();
    assert.equal(fired.length, 1);
    assert.deepEqual(await h.schedules.tick(), [], "fires once per instant");
    await h.runner.idle();
    const job = (await call(h, "GET", `/data/core/ups/segment/jobs/${fired[0]}`)).body as SegmentJob;
    assert.equal(job.status, "SUCCEEDED");
    assert.equal(job.source, "scheduler");
    assert.equal(job.properties?.scheduleId, s.id);
    assert.deepEqual(job.segments, [{ segmentId: "*" }]);
    assert.deepEqual(Object.keys(job.metrics.segmentedProfileCounter ?? {}).sort(), [...defs].sort());
    clock.set(Date.UTC(2026, 10, 23, 1, 0, 0));
    assert.equal((await h.schedules.tick()).length, 1, "next day");
    await h.runner.idle();
  });

  it("patches the cron expression; refuses other paths; deletes", async () => {
    const s = ((await call(h, "GET", PATH)).body as { children: Schedule[] }).children[0]!;
    const bad = await call(h, "PATCH", `${PATH}/${s.id}`, [{ op: "add", path: "/name", value: "x" }]);
    assert.equal(bad.status, 400);
    assert.deepEqual(errorOf(bad.body), { code: "SEGMENTD-BATCH-SCHEDULE-400", message: 'Unsupported patch path "/name": only /state and /schedule can change' });
    assert.equal((await call(h, "PATCH", `${PATH}/${s.id}`, [{ op: "add", path: "/schedule", value: "0 30 2 ? * MON" }])).status, 204);
    assert.equal(((await call(h, "GET", `${PATH}/${s.id}`)).body as Schedule).schedule, "0 30 2 ? * MON");
    assert.equal((await call(h, "DELETE", `${PATH}/${s.id}`)).status, 204);
    assert.equal((await call(h, "GET", `${PATH}/${s.id}`)).status, 404);
    assert.equal((await call(h, "DELETE", `${PATH}/${s.id}`)).status, 404);
  });
});
