/** A backfill's state and a transition's source in words (src/backfill-words.ts): no browser needed. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Backfill } from "../src/api/types.js";
import { backfillCounts, backfillHeadline, backfillPercent, isBackfillRunning, reasonWords, sourceWords } from "../src/backfill-words.js";

const base: Backfill = {
  definitionId: "d1", state: "running", phase: "writing", reason: "created", definitionVersion: 1, fence: 10,
  total: 2_000, processed: 500, entered: 400, exited: 3, fenced: 0, queuedAt: "2026-01-01T00:00:00.000Z",
  startedAt: "2026-01-01T00:00:01.000Z", evaluatedAt: "2026-01-01T00:00:02.000Z", finishedAt: null, attempts: 1, error: null,
};

describe("backfill words", () => {
  it("names each source; backfill says what it is", () => {
    assert.deepEqual(["batch", "streaming", "edge", "backfill", "future"].map(sourceWords), ["batch evaluation", "streaming evaluation", "edge evaluation", "backfill (filled when saved)", "future"]);
  });

  it("says why it ran, a merge policy change included; an unknown reason as sent", () => {
    assert.equal(reasonWords("mergePolicy"), "its merge policy changed");
    assert.equal(reasonWords("referenced"), "an audience it reads with inSegment was backfilled");
    assert.equal(reasonWords("something new"), "something new");
  });

  it("gives a percentage only while writing (and 100 when complete or nothing to write)", () => {
    assert.equal(backfillPercent(base), 25);
    assert.equal(backfillPercent({ ...base, phase: "fencing", processed: 1_999 }), 99);
    assert.equal(backfillPercent({ ...base, phase: "evaluating" }), null);
    assert.equal(backfillPercent({ ...base, state: "queued", phase: "queued" }), null);
    assert.equal(backfillPercent({ ...base, total: 0, processed: 0 }), 100);
    assert.equal(backfillPercent({ ...base, state: "succeeded", phase: "done" }), 100);
  });

  it("headlines the state, and polls only while queued or running", () => {
    assert.equal(backfillHeadline(base), "Writing the changes");
    assert.equal(backfillHeadline({ ...base, state: "succeeded", phase: "done" }), "Complete");
    assert.equal(backfillHeadline({ ...base, state: "failed", phase: "done" }), "Failed");
    assert.deepEqual((["queued", "running", "succeeded", "failed"] as const).map((state) => isBackfillRunning({ state })), [true, true, false, false]);
    assert.equal(backfillCounts(base), "500 of 2,000 changes decided · 400 entered, 3 exited");
  });
});
