/**
 * Previews and estimates over real HTTP on demo data: sample members equal
 * `evaluate`'s members (full data below 1M profiles), the estimate equals the
 * exact count with a zero-width interval on full data, sampling rules and the
 * interval arithmetic, validation errors.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parse } from "@segmentd/pql";
import { ManualClock } from "../../src/index.js";
import { DEMO_DATASETS, demoEvents, demoProfiles } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { NO_MERGE_POLICY, type TenantScope } from "../../src/profiles/types.js";
import { estimateFrom, sampleSize, type Estimate } from "../../src/batch/previews/preview-service.js";
import { ORG_A, call, startBatchHarness, type BatchHarness } from "./batch-harness.js";
import { referenceMembers } from "./fixtures.js";
import type { TestStoreHandle } from "../helpers/test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12, 0, 0);
const SCOPE: TenantScope = { orgId: ORG_A, sandboxName: "prod" };

describe("sampling and interval arithmetic", () => {
  it("samples as AEP documents: all below 1M, 1M up to 20M, 5% above", () => {
    assert.equal(sampleSize(999_999), 999_999);
    assert.equal(sampleSize(1_000_000), 1_000_000);
    assert.equal(sampleSize(20_000_000), 1_000_000);
    assert.equal(sampleSize(40_000_000), 2_000_000);
  });

  it("scales the sample rate with a finite-population 95% interval", () => {
    assert.deepEqual(estimateFrom({ totalRows: 100, read: 100, matched: 30 }), { size: 30, standardError: 0, low: 30, high: 30 });
    const e = estimateFrom({ totalRows: 10_000_000, read: 1_000_000, matched: 250_000 });
    assert.equal(e.size, 2_500_000);
    // SE = N·sqrt(p(1−p)/n · (N−n)/(N−1)) = 1e7 · sqrt(0.1875/1e6 · 0.9000000900…)
    assert.ok(Math.abs(e.standardError - 1e7 * Math.sqrt((0.1875 / 1e6) * (9_000_000 / 9_999_999))) < 1e-6);
    assert.equal(e.low, Math.floor(2_500_000 - 1.96 * e.standardError));
    assert.equal(e.high, Math.ceil(2_500_000 + 1.96 * e.standardError));
  });
});

describe("previews and estimates API", () => {
  let h: BatchHarness & { store: TestStoreHandle };

  before(async () => {
    h = await startBatchHarness("preview", { clock: new ManualClock(NOW) });
    const p = (await h.profiles.createDataset(SCOPE, DEMO_DATASETS.profiles, NOW)).id;
    const e = (await h.profiles.createDataset(SCOPE, DEMO_DATASETS.events, NOW)).id;
    const demo = { profiles: 200, events: 1500, now: NOW, seed: 4 };
    await ingestRecords(h.profiles, SCOPE, p, [...demoProfiles(demo)].map((value, index) => ({ index, value })), { now: NOW });
    await ingestRecords(h.profiles, SCOPE, e, [...demoEvents(demo)].map((value, index) => ({ index, value })), { now: NOW });
  });
  after(async () => {
    await h.close();
  });

  it("previews members and estimates the size of an expression on full data", async () => {
    const text = 'loyalty.tier = "gold" or xEvent[eventType = "commerce.purchases"].count() > 0';
    const r = await call(h, "POST", "/data/core/ups/preview", { predicateExpression: text, predicateType: "pql/text", predicateModel: "_xdm.context.profile", graphType: "pdg" });
    assert.equal(r.status, 201);
    const created = r.body as { previewId: string; state: string };
    assert.equal(created.state, "NEW");
    await h.previews.idle();
    const want = await referenceMembers(h.profiles, parse(text), { excludeOptOut: true, scope: SCOPE, now: NOW });
    assert.ok(want.size > 10);
    const est = (await call(h, "GET", `/data/core/ups/estimate/${created.previewId}`)).body as Estimate;
    assert.equal(est.state, "RESULT_READY");
    assert.equal(est.totalRows, await h.profiles.countProfiles(SCOPE));
    assert.equal(est.profilesReadSoFar, est.totalRows);
    assert.equal(est.estimatedSize, want.size);
    assert.equal(est.profilesMatchedSoFar, want.size);
    assert.equal(est.standardError, 0, "full data: exact");
    assert.equal(est.confidenceInterval, "95%");
    // Every demo profile (known or anonymous) carries an ECID.
    assert.equal(est.estimatedNamespaceDistribution.find((x) => x.namespaceId === "ecid")?.profilesMatchedSoFar, want.size);
    const page1 = (await call(h, "GET", `/data/core/ups/preview/${created.previewId}?limit=10`)).body as { results: Array<Record<string, unknown>>; links: { next?: string }; page: { offset: number; size: number } };
    assert.equal(page1.results.length, 10);
    assert.equal(page1.links.next, `/data/core/ups/preview/${created.previewId}?offset=10&limit=10`);
    const all = (await call(h, "GET", `/data/core/ups/preview/${created.previewId}`)).body as { results: Array<Record<string, unknown>> };
    assert.deepEqual(new Set(all.results.map((x) => Object.keys(x)[0])), want);
  });

  it("graphType none evaluates identities separately", async () => {
    const text = 'xEvent[eventType = "directMarketing.emailOpened"].count() > 0 and loyalty.tier.isNotNull()';
    const r = await call(h, "POST", "/data/core/ups/preview", { predicateExpression: text, graphType: "none" });
    await h.previews.idle();
    const id = (r.body as { previewId: string }).previewId;
    const est = (await call(h, "GET", `/data/core/ups/estimate/${id}`)).body as Estimate;
    const want = await referenceMembers(h.profiles, parse(text), { excludeOptOut: true, scope: SCOPE, now: NOW, policy: NO_MERGE_POLICY });
    assert.equal(est.estimatedSize, want.size);
  });

  it("refuses bad previews, and forgets deleted ones", async () => {
    const bad = await call(h, "POST", "/data/core/ups/preview", { predicateExpression: "a = " });
    assert.equal(bad.status, 400);
    const item = (bad.body as { errors: Record<string, Array<{ code: string; message: string }>> }).errors["400"]![0]!;
    assert.equal(item.code, "SEGMENTD-BATCH-PREVIEW-400");
    assert.match(item.message, /^Invalid predicateExpression: /);
    const noExpr = await call(h, "POST", "/data/core/ups/preview", {});
    assert.deepEqual((noExpr.body as { errors: unknown }).errors, { "400": [{ code: "SEGMENTD-BATCH-PREVIEW-400", message: "predicateExpression is required: the PQL text to preview" }] });
    const r = await call(h, "POST", "/data/core/ups/preview", { predicateExpression: "true" });
    await h.previews.idle();
    const id = (r.body as { previewId: string }).previewId;
    assert.equal((await call(h, "GET", `/data/core/ups/estimate/${id}`, undefined, "dev")).status, 404, "other sandbox");
    assert.equal((await call(h, "DELETE", `/data/core/ups/preview/${id}`)).status, 200);
    assert.equal((await call(h, "GET", `/data/core/ups/estimate/${id}`)).status, 404);
  });
});
