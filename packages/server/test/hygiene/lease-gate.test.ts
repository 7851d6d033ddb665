/**
 * Several hubs (issue #43): the data lifecycle's background work runs on the hub holding the
 * lifecycle lease — `Hygiene.gate` false: no resume of unfinished work orders, no expiration
 * polls; true (the default, one hub): both.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { defaultHygieneConfig } from "../../src/hygiene/entitlements.js";
import { Hygiene } from "../../src/hygiene/hygiene.js";
import type { HygieneStore } from "../../src/hygiene/store/types.js";
import type { LifecycleProfileStore } from "../../src/hygiene/lifecycle-exits.js";
import { ManualClock } from "../../src/platform/clock.js";

function counted(): { store: HygieneStore; calls: { resume: number; due: number } } {
  const calls = { resume: 0, due: 0 };
  const store = {
    unfinishedWorkOrders: async () => (calls.resume++, []),
    dueExpirations: async () => (calls.due++, []),
  } as unknown as HygieneStore;
  return { store, calls };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("the lifecycle gate", () => {
  it("closed: nothing resumed or polled; opened: the next poll runs, resumeUnfinished resumes", async () => {
    const { store, calls } = counted();
    const h = new Hygiene({ store, profiles: {} as LifecycleProfileStore, clock: new ManualClock(0), config: { ...defaultHygieneConfig(), pollIntervalMs: 20 } });
    let holds = false;
    h.gate = () => holds;
    await h.start();
    await sleep(150);
    assert.deepEqual(calls, { resume: 0, due: 0 });
    holds = true;
    await sleep(150);
    assert.equal(calls.resume, 0, "the poll does not resume: the lease gain does");
    assert.ok(calls.due >= 2, `polled ${calls.due} times`);
    await h.resumeUnfinished();
    assert.equal(calls.resume, 1);
    await h.stop();
  });

  it("by default (one hub) start resumes and polls", async () => {
    const { store, calls } = counted();
    const h = new Hygiene({ store, profiles: {} as LifecycleProfileStore, clock: new ManualClock(0), config: { ...defaultHygieneConfig(), pollIntervalMs: 20 } });
    await h.start();
    await sleep(150);
    assert.equal(calls.resume, 1);
    assert.ok(calls.due >= 2, `polled ${calls.due} times`);
    await h.stop();
  });
});
