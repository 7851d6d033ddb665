/**
 * The reverse index picks the definitions an event or profile record can
 * affect; it may pick too many but never too few. The property test checks
 * "never too few" against evaluation: an event whose type the index does not
 * map to a definition never changes that definition's result.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { evaluate, parse } from "@segmentd/pql";
import { footprintOf, ReverseIndex } from "../../src/streaming/reverse-index.js";

const fp = (pql: string) => footprintOf(parse(pql));
const types = (pql: string) => {
  const t = fp(pql).eventTypes;
  return t === "any" ? "any" : [...t].sort();
};

describe("reverse index", () => {
  it("reads event types from every spelling of an event condition", () => {
    assert.deepEqual(types('chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(today)])'), ["a"]);
    assert.deepEqual(types('CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("Commerce.Checkouts", false)) WHEN(today)])'), ["commerce.checkouts"]);
    assert.deepEqual(types('xEvent[eventType = "a" and timestamp occurs < 3 hours before now].count() > 0'), ["a"]);
    assert.deepEqual(types('select X from xEvent where X.eventType = "b" and X.timestamp occurs < 1 hours before now'), ["b"]);
    assert.deepEqual(types('xEvent[eventType in ["a", "c"]].count() > 1'), ["a", "c"]);
    assert.deepEqual(types('chain(xEvent, timestamp, [C0: WHAT(eventType = "a"), C1: WHAT(eventType = "b") WHEN(today)])'), ["a", "b"]);
    assert.deepEqual(types('homeAddress.country = "US"'), []);
  });

  it("is a wildcard when a condition does not pin the event type", () => {
    assert.equal(types('xEvent[eventType = "a" or web.name = "x"].count() > 0'), "any");
    assert.equal(types("xEvent.count() > 2"), "any");
    assert.equal(types('chain(xEvent, timestamp, [C0: WHAT(web.name = "x") WHEN(today)])'), "any");
  });

  it("maps profile keys, event types and inSegment references to definitions", () => {
    const defs = [
      { id: "country", footprint: fp('homeAddress.country = "US"') },
      { id: "buy", footprint: fp('chain(xEvent, timestamp, [C0: WHAT(eventType = "buy") WHEN(today)])') },
      { id: "any", footprint: fp("xEvent.count() > 2") },
      { id: "ref", footprint: fp('inSegment("country") and age > 3') },
    ];
    const idx = new ReverseIndex(defs);
    assert.deepEqual(idx.forEvent("BUY").map((d) => d.id).sort(), ["any", "buy"]);
    assert.deepEqual(idx.forEvent("view").map((d) => d.id), ["any"]);
    assert.deepEqual(idx.forProfileKeys(["homeAddress"]).map((d) => d.id), ["country"]);
    assert.deepEqual(idx.forProfileKeys(["age", "identityMap"]).map((d) => d.id), ["ref"]);
    assert.deepEqual(idx.dependentsOf(["country"]).map((d) => d.id), ["ref"]);
  });

  it("never misses: an event of an unmapped type does not change the result", () => {
    const queries = [
      'xEvent[eventType = "a" and timestamp occurs < 3 hours before now].count() > 0',
      'chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(< 2 hours before now), C1: WHAT(eventType in ["b", "c"]) WHEN(< 2 hours before now)])',
      'xEvent[eventType = "a" or web.x = "b"].count() >= 2',
      'xEvent[eventType = "a" or eventType = "b"].count() >= 2',
      'select X from xEvent where X.eventType = "c" and X.timestamp occurs < 1 hours before now',
    ];
    const now = Date.parse("2026-01-01T12:00:00Z");
    const ev = fc.record({ eventType: fc.constantFrom("a", "b", "c", "d", "A"), ago: fc.integer({ min: 1, max: 4 * 3_600_000 }) });
    fc.assert(
      fc.property(fc.constantFrom(...queries), fc.array(ev, { maxLength: 6 }), ev, (q, history, extra) => {
        const f = footprintOf(parse(q));
        const mapped = f.eventTypes === "any" || f.eventTypes.has(extra.eventType.toLowerCase());
        const toEvent = (e: { eventType: string; ago: number }) => ({ eventType: e.eventType, timestamp: new Date(now - e.ago).toISOString() });
        const before = evaluate(q, { profile: {}, events: history.map(toEvent), now });
        const afterIt = evaluate(q, { profile: {}, events: [...history, extra].map(toEvent), now });
        if (!mapped) assert.deepEqual(afterIt, before);
      }),
      { numRuns: 400 },
    );
  });
});
