/**
 * The edge evaluation plan (evaluation-plan.ts) skips definitions and caches
 * profile results; its decisions must be exactly those of running every
 * definition on every request (the loop it replaced), and the qualifying set
 * must be what `evaluatePredicate` says on all the events. Checked on random
 * profiles, memberships, events and clocks, over definitions of every kind —
 * including the ones the plan must not skip or cache (clock-dependent profile
 * untyped event conditions, segments of segments, opt-out exclusion).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { evaluatePredicate, parse } from "@segmentd/pql";
import { EdgePlan, kindOf, qualifies, type ProfileView } from "../../src/edge/evaluation-plan.js";
import type { MembershipStatus } from "../../src/profiles/types.js";
import type { DefinitionRecord, MergePolicyRecord } from "../../src/stores/types.js";
import { liveDefinition, type LiveDefinition, type LiveSet } from "../../src/streaming/definition-catalog.js";
import type { MembershipEntry } from "../../src/streaming/profile-state.js";
import { eventsFor, groupEventsByType, ReverseIndex } from "../../src/streaming/reverse-index.js";

const NOW = Date.parse("2026-06-15T12:00:00Z");
const HOUR = 3_600_000;
const TYPES = ["web.webpagedetails.pageViews", "commerce.purchases", "type.a", "Type.B"];

// [pql, queryType, excludeOptOut, expected kind]
const QUERIES: Array<[string, string | null, boolean, string]> = [
  [`homeAddress.countryCode = "US" and loyalty.points > 500`, "profile-only", false, "profile"],
  [`loyalty.tier = "gold" or homeAddress.countryCode.startsWith("F")`, "profile-only", true, "profile"],
  [`loyalty.points > 100 and currentMonth() = 6`, "profile-only", false, "always"],
  [`inSegment("d0") or inSegment("d1")`, "segment-of-segments", false, "profile"],
  [`inSegment("d7")`, "segment-of-segments", false, "profile"],
  [`chain(xEvent, timestamp, [C0: WHAT(eventType = "type.a") WHEN(< 2 hours before now)])`, "single-event", false, "event"],
  [`chain(xEvent, timestamp, [C0: WHAT(eventType = "type.b") WHEN(today)])`, "single-event", true, "event"],
  [`loyalty.tier = "gold" and chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(< 24 hours before now)])`, "profile-and-event", false, "event"],
  [`chain(xEvent, timestamp, [C0: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(< 12 hours before now), C1: WHAT(eventType = "type.a") WHEN(< 12 hours before now)])`, "multiple-events", false, "event"],
  [`chain(xEvent, timestamp, [C0: WHAT(eventType in ["type.a", "commerce.purchases"]) COUNT(2) WHEN(< 6 hours before now)])`, "multiple-events", false, "event"],
  [`chain(xEvent, timestamp, [C0: WHAT(true) WHEN(< 1 hours before now)])`, "single-event", false, "event"],
  [`not chain(xEvent, timestamp, [C0: WHAT(eventType = "type.a") WHEN(< 2 hours before now)])`, "single-event", false, "always"],
  [`loyalty.tier = "silver" or chain(xEvent, timestamp, [C0: WHAT(eventType = "type.a") WHEN(< 2 hours before now)])`, "profile-and-event", false, "always"],
  [`exists e from xEvent where e.eventType = "commerce.purchases"`, "single-event", false, "event"],
  [`xEvent[eventType = "type.a"].count() = 0`, "single-event", false, "always"],
];

function record(i: number, pql: string, queryType: string | null, excludeOptOut: boolean): DefinitionRecord {
  return {
    canonicalText: pql,
    references: [],
    definition: {
      id: `d${i}`,
      name: `d${i}`,
      mergePolicyId: "mp",
      classification: { queryType },
      dataGovernancePolicy: { excludeOptOut },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
    },
  } as unknown as DefinitionRecord;
}

const definitions: LiveDefinition[] = QUERIES.map(([pql, qt, optOut], i) => liveDefinition(record(i, pql, qt, optOut), undefined as unknown as MergePolicyRecord));
const set: LiveSet = { definitions, index: new ReverseIndex(definitions), byId: new Map(definitions.map((d) => [d.id, d])), maxWindowMs: 24 * HOUR };
const queries = new Map(QUERIES.map(([pql], i) => [`d${i}`, parse(pql)]));

/** The loop the plan replaced: every definition, every request. */
function fullLoop(view: ProfileView, optedOut: boolean, events: Record<string, unknown>[], now: number) {
  const byType = groupEventsByType(events);
  const qualifying: string[] = [];
  const changes: Array<[string, boolean]> = [];
  for (const d of definitions) {
    const was = view.ups[d.id]?.status === "realized";
    const q = qualifies(d, view.profile, eventsFor(d.footprint, events, byType), now, optedOut, was);
    if (q) qualifying.push(d.id);
    if (q !== was) changes.push([d.id, q]);
  }
  return { qualifying, changes };
}

const arbEvent = fc.record({
  type: fc.constantFrom(...TYPES),
  ageMin: fc.integer({ min: 0, max: 30 * 60 }),
});
const arbProfile = fc.record({
  country: fc.constantFrom("US", "FR", "DE"),
  tier: fc.constantFrom("gold", "silver", "bronze"),
  points: fc.integer({ min: 0, max: 1000 }),
  optedOut: fc.boolean(),
  memberships: fc.array(fc.tuple(fc.integer({ min: 0, max: QUERIES.length + 2 }), fc.constantFrom<MembershipStatus>("realized", "exited")), { maxLength: 8 }),
  events: fc.array(arbEvent, { maxLength: 6 }),
  requests: fc.array(fc.tuple(arbEvent, fc.integer({ min: 0, max: 12 * HOUR })), { minLength: 1, maxLength: 6 }),
  /** After which requests the hub projects the profile again. */
  projections: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 2 }),
});

describe("edge evaluation plan", () => {
  it("classifies definitions: profile (cached), event (skipped without events), always", () => {
    assert.deepEqual(definitions.map((d) => kindOf(d, queries.get(d.id)!)), QUERIES.map((q) => q[3]));
  });

  it("decides exactly what running every definition decides, across requests of one profile", () => {
    fc.assert(
      fc.property(arbProfile, (p) => {
        const projections = p.projections;
        const plan = new EdgePlan(set, queries);
        const ups: Record<string, MembershipEntry> = {};
        for (const [i, status] of p.memberships) ups[`d${i}`] = { status, lastQualificationTime: new Date(NOW - HOUR).toISOString() };
        const held = { revision: 1 };
        const events: Record<string, unknown>[] = p.events
          .map((e, n) => ({ _id: `e${n}`, eventType: e.type, timestamp: new Date(NOW - e.ageMin * 60_000).toISOString() }))
          .sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp));
        let now = NOW;
        for (const [n, [e, advance]] of p.requests.entries()) {
          now += advance;
          // The location drops events older than 25 hours when it collects one (no revision bump).
          while (events.length > 0 && Date.parse(events[0]!["timestamp"] as string) < now - 25 * HOUR) events.shift();
          events.push({ _id: `r${n}`, eventType: e.type, timestamp: new Date(now - e.ageMin * 1000).toISOString() });
          const view: ProfileView = { profile: { homeAddress: { countryCode: p.country }, loyalty: { tier: p.tier, points: p.points }, segmentMembership: { ups } }, ups };
          const got = plan.decide(held, view, p.optedOut, events, now);
          const want = fullLoop(view, p.optedOut, events, now);
          assert.deepEqual(got.qualifying.map((d) => d.id), want.qualifying);
          assert.deepEqual(got.changes.map((c) => [c.definition.id, c.qualifies]), want.changes);
          // Against the reference interpreter on all events (opt-out and segment-of-segments aside).
          for (const d of definitions) {
            if (d.excludeOptOut && p.optedOut) continue;
            if (d.queryType === "segment-of-segments" && ups[d.id]?.status === "realized") continue;
            assert.equal(got.qualifying.includes(d), evaluatePredicate(queries.get(d.id)!, { profile: view.profile, events, now }), `${d.id} at request ${n}`);
          }
          // Apply the changes as the interact service does (the store bumps the revision).
          // Its cached profile results are carried over its own changes, or dropped after a projection.
          if (got.changes.length > 0) {
            for (const c of got.changes) ups[c.definition.id] = { status: c.qualifies ? "realized" : "exited", lastQualificationTime: new Date(now).toISOString() };
            held.revision++;
            plan.carryForward(held, held.revision - 1, got.changes);
          }
          if (projections.includes(n)) {
            // A projection: new attributes and hub memberships, one revision bump.
            p.points = (p.points * 7 + 311) % 1000;
            p.tier = p.tier === "gold" ? "silver" : "gold";
            ups[`d${n % QUERIES.length}`] = { status: n % 2 === 0 ? "realized" : "exited", lastQualificationTime: new Date(now).toISOString() };
            held.revision++;
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a profile the location does not hold is decided like an empty profile", () => {
    const plan = new EdgePlan(set, queries);
    const ups = {};
    const view: ProfileView = { profile: { segmentMembership: { ups } }, ups };
    for (const type of TYPES) {
      const events = [{ _id: "x", eventType: type, timestamp: new Date(NOW - 1000).toISOString() }];
      const got = plan.decide(null, view, false, events, NOW);
      const want = fullLoop(view, false, events, NOW);
      assert.deepEqual(got.qualifying.map((d) => d.id), want.qualifying);
      assert.deepEqual(got.changes.map((c) => [c.definition.id, c.qualifies]), want.changes);
    }
  });
});
