/**
 * Export jobs over real HTTP: members of an audience (filtered by status)
 * written to a dataset in one ingestion batch, with metrics; validation
 * errors with nothing stored; list paging with AEP's offset cursor.
 *
 * Options (second suite, hand-computed data): segmentQualificationTime,
 * fromIngestTimestamp, emptyProfiles, additionalFields.eventList,
 * segmentPerBatch, evaluationInfo.segmentation, and every new field's bad
 * input. Cancellation and recovery (third suite): DELETE of a running export
 * (batches aborted, nothing visible), of an export waiting for its segment
 * job, of finished / unknown / foreign jobs; a failed segment job; a restart.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "../../src/index.js";
import { demoProfile } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore, ScanOptions, ScannedProfile } from "../../src/profiles/store.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import type { ExportJob } from "../../src/batch/exports/export-service.js";
import type { SegmentJob } from "../../src/batch/jobs/segment-job.js";
import { ORG_A, call, openRepo, startBatchHarness, type BatchHarness } from "./batch-harness.js";
import { API_KEY, ORG_B, TOKEN_B } from "../helpers/server-harness.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const SCOPE: TenantScope = { orgId: ORG_A, sandboxName: "prod" };

describe("export jobs API", () => {
  let h: BatchHarness & { store: TestStoreHandle };
  const clock = new ManualClock(NOW);
  let gold: string;
  let crm: string;
  let out: string;

  before(async () => {
    h = await startBatchHarness("export", { clock });
    crm = (await h.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    out = (await h.profiles.createDataset(SCOPE, { name: "audience export", schemaClass: "profile", profileEnabled: false }, NOW)).id;
    await ingestRecords(h.profiles, SCOPE, crm, Array.from({ length: 60 }, (_, i) => ({ index: i, value: demoProfile(i, { now: NOW, seed: 12 }) })), { now: NOW });
    const r = await call(h, "POST", "/data/core/ups/segment/definitions", { name: "gold", expression: { type: "PQL", format: "pql/text", value: 'loyalty.tier = "gold"' }, schema: { name: "_xdm.context.profile" } });
    gold = (r.body as { id: string }).id;
    await call(h, "POST", "/data/core/ups/segment/jobs", [{ segmentId: gold }]);
    await h.runner.idle();
  });
  after(async () => {
    await h.close();
  });

  it("exports the realized members with projected fields and metrics", async () => {
    const members = await h.profiles.listMembers(SCOPE, gold, { limit: 1000 });
    assert.ok(members.length > 0);
    const r = await call(h, "POST", "/data/core/ups/export/jobs", {
      fields: "person.name,loyalty.tier",
      filter: { segments: [{ segmentId: gold }] },
      destination: { datasetId: out },
      schema: { name: "_xdm.context.profile" },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const created = r.body as ExportJob;
    assert.equal(created.status, "NEW");
    assert.deepEqual(created.filter.segments, [{ segmentId: gold, segmentNs: "ups", status: ["realized", "existing"] }]);
    // The definition's merge policy, at its current version.
    const policyId = ((await call(h, "GET", `/data/core/ups/segment/definitions/${gold}`)).body as { mergePolicyId: string }).mergePolicyId;
    const policy = (await call(h, "GET", `/data/core/ups/config/mergePolicies/${policyId}`)).body as { id: string; version: number };
    assert.deepEqual(created.mergePolicy, { id: policy.id, version: policy.version });
    await h.exports.idle();
    const job = (await call(h, "GET", `/data/core/ups/export/jobs/${created.id}`)).body as ExportJob;
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    assert.equal(job.metrics.totalExportedProfileCounter, members.length);
    assert.equal(job.metrics.exportedProfileByNamespaceCounter?.["crmid"], members.length);
    const batch = await h.profiles.getBatch(SCOPE, job.destination.batchId!);
    assert.equal(batch?.status, "success");
    assert.equal(batch?.recordsWritten, members.length);
    assert.equal(batch?.datasetId, out);
  });

  it("exports exited members when asked", async () => {
    // Everyone leaves the gold audience.
    const t = NOW + 1000;
    clock.set(t);
    const downgrade = Array.from({ length: 60 }, (_, i) => {
      const p = demoProfile(i, { now: NOW, seed: 12 });
      return { index: i, value: { identityMap: p["identityMap"], loyalty: { tier: "bronze" }, _repo: { modifyDate: new Date(t).toISOString() } } };
    });
    await ingestRecords(h.profiles, SCOPE, crm, downgrade, { now: t });
    const before = (await h.profiles.listMembers(SCOPE, gold, { limit: 1000 })).length;
    await call(h, "POST", "/data/core/ups/segment/jobs", [{ segmentId: gold }]);
    await h.runner.idle();
    const r = await call(h, "POST", "/data/core/ups/export/jobs", { filter: { segments: [{ segmentId: gold, status: ["exited"] }] }, destination: { datasetId: out }, schema: { name: "_xdm.context.profile" } });
    await h.exports.idle();
    const job = (await call(h, "GET", `/data/core/ups/export/jobs/${(r.body as ExportJob).id}`)).body as ExportJob;
    assert.equal(job.metrics.totalExportedProfileCounter, before);
  });

  it("refuses a profile-enabled destination or unknown audiences, storing nothing", async () => {
    const before = ((await call(h, "GET", "/data/core/ups/export/jobs")).body as { records: unknown[] }).records.length;
    const bad = await call(h, "POST", "/data/core/ups/export/jobs", { filter: { segments: [{ segmentId: gold }] }, destination: { datasetId: crm }, schema: { name: "_xdm.context.profile" } });
    assert.equal(bad.status, 400);
    assert.deepEqual((bad.body as { errors: unknown }).errors, { "400": [{ code: "SEGMENTD-BATCH-EXPORT-400", message: `Dataset ${crm} cannot receive an export: it must be of class profile and not enabled for Profile` }] });
    const unknown = await call(h, "POST", "/data/core/ups/export/jobs", { filter: { segments: [{ segmentId: "nope" }] }, destination: { datasetId: out }, schema: { name: "_xdm.context.profile" } });
    assert.deepEqual((unknown.body as { errors: unknown }).errors, { "400": [{ code: "SEGMENTD-BATCH-UNKNOWN-DEFINITION-400", message: "Segment definitions not found: nope" }] });
    const after = ((await call(h, "GET", "/data/core/ups/export/jobs")).body as { records: unknown[] }).records.length;
    assert.equal(after, before);
  });

  it("lists newest first with an offset cursor", async () => {
    const p1 = (await call(h, "GET", "/data/core/ups/export/jobs?limit=1")).body as { records: ExportJob[]; page: { pageOffset: string }; link: { next: string } };
    assert.equal(p1.records[0]!.id, 2);
    assert.equal(p1.page.pageOffset, `${p1.records[0]!.creationTime}_2`);
    assert.equal(p1.link.next, `/export/jobs/?limit=1&offset=${p1.page.pageOffset}`);
    const p2 = (await call(h, "GET", `/data/core/ups/export/jobs?limit=1&offset=${p1.page.pageOffset}`)).body as { records: ExportJob[]; link: { next: string } };
    assert.equal(p2.records[0]!.id, 1);
    assert.equal(p2.link.next, "");
  });

  it("without filter.segments exports every profile of the sandbox, once each", async () => {
    const policy = ((await call(h, "GET", `/data/core/ups/segment/definitions/${gold}`)).body as { mergePolicyId: string }).mergePolicyId;
    // A renamed policy is at a later version: the job records the version it read profiles at.
    const renamed = await call(h, "PATCH", `/data/core/ups/config/mergePolicies/${policy}`, [{ op: "replace", path: "/name", value: "renamed for the export" }]);
    assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
    const version = (renamed.body as { version: number }).version;
    assert.ok(version > 1);
    const r = await call(h, "POST", "/data/core/ups/export/jobs", {
      fields: "loyalty.tier",
      mergePolicy: { id: policy },
      destination: { datasetId: out, segmentPerBatch: true },
      schema: { name: "_xdm.context.profile" },
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const created = r.body as ExportJob;
    assert.deepEqual(created.filter.segments, []);
    assert.deepEqual(created.mergePolicy, { id: policy, version });
    await h.exports.idle();
    const job = (await call(h, "GET", `/data/core/ups/export/jobs/${created.id}`)).body as ExportJob;
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    // The 60 CRM profiles this suite ingested, members of an audience or not; one batch.
    assert.equal(job.metrics.totalExportedProfileCounter, 60);
    assert.equal(job.metrics.exportedProfileByNamespaceCounter?.["crmid"], 60);
    assert.equal(job.destination.batches, undefined);
    const batch = await h.profiles.getBatch(SCOPE, job.destination.batchId!);
    assert.equal(batch?.recordsWritten, 60);
  });
});

// ---- options ---------------------------------------------------------------------------

const JOBS = "/data/core/ups/export/jobs";
const PROFILE_SCHEMA = { name: "_xdm.context.profile" };
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();
type Harness = BatchHarness & { store: TestStoreHandle };

async function createDefinition(h: Harness, name: string, pql: string): Promise<string> {
  const r = await call(h, "POST", "/data/core/ups/segment/definitions", { name, expression: { type: "PQL", format: "pql/text", value: pql }, schema: PROFILE_SCHEMA });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body as { id: string }).id;
}

async function runSegmentJob(h: Harness, ids: string[]): Promise<void> {
  const r = await call(h, "POST", "/data/core/ups/segment/jobs", ids.map((segmentId) => ({ segmentId })));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await h.runner.idle();
  const job = (await call(h, "GET", `/data/core/ups/segment/jobs/${(r.body as SegmentJob).id}`)).body as SegmentJob;
  assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
}

async function getExport(h: Harness, id: number): Promise<ExportJob> {
  const r = await call(h, "GET", `${JOBS}/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as ExportJob;
}

/** POST, wait for the export to finish, GET it. */
async function runExport(h: Harness, body: unknown): Promise<ExportJob> {
  const r = await call(h, "POST", JOBS, body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await h.exports.idle();
  return getExport(h, (r.body as ExportJob).id);
}

/** Polls until the export has `status` (the runner moves it on its own). */
async function waitForStatus(h: Harness, id: number, status: ExportJob["status"]): Promise<void> {
  for (let i = 0; (await getExport(h, id)).status !== status; i++) {
    assert.ok(i < 500, `export ${id} never reached ${status}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function outDataset(h: Harness, name: string): Promise<string> {
  return (await h.profiles.createDataset(SCOPE, { name, schemaClass: "profile", profileEnabled: false }, NOW)).id;
}

/** Every record of an export destination (what a reader of the dataset sees). */
async function lakeRecords(h: Harness, datasetId: string): Promise<JsonObject[]> {
  const out: JsonObject[] = [];
  for (let after = 0; ;) {
    const page = await h.profiles.listLakeRecords(SCOPE, datasetId, { afterSeq: after, limit: 100 });
    out.push(...page.map((r) => r.body));
    if (page.length < 100) return out;
    after = page[page.length - 1]!.seq;
  }
}

/** The identity ids of exported records, sorted. */
function idsOf(records: readonly JsonObject[]): string[] {
  return records.map((r) => Object.values(r["identityMap"] as Record<string, Array<{ id: string }>>).flat().map((i) => i.id).join("+")).sort();
}

function errorsOf(r: { body: unknown }): unknown {
  return (r.body as { errors: unknown }).errors;
}

async function exportCount(h: Harness): Promise<number> {
  return ((await call(h, "GET", `${JOBS}?limit=100`)).body as { records: unknown[] }).records.length;
}

describe("export job options", () => {
  let h: Harness;
  const clock = new ManualClock(NOW);
  const T1 = NOW + HOUR;
  const T2 = T1 + 60_000;
  const ids: Record<string, string> = {};
  const event = (id: string, ns: string, idv: string, at: number, eventType: string) => ({
    _id: id, timestamp: iso(at), eventType, identityMap: { [ns]: [{ id: idv, primary: true }] }, web: { webPageDetails: { name: `page ${id}` } },
  });
  const events = [
    event("c0-a", "CRMID", "c0", NOW - 3 * HOUR, "web.webpagedetails.pageViews"),
    event("c0-b", "CRMID", "c0", NOW - 2 * HOUR, "commerce.purchases"),
    event("c0-c", "CRMID", "c0", NOW - HOUR, "web.webpagedetails.pageViews"),
    event("c1-a", "CRMID", "c1", NOW - 2 * HOUR, "web.webpagedetails.pageViews"),
    // Event-only ("empty") profiles.
    event("x0-a", "ECID", "x0", NOW - 2 * HOUR, "web.webpagedetails.pageViews"),
    event("x1-a", "ECID", "x1", NOW - HOUR, "web.webpagedetails.pageViews"),
  ];

  before(async () => {
    h = await startBatchHarness("export-options", { clock });
    const crm = (await h.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    const web = (await h.profiles.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
    // c0..c5 gold, c6..c9 silver; fragments ingested 4 h before NOW (before every event).
    const profile = (i: number) => ({ identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, person: { name: { firstName: `First${i}`, lastName: `Last${i}` } }, loyalty: { tier: i < 6 ? "gold" : "silver" } });
    await ingestRecords(h.profiles, SCOPE, crm, Array.from({ length: 10 }, (_, i) => ({ index: i, value: profile(i) })), { now: NOW - 4 * HOUR });
    const stored = await ingestRecords(h.profiles, SCOPE, web, events.map((value, index) => ({ index, value })), { now: NOW - 30_000 });
    assert.deepEqual(stored.failed, []);
    ids["gold"] = await createDefinition(h, "gold", 'loyalty.tier = "gold"');
    ids["silver"] = await createDefinition(h, "silver", 'loyalty.tier = "silver"');
    ids["everyone"] = await createDefinition(h, "everyone", "true");
    // At NOW: gold c0..c5, silver c6..c9, everyone c0..c9 + x0, x1 (lastQualificationTime NOW).
    await runSegmentJob(h, [ids["gold"]!, ids["silver"]!, ids["everyone"]!]);
    // At T1 c6 and c7 turn gold (fragments ingested at T1): they qualify for gold and exit silver at T1;
    // the others keep their lastQualificationTime NOW.
    clock.set(T1);
    await ingestRecords(h.profiles, SCOPE, crm, [6, 7].map((i, index) => ({ index, value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, loyalty: { tier: "gold" } } })), { now: T1 });
    await runSegmentJob(h, [ids["gold"]!, ids["silver"]!]);
    clock.set(T2);
    assert.equal((await h.profiles.listMembers(SCOPE, ids["gold"]!)).length, 8);
    assert.equal((await h.profiles.listMembers(SCOPE, ids["everyone"]!)).length, 12);
  });
  after(async () => {
    await h.close();
  });

  it("segmentQualificationTime exports only the memberships qualified in the range (both ends inclusive)", async () => {
    const ds = await outDataset(h, "qualified since T1");
    const since = await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], segmentQualificationTime: { startTime: iso(T1) } }, destination: { datasetId: ds }, schema: PROFILE_SCHEMA });
    assert.equal(since.status, "SUCCEEDED", JSON.stringify(since.errors));
    assert.deepEqual(since.filter.segmentQualificationTime, { startTime: iso(T1) });
    assert.equal(since.metrics.totalExportedProfileCounter, 2);
    assert.deepEqual(idsOf(await lakeRecords(h, ds)), ["c6", "c7"]);
    const before = await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], segmentQualificationTime: { endTime: iso(T1 - 1) } }, destination: { datasetId: await outDataset(h, "before T1") }, schema: PROFILE_SCHEMA });
    assert.equal(before.metrics.totalExportedProfileCounter, 6);
    const exact = await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], segmentQualificationTime: { startTime: iso(NOW), endTime: iso(NOW) } }, destination: { datasetId: await outDataset(h, "at NOW") }, schema: PROFILE_SCHEMA });
    assert.equal(exact.metrics.totalExportedProfileCounter, 6);
    assert.equal((await h.profiles.getBatch(SCOPE, exact.destination.batchId!))?.recordsWritten, 6);
  });

  it("fromIngestTimestamp exports profiles updated after it: fragments by ingestion time, events by their timestamp", async () => {
    const ds = await outDataset(h, "updated after NOW");
    const job = await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], fromIngestTimestamp: iso(NOW) }, destination: { datasetId: ds }, schema: PROFILE_SCHEMA });
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    assert.equal(job.filter.fromIngestTimestamp, iso(NOW));
    assert.deepEqual(idsOf(await lakeRecords(h, ds)), ["c6", "c7"]);
    // 90 minutes before NOW: c0's event at NOW - 1 h counts, c1's at NOW - 2 h does not.
    const ds2 = await outDataset(h, "updated after NOW - 90 min");
    await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], fromIngestTimestamp: iso(NOW - 90 * 60_000) }, destination: { datasetId: ds2 }, schema: PROFILE_SCHEMA });
    assert.deepEqual(idsOf(await lakeRecords(h, ds2)), ["c0", "c6", "c7"]);
    // Strictly after: c6 and c7 were ingested exactly at T1.
    const none = await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }], fromIngestTimestamp: iso(T1) }, destination: { datasetId: await outDataset(h, "after T1") }, schema: PROFILE_SCHEMA });
    assert.equal(none.status, "SUCCEEDED");
    assert.equal(none.metrics.totalExportedProfileCounter, 0);
  });

  it("emptyProfiles: profiles with events but no profile fragment are exported only when true", async () => {
    const byDefault = await outDataset(h, "default");
    await runExport(h, { filter: { segments: [{ segmentId: ids["everyone"] }] }, destination: { datasetId: byDefault }, schema: PROFILE_SCHEMA });
    const tens = Array.from({ length: 10 }, (_, i) => `c${i}`);
    assert.deepEqual(idsOf(await lakeRecords(h, byDefault)), tens);
    const no = await outDataset(h, "emptyProfiles false");
    const noJob = await runExport(h, { filter: { segments: [{ segmentId: ids["everyone"] }], emptyProfiles: false }, destination: { datasetId: no }, schema: PROFILE_SCHEMA });
    assert.equal(noJob.filter.emptyProfiles, false);
    assert.deepEqual(idsOf(await lakeRecords(h, no)), tens);
    const yes = await outDataset(h, "emptyProfiles true");
    const yesJob = await runExport(h, { filter: { segments: [{ segmentId: ids["everyone"] }], emptyProfiles: true }, destination: { datasetId: yes }, schema: PROFILE_SCHEMA });
    assert.equal(yesJob.metrics.totalExportedProfileCounter, 12);
    assert.equal(yesJob.metrics.exportedProfileByNamespaceCounter?.["ecid"], 2);
    const records = await lakeRecords(h, yes);
    assert.deepEqual(idsOf(records), [...tens, "x0", "x1"].sort());
    const x0 = records.find((r) => idsOf([r])[0] === "x0")!;
    assert.equal(x0["person"], undefined, "an empty profile has no attributes");
  });

  it("additionalFields.eventList adds each profile's events as eventList, projected and filtered", async () => {
    const ds = await outDataset(h, "with events");
    const eventList = { fields: "eventType", filter: { fromIngestTimestamp: iso(NOW - 150 * 60_000), toIngestTimestamp: iso(NOW - HOUR) } };
    const job = await runExport(h, {
      fields: "loyalty.tier",
      filter: { segments: [{ segmentId: ids["gold"] }] },
      additionalFields: { eventList },
      destination: { datasetId: ds },
      schema: PROFILE_SCHEMA,
    });
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    assert.deepEqual(job.additionalFields, { eventList });
    const records = await lakeRecords(h, ds);
    const byId = new Map(records.map((r) => [idsOf([r])[0]!, r]));
    assert.deepEqual(byId.get("c0")!["eventList"], [
      { _id: "c0-b", timestamp: iso(NOW - 2 * HOUR), eventType: "commerce.purchases" },
      { _id: "c0-c", timestamp: iso(NOW - HOUR), eventType: "web.webpagedetails.pageViews" },
    ]);
    assert.deepEqual(byId.get("c1")!["eventList"], [{ _id: "c1-a", timestamp: iso(NOW - 2 * HOUR), eventType: "web.webpagedetails.pageViews" }]);
    for (const id of ["c2", "c3", "c4", "c5", "c6", "c7"]) assert.deepEqual(byId.get(id)!["eventList"], [], id);
    assert.deepEqual(byId.get("c0")!["loyalty"], { tier: "gold" });
    // Without fields and filter: every event, whole, oldest first.
    const all = await outDataset(h, "all events");
    await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }] }, additionalFields: { eventList: {} }, destination: { datasetId: all }, schema: PROFILE_SCHEMA });
    const c0 = (await lakeRecords(h, all)).find((r) => idsOf([r])[0] === "c0")!;
    const list = c0["eventList"] as JsonObject[];
    assert.deepEqual(list.map((e) => e["_id"]), ["c0-a", "c0-b", "c0-c"]);
    assert.deepEqual(list.map((e) => e["web"]), events.slice(0, 3).map((e) => e.web));
    // Not asked for: no eventList.
    const plain = await outDataset(h, "no events");
    await runExport(h, { filter: { segments: [{ segmentId: ids["gold"] }] }, destination: { datasetId: plain }, schema: PROFILE_SCHEMA });
    assert.ok((await lakeRecords(h, plain)).every((r) => !("eventList" in r)));
  });

  it("segmentPerBatch writes one batch per filter.segments entry with its own members", async () => {
    const ds = await outDataset(h, "per segment");
    const segments = [{ segmentId: ids["gold"] }, { segmentId: ids["silver"], status: ["exited"] }];
    const job = await runExport(h, { filter: { segments }, destination: { datasetId: ds, segmentPerBatch: true }, schema: PROFILE_SCHEMA });
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    assert.equal(job.destination.batchId, undefined);
    const batches = job.destination.batches!;
    assert.deepEqual(batches.map(({ batchId: _b, ...rest }) => rest), [
      { segmentId: ids["gold"], segmentNs: "ups", status: ["realized", "existing"] },
      { segmentId: ids["silver"], segmentNs: "ups", status: ["exited"] },
    ]);
    const [gold, exited] = await Promise.all(batches.map((b) => h.profiles.getBatch(SCOPE, b.batchId)));
    assert.deepEqual([gold?.status, gold?.recordsWritten, gold?.datasetId], ["success", 8, ds]);
    assert.deepEqual([exited?.status, exited?.recordsWritten, exited?.datasetId], ["success", 2, ds]);
    assert.notEqual(gold?.id, exited?.id);
    assert.equal(job.metrics.totalExportedProfileCounter, 10);
    // c6 and c7 are in both audiences: once in each batch.
    assert.deepEqual(idsOf(await lakeRecords(h, ds)), ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c6", "c7", "c7"]);
    // The same selection in one batch: each profile once.
    const one = await outDataset(h, "one batch");
    const single = await runExport(h, { filter: { segments }, destination: { datasetId: one, segmentPerBatch: false }, schema: PROFILE_SCHEMA });
    assert.equal(single.destination.batches, undefined);
    assert.equal((await h.profiles.getBatch(SCOPE, single.destination.batchId!))?.recordsWritten, 8);
    assert.equal((await lakeRecords(h, one)).length, 8);
  });

  it("evaluationInfo.segmentation runs a segment job over the selected definitions, then exports its result", async () => {
    const late = await createDefinition(h, "silver, never evaluated", 'loyalty.tier = "silver"');
    const without = await runExport(h, { filter: { segments: [{ segmentId: late }] }, destination: { datasetId: await outDataset(h, "not evaluated") }, schema: PROFILE_SCHEMA });
    assert.equal(without.metrics.totalExportedProfileCounter, 0, "no job has evaluated it yet");
    const ds = await outDataset(h, "evaluated");
    const r = await call(h, "POST", JOBS, { filter: { segments: [{ segmentId: late }] }, evaluationInfo: { segmentation: true }, destination: { datasetId: ds }, schema: PROFILE_SCHEMA });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const created = r.body as ExportJob;
    const segmentJobId = created.evaluationInfo?.segmentJobId;
    assert.equal(typeof segmentJobId, "string");
    assert.equal(created.evaluationInfo?.segmentation, true);
    await h.exports.idle();
    const job = await getExport(h, created.id);
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job.errors));
    assert.deepEqual(idsOf(await lakeRecords(h, ds)), ["c8", "c9"]);
    const seg = (await call(h, "GET", `/data/core/ups/segment/jobs/${segmentJobId}`)).body as SegmentJob;
    assert.equal(seg.status, "SUCCEEDED");
    assert.deepEqual(seg.segments.map((s) => s.segmentId), [late]);
  });

  it("refuses a wrong type for every new field with the exact error, storing and starting nothing", async () => {
    const ds = await outDataset(h, "refused");
    const base = { filter: { segments: [{ segmentId: ids["gold"] }] }, destination: { datasetId: ds }, schema: PROFILE_SCHEMA };
    const withFilter = (extra: object) => ({ ...base, filter: { ...base.filter, ...extra } });
    const rfc = (path: string, got: string) => `${path} must be an RFC 3339 date-time such as 2026-01-31T00:00:00Z, got ${got}`;
    const cases: Array<[unknown, string]> = [
      [[base], "The request body must be a JSON object (CreateExportJobRequest)"],
      [{ ...base, destination: { datasetId: ds, segmentPerBatch: "true" } }, 'destination.segmentPerBatch must be a boolean (true or false), got "true"'],
      [{ ...base, destination: { datasetId: ds, segmentPerBatch: 1 } }, "destination.segmentPerBatch must be a boolean (true or false), got 1"],
      [{ ...base, filter: "gold" }, "filter must be an object"],
      [{ ...base, filter: { segments: "gold" } }, "filter.segments must be an array of {segmentId, segmentNs?, status?}; omit it to export every profile"],
      [{ ...base, filter: { segmentQualificationTime: { startTime: "2026-01-01T00:00:00Z" } } }, "filter.segmentQualificationTime needs filter.segments: without segments every profile is exported"],
      [{ ...base, filter: {}, evaluationInfo: { segmentation: true } }, "evaluationInfo.segmentation needs filter.segments: the audiences to evaluate before exporting"],
      [withFilter({ segmentsById: [] }), "filter.segmentsById is not supported: use segments, segmentQualificationTime, fromIngestTimestamp, emptyProfiles"],
      [withFilter({ segmentQualificationTime: "2026-01-01T00:00:00Z" }), "filter.segmentQualificationTime must be an object"],
      [withFilter({ segmentQualificationTime: { startTime: "yesterday" } }), rfc("filter.segmentQualificationTime.startTime", '"yesterday"')],
      [withFilter({ segmentQualificationTime: { endTime: 1767225600000 } }), rfc("filter.segmentQualificationTime.endTime", "1767225600000")],
      [withFilter({ segmentQualificationTime: { startTime: "2026-02-30T00:00:00Z" } }), rfc("filter.segmentQualificationTime.startTime", '"2026-02-30T00:00:00Z"')],
      [withFilter({ segmentQualificationTime: { startTime: "2026-01-01T00:00:00" } }), rfc("filter.segmentQualificationTime.startTime", '"2026-01-01T00:00:00"')],
      [withFilter({ segmentQualificationTime: { startTime: iso(T1), endTime: iso(NOW) } }), "filter.segmentQualificationTime.startTime must not be after filter.segmentQualificationTime.endTime"],
      [withFilter({ segmentQualificationTime: { since: iso(NOW) } }), "filter.segmentQualificationTime.since is not supported: use startTime, endTime"],
      [withFilter({ fromIngestTimestamp: true }), rfc("filter.fromIngestTimestamp", "true")],
      [withFilter({ fromIngestTimestamp: "2026-11-21" }), rfc("filter.fromIngestTimestamp", '"2026-11-21"')],
      [withFilter({ emptyProfiles: "false" }), 'filter.emptyProfiles must be a boolean (true or false), got "false"'],
      [withFilter({ emptyProfiles: 0 }), "filter.emptyProfiles must be a boolean (true or false), got 0"],
      [{ ...base, additionalFields: [] }, "additionalFields must be an object"],
      [{ ...base, additionalFields: {} }, "additionalFields.eventList is required when additionalFields is given"],
      [{ ...base, additionalFields: { profileList: {} } }, "additionalFields.profileList is not supported: use eventList"],
      [{ ...base, additionalFields: { eventList: true } }, "additionalFields.eventList must be an object"],
      [{ ...base, additionalFields: { eventList: { fields: ["eventType"] } } }, "additionalFields.eventList.fields must be a comma-separated string of field paths"],
      [{ ...base, additionalFields: { eventList: { filter: "recent" } } }, "additionalFields.eventList.filter must be an object"],
      [{ ...base, additionalFields: { eventList: { filter: { fromIngestTimestamp: "2026-13-01T00:00:00Z" } } } }, rfc("additionalFields.eventList.filter.fromIngestTimestamp", '"2026-13-01T00:00:00Z"')],
      [{ ...base, additionalFields: { eventList: { filter: { toIngestTimestamp: null } } } }, rfc("additionalFields.eventList.filter.toIngestTimestamp", "null")],
      [{ ...base, additionalFields: { eventList: { filter: { fromIngestTimestamp: iso(T1), toIngestTimestamp: iso(NOW) } } } },
        "additionalFields.eventList.filter.fromIngestTimestamp must not be after additionalFields.eventList.filter.toIngestTimestamp"],
      [{ ...base, evaluationInfo: true }, "evaluationInfo must be an object"],
      [{ ...base, evaluationInfo: {} }, "evaluationInfo.segmentation is required when evaluationInfo is given (true or false)"],
      [{ ...base, evaluationInfo: { segmentation: "yes" } }, 'evaluationInfo.segmentation must be a boolean (true or false), got "yes"'],
      [{ ...base, mergePolicy: "timestampOrdered" }, "mergePolicy must be an object with a string id"],
      [{ ...base, mergePolicy: { id: "nope", version: "1" } }, "mergePolicy.version must be a positive integer"],
      [{ ...base, mergePolicy: { id: "no-such-policy" } }, "Merge policy no-such-policy does not exist in this sandbox"],
    ];
    const exportsBefore = await exportCount(h);
    const segmentJobsBefore = ((await call(h, "GET", "/data/core/ups/segment/jobs")).body as { _page: { totalCount: number } })._page.totalCount;
    for (const [body, message] of cases) {
      const r = await call(h, "POST", JOBS, body);
      assert.equal(r.status, 400, message);
      assert.deepEqual(errorsOf(r), { "400": [{ code: "SEGMENTD-BATCH-EXPORT-400", message }] });
    }
    await h.exports.idle();
    assert.equal(await exportCount(h), exportsBefore);
    assert.equal(((await call(h, "GET", "/data/core/ups/segment/jobs")).body as { _page: { totalCount: number } })._page.totalCount, segmentJobsBefore);
    assert.deepEqual(await h.profiles.listBatches(SCOPE, { datasetId: ds }), []);
    assert.deepEqual(await lakeRecords(h, ds), []);
  });
});

// ---- cancellation and recovery ------------------------------------------------------------

/** Holds the n-th call after `arm(n)` until `release()`. */
class Pause {
  private left = 0;
  private hitFn: () => void = () => {};
  private openFn: () => void = () => {};
  private opened: Promise<void> = Promise.resolve();
  reached: Promise<void> = Promise.resolve();

  arm(n = 1): void {
    this.left = n;
    this.reached = new Promise((r) => (this.hitFn = r));
    this.opened = new Promise((r) => (this.openFn = r));
  }

  async hit(): Promise<void> {
    if (this.left === 0 || --this.left > 0) return;
    this.hitFn();
    await this.opened;
  }

  release(): void {
    this.openFn();
  }
}

describe("export job cancellation and recovery", () => {
  let h: Harness;
  let closed = false;
  let out: string;
  const ids: Record<string, string> = {};
  /** Export runs: getProfile. Segment jobs: the scan, before its second chunk. */
  const profileRead = new Pause();
  const scan = new Pause();
  const wrap = (p: ProfileStore): ProfileStore =>
    new Proxy(p, {
      get(target, prop, receiver) {
        if (prop === "getProfile") {
          return async (...args: Parameters<ProfileStore["getProfile"]>) => {
            await profileRead.hit();
            return target.getProfile(...args);
          };
        }
        if (prop === "scanProfiles") {
          return async function* (scope: TenantScope, policy: MergePolicySpec, o?: ScanOptions): AsyncIterable<ScannedProfile[]> {
            let n = 0;
            for await (const chunk of target.scanProfiles(scope, policy, o)) {
              if (n++ === 1) await scan.hit();
              yield chunk;
            }
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
  const exportBody = (extra: object = {}) => ({ filter: { segments: [{ segmentId: ids["gold"] }] }, destination: { datasetId: out }, schema: PROFILE_SCHEMA, ...extra });

  before(async () => {
    h = await startBatchHarness("export-cancel", { clock: new ManualClock(NOW), chunkSize: 4, wrapProfiles: wrap });
    const crm = (await h.profiles.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    out = await outDataset(h, "cancel destination");
    const profile = (i: number) => ({ identityMap: { CRMID: [{ id: `p${i}`, primary: true }] }, loyalty: { tier: i < 6 ? "gold" : "silver" } });
    await ingestRecords(h.profiles, SCOPE, crm, Array.from({ length: 10 }, (_, i) => ({ index: i, value: profile(i) })), { now: NOW });
    ids["gold"] = await createDefinition(h, "gold", 'loyalty.tier = "gold"');
    ids["silver"] = await createDefinition(h, "silver", 'loyalty.tier = "silver"');
  });
  after(async () => {
    profileRead.release();
    scan.release();
    if (!closed) await h.close();
  });

  it("an export whose segment job does not succeed FAILS with a clear error, writing nothing", async () => {
    scan.arm();
    const r = await call(h, "POST", JOBS, exportBody({ evaluationInfo: { segmentation: true } }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const created = r.body as ExportJob;
    const sid = created.evaluationInfo!.segmentJobId!;
    await scan.reached;
    await waitForStatus(h, created.id, "PROCESSING");
    assert.equal((await call(h, "DELETE", `/data/core/ups/segment/jobs/${sid}`)).status, 204);
    scan.release();
    await h.runner.idle();
    await h.exports.idle();
    const job = await getExport(h, created.id);
    assert.equal(job.status, "FAILED");
    assert.deepEqual(job.errors, [{ code: "SEGMENTD-EXPORT-SEGMENTATION-FAILED", msg: `Segment job ${sid} ended CANCELLED; nothing was exported` }]);
    assert.equal(job.destination.batchId, undefined);
    assert.deepEqual(await h.profiles.listBatches(SCOPE, { datasetId: out }), []);
    assert.deepEqual(await h.profiles.listMembers(SCOPE, ids["gold"]!), []);
  });

  it("DELETE of an export waiting for its segment job cancels both", async () => {
    scan.arm();
    const created = (await call(h, "POST", JOBS, exportBody({ evaluationInfo: { segmentation: true } }))).body as ExportJob;
    const sid = created.evaluationInfo!.segmentJobId!;
    await scan.reached;
    await waitForStatus(h, created.id, "PROCESSING");
    const del = await call(h, "DELETE", `${JOBS}/${created.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { status: true, message: "Export job has been marked for cancelling" });
    await h.exports.idle();
    assert.equal((await getExport(h, created.id)).status, "CANCELLED");
    assert.equal(((await call(h, "GET", `/data/core/ups/segment/jobs/${sid}`)).body as SegmentJob).status, "CANCELLING");
    scan.release();
    await h.runner.idle();
    assert.equal(((await call(h, "GET", `/data/core/ups/segment/jobs/${sid}`)).body as SegmentJob).status, "CANCELLED");
    assert.deepEqual(await h.profiles.listBatches(SCOPE, { datasetId: out }), []);
  });

  it("DELETE of a running export ends it CANCELLED with its batches aborted and nothing visible; other sandboxes and orgs get 404", async () => {
    await runSegmentJob(h, [ids["gold"]!, ids["silver"]!]);
    // Batch 1 (gold) reads p0..p5 and stages them; batch 2 (silver) stops at its second profile.
    profileRead.arm(8);
    const created = (await call(h, "POST", JOBS, exportBody({ filter: { segments: [{ segmentId: ids["gold"] }, { segmentId: ids["silver"] }] }, destination: { datasetId: out, segmentPerBatch: true } }))).body as ExportJob;
    await profileRead.reached;
    const running = await getExport(h, created.id);
    assert.equal(running.status, "PROCESSING");
    const [b1, b2] = running.destination.batches!.map((b) => b.batchId);
    const staged = await h.profiles.getBatch(SCOPE, b1!);
    assert.deepEqual([staged?.status, staged?.recordsRead, staged?.recordsWritten], ["loading", 6, 0]);
    assert.deepEqual(await lakeRecords(h, out), [], "staged records are not visible");

    const notFound = { "404": [{ code: "SEGMENTD-NOT-FOUND-404", message: `Export job with id '${created.id}' was not found` }] };
    const dev = await call(h, "DELETE", `${JOBS}/${created.id}`, undefined, "dev");
    assert.equal(dev.status, 404);
    assert.deepEqual(errorsOf(dev), notFound);
    const orgB = await fetch(`${h.url}${JOBS}/${created.id}`, { method: "DELETE", headers: { authorization: `Bearer ${TOKEN_B}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_B, "x-sandbox-name": "prod" } });
    assert.equal(orgB.status, 404);
    assert.deepEqual((await orgB.json() as { errors: unknown }).errors, notFound);
    assert.deepEqual(await getExport(h, created.id), running, "nothing changed");

    const del = await call(h, "DELETE", `${JOBS}/${created.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { status: true, message: "Export job has been marked for cancelling" });
    assert.equal((await getExport(h, created.id)).status, "CANCELLING");
    assert.deepEqual((await call(h, "DELETE", `${JOBS}/${created.id}`)).body, { status: true, message: "Export job has been marked for cancelling" });
    profileRead.release();
    await h.exports.idle();
    const job = await getExport(h, created.id);
    assert.equal(job.status, "CANCELLED");
    assert.equal(job.errors, undefined);
    assert.equal(job.metrics.totalExportedProfileCounter, undefined);
    for (const id of [b1!, b2!]) {
      const b = await h.profiles.getBatch(SCOPE, id);
      assert.deepEqual([b?.status, b?.recordsWritten], ["aborted", 0], id);
    }
    assert.deepEqual(await lakeRecords(h, out), []);
    const cancelled = (await call(h, "GET", `${JOBS}?status=CANCELLED`)).body as { records: ExportJob[] };
    assert.ok(cancelled.records.some((j) => j.id === created.id));
    const again = await call(h, "DELETE", `${JOBS}/${created.id}`);
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, { status: true, message: "Export job has been deleted" });
    assert.equal((await call(h, "GET", `${JOBS}/${created.id}`)).status, 404);
  });

  it("DELETE of a finished export deletes the job (200), not what it exported; an unknown id is 404", async () => {
    const done = await runExport(h, exportBody());
    assert.equal(done.status, "SUCCEEDED");
    const r = await call(h, "DELETE", `${JOBS}/${done.id}`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: true, message: "Export job has been deleted" });
    const gone = await call(h, "GET", `${JOBS}/${done.id}`);
    assert.equal(gone.status, 404);
    assert.deepEqual(errorsOf(gone), { "404": [{ code: "SEGMENTD-NOT-FOUND-404", message: `Export job with id '${done.id}' was not found` }] });
    assert.ok(!((await call(h, "GET", `${JOBS}?limit=100`)).body as { records: ExportJob[] }).records.some((j) => j.id === done.id));
    assert.equal((await h.profiles.getBatch(SCOPE, done.destination.batchId!))?.status, "success");
    assert.equal((await lakeRecords(h, out)).length, 6);
    const unknown = await call(h, "DELETE", `${JOBS}/999`);
    assert.equal(unknown.status, 404);
    assert.deepEqual(errorsOf(unknown), { "404": [{ code: "SEGMENTD-NOT-FOUND-404", message: "Export job with id '999' was not found" }] });
  });

  it("after a restart, an export left PROCESSING is FAILED and its loading batch aborted", async () => {
    const done = await getExport(h, 1);
    const batch = await h.profiles.createBatch(SCOPE, out, NOW);
    const record = { identityMap: { crmid: [{ id: "p0" }] } };
    const json = JSON.stringify(record);
    await h.profiles.stageBatchRecords(SCOPE, batch.id, [{ index: 0, kind: "profile", body: record, primary: { namespace: "crmid", id: "p0" }, identities: [{ namespace: "crmid", id: "p0" }], timestamp: null, eventId: null, size: json.length, json }],
      { read: 1, failed: [], now: NOW });
    const visible = (await lakeRecords(h, out)).length;
    // What a stop in the middle of an export leaves behind.
    const interrupted: ExportJob = { ...done, id: 99, status: "PROCESSING", destination: { datasetId: out, segmentPerBatch: false, batchId: batch.id }, metrics: { totalTime: { startTimeInMs: NOW }, profileExportTime: {}, aCPDatasetWriteTime: {} } };
    delete interrupted.errors;
    delete interrupted.evaluationInfo;
    await h.close({ keepData: true });
    closed = true;
    const repo = openRepo(h.batchLocation);
    await repo.insert("export-job", { scope: SCOPE, id: "99", status: "PROCESSING", creationTime: NOW + 99, doc: interrupted });
    await repo.close();
    const h2 = await startBatchHarness("export-restart", { clock: new ManualClock(NOW + 5000), reuse: { store: h.store, profileLocation: h.profileLocation, batchLocation: h.batchLocation } });
    try {
      const job = await getExport(h2, 99);
      assert.equal(job.status, "FAILED");
      assert.deepEqual(job.errors, [{ code: "SEGMENTD-EXPORT-INTERRUPTED", msg: "The service stopped while the export job was active; its unfinished batches were aborted" }]);
      assert.deepEqual(job.metrics.totalTime, { startTimeInMs: NOW, endTimeInMs: NOW + 5000, totalTimeInMs: 5000 });
      assert.equal((await h2.profiles.getBatch(SCOPE, batch.id))?.status, "aborted");
      assert.equal((await lakeRecords(h2, out)).length, visible);
    } finally {
      await h2.close();
    }
  });
});
