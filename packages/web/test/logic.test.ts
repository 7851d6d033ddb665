/** The UI's decisions that need no browser: eligibility, methods, last evaluated, errors, routes, chart and quota geometry. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { describeFailure, TOKEN_HINT } from "../src/api/errors.js";
import type { EligibilityAnswer, MergePolicy, SegmentDefinition, SegmentJob } from "../src/api/types.js";
import { barGeometry } from "../src/chart.js";
import { choicesFromLocal, choicesFromServer, keepSelection, localVerdict } from "../src/eligibility.js";
import { lastEvaluated } from "../src/last-evaluated.js";
import { methodFilter, methodOf } from "../src/methods.js";
import { usedPercent } from "../src/pages/lifecycle.js";
import { matchesSearch } from "../src/pages/audiences.js";
import { parseRoute } from "../src/router.js";

const onEdge: MergePolicy = { id: "p1", name: "Default", isActiveOnEdge: true, default: true, schema: { name: "_xdm.context.profile" } };
const notOnEdge: MergePolicy = { ...onEdge, id: "p2", name: "Batch only", isActiveOnEdge: false };
const byMethod = (cs: ReturnType<typeof choicesFromLocal>) => Object.fromEntries(cs.map((c) => [c.method, c]));

describe("local eligibility", () => {
  it("offers Edge and Streaming for a profile-only expression on the active-on-edge policy", () => {
    const c = byMethod(choicesFromLocal(localVerdict('homeAddress.countryCode = "US"'), onEdge));
    assert.equal(c.synchronous!.enabled, true);
    assert.equal(c.continuous!.enabled, true);
    assert.equal(c.batch!.enabled, true);
  });
  it("disables Edge and Streaming for a 7-day window, with the classifier's reason", () => {
    const c = byMethod(choicesFromLocal(localVerdict('chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(<= 7 days before now)])'), onEdge));
    assert.equal(c.synchronous!.enabled, false);
    assert.match(c.synchronous!.reasons.join(" "), /7 days/);
    assert.equal(c.continuous!.enabled, false);
    assert.equal(c.batch!.enabled, true);
  });
  it("enables Edge again for a 2-hour window", () => {
    const c = byMethod(choicesFromLocal(localVerdict('chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(<= 2 hours before now)])'), onEdge));
    assert.equal(c.synchronous!.enabled, true);
  });
  it("names the merge policy when it is not active on edge, leaving Streaming available", () => {
    const c = byMethod(choicesFromLocal(localVerdict('homeAddress.countryCode = "US"'), notOnEdge));
    assert.equal(c.synchronous!.enabled, false);
    assert.match(c.synchronous!.reasons.join(" "), /Batch only.*not active on edge/);
    assert.equal(c.continuous!.enabled, true);
  });
  it("reports diagnostics for invalid text instead of throwing", () => {
    const v = localVerdict('homeAddress.countryCode = ');
    assert.ok(v.diagnostics.length > 0);
    assert.equal(v.synchronous, false);
    assert.deepEqual(localVerdict("   ").reasons, ["the expression is empty"]);
  });
});

describe("server eligibility and selection", () => {
  const answer: EligibilityAnswer = {
    valid: true, diagnostics: [], mergePolicy: { id: "p2", isActiveOnEdge: false },
    eligible: { batch: true, continuous: true, synchronous: false },
    reasons: { continuous: [], synchronous: ["merge policy 'p2' is not active on edge", "merge policy 'p2' is not active on edge"] },
  };
  it("takes the server's verdict and reasons (once each)", () => {
    const c = byMethod(choicesFromServer(answer));
    assert.equal(c.synchronous!.enabled, false);
    assert.deepEqual(c.synchronous!.reasons, ["merge policy 'p2' is not active on edge"]);
    assert.equal(c.continuous!.enabled, true);
  });
  it("keeps the choice while allowed and falls back to Batch when not", () => {
    const cs = choicesFromServer(answer);
    assert.equal(keepSelection("continuous", cs), "continuous");
    assert.equal(keepSelection("synchronous", cs), "batch");
  });
});

const flags = (b: boolean, c: boolean, s: boolean) => ({ batch: { enabled: b }, continuous: { enabled: c }, synchronous: { enabled: s } });

describe("methods", () => {
  it("names a definition by its most immediate flag", () => {
    assert.equal(methodOf({ evaluationInfo: flags(true, true, true) }), "synchronous");
    assert.equal(methodOf({ evaluationInfo: flags(true, true, false) }), "continuous");
    assert.equal(methodOf({ evaluationInfo: flags(true, false, false) }), "batch");
    assert.equal(methodOf({ evaluationInfo: flags(false, false, false) }), "batch");
  });
  it("filters the list so that each definition appears under exactly the method methodOf gives it", () => {
    const all = [flags(true, false, false), flags(false, true, false), flags(true, true, true), flags(false, false, true)];
    for (const m of ["batch", "continuous", "synchronous"] as const) {
      const f = methodFilter(m);
      const selected = all.filter((e) => Object.entries(f).every(([k, v]) => e[k as keyof typeof e].enabled === v));
      assert.deepEqual(selected.map((e) => methodOf({ evaluationInfo: e })), selected.map(() => m));
      assert.equal(selected.length, all.filter((e) => methodOf({ evaluationInfo: e }) === m).length);
    }
  });
  it("searches name and description, case-insensitively", () => {
    assert.equal(matchesSearch({ name: "Recent Purchasers", description: "" }, "purch"), true);
    assert.equal(matchesSearch({ name: "x", description: "Loyal GOLD members" }, "gold"), true);
    assert.equal(matchesSearch({ name: "x" }, "gold"), false);
  });
});

describe("last evaluated", () => {
  const def: Pick<SegmentDefinition, "id" | "evaluationInfo" | "creationTime"> = { id: "d1", evaluationInfo: flags(true, false, false), creationTime: 1000 };
  const job = (over: Partial<SegmentJob>): SegmentJob => ({ id: "j", status: "SUCCEEDED", creationTime: 2000, updateTime: 3000, segments: [{ segmentId: "d1" }], ...over });
  it("is continuous for streaming and edge audiences", () => {
    assert.deepEqual(lastEvaluated({ ...def, evaluationInfo: flags(false, false, true) }, []), { kind: "continuous" });
  });
  it("is the newest successful job that named the audience, or a later '*' job", () => {
    assert.deepEqual(lastEvaluated(def, [job({ updateTime: 3000 }), job({ updateTime: 5000, segments: [{ segmentId: "*" }] }), job({ updateTime: 9000, status: "FAILED" })]), { kind: "at", time: 5000 });
    // A "*" job created before the audience existed did not evaluate it.
    assert.deepEqual(lastEvaluated(def, [job({ creationTime: 500, updateTime: 7000, segments: [{ segmentId: "*" }] })]), { kind: "never" });
    assert.deepEqual(lastEvaluated(def, [job({ segments: [{ segmentId: "other" }] })]), { kind: "never" });
  });
});

describe("errors in words", () => {
  it("uses the UPS title and keeps the item messages as details", () => {
    const f = describeFailure(400, { title: "Segment definition 'a' cannot be deleted: it is referenced through inSegment by 'b'", errors: { "400": [{ code: "X", message: "Segment definition 'a' is referenced by other segment definitions" }] } });
    assert.match(f.message, /referenced through inSegment by 'b'/);
    assert.deepEqual(f.details, ["Segment definition 'a' is referenced by other segment definitions"]);
  });
  it("reads the gateway and problem shapes", () => {
    assert.equal(describeFailure(403, { error_code: "403003", message: "Api Key is invalid" }).message, "Api Key is invalid");
    // A refused token also says where a valid one comes from (issue #39).
    assert.equal(describeFailure(401, { error_code: "401013", message: "Oauth token is not valid" }).message, `Oauth token is not valid. ${TOKEN_HINT}`);
    assert.equal(describeFailure(400, { title: "BadRequestError", detail: "A valid content-type must be specified" }).message, "A valid content-type must be specified");
  });
  it("never shows markup or nothing", () => {
    assert.match(describeFailure(502, "<html><body>Bad gateway</body></html>").message, /server failed \(HTTP 502\)/);
    assert.match(describeFailure(404, undefined).message, /Not found/);
    assert.match(describeFailure(0, undefined).message, /could not be reached/);
  });
});

describe("routes", () => {
  it("parses every client route and nothing else", () => {
    assert.equal(parseRoute("/", "").page, "audiences");
    assert.equal(parseRoute("/audiences", "?q=x").page, "audiences");
    assert.deepEqual(parseRoute("/audiences/new", ""), { page: "new" });
    assert.deepEqual(parseRoute("/audiences/a%2Fb", ""), { page: "details", id: "a/b" });
    assert.deepEqual(parseRoute("/audiences/abc/edit", ""), { page: "edit", id: "abc" });
    assert.deepEqual(parseRoute("/lifecycle", ""), { page: "lifecycle" });
    assert.deepEqual(parseRoute("/signin", ""), { page: "signin" });
    assert.equal(parseRoute("/audiences/a/b/c", "").page, "notFound");
    assert.equal(parseRoute("/elsewhere", "").page, "notFound");
  });
});

describe("chart and quota geometry", () => {
  const bucket = (q: number, d: number) => ({ start: "", end: "", qualified: q, disqualified: d, net: q - d });
  it("scales ups above and downs below one zero line, filling the height", () => {
    const g = barGeometry({ buckets: [bucket(3, 0), bucket(0, 1), bucket(0, 0)] }, 300, 100);
    assert.equal(g.zeroY, 75);
    assert.equal(g.bars[0]!.upHeight, 75);
    assert.equal(g.bars[1]!.downHeight, 25);
    assert.equal(g.bars[2]!.upHeight + g.bars[2]!.downHeight, 0);
    assert.ok(g.bars.every((b, i) => b.x >= i * 100 && b.x + b.width <= (i + 1) * 100));
  });
  it("draws no bar at all when nothing changed", () => {
    const g = barGeometry({ buckets: [bucket(0, 0), bucket(0, 0)] }, 100, 50);
    assert.equal(g.zeroY, 50);
    assert.ok(g.bars.every((b) => b.upHeight === 0 && b.downHeight === 0));
  });
  it("reports quota use as a percentage, capped, with a zero allowance full once used", () => {
    assert.equal(usedPercent({ consumed: 5, quota: 20 }), 25);
    assert.equal(usedPercent({ consumed: 30, quota: 20 }), 100);
    assert.equal(usedPercent({ consumed: 0, quota: 0 }), 0);
    assert.equal(usedPercent({ consumed: 1, quota: 0 }), 100);
  });
});
