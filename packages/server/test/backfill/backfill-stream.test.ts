/**
 * Backfill, acceptance 2 in process at npm-test size (20,000 profiles; the 200,000-profile run is
 * backfill-stream.latency.test.ts): a definition created and then edited while a stream of records
 * and events for the same profiles arrives ends with the members of a from-scratch batch job, and
 * no profile's transitions doubled (stream-scenario.ts).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startHarness, type Harness } from "../helpers/server-harness.js";
import { streamScenario } from "./stream-scenario.js";

let h: Harness;
before(async () => {
  h = await startHarness("backfill-stream");
});
after(async () => h.close());

test("a backfill racing a live stream ends with a from-scratch evaluation's members and no transition doubled (20,000 profiles)", async () => {
  const f = await streamScenario(h, 20_000);
  assert.ok(f.created.fenced + f.edited.fenced > 0, `the stream changed profiles after the fences: ${JSON.stringify(f)}`);
  console.log(JSON.stringify({ ...f, created: { total: f.created.total, entered: f.created.entered, exited: f.created.exited, fenced: f.created.fenced }, edited: { total: f.edited.total, entered: f.edited.entered, exited: f.edited.exited, fenced: f.edited.fenced } }));
});
