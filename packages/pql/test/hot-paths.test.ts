/**
 * The runtime's hot paths, rewritten to allocate less (the edge evaluates
 * dozens of predicates per request), checked against the interpreter and
 * against fixed answers: inSegment's namespace order, a chain's events in or
 * out of time order across repeated calls (its arrays are reused), occurs
 * bounds cached per `now` across changing instants, records without the usual
 * prototype, and month lengths.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compile, compilePredicate } from "../src/compile.js";
import { evaluate } from "../src/evaluate.js";
import { inSegment } from "../src/runtime/builtins.js";
import { daysInMonth } from "../src/runtime/timestamp.js";
import { isRecord, member, DateInterval } from "../src/runtime/values.js";

const NOW = Date.UTC(2024, 2, 15, 12, 0, 0);
const MIN = 60_000;
const iso = (t: number) => new Date(t).toISOString();

test("inSegment: ups first, then the first namespace in key order that holds the id", () => {
  const p = (sm: unknown) => ({ segmentMembership: sm });
  assert.equal(inSegment(p({ ups: { a: { status: "realized" } } }), "a"), true);
  assert.equal(inSegment(p({ ups: { a: { status: "exited" } } }), "a"), false);
  assert.equal(inSegment(p({ ups: { a: { status: "Existing" } } }), "a"), true);
  // ups decides even when it comes last in key order.
  assert.equal(inSegment(p({ other: { a: { status: "realized" } }, ups: { a: { status: "exited" } } }), "a"), false);
  assert.equal(inSegment(p({ other: { a: { status: "exited" } }, ups: { a: { status: "realized" } } }), "a"), true);
  // Without the id in ups: the first other namespace holding it.
  assert.equal(inSegment(p({ ups: {}, x: { a: { status: "realized" } }, y: { a: { status: "exited" } } }), "a"), true);
  assert.equal(inSegment(p({ y: { a: { status: "exited" } }, x: { a: { status: "realized" } } }), "a"), false);
  assert.equal(inSegment(p({ ups: "not a record", x: { a: { status: "realized" } } }), "a"), true);
  assert.equal(inSegment(p({ x: { b: { status: "realized" } } }), "a"), false);
  // Inherited properties are not namespaces.
  const inherited = Object.create({ x: { a: { status: "realized" } } }) as Record<string, unknown>;
  assert.equal(inSegment(p(inherited), "a"), false);
  assert.equal(inSegment(p({ ups: Object.create({ a: { status: "realized" } }) as unknown }), "a"), false);
  assert.equal(inSegment(p(null), "a"), false);
  assert.equal(inSegment(p({ ups: { a: { status: "realized" } } }), 1), false);
  const q = 'inSegment("a")';
  const f = compilePredicate(q);
  for (const sm of [{ ups: { a: { status: "realized" } } }, { x: { a: { status: "realized" } }, ups: { a: { status: "exited" } } }, { x: { a: { status: "realized" } } }, {}]) {
    assert.equal(f({ profile: p(sm), now: NOW }), evaluate(q, { profile: p(sm), now: NOW }), JSON.stringify(sm));
  }
});

test("chain: events in or out of time order, repeated calls on the same compiled query agree with the interpreter", () => {
  const q = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(< 2 hours before now), C1: WHAT(eventType = "b") WHEN(< 2 hours before now)])';
  const f = compilePredicate(q);
  const ev = (type: string, t: number | string | null) => ({ eventType: type, timestamp: typeof t === "number" ? iso(t) : t });
  const lists = [
    [ev("a", NOW - 30 * MIN), ev("b", NOW - 10 * MIN)],
    [ev("b", NOW - 10 * MIN), ev("a", NOW - 30 * MIN)], // out of order: still a then b in time
    [ev("b", NOW - 30 * MIN), ev("a", NOW - 10 * MIN)], // b before a
    [ev("a", NOW - 10 * MIN), ev("b", NOW - 10 * MIN)], // same instant: b is not after a
    [ev("a", NOW - 30 * MIN), ev("x", "not a time"), ev("b", NOW - 5 * MIN)],
    [ev("a", NOW - 30 * MIN), ev("b", null)],
    [ev("a", NOW - 300 * MIN), ev("b", NOW - 5 * MIN)],
    [],
    [ev("b", NOW - 1 * MIN), ev("a", NOW - 50 * MIN), ev("x", NOW - 70 * MIN), ev("b", NOW - 40 * MIN)],
  ];
  const expected = [true, true, false, false, true, false, false, false, true];
  // Twice over, so that every list is also seen after another one (the compiled chain reuses its arrays).
  for (let round = 0; round < 2; round++) {
    lists.forEach((events, i) => {
      assert.equal(evaluate(q, { profile: {}, events, now: NOW }), expected[i], `interpreter, list ${i}`);
      assert.equal(f({ profile: {}, events, now: NOW }), expected[i], `compiled, list ${i}, round ${round}`);
    });
  }
});

test("occurs bounds cached per now: changing instants, every tail shape, agree with the interpreter", () => {
  const tails = ["< 2 hours before now", "<= 2 hours before now", "> 2 hours before now", ">= 2 hours before now", "= 2 hours before now", "!= 2 hours before now", "< 1 days after now", "today", "before today", "after yesterday", "between yesterday and now"];
  const instants = [NOW, NOW + 1, NOW + 3_600_000, NOW - 86_400_000, NOW, NOW + 7 * 86_400_000];
  const times = [-200, -150, -121, -120, -119, -60, -1, 0, 1, 60, 1440, 3000].map((m) => NOW + m * MIN);
  for (const tail of tails) {
    const q = `chain(xEvent, timestamp, [C0: WHAT(eventType = "a") WHEN(${tail})])`;
    const f = compilePredicate(q);
    for (const now of instants) {
      for (const t of times) {
        const ctx = { profile: {}, events: [{ eventType: "a", timestamp: iso(t) }], now };
        assert.equal(f(ctx), evaluate(q, ctx), `${tail} at ${iso(now)} for ${iso(t)}`);
      }
    }
  }
});

test("records: data objects with or without the usual prototype; instants, intervals and arrays are not records", () => {
  const bare = Object.create(null) as Record<string, unknown>;
  bare["tier"] = "gold";
  assert.equal(isRecord({}), true);
  assert.equal(isRecord(bare), true);
  assert.equal(isRecord([]), false);
  assert.equal(isRecord(new Date(NOW)), false);
  assert.equal(isRecord(new DateInterval(NOW, NOW + 1)), false);
  assert.equal(isRecord(null), false);
  assert.equal(isRecord("x"), false);
  class Custom {
    tier = "gold";
  }
  assert.equal(isRecord(new Custom()), true);
  assert.equal(member(bare, "tier"), "gold");
  assert.equal(compile("tier")({ profile: bare, now: NOW }), "gold");
  assert.equal(compilePredicate('tier = "gold"')({ profile: bare, now: NOW }), evaluate('tier = "gold"', { profile: bare, now: NOW }));
});

test("month lengths", () => {
  assert.deepEqual(Array.from({ length: 12 }, (_, m) => daysInMonth(2023, m)), [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]);
  assert.equal(daysInMonth(2024, 1), 29);
  assert.equal(daysInMonth(1900, 1), 28);
  assert.equal(daysInMonth(2000, 1), 29);
  assert.equal(daysInMonth(2024, 12), undefined);
});
