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
import { APPEND_SLICE, HubForwardError, HubForwarder, READ_CHECK, READ_CHUNK, type ForwardItem, type HubForwarderOptions } from "../../src/edge/hub-forwarder.js";
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
  const calls = { append: 0, appended: 0, appendSizes: [] as number[], memberships: 0, membershipsApplied: 0, membershipsInAppendTurn: [] as boolean[], reads: 0, readSizes: [] as number[], mostReadCallsInOneTurn: 0, readsOutstanding: 0, mostReadsOutstanding: 0, appendsInOneTurn: [] as number[] };
  // findProfileIds calls made in the current synchronous run (a microtask resets it: anything
  // the forwarder awaits, a yield or answers, ends the run).
  let readCallsThisTurn = 0;
  // Appends made in the current synchronous run (same), pushed to appendsInOneTurn when it ends.
  let appendsThisTurn = 0;
  // True from an append call until the end of that synchronous turn (a microtask resets it).
  let inAppendTurn = false;
  const fail = { append: 0, memberships: 0, always: false };
  const store = {
    kind: hub.kind,
    async append(...args: Parameters<ProfileStore["append"]>) {
      calls.append++;
      if (appendsThisTurn++ === 0) {
        queueMicrotask(() => {
          calls.appendsInOneTurn.push(appendsThisTurn);
          appendsThisTurn = 0;
        });
      }
      inAppendTurn = true;
      queueMicrotask(() => (inAppendTurn = false));
      if (fail.always || fail.append > 0) {
        if (fail.append > 0) fail.append--;
        throw Object.assign(new Error("hub unavailable (append)"), { code: "ECONNRESET" });
      }
      calls.appended++;
      calls.appendSizes.push(args[2].length);
      return hub.append(...args);
    },
    findProfileIds(...args: Parameters<ProfileStore["findProfileIds"]>) {
      calls.reads += args[1].length;
      calls.readSizes.push(args[1].length);
      if (readCallsThisTurn++ === 0) queueMicrotask(() => (readCallsThisTurn = 0));
      calls.mostReadCallsInOneTurn = Math.max(calls.mostReadCallsInOneTurn, readCallsThisTurn);
      calls.mostReadsOutstanding = Math.max(calls.mostReadsOutstanding, ++calls.readsOutstanding);
      return hub.findProfileIds(...args).finally(() => calls.readsOutstanding--);
    },
    async writeMembershipChanges(...args: Parameters<ProfileStore["writeMembershipChanges"]>) {
      calls.memberships++;
      calls.membershipsInAppendTurn.push(inAppendTurn);
      if (fail.memberships > 0) {
        fail.memberships--;
        throw Object.assign(new Error("hub unavailable (memberships)"), { code: "ECONNRESET" });
      }
      calls.membershipsApplied++;
      return hub.writeMembershipChanges(...args);
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

  /**
   * The item with an `identity` that counts how many items' identities the forwarder looks at
   * in one synchronous run (it reads them only to gather the profile-id reads).
   */
  const looks = { thisTurn: 0, most: 0 };
  function counted(it: ForwardItem): ForwardItem {
    const identity = it.identity;
    return Object.defineProperty({ ...it }, "identity", {
      get() {
        if (looks.thisTurn++ === 0) queueMicrotask(() => (looks.thisTurn = 0));
        looks.most = Math.max(looks.most, looks.thisTurn);
        return identity;
      },
    });
  }

  it("reads the profile ids of a large batch in calls of READ_CHUNK identities, once per identity, yielding every READ_CHECK items when the budget is spent", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    const fw = forwarder(store, { maxBatch: 5000, flushIntervalMs: 60_000, turnBudgetMs: 0 });
    const profiles = READ_CHUNK + 8 * READ_CHECK + 3;
    for (let i = 0; i < profiles; i++) fw.enqueue(item(`reads-${i}`));
    await fw.idle();
    calls.reads = 0;
    calls.readSizes.length = 0;
    looks.most = 0;
    // Two events per profile: one read per identity; each profile qualifies with its first
    // event and exits with its second (changes built over several turns, in order).
    for (let i = 0; i < 2 * profiles; i++) fw.enqueue(counted(item(`reads-${i % profiles}`, [{ definitionId: "d-reads", status: i < profiles ? "realized" : "exited" }])));
    await fw.idle();
    assert.equal(calls.reads, profiles, "one read per distinct identity");
    assert.deepEqual(calls.readSizes, [READ_CHUNK, profiles - READ_CHUNK], "in calls of READ_CHUNK identities");
    assert.equal(looks.most, READ_CHECK, "no budget: never more than READ_CHECK items gathered in one turn");
    assert.deepEqual(calls.membershipsInAppendTurn, [true], "the transitions still go in the events' turn (one group commit)");
    const transitions = await f.hub.listTransitions(scope, { definitionId: "d-reads", limit: 10_000 });
    assert.equal(transitions.length, 2 * profiles);
    for (const t of transitions.filter((x) => x.to === "exited")) assert.equal(t.from, "realized");
    // Every transition of the right profile: the answers of both calls were matched to their items.
    const pids = await f.hub.findProfileIds(scope, Array.from({ length: profiles }, (_, i) => ({ namespace: "crmid", id: `reads-${i}` })));
    assert.deepEqual(transitions.filter((x) => x.to === "realized").map((t) => t.profileId), pids);
    assert.deepEqual(transitions.filter((x) => x.to === "exited").map((t) => t.profileId), pids);
    const n = 2 * profiles;
    assert.deepEqual(calls.appendSizes.slice(-Math.ceil(n / APPEND_SLICE)), [...new Array<number>(Math.floor(n / APPEND_SLICE)).fill(APPEND_SLICE), n % APPEND_SLICE],
      "the known profiles' events went together, in slices");
    await fw.close();
  });

  it("posts a batch's reads in one turn when the turn budget is unlimited", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    const fw = forwarder(store, { maxBatch: 5000, flushIntervalMs: 60_000, turnBudgetMs: Infinity });
    const profiles = 2 * READ_CHUNK + 5;
    for (let i = 0; i < profiles; i++) fw.enqueue(item(`reads-at-once-${i}`));
    await fw.idle();
    calls.mostReadCallsInOneTurn = 0;
    calls.mostReadsOutstanding = 0;
    calls.reads = 0;
    calls.readSizes.length = 0;
    looks.most = 0;
    for (let i = 0; i < profiles; i++) fw.enqueue(counted(item(`reads-at-once-${i}`)));
    await fw.idle();
    assert.equal(calls.reads, profiles);
    assert.deepEqual(calls.readSizes, [READ_CHUNK, READ_CHUNK, 5]);
    assert.equal(looks.most, profiles, "every item gathered in one turn");
    assert.equal(calls.mostReadCallsInOneTurn, 3, "every call posted in that turn");
    assert.equal(calls.mostReadsOutstanding, 3, "none waited for another's answer");
    for (let p = 0; p < profiles; p += 97) assert.equal(await hubEventCount(`reads-at-once-${p}`), 2);
    await fw.close();
  });

  it("appends a large batch in slices, yielding between them when the budget is spent, with the transitions in the last slice's turn", async () => {
    const { store, calls } = instrumentedHub(f.hub);
    const fw = forwarder(store, { maxBatch: 5000, flushIntervalMs: 60_000, turnBudgetMs: 0 });
    const profiles = 2 * APPEND_SLICE + 10;
    for (let p = 0; p < profiles; p++) fw.enqueue(item(`sliced-${p}`));
    await fw.idle();
    calls.appendSizes.length = 0;
    calls.appendsInOneTurn.length = 0;
    for (let p = 0; p < profiles; p++) fw.enqueue(item(`sliced-${p}`, [{ definitionId: "d-sliced", status: "realized" }]));
    await fw.idle();
    assert.deepEqual(calls.appendSizes, [APPEND_SLICE, APPEND_SLICE, 10], "one append per slice");
    assert.deepEqual(calls.appendsInOneTurn, [1, 1, 1], "no budget: one slice per turn");
    assert.deepEqual(calls.membershipsInAppendTurn, [true], "the transitions go in one call, in the last slice's turn");
    let events = 0;
    for (let p = 0; p < profiles; p++) events += await hubEventCount(`sliced-${p}`);
    assert.equal(events, 2 * profiles, "every event once");
    assert.equal((await f.hub.listTransitions(scope, { definitionId: "d-sliced", limit: 10_000 })).length, profiles);

    // An unlimited budget hands every slice over in one turn.
    calls.appendsInOneTurn.length = 0;
    const fast = forwarder(store, { maxBatch: 5000, flushIntervalMs: 60_000, turnBudgetMs: Infinity });
    for (let p = 0; p < profiles; p++) fast.enqueue(item(`sliced-${p}`));
    await fast.idle();
    assert.deepEqual(calls.appendsInOneTurn, [3]);
    await fw.close();
    await fast.close();
  });

  it("retries a batch whose second append failed without doubling the events already stored", async () => {
    const { store, calls, fail } = instrumentedHub(f.hub);
    const errors: unknown[] = [];
    const fw = forwarder(store, { maxBatch: 5000, flushIntervalMs: 60_000, retryDelayMs: 1, turnBudgetMs: 0 }, errors);
    const profiles = APPEND_SLICE + 5;
    for (let p = 0; p < profiles; p++) fw.enqueue(item(`retry-slice-${p}`));
    await fw.idle();
    for (let p = 0; p < profiles; p++) fw.enqueue(item(`retry-slice-${p}`, [{ definitionId: "d-retry-slice", status: "realized" }]));
    // The first slice is stored; the second fails once.
    const append = store.append.bind(store);
    let seen = 0;
    (store as { append: ProfileStore["append"] }).append = async (...args) => {
      if (++seen === 2) fail.append = 1;
      return append(...args);
    };
    const membershipCalls = calls.memberships;
    await fw.idle();
    assert.equal(errors.length, 1, "one failed attempt, reported");
    assert.ok(errors[0] instanceof HubForwardError && errors[0].willRetry);
    assert.equal(fw.stats.dropped, 0);
    assert.equal(calls.memberships - membershipCalls, 1, "the transitions were applied once (the retry only appends)");
    let events = 0;
    for (let p = 0; p < profiles; p++) events += await hubEventCount(`retry-slice-${p}`);
    assert.equal(events, 2 * profiles, "every event once");
    assert.equal((await f.hub.listTransitions(scope, { definitionId: "d-retry-slice", limit: 10_000 })).length, profiles, "one transition per profile");
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
    // The first batch creates the profiles (one append, then their ids); the others are of
    // known profiles, appended in slices of at most APPEND_SLICE events.
    assert.deepEqual(calls.appendSizes, [500, APPEND_SLICE, 500 - APPEND_SLICE, 200]);
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
    assert.deepEqual(fw.stats, { forwarded: 3, batches: 1, retries: 3, dropped: 0, deadLettered: 0, refused: 0 });
    assert.equal(await hubEventCount("retry-a"), 2);
    assert.equal(await hubEventCount("retry-b"), 1);
    assert.equal((await f.hub.listTransitions(scope, { definitionId: "d-retry" })).length, 2);
    await fw.close();
  });

  it("waits for a hub that is away (transient errors) past maxAttempts, dropping nothing; drops only when closing with the hub still away", async () => {
    const { store, fail } = instrumentedHub(f.hub);
    const errors: unknown[] = [];
    const fw = forwarder(store, { retryDelayMs: 1, maxAttempts: 2 }, errors);
    fail.always = true;
    fw.enqueue(item("away"));
    fw.enqueue(item("away"));
    const idle = fw.idle();
    while (errors.length < 6) await new Promise((r) => setTimeout(r, 5));
    assert.ok(errors.every((e) => (e as HubForwardError).willRetry), "every failure is retried while the forwarder runs");
    assert.match((errors[5] as Error).message, /^hub write of 2 edge event\(s\) failed \(attempt 6\); retrying$/);
    assert.equal(fw.stats.dropped, 0);
    fail.always = false;
    await idle;
    assert.equal(await hubEventCount("away"), 2);
    assert.equal(fw.stats.dropped, 0);
    // Closing with the hub away: maxAttempts bounds the shutdown, and what is left is dropped, counted and said.
    fail.always = true;
    fw.enqueue(item("at-close"));
    await fw.close();
    const last = errors[errors.length - 1] as HubForwardError;
    assert.equal(last.willRetry, false);
    assert.match(last.message, /failed \d+ time\(s\); the events are dropped/);
    assert.equal(fw.stats.dropped, 1);
    assert.equal(await hubEventCount("at-close"), 0);
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
