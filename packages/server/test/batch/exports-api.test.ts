/**
 * Export jobs over real HTTP: members of an audience (filtered by status)
 * written to a dataset in one ingestion batch, with metrics; validation
 * errors with nothing stored; list paging with AEP's offset cursor.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ManualClock } from "../../src/index.js";
import { demoProfile } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import type { ExportJob } from "../../src/batch/exports/export-service.js";
import { ORG_A, call, startBatchHarness, type BatchHarness } from "./batch-harness.js";
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
});
