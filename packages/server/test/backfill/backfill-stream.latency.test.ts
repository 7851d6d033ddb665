/**
 * Backfill, acceptance 2 in process at full size (issue #40): 200,000 profiles, a streaming
 * definition created and then edited while a stream of records and events for those profiles
 * arrives (stream-scenario.ts). It ends with a from-scratch batch job's members and no transition
 * doubled. Minutes per store: in the latency suite (one file at a time), not in npm test, whose
 * backfill-stream.test.ts runs the same at 20,000. Prints its figures.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startHarness, type Harness } from "../helpers/server-harness.js";
import { streamScenario } from "./stream-scenario.js";

const N = Number(process.env["SEGMENTD_BACKFILL_PROFILES"] ?? 200_000);

let h: Harness;
before(async () => {
  h = await startHarness("backfill-stream-200k");
});
after(async () => h.close());

test(`a backfill racing a live stream at ${N} profiles ends with a from-scratch evaluation's members and no transition doubled`, { timeout: 1_800_000 }, async () => {
  const f = await streamScenario(h, N);
  assert.ok(f.created.fenced + f.edited.fenced > 0, `the stream changed profiles after the fences: ${JSON.stringify(f)}`);
  const brief = (b: typeof f.created) => ({ total: b.total, entered: b.entered, exited: b.exited, fenced: b.fenced, ms: Date.parse(b.finishedAt!) - Date.parse(b.startedAt!), evaluateMs: Date.parse(b.evaluatedAt!) - Date.parse(b.startedAt!) });
  console.log(`# backfill at ${N} profiles (${process.env["SEGMENTD_TEST_STORE"] ?? "embedded"}): ${JSON.stringify({ ...f, created: brief(f.created), edited: brief(f.edited) })}`);
});
