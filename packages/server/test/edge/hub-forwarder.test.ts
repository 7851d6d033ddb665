/**
 * The hub forwarding queue of the edge (hub-forwarder.ts), against the real
 * hub of the fixture (embedded, or PostgreSQL in test:pg): batches written
 * off the caller's turn, backpressure (a bounded queue, and 503 over HTTP
 * with nothing stored), a drain on close that loses nothing, per-profile
 * order across batches, and hub write failures reported and retried (or
 * dropped after the last attempt, without blocking what follows).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { HubForwardError, HubForwarder, type ForwardItem, type HubForwarderOptions } from "../../src/edge/hub-forwarder.js";
import type { EdgeProjector } from "../../src/edge/projector.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { Dataset, MembershipStatus, MergePolicySpec } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { EVENTS_DS, event, openFixture, type Fixture } from "../streaming/fixtures.js";
import { startEdgeHarness, type EdgeHarness } from "./harness.js";

const T0 = Date.parse("2026-09-01T10:00:00Z");
const PDG: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A hub that counts calls and can fail them: `fail.append = 2` fails the next two appends. */
function instrumentedHub(hub: ProfileStore) {
  const calls = { append: 0, appended: 0, appendSizes: [] as number[], memberships: 0, membershipsApplied: 0, membershipsInAppendTurn: [] as boolean[] };
  // True from an append call until the end of that synchronous turn (a microtask resets it).
  let inAppendTurn = false;
  const fail = { append: 0, memberships: 0, always: false };
  const store = {
    kind: hub.kind,
    async append(...args: Parameters<ProfileStore["append"]>) {
      calls.append++;
      inAppendTurn = true;
      queueMicrotask(() => (inAppendTurn = false));
      if (fail.always || fail.append > 0) {
        if (fail.append > 0) fail.append--;
        throw new Error("hub unavailable (append)");
      }
      calls.appended++;
      calls.appendSizes.push(args[2].length);
      return hub.append(...args);
    },
    findProfileId: (...args: Parameters<ProfileStore["findProfileId"]>) => hub.findProfileId(...args),
    async applyMembershipChanges(...args: Parameters<ProfileStore["applyMembershipChanges"]>) {
      calls.memberships++;
      calls.membershipsInAppendTurn.push(inAppendTurn);
      if (fail.memberships > 0) {
        fail.memberships--;
        throw new Error("hub unavailable (memberships)");
      }
      calls.membershipsApplied++;
      return hub.applyMembershipChanges(...args);
    },
  } as unknown as ProfileStore;
  return { store, calls, fail };
}

describe("hub forwarder", () => {
  let f: Fixture;
  let dataset: Dataset;
  const scope = { orgId: "", sandboxName: "prod" };
  const projector = { project: async () => 0 } as unknown as EdgeProjector;

  before(async () => {
    f = await openFixture(T0);
    scope.orgId = f.tenant.orgId;
    dataset = (await f.hub.getDataset(scope, EVENTS_DS))!;
  });
  after(async () => {
    await f.close();
  });

  let n = 0;
  function item(crmId: string, changes: Array<{ definitionId: string; status: MembershipStatus }> = []): ForwardItem {
    const at = T0 - 100_000 + ++n;
    const r = validateRecord(event(crmId, "page.view", at), 0, dataset);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return {
      tenant: f.tenant,
      datasetId: EVENTS_DS,
      record: r.record,
      identity: { namespace: "crmid", id: crmId },
      location: "edge",
      newAtLocation: false,
      edgeChanges: changes.map((c) => ({ ...c, at })),
    };
  }

  function forwarder(hub: ProfileStore, opts: HubForwarderOptions, errors: unknown[] = []): HubForwarder {
    return new HubForwarder({ ...opts, hub, projector, now: () => f.clock.now(), onError: (err) => errors.push(err) });
  }

  async function hubEventCount(crmId: string): Promise<number> {
    return (await f.hub.getEvents(scope, { namespace: "crmid", id: crmId }, PDG, { limit: 1000 })).events.length;
  }

  it("writes in large batches, never in the enqueueing turn, and after the interval when no batch is full", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    const fw = forwarder(store, { maxBatch: 100, flushIntervalMs: 200 });
    for (let i = 0; i < 250; i++) fw.enqueue(item(`batch-${i % 5}`));
    assert.equal(calls.append, 0, "nothing is written in the caller's synchronous turn");
    assert.equal(fw.pending, 250);
    await fw.idle();
    assert.deepEqual(calls.appendSizes, [100, 100, 50], "one append per batch of at most maxBatch items");
    for (let p = 0; p < 5; p++) assert.equal(await hubEventCount(`batch-${p}`), 50);

    // Fewer than maxBatch items wait for the interval (the rate bound), then go in one batch.
    for (let i = 0; i < 3; i++) fw.enqueue(item("batch-late"));
    await sleep(20);
    assert.equal(calls.append, 3, "a partial batch waits for the interval");
    await waitFor(() => fw.pending === 0, "the interval flush");
    assert.deepEqual(calls.appendSizes, [100, 100, 50, 3]);
    assert.equal(await hubEventCount("batch-late"), 3);
    await fw.close();
  });

  it("hands a known profile's events and transitions to the store in one turn (one group commit)", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    const fw = forwarder(store, {});
    // A new profile: the append creates it, so its id is read after the append (two steps).
    fw.enqueue(item("together", [{ definitionId: "d-together", status: "realized" }]));
    await fw.idle();
    // Now the hub knows it: events and transitions go together.
    fw.enqueue(item("together", [{ definitionId: "d-together", status: "exited" }]));
    fw.enqueue(item("together", [{ definitionId: "d-together", status: "realized" }]));
    await fw.idle();
    assert.deepEqual(calls.membershipsInAppendTurn, [false, true]);
    assert.deepEqual(calls.appendSizes, [1, 2]);
    const transitions = await f.hub.listTransitions(scope, { definitionId: "d-together" });
    assert.deepEqual(transitions.map((t) => [t.from, t.to]), [[null, "realized"], ["realized", "exited"], ["exited", "realized"]]);
    assert.equal(await hubEventCount("together"), 3);
    await fw.close();
  });

  it("applies backpressure: admit() refuses once maxQueue items wait, and accepts again after the drain", async () => {
    const fw = forwarder(f.hub, { maxQueue: 3, flushIntervalMs: 60_000 });
    for (let i = 0; i < 3; i++) {
      assert.equal(fw.admit(), true, `item ${i} is admitted`);
      fw.enqueue(item("bp"));
    }
    assert.equal(fw.admit(), false, "the fourth is refused while three wait");
    assert.equal(fw.stats.refused, 1);
    assert.equal(fw.pending, 3, "the refused item was not queued");
    await fw.idle();
    assert.equal(fw.pending, 0);
    assert.equal(fw.admit(), true);
    assert.equal(await hubEventCount("bp"), 3);
    await fw.close();
    assert.equal(fw.admit(), false, "a closed forwarder admits nothing");
  });

  it("close() drains the queue: every queued item reaches the hub", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    // A long interval: without the drain nothing would be written during the test.
    const fw = forwarder(store, { maxBatch: 500, flushIntervalMs: 60_000 });
    for (let i = 0; i < 1200; i++) fw.enqueue(item(`drain-${i % 12}`, i < 12 ? [{ definitionId: "d-drain", status: "realized" }] : []));
    await fw.close();
    assert.equal(fw.pending, 0);
    assert.equal(fw.stats.forwarded, 1200);
    assert.equal(fw.stats.dropped, 0);
    assert.deepEqual(calls.appendSizes, [500, 500, 200]);
    for (let p = 0; p < 12; p++) assert.equal(await hubEventCount(`drain-${p}`), 100, `drain-${p}`);
    const transitions = await f.hub.listTransitions(scope, { definitionId: "d-drain" });
    assert.equal(transitions.length, 12, "the 12 edge qualifications (one per profile) are recorded");
  });

  it("keeps each profile's order across batches", async () => {
    const fw = forwarder(f.hub, { maxBatch: 3, flushIntervalMs: 1 });
    for (let i = 0; i < 10; i++) fw.enqueue(item("ordered", [{ definitionId: "d-order", status: i % 2 === 0 ? "realized" : "exited" }]));
    await fw.idle();
    assert.equal(fw.stats.batches, 4);
    const transitions = await f.hub.listTransitions(scope, { definitionId: "d-order" });
    const expected: Array<[MembershipStatus | null, MembershipStatus]> = [[null, "realized"]];
    for (let i = 1; i < 10; i++) expected.push(i % 2 === 0 ? ["exited", "realized"] : ["realized", "exited"]);
    assert.deepEqual(transitions.map((t) => [t.from, t.to]), expected);
    const pid = (await f.hub.findProfileId(scope, { namespace: "crmid", id: "ordered" }))!;
    assert.deepEqual((await f.hub.getMemberships(scope, pid)).filter((m) => m.definitionId === "d-order").map((m) => m.status), ["exited"]);
    await fw.close();
  });

  it("reports a failed hub write and retries it from the step that failed: nothing lost, nothing doubled", async () => {
    const { store, calls, fail } = instrumentedHub(f.hub);
    const errors: unknown[] = [];
    const fw = forwarder(store, { retryDelayMs: 1, maxAttempts: 5 }, errors);
    fail.append = 2;
    fail.memberships = 1;
    fw.enqueue(item("retry-a", [{ definitionId: "d-retry", status: "realized" }]));
    fw.enqueue(item("retry-b", [{ definitionId: "d-retry", status: "realized" }]));
    fw.enqueue(item("retry-a"));
    await fw.idle();
    assert.equal(errors.length, 3);
    for (const [i, e] of errors.entries()) {
      assert.ok(e instanceof HubForwardError, String(e));
      assert.equal(e.attempt, i + 1);
      assert.equal(e.willRetry, true);
      assert.equal(e.items, 3);
      assert.match(String((e.cause as Error).message), /hub unavailable/);
    }
    assert.deepEqual([calls.append, calls.appended, calls.memberships, calls.membershipsApplied], [3, 1, 2, 1], "the append is not redone when only the membership write failed");
    assert.deepEqual(fw.stats, { forwarded: 3, batches: 1, retries: 3, dropped: 0, refused: 0 });
    assert.equal(await hubEventCount("retry-a"), 2);
    assert.equal(await hubEventCount("retry-b"), 1);
    assert.equal((await f.hub.listTransitions(scope, { definitionId: "d-retry" })).length, 2);
    await fw.close();
  });

  it("drops a batch after maxAttempts, says so, and keeps forwarding what follows", async () => {
    const { store, fail } = instrumentedHub(f.hub);
    const errors: unknown[] = [];
    const fw = forwarder(store, { retryDelayMs: 1, maxAttempts: 2 }, errors);
    fail.always = true;
    fw.enqueue(item("poison"));
    fw.enqueue(item("poison"));
    await fw.idle();
    assert.deepEqual(errors.map((e) => (e as HubForwardError).willRetry), [true, false]);
    assert.match((errors[1] as Error).message, /failed 2 time\(s\); the events are dropped/);
    assert.equal(fw.stats.dropped, 2);
    fail.always = false;
    fw.enqueue(item("after-poison"));
    await fw.close();
    assert.equal(await hubEventCount("after-poison"), 1);
    assert.equal(await hubEventCount("poison"), 0);
    assert.equal(fw.stats.forwarded, 1);
  });

  it("idle() rejects when the error handler throws (tests see failures), then the queue carries on", async () => {
    const { store, fail } = instrumentedHub(f.hub);
    const fw = new HubForwarder({ hub: store, projector, retryDelayMs: 1, now: () => f.clock.now(), onError: (err) => { throw err; } });
    fail.append = 1;
    fw.enqueue(item("thrower"));
    await assert.rejects(fw.idle(), (err: unknown) => err instanceof HubForwardError && err.willRetry);
    await fw.idle();
    assert.equal(await hubEventCount("thrower"), 1, "the retry wrote the event");
    await fw.close();
  });
});

describe("edge interact under backpressure", () => {
  let h: EdgeHarness;
  let ds: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    // One waiting item fills the queue; the long interval keeps it there until idle().
    h = await startEdgeHarness(T0, undefined, { forwarder: { maxQueue: 1, flushIntervalMs: 60_000 } });
    scope.orgId = h.f.tenant.orgId;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  const send = (id: string) =>
    h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { identityMap: { CRMID: [{ id, primary: true }] }, eventType: "page.view", timestamp: new Date(T0 - 1000).toISOString() } } });

  it("answers 503 with Retry-After when the queue is full, and stores nothing for that request", async () => {
    const tk = `${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`;
    const first = await send("bp-first");
    assert.equal(first.status, 200);
    const refused = await send("bp-refused");
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get("retry-after"), "1");
    const body = refused.json as { status: number; errors: Record<string, Array<{ code: string }>> };
    assert.equal(body.status, 503);
    assert.equal(body.errors["503"]![0]!.code, "SEGMENTD-EDGE-BUSY-503");
    assert.equal(await h.rt.locations.get("edge")!.lookup(tk, { namespace: "crmid", id: "bp-refused" }), undefined, "the location stored nothing");

    await h.rt.flush();
    assert.equal(await h.f.hub.findProfileId(scope, { namespace: "crmid", id: "bp-refused" }), null, "the hub has nothing of the refused request");
    assert.ok(await h.f.hub.findProfileId(scope, { namespace: "crmid", id: "bp-first" }), "the accepted one reached the hub");
    assert.equal((await send("bp-refused")).status, 200, "accepted again once the queue drained");
  });
});
