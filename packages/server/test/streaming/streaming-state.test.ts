/**
 * The streaming engine's in-memory bookkeeping, without a store: profile state
 * (events by type kept in step incrementally, duplicates, trimming, the
 * inSegment mirror updated in place), the sweep schedule (re-scheduling the
 * same instant does not grow the heap; several windows), and the membership
 * writer (one store call per drain, each caller gets its own transitions;
 * writes pipelined up to a limit, failures reach only their own callers).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { MembershipChange, ProfileStore } from "../../src/profiles/store.js";
import type { JsonObject, MembershipTransition, TenantScope } from "../../src/profiles/types.js";
import { MAX_IN_FLIGHT, MembershipWriter } from "../../src/streaming/membership-writer.js";
import { addEvent, allEventBodies, eventBodiesOfType, eventBodiesOfTypes, LruMap, newProfileState, setMembership, trimEvents, type ProfileState } from "../../src/streaming/profile-state.js";
import { groupEventsByType, ReverseIndex, footprintOf } from "../../src/streaming/reverse-index.js";
import { nextWindowChange, nextWindowChangeOf, SweepSchedule } from "../../src/streaming/sweep-schedule.js";
import { parse } from "@segmentd/pql";

const T = Date.parse("2026-04-01T12:00:00Z");

function state(): ProfileState {
  return newProfileState({
    profileId: "1",
    identity: { namespace: "crmid", id: "x" },
    entity: { segmentMembership: { other: { keep: true } } },
    events: [],
    optedOut: false,
    memberships: [["d0", { status: "realized", lastQualificationTime: "2026-04-01T00:00:00.000Z" }]],
  });
}

describe("profile state", () => {
  it("keeps its event columns in time order and reads them back by type as a regrouping would, for any order of arrivals, duplicates, trims and reads", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("add" as const), id: fc.integer({ min: 0, max: 30 }), ago: fc.integer({ min: 0, max: 50 }), type: fc.constantFrom("A", "a", "b", "c", null), withJson: fc.boolean() }),
      fc.record({ kind: fc.constant("trim" as const), ago: fc.integer({ min: 0, max: 50 }) }),
      fc.record({ kind: fc.constant("read" as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const s = state();
        // The model: the events held, each with its arrival number (ties in time keep arrival order).
        let model: Array<{ id: string; ts: number; body: JsonObject; n: number }> = [];
        let arrivals = 0;
        for (const o of ops) {
          if (o.kind === "add") {
            const id = `e${o.id}`;
            const body: JsonObject = { _id: id, n: arrivals };
            if (o.type !== null) body["eventType"] = o.type;
            const ts = T - o.ago * 1000;
            const added = addEvent(s, { ts, id, body, ...(o.withJson ? { json: JSON.stringify(body) } : {}) });
            assert.equal(added, !model.some((e) => e.id === id), "a duplicate id is refused");
            if (added) model.push({ id, ts, body, n: arrivals++ });
          } else if (o.kind === "trim") {
            trimEvents(s, T - o.ago * 1000);
            model = model.filter((e) => e.ts >= T - o.ago * 1000);
          } else {
            // Reads between changes: what they parsed must not be served once the state changes.
            allEventBodies(s);
            eventBodiesOfType(s, "a");
          }
          // Invariants after every step.
          const held = [...model].sort((x, y) => x.ts - y.ts || x.n - y.n);
          assert.deepEqual(s.eventTs, held.map((e) => e.ts));
          assert.deepEqual(s.eventIds, held.map((e) => e.id));
          assert.equal(s.eventTypes.length, held.length);
          assert.equal(s.eventJson.length, held.length);
          assert.deepEqual(allEventBodies(s), held.map((e) => e.body));
          const grouped = groupEventsByType(allEventBodies(s));
          for (const t of ["a", "b", "c", ""]) assert.deepEqual(eventBodiesOfType(s, t), grouped.get(t) ?? [], `type "${t}"`);
          const ab = new Set(["a", "b"]);
          assert.deepEqual(eventBodiesOfTypes(s, ab), held.map((e) => e.body).filter((b) => typeof b["eventType"] === "string" && ab.has(b["eventType"].toLowerCase())));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("keeps an event's body as the JSON text it was given, and parses it only when read", () => {
    const s = state();
    const body: JsonObject = { eventType: "web.webpagedetails.pageViews", web: { webPageDetails: { name: "home" } } };
    const json = JSON.stringify(body);
    addEvent(s, { ts: T, id: "e1", body, json });
    assert.equal(s.eventJson[0], json, "the given text, not a copy");
    assert.deepEqual(s.eventTypes, ["web.webpagedetails.pageviews"]);
    const read = eventBodiesOfType(s, "web.webpagedetails.pageviews");
    assert.deepEqual(read, [body]);
    assert.notEqual(read[0], body, "parsed from the text: the caller's object is not kept");
    assert.equal(eventBodiesOfType(s, "web.webpagedetails.pageviews")[0], read[0], "parsed once per state version");
  });

  it("mirrors memberships into segmentMembership.ups in place, keeping other namespaces", () => {
    const s = state();
    const ups = (s.entity["segmentMembership"] as { ups: Record<string, unknown> }).ups;
    assert.deepEqual(Object.keys(ups), ["d0"]);
    setMembership(s, "d1", { status: "realized", lastQualificationTime: "2026-04-01T12:00:00.000Z" });
    setMembership(s, "d0", { status: "exited", lastQualificationTime: "2026-04-01T00:00:00.000Z" });
    const sm = s.entity["segmentMembership"] as { ups: Record<string, { status: string }>; other: unknown };
    assert.equal(sm.ups, ups, "the same object, updated in place");
    assert.deepEqual(Object.fromEntries(Object.entries(sm.ups).map(([k, v]) => [k, v.status])), { d0: "exited", d1: "realized" });
    assert.deepEqual(sm.other, { keep: true });
    assert.equal(s.memberships.get("d1")?.status, "realized");
  });
});

describe("LruMap", () => {
  it("keeps its capacity and evicts an entry not read since the last round first", () => {
    const m = new LruMap<number>(3);
    m.set("a", 1);
    m.set("b", 2);
    m.set("c", 3);
    m.set("d", 4); // every entry was fresh: one round clears the marks, the oldest goes
    assert.equal(m.size, 3);
    assert.equal(m.get("a"), undefined);
    assert.equal(m.get("b"), 2); // read: b gets another round
    m.set("e", 5);
    assert.equal(m.size, 3);
    assert.equal(m.get("c"), undefined, "c was not read since the last round");
    assert.deepEqual([m.get("b"), m.get("d"), m.get("e")], [2, 4, 5]);
    m.set("b", 20);
    assert.equal(m.get("b"), 20);
    m.delete("b");
    assert.equal(m.get("b"), undefined);
    assert.equal(m.size, 2);
  });

  it("never holds more than its capacity, keeps what was just set, and returns the latest values", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.boolean()), { maxLength: 200 }), (ops) => {
        const m = new LruMap<number>(5);
        const latest = new Map<string, number>();
        ops.forEach(([k, read], i) => {
          if (read) {
            const v = m.get(`k${k}`);
            if (v !== undefined) assert.equal(v, latest.get(`k${k}`));
            return;
          }
          m.set(`k${k}`, i);
          latest.set(`k${k}`, i);
          assert.equal(m.get(`k${k}`), i);
          assert.ok(m.size <= 5);
        });
      }),
      { numRuns: 200 },
    );
  });
});

describe("reverse index: forEvent", () => {
  it("includes the any-event definitions with every mapped type, once, and for unmapped types", () => {
    const defs = [
      { id: "buy", footprint: footprintOf(parse('chain(xEvent, timestamp, [C0: WHAT(eventType = "buy") WHEN(today)])')) },
      { id: "both", footprint: footprintOf(parse('xEvent[eventType in ["buy", "view"]].count() > 1')) },
      { id: "any", footprint: footprintOf(parse("xEvent.count() > 2")) },
    ];
    const idx = new ReverseIndex(defs);
    assert.deepEqual(idx.forEvent("Buy").map((d) => d.id).sort(), ["any", "both", "buy"]);
    assert.deepEqual(idx.forEvent("view").map((d) => d.id).sort(), ["any", "both"]);
    assert.deepEqual(idx.forEvent("other").map((d) => d.id), ["any"]);
    assert.deepEqual(idx.forEvent(null).map((d) => d.id), ["any"]);
    assert.equal(idx.hasDependents, false);
  });
});

describe("sweep schedule", () => {
  it("scheduling the instant already scheduled does not grow the heap; only the newest due time counts", () => {
    const s = new SweepSchedule();
    for (let i = 0; i < 100; i++) s.schedule(T + 1000, "t", "p", "d");
    assert.equal(s.heapSize, 1);
    s.schedule(T + 5000, "t", "p", "d");
    s.schedule(T + 2000, "t", "p", "e");
    assert.equal(s.size, 2);
    assert.deepEqual(s.popDue(T + 1500), [], "the superseded entry is skipped");
    assert.deepEqual(s.popDue(T + 5000).map((e) => [e.definitionId, e.due]), [["e", T + 2000], ["d", T + 5000]]);
    assert.equal(s.size, 0);
    s.schedule(T + 5000, "t", "p", "d");
    assert.equal(s.size, 1, "a popped membership can be scheduled again at the same instant");
  });

  it("a run of many memberships pops in due order; one scheduled alone before or after takes its place", () => {
    const s = new SweepSchedule();
    s.schedule(T + 9000, "t", "p2", "d");
    s.scheduleMany("t", "d", ["p1", "p2", "p3", "p4"], [T + 3000, T + 1000, T + 2000, T + 4000]);
    assert.equal(s.heapSize, 2, "p2 was scheduled alone already: rescheduled alone");
    assert.equal(s.size, 4);
    s.schedule(T + 8000, "t", "p4", "d");
    assert.deepEqual(s.popDue(T + 2000).map((e) => [e.profileId, e.due]), [["p2", T + 1000], ["p3", T + 2000]]);
    assert.deepEqual(s.popDue(T + 5000).map((e) => [e.profileId, e.due]), [["p1", T + 3000]], "p4's place in the run was superseded");
    assert.deepEqual(s.popDue(T + 9000).map((e) => [e.profileId, e.due]), [["p4", T + 8000]]);
    assert.equal(s.size, 0);
    assert.deepEqual(s.popDue(T + 99_000), []);
  });

  it("picks the first instant an event leaves any of the windows, or midnight", () => {
    const H = 3_600_000;
    assert.equal(nextWindowChange(T, [T - 10 * 60_000], [H, 12 * H]), T - 10 * 60_000 + H + 1);
    // 10:00 + 1 hour is past; 10:00 + 12 hours is before midnight.
    assert.equal(nextWindowChange(T, [T - 2 * H], [H, 12 * H]), T - 2 * H + 12 * H + 1);
    assert.equal(nextWindowChange(T, [], 3 * H), Date.parse("2026-04-02T00:00:00Z"));
    const events = [T - 30 * 60_000, T - 50 * 60_000];
    // Only the events of the definition's types count.
    assert.equal(nextWindowChangeOf(T, events, ["a", "b"], new Set(["a"]), [H]), T - 30 * 60_000 + H + 1);
    assert.equal(nextWindowChangeOf(T, events, ["a", "b"], "any", [H]), T - 50 * 60_000 + H + 1);
    assert.equal(nextWindowChangeOf(T, events, ["a", "b"], new Set(["c"]), [H]), Date.parse("2026-04-02T00:00:00Z"));
  });
});

describe("membership writer", () => {
  const scope: TenantScope = { orgId: "o", sandboxName: "s" };

  it("sends everything pending as one call and hands each caller its own transitions", async () => {
    const calls: MembershipChange[][] = [];
    const hub = {
      async applyMembershipChanges(_s: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
        calls.push([...changes]);
        // Reversed, to show that callers are matched by key, not by position; "skip" changes are no-ops.
        return changes
          .filter((c) => c.definitionId !== "skip")
          .map((c) => ({ profileId: c.profileId, definitionId: c.definitionId, from: c.from ?? null, to: c.status, source: c.source, at: new Date(c.at).toISOString() }))
          .reverse();
      },
    } as unknown as ProfileStore;
    const w = new MembershipWriter(hub);
    const ch = (p: string, d: string): MembershipChange => ({ profileId: p, definitionId: d, status: "realized", source: "streaming", at: T, from: null });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => w.write(scope, [ch(String(i), "d1"), ch(String(i), "d2"), ch(String(i), "skip")])),
    );
    assert.equal(calls.length, 1, "one store call");
    assert.equal(calls[0]!.length, 600);
    assert.ok(calls[0]!.every((c) => c.from === null), "from is passed through");
    results.forEach((r, i) => assert.deepEqual(r.map((t) => `${t.profileId}/${t.definitionId}`).sort(), [`${i}/d1`, `${i}/d2`]));
  });

  /** A store whose writes stay in flight until the test releases them (or fails them), in call order. */
  function heldStore() {
    const calls: Array<{ changes: MembershipChange[]; release: () => void; fail: (err: Error) => void }> = [];
    const hub = {
      applyMembershipChanges(_s: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
        return new Promise((resolve, reject) => {
          const transitions = changes.map((c) => ({ profileId: c.profileId, definitionId: c.definitionId, from: c.from ?? null, to: c.status, source: c.source, at: new Date(c.at).toISOString() }));
          calls.push({ changes: [...changes], release: () => resolve(transitions), fail: reject });
        });
      },
    } as unknown as ProfileStore;
    return { hub, calls };
  }
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
  const change = (p: string): MembershipChange => ({ profileId: p, definitionId: "d", status: "realized", source: "streaming", at: T });

  it("sends a turn's changes while earlier writes are still in flight, up to MAX_IN_FLIGHT, then the rest together", async () => {
    const { hub, calls } = heldStore();
    const w = new MembershipWriter(hub);
    const results: Array<Promise<MembershipTransition[]>> = [];
    for (let turn = 0; turn < MAX_IN_FLIGHT; turn++) {
      results.push(w.write(scope, [change(`p${turn}`)]));
      await nextTurn();
      await nextTurn();
      assert.equal(calls.length, turn + 1, `turn ${turn}'s change is sent without waiting for the ${turn} write(s) in flight`);
    }
    assert.equal(w.writing, MAX_IN_FLIGHT);
    // At the limit: the next turns' changes wait, and go out together when a write finishes.
    results.push(w.write(scope, [change("late1")]));
    await nextTurn();
    results.push(w.write(scope, [change("late2")]));
    await nextTurn();
    await nextTurn();
    assert.equal(calls.length, MAX_IN_FLIGHT, "nothing more is sent while MAX_IN_FLIGHT writes are in flight");
    calls[0]!.release();
    await results[0];
    await nextTurn();
    await nextTurn();
    assert.equal(calls.length, MAX_IN_FLIGHT + 1);
    assert.deepEqual(calls[MAX_IN_FLIGHT]!.changes.map((c) => c.profileId), ["late1", "late2"], "the waiting changes go out as one call");
    for (const c of calls.slice(1)) c.release();
    const all = await Promise.all(results);
    const expected = [...Array.from({ length: MAX_IN_FLIGHT }, (_, i) => [`p${i}`]), ["late1"], ["late2"]];
    assert.deepEqual(all.map((r) => r.map((t) => t.profileId)), expected, "each caller gets its own transitions");
    await w.idle();
    assert.equal(w.writing, 0);
  });

  it("rejects only the callers of a failed write; idle() waits for every write in flight", async () => {
    const { hub, calls } = heldStore();
    const w = new MembershipWriter(hub);
    const first = w.write(scope, [change("a")]);
    await nextTurn();
    await nextTurn();
    const second = w.write(scope, [change("b")]);
    await nextTurn();
    await nextTurn();
    assert.equal(calls.length, 2);
    let idle = false;
    const idled = w.idle().then(() => (idle = true));
    calls[0]!.fail(new Error("disk full"));
    await assert.rejects(first, /disk full/);
    await nextTurn();
    assert.equal(idle, false, "the second write is still in flight");
    calls[1]!.release();
    assert.deepEqual((await second).map((t) => t.profileId), ["b"]);
    await idled;
    assert.equal(idle, true);
  });
});

