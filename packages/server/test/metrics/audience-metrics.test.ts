/**
 * Audience metrics over real HTTP after a scripted sequence of qualifications
 * and exits across 40 days: totals, "new audience updated" for 24h / 7d / 30d
 * and every chart bucket equal hand-computed values.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PROFILES_DS, profile } from "../streaming/fixtures.js";
import { OTHER_ORG, startEdgeHarness, type EdgeHarness } from "../edge/harness.js";

const NOW = Date.parse("2026-06-30T12:00:00Z");
const H = 3_600_000;
const D = 24 * H;

interface Metrics {
  segmentId: string;
  window: string;
  from: string;
  to: string;
  totalQualified: number;
  newAudienceUpdated: number;
  qualified: number;
  disqualified: number;
  bucketSizeMs: number;
  buckets: Array<{ start: string; end: string; qualified: number; disqualified: number; net: number }>;
}

/** Buckets all zero except the listed [index, qualified, disqualified]. */
function expectedBuckets(count: number, size: number, from: number, nonZero: Array<[number, number, number]>): Metrics["buckets"] {
  return Array.from({ length: count }, (_, i) => {
    const hit = nonZero.find((n) => n[0] === i);
    const q = hit?.[1] ?? 0;
    const d = hit?.[2] ?? 0;
    return { start: new Date(from + i * size).toISOString(), end: new Date(from + (i + 1) * size).toISOString(), qualified: q, disqualified: d, net: q - d };
  });
}

describe("audience metrics", () => {
  let h: EdgeHarness;
  let def: string;

  before(async () => {
    h = await startEdgeHarness(NOW - 41 * D);
    def = await h.f.define("metrics audience", 'homeAddress.country = "US"', { continuous: true });
    const scope = { orgId: h.f.tenant.orgId, sandboxName: "prod" };
    await h.f.store(PROFILES_DS, ["p1", "p2", "p3", "p4", "p5"].map((p) => profile(p, { person: { name: p } })));
    const pid: Record<string, string> = {};
    for (const p of ["p1", "p2", "p3", "p4", "p5"]) pid[p] = (await h.f.hub.findProfileId(scope, { namespace: "crmid", id: p }))!;
    // The script, oldest first: [profile, status, source, at].
    const script: Array<[string, "realized" | "exited", "batch" | "streaming" | "edge", number]> = [
      ["p1", "realized", "streaming", NOW - 40 * D], // before every window
      ["p2", "realized", "edge", NOW - 20 * D],
      ["p3", "realized", "streaming", NOW - 5 * D],
      ["p2", "exited", "edge", NOW - 3 * D],
      ["p4", "realized", "batch", NOW - 2 * D], // batch: never in "new audience updated"
      ["p1", "exited", "streaming", NOW - 25 * H],
      ["p3", "exited", "streaming", NOW - 10 * H],
      ["p3", "realized", "streaming", NOW - 2 * H], // exited → realized counts again
      ["p5", "realized", "edge", NOW - 30 * 60_000],
      ["p5", "realized", "edge", NOW - 20 * 60_000], // no status change: no transition, counts nothing
    ];
    for (const [p, status, source, at] of script) await h.f.hub.applyMembershipChanges(scope, [{ profileId: pid[p]!, definitionId: def, status, source, at }]);
    h.f.clock.set(NOW);
  });
  after(async () => {
    await h.close();
  });

  const get = async (window: string) => {
    const r = await h.get(`/data/core/ups/segment/definitions/${def}/metrics?window=${window}`, h.headers());
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json as Metrics;
  };

  it("last 24 hours", async () => {
    const m = await get("24h");
    const from = NOW - D;
    assert.deepEqual(m, {
      segmentId: def,
      window: "24h",
      from: new Date(from).toISOString(),
      to: new Date(NOW).toISOString(),
      totalQualified: 3, // p3, p4 (batch), p5
      newAudienceUpdated: 1, // +p3 +p5 −p3
      qualified: 2,
      disqualified: 1,
      bucketSizeMs: H,
      buckets: expectedBuckets(24, H, from, [[14, 0, 1], [22, 1, 0], [23, 1, 0]]),
    });
  });

  it("last 7 days", async () => {
    const m = await get("7d");
    const from = NOW - 7 * D;
    assert.equal(m.totalQualified, 3);
    assert.equal(m.newAudienceUpdated, 0); // +p3 −p2 −p1 −p3 +p3 +p5
    assert.equal(m.qualified, 3);
    assert.equal(m.disqualified, 3);
    assert.deepEqual(m.buckets, expectedBuckets(7, D, from, [[2, 1, 0], [4, 0, 1], [5, 0, 1], [6, 2, 1]]));
  });

  it("last 30 days", async () => {
    const m = await get("30d");
    const from = NOW - 30 * D;
    assert.equal(m.newAudienceUpdated, 1); // +p2 and the 7-day figures
    assert.equal(m.qualified, 4);
    assert.equal(m.disqualified, 3);
    assert.deepEqual(m.buckets, expectedBuckets(30, D, from, [[10, 1, 0], [25, 1, 0], [27, 0, 1], [28, 0, 1], [29, 2, 1]]));
  });

  it("defaults to 24 hours", async () => {
    const r = await h.get(`/data/core/ups/segment/definitions/${def}/metrics`, h.headers());
    assert.equal((r.json as Metrics).window, "24h");
  });

  it("an unknown window is a 400", async () => {
    const r = await h.get(`/data/core/ups/segment/definitions/${def}/metrics?window=1y`, h.headers());
    assert.equal(r.status, 400);
    const body = r.json as { errors: Record<string, Array<{ code: string; message: string }>> };
    assert.equal(body.errors["400"]![0]!.code, "UPLIB-101206-500");
    assert.match(body.errors["400"]![0]!.message, /window/);
  });

  it("an unknown definition, or another organization's, is a 404", async () => {
    const r = await h.get(`/data/core/ups/segment/definitions/nope/metrics?window=7d`, h.headers());
    assert.equal(r.status, 404);
    assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["404"], [{ code: "SEGMENTD-NOT-FOUND-404", message: "Segment definition with id 'nope' was not found" }]);
    const other = await h.get(`/data/core/ups/segment/definitions/${def}/metrics?window=7d`, h.headers(OTHER_ORG));
    assert.equal(other.status, 404);
  });
});
