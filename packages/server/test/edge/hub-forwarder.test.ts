/**
 * The hub forwarding queue of the edge (hub-forwarder.ts), against the real
 * hub of the fixture (embedded, or PostgreSQL in test:pg): batches written
 * off the caller's turn, backpressure (a bounded queue, and 503 over HTTP
 * with nothing stored), a drain on close that loses nothing, per-profile
 * order across batches, and hub write failures reported and retried (or
 * dropped after the last attempt, without blocking what follows). Issue #37:
 * a forward() (interact's) settles only once the hub committed its item, and
 * interact answers 200 only then (422 when the hub refuses the event, 503 when
 * it does not commit it in time).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DeadLetteredError } from "../../src/edge/hub-write-errors.js";
import { APPEND_SLICE, HubForwardError, HubForwarder, READ_CHECK, READ_CHUNK, type ForwardItem, type HubForwarderOptions } from "../../src/edge/hub-forwarder.js";
import type { EdgeProjector } from "../../src/edge/projector.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { Dataset, MembershipStatus, MergePolicySpec } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { EVENTS_DS, event, openFixture, type Fixture } from "../streaming/fixtures.js";
import { gatedHub } from "./gated-hub.js";
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

  it("forward() settles only once the item's hub write is committed, without waiting for the interval; callers arriving meanwhile share the next batch", async () => {
    const g = gatedHub(f.hub);
    const fw = forwarder(g.store, { flushIntervalMs: 60_000 });
    // The profile's first event (created by its append); no 60 s interval on the acknowledgement path.
    const t0 = Date.now();
    const warm = item("acked");
    await fw.forward(warm);
    assert.ok(Date.now() - t0 < 30_000, "forward() did not wait for the interval");
    assert.ok(g.committed.has(warm.record.eventId!));
    g.hold();
    const order: string[] = [];
    const track = (it: ForwardItem) => fw.forward(it).then(() => {
      // Checked in the turn the caller is told: its event is in the store already.
      assert.ok(g.committed.has(it.record.eventId!), `${it.record.eventId} acknowledged before its append committed`);
      order.push(it.record.eventId!);
    });
    const firstItem = item("acked", [{ definitionId: "d-acked", status: "realized" }]);
    const first = track(firstItem);
    await waitFor(() => g.state.appendsWaiting === 1, "the first batch's append");
    const laterItems = Array.from({ length: 20 }, () => item("acked"));
    const later = laterItems.map(track);
    await sleep(50);
    assert.deepEqual(order, [], "nothing is acknowledged while its append is held");
    assert.equal(await hubEventCount("acked"), 1);
    g.release();
    await Promise.all([first, ...later]);
    assert.deepEqual(order, [firstItem, ...laterItems].map((it) => it.record.eventId), "acknowledged in arrival order");
    assert.deepEqual(g.state.appendSizes, [1, 1, 20], "the 20 callers that came while the first batch was held went in one batch");
    assert.equal(await hubEventCount("acked"), 22);
    assert.equal((await f.hub.listTransitions(scope, { definitionId: "d-acked" })).length, 1, "the edge transition was written with its event");
    await fw.close();
  });

  it("forward() rejects with a DeadLetteredError for an event the hub refuses; the others of its batch resolve, stored once", async () => {
    const g = gatedHub(f.hub);
    const errors: unknown[] = [];
    const letters: string[] = [];
    const fw = new HubForwarder({ hub: g.store, projector, retryDelayMs: 1, now: () => f.clock.now(), onError: (e) => errors.push(e), onDeadLetter: (l) => letters.push(l.eventId ?? "") });
    const items = [item("dl-a"), item("dl-b"), item("dl-a")];
    g.refused.add(items[1]!.record.eventId!);
    const outcomes = await Promise.allSettled(items.map((it) => fw.forward(it)));
    assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "fulfilled"]);
    const err = (outcomes[1] as PromiseRejectedResult).reason as unknown;
    assert.ok(err instanceof DeadLetteredError, String(err));
    assert.equal(err.eventId, items[1]!.record.eventId);
    assert.equal(err.reason, "the hub refuses this event");
    assert.deepEqual(letters, [items[1]!.record.eventId]);
    assert.deepEqual(errors, []);
    assert.equal(await hubEventCount("dl-a"), 2);
    assert.equal(await hubEventCount("dl-b"), 0);
    await fw.close();
  });

  it("forward() stays pending while the hub is away, and rejects with the HubForwardError when closing drops the item", async () => {
    const { store, fail } = instrumentedHub(f.hub);
    const errors: unknown[] = [];
    const fw = forwarder(store, { retryDelayMs: 1, maxAttempts: 2 }, errors);
    fail.always = true;
    const outcome = fw.forward(item("ack-away")).then(() => "resolved", (e: unknown) => e);
    await waitFor(() => errors.length >= 4, "four failed attempts");
    assert.equal(await Promise.race([outcome, sleep(20).then(() => "pending")]), "pending", "a transient failure is retried, not answered");
    await fw.close();
    const e = await outcome;
    assert.ok(e instanceof HubForwardError, String(e));
    assert.equal(e.willRetry, false);
    assert.equal(fw.stats.dropped, 1);
    assert.equal(await hubEventCount("ack-away"), 0);
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
  let g: ReturnType<typeof gatedHub>;
  let ds: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    // One waiting item fills the queue; a held append keeps it there.
    h = await startEdgeHarness(T0, undefined, { forwarder: { maxQueue: 1 }, hub: (f) => (g = gatedHub(f.hub)).store });
    scope.orgId = h.f.tenant.orgId;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    g.release();
    await h.close();
  });

  const send = (id: string, eventId?: string) =>
    h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { ...(eventId ? { _id: eventId } : {}), identityMap: { CRMID: [{ id, primary: true }] }, eventType: "page.view", timestamp: new Date(T0 - 1000).toISOString() } } });

  it("answers 200 only once the hub committed the event, and 503 with Retry-After while the queue is full, storing nothing for that request", async () => {
    const tk = `${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`;
    assert.equal((await send("bp-first", "bp-first-1")).status, 200);
    assert.ok(g.committed.has("bp-first-1"), "the first event was committed by the time of its 200");
    // Its batch's follow-ups (streaming, projection) done: the queue is empty again.
    await h.rt.flush();
    g.hold();
    let answered = false;
    const pending = send("bp-first", "bp-first-2").then((r) => {
      answered = true;
      return { r, committedBefore: g.committed.has("bp-first-2") };
    });
    await waitFor(() => g.state.appendsWaiting === 1, "the held append");
    await sleep(50);
    assert.equal(answered, false, "no answer while the event's append is held");

    const refused = await send("bp-refused");
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get("retry-after"), "1");
    const body = refused.json as { status: number; errors: Record<string, Array<{ code: string }>> };
    assert.equal(body.status, 503);
    assert.equal(body.errors["503"]![0]!.code, "SEGMENTD-EDGE-BUSY-503");
    assert.equal(await h.rt.locations.get("edge")!.lookup(tk, { namespace: "crmid", id: "bp-refused" }), undefined, "the location stored nothing");

    g.release();
    const { r, committedBefore } = await pending;
    assert.equal(r.status, 200);
    assert.equal(committedBefore, true, "the event was committed when its 200 came");
    assert.deepEqual(r.json, {
      requestId: (r.json as { requestId: string }).requestId,
      handle: [{ type: "activation:pull", eventIndex: 0, payload: [] }, { type: "locationHint:result", payload: [{ scope: "EdgeNetwork", hint: "edge", ttlSeconds: 1800 }] }],
    }, "Adobe's interact shape, unchanged");
    await h.rt.flush();
    assert.equal(await h.f.hub.findProfileId(scope, { namespace: "crmid", id: "bp-refused" }), null, "the hub has nothing of the refused request");
    assert.equal((await h.f.hub.getEvents(scope, { namespace: "crmid", id: "bp-first" }, PDG, { limit: 10 })).events.length, 2);
    assert.equal((await send("bp-refused")).status, 200, "accepted again once the queue drained");
  });
});

describe("edge interact acknowledgements", () => {
  let h: EdgeHarness;
  let g: ReturnType<typeof gatedHub>;
  let ds: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    h = await startEdgeHarness(T0, undefined, { forwarder: { ackTimeoutMs: 500, retryDelayMs: 1 }, hub: (f) => (g = gatedHub(f.hub)).store });
    scope.orgId = h.f.tenant.orgId;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    g.release();
    await h.close();
  });

  const send = (id: string, eventId: string) =>
    h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { _id: eventId, identityMap: { CRMID: [{ id, primary: true }] }, eventType: "page.view", timestamp: new Date(T0 - 1000).toISOString() } } });
  const eventIds = async (id: string) => (await h.f.hub.getEvents(scope, { namespace: "crmid", id }, PDG, { limit: 100 })).events.map((e) => e.eventId).sort();
  const errorOf = (json: unknown, status: number) => (json as { errors: Record<string, Array<{ code: string; message: string }>> }).errors[String(status)]![0]!;

  it("answers 503 with Retry-After when the hub has not committed the event within ackTimeoutMs; a retry with the same _id is stored once", async () => {
    g.hold();
    const late = await send("ack-late", "late-1");
    assert.equal(late.status, 503);
    assert.equal(late.headers.get("retry-after"), "1");
    assert.deepEqual(errorOf(late.json, 503), { code: "SEGMENTD-EDGE-BUSY-503", message: "The hub has not stored the event within 0.5 s; retry shortly with the same _id (the hub keeps one copy of an event id)" });
    assert.equal(g.committed.has("late-1"), false);
    g.release();
    await h.rt.flush();
    // Not acknowledged, yet written once the hub came back: the client's retry must not double it.
    assert.deepEqual(await eventIds("ack-late"), ["late-1"]);
    assert.equal((await send("ack-late", "late-1")).status, 200);
    await h.rt.flush();
    assert.deepEqual(await eventIds("ack-late"), ["late-1"], "the retried event id is stored once");
  });

  it("answers 422 for an event the hub refuses (dead-lettered), never 200; the requests around it are answered 200", async () => {
    g.refused.add("refused-1");
    const [a, refused, b] = await Promise.all([send("ack-ok", "ok-1"), send("ack-refused", "refused-1"), send("ack-ok", "ok-2")]);
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.equal(refused.status, 422);
    assert.equal(refused.headers.get("retry-after"), null);
    assert.deepEqual(errorOf(refused.json, 422), { code: "SEGMENTD-EDGE-EVENT-REFUSED-422", message: "The hub refused to store the event; it is kept as a dead letter for an operator (GET /admin/edge/dead-letters) and would be refused again if sent unchanged" });
    await h.rt.flush();
    assert.deepEqual(await eventIds("ack-ok"), ["ok-1", "ok-2"]);
    assert.deepEqual(await eventIds("ack-refused"), []);
    assert.deepEqual(h.rt.forwarder.deadLetters().map((l) => l.eventId), ["refused-1"]);
  });
});
