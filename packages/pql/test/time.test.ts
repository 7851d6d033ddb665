/**
 * Time semantics (pql.md §8): every TimeRef, every occurs form, calendar
 * boundaries, month-end clamping, leap years, n = 0, instants vs periods, and
 * the [LEG] examples marked ✓. Each case runs through evaluate and compile.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluate } from "../src/evaluate.js";
import { compile } from "../src/compile.js";
import { parse } from "../src/parser.js";
import type { Occurs } from "../src/ast.js";
import { addUnits, occursBounds, periodStart, resolveTimeRef } from "../src/runtime/time.js";
import { parseTimestamp } from "../src/runtime/timestamp.js";

const iso = (s: string) => Date.parse(s);

/** `t occurs TAIL` with t given as data, at `now`; both evaluators must agree. */
function occurs(t: unknown, tail: string, now: string, extra: Record<string, unknown> = {}): boolean {
  const q = `t occurs ${tail}`;
  const ctx = { profile: { t, ...extra }, now };
  const a = evaluate(q, ctx);
  const b = compile(q)(ctx);
  assert.equal(a, b, `evaluate and compile disagree on ${q}`);
  return a as boolean;
}

const NOW = "2018-08-28T10:00:00Z"; // a Tuesday

test("[LEG] ✓ last month on 2018-08-28 is 2018-07-01 … 2018-07-31", () => {
  assert.equal(occurs("2018-07-01T00:00:00Z", "last month", NOW), true);
  assert.equal(occurs("2018-07-31T23:59:59.999Z", "last month", NOW), true);
  assert.equal(occurs("2018-06-30T23:59:59.999Z", "last month", NOW), false);
  assert.equal(occurs("2018-08-01T00:00:00Z", "last month", NOW), false);
});

test("[LEG] ✓ <= 1 month before today on 2018-08-28 is 2018-07-28 00:00 … 2018-08-27 end", () => {
  assert.equal(occurs("2018-07-28T00:00:00Z", "<= 1 month before today", NOW), true);
  assert.equal(occurs("2018-08-27T23:59:59.999Z", "<= 1 month before today", NOW), true);
  assert.equal(occurs("2018-07-27T23:59:59.999Z", "<= 1 month before today", NOW), false);
  assert.equal(occurs("2018-08-28T00:00:00Z", "<= 1 month before today", NOW), false);
});

test("[LEG] ✓ occurs on date(2017, 10, 1) is any time that day; `on` is optional", () => {
  assert.equal(occurs("2017-10-01T00:00:00Z", "on date(2017, 10, 1)", NOW), true);
  assert.equal(occurs("2017-10-01T23:59:59.999Z", "date(2017, 10, 1)", NOW), true);
  assert.equal(occurs("2017-10-02T00:00:00Z", "on date(2017, 10, 1)", NOW), false);
  assert.equal(occurs("2017-09-30T23:59:59.999Z", "on date(2017, 10, 1)", NOW), false);
});

test("[LEG] ✓ between two dates includes both whole days", () => {
  const tail = "between date(2024, 1, 1) and date(2024, 1, 31)";
  assert.equal(occurs("2024-01-01T00:00:00Z", tail, NOW), true);
  assert.equal(occurs("2024-01-31T23:59:59Z", tail, NOW), true);
  assert.equal(occurs("2024-02-01T00:00:00Z", tail, NOW), false);
  assert.equal(occurs("2023-12-31T23:59:59Z", tail, NOW), false);
});

test("between with an instant end includes the instant; relative periods as ends", () => {
  assert.equal(occurs("2018-08-28T10:00:00Z", "between yesterday and now", NOW), true);
  assert.equal(occurs("2018-08-28T10:00:00.001Z", "between yesterday and now", NOW), false);
  assert.equal(occurs("2018-08-27T00:00:00Z", "between yesterday and now", NOW), true);
  assert.equal(occurs("2018-06-15T00:00:00Z", "between last month and this month", NOW), false);
  assert.equal(occurs("2018-07-15T00:00:00Z", "between last month and this month", NOW), true);
  assert.equal(occurs("2018-08-31T23:00:00Z", "between last month and this month", NOW), true);
});

test("today, yesterday, tomorrow are UTC days; now is an instant", () => {
  assert.equal(occurs("2018-08-28T00:00:00Z", "today", NOW), true);
  assert.equal(occurs("2018-08-28T23:59:59.999Z", "today", NOW), true);
  assert.equal(occurs("2018-08-28T01:00:00+02:00", "today", NOW), false, "23:00 UTC the day before");
  assert.equal(occurs("2018-08-27T12:00:00Z", "yesterday", NOW), true);
  assert.equal(occurs("2018-08-29T12:00:00Z", "tomorrow", NOW), true);
  assert.equal(occurs("2018-08-29T12:00:00Z", "yesterday", NOW), false);
  assert.equal(occurs(iso(NOW), "on now", NOW), true);
  assert.equal(occurs(iso(NOW) + 1, "on now", NOW), false);
});

test("before / after / from: periods vs instants", () => {
  assert.equal(occurs("2018-08-27T23:59:59Z", "before today", NOW), true);
  assert.equal(occurs("2018-08-28T00:00:00Z", "before today", NOW), false);
  assert.equal(occurs("2018-08-29T00:00:00Z", "after today", NOW), true, "after a period: from its end");
  assert.equal(occurs("2018-08-28T23:00:00Z", "after today", NOW), false);
  assert.equal(occurs("2018-08-29T00:00:00Z", "from today", NOW), true, "from behaves like after");
  assert.equal(occurs(iso(NOW), "after now", NOW), false, "after an instant is strict");
  assert.equal(occurs(iso(NOW) + 1, "after now", NOW), true);
  assert.equal(occurs(iso(NOW) - 1, "before now", NOW), true);
  assert.equal(occurs(iso(NOW), "before now", NOW), false);
});

test("OP n UNIT before: every comparison", () => {
  const h = (x: number) => iso(NOW) - x * 3_600_000;
  assert.equal(occurs(h(1.5), "< 2 hours before now", NOW), true);
  assert.equal(occurs(h(2), "< 2 hours before now", NOW), false, "< is strict at A − n·U");
  assert.equal(occurs(h(2), "<= 2 hours before now", NOW), true);
  assert.equal(occurs(h(0), "<= 2 hours before now", NOW), false, "T must be before the anchor");
  assert.equal(occurs(h(3), "> 2 hours before now", NOW), true);
  assert.equal(occurs(h(2), "> 2 hours before now", NOW), false);
  assert.equal(occurs(h(2), ">= 2 hours before now", NOW), true);
  assert.equal(occurs(h(1), ">= 2 hours before now", NOW), false);
  // = n U: the n-th unit window before the anchor.
  assert.equal(occurs("2018-08-25T13:00:00Z", "= 3 days before today", NOW), true);
  assert.equal(occurs("2018-08-26T00:00:00Z", "= 3 days before today", NOW), false);
  assert.equal(occurs("2018-08-24T23:59:59Z", "= 3 days before today", NOW), false);
  // != n U: before the anchor and outside that window.
  assert.equal(occurs("2018-08-26T13:00:00Z", "!= 3 days before today", NOW), true);
  assert.equal(occurs("2018-08-25T13:00:00Z", "!= 3 days before today", NOW), false);
  assert.equal(occurs("2018-08-28T13:00:00Z", "!= 3 days before today", NOW), false);
});

test("OP n UNIT after: every comparison, strict at an instant anchor", () => {
  assert.equal(occurs("2018-08-29T12:00:00Z", "= 1 day after today", NOW), true, "= 1 day after today is tomorrow");
  assert.equal(occurs("2018-08-30T00:00:00Z", "= 1 day after today", NOW), false);
  assert.equal(occurs("2018-08-29T00:00:00Z", "< 2 days after today", NOW), true, "an interval anchor is inclusive");
  assert.equal(occurs("2018-08-31T00:00:00Z", "< 2 days after today", NOW), false);
  assert.equal(occurs("2018-08-31T00:00:00Z", "<= 2 days after today", NOW), true);
  assert.equal(occurs("2018-08-31T00:00:00Z", "> 2 days after today", NOW), false);
  assert.equal(occurs("2018-08-31T00:00:01Z", "> 2 days after today", NOW), true);
  assert.equal(occurs("2018-08-31T00:00:00Z", ">= 2 days after today", NOW), true);
  assert.equal(occurs(iso(NOW), "< 2 hours after now", NOW), false, "an instant anchor is strict");
  assert.equal(occurs(iso(NOW) + 1, "< 2 hours after now", NOW), true);
  assert.equal(occurs("2018-08-30T12:00:00Z", "!= 1 day after today", NOW), true);
  assert.equal(occurs("2018-08-29T12:00:00Z", "!= 1 day after today", NOW), false);
});

test("n = 0: `= 0 days before/after today` both mean today; `< 0` and `<= 0` never match", () => {
  assert.equal(occurs("2018-08-28T05:00:00Z", "= 0 days before today", NOW), true);
  assert.equal(occurs("2018-08-28T05:00:00Z", "= 0 days after today", NOW), true);
  assert.equal(occurs("2018-08-27T05:00:00Z", "= 0 days before today", NOW), false);
  assert.equal(occurs("2018-08-29T05:00:00Z", "= 0 days after today", NOW), false);
  assert.equal(occurs(iso(NOW) - 1, "< 0 hours before now", NOW), false);
  assert.equal(occurs(iso(NOW) - 1, "<= 0 hours before now", NOW), false);
  assert.equal(occurs(iso(NOW) + 1, "< 0 hours after now", NOW), false);
});

test("this/last/next week: ISO weeks starting Monday 00:00 UTC", () => {
  assert.equal(occurs("2018-08-27T00:00:00Z", "this week", NOW), true, "Monday");
  assert.equal(occurs("2018-09-02T23:59:59Z", "this week", NOW), true, "Sunday");
  assert.equal(occurs("2018-08-26T23:59:59Z", "this week", NOW), false);
  assert.equal(occurs("2018-08-20T00:00:00Z", "last week", NOW), true);
  assert.equal(occurs("2018-09-03T00:00:00Z", "next week", NOW), true);
  // A Sunday `now` belongs to the week that started six days earlier.
  assert.equal(occurs("2018-08-27T00:00:00Z", "this week", "2018-09-02T22:00:00Z"), true);
});

test("month and year boundaries, decades, centuries and millennia aligned", () => {
  assert.equal(occurs("2018-12-31T23:59:59Z", "this year", NOW), true);
  assert.equal(occurs("2019-01-01T00:00:00Z", "this year", NOW), false);
  assert.equal(occurs("2019-01-01T00:00:00Z", "next year", NOW), true);
  assert.equal(occurs("2017-06-01", "last year", NOW), true);
  assert.equal(occurs("2018-09-01T00:00:00Z", "next month", NOW), true);
  assert.equal(occurs("2019-12-15T00:00:00Z", "next month", "2019-11-30T00:00:00Z"), true);
  assert.equal(occurs("2019-12-31T12:00:00Z", "last month", "2020-01-15T00:00:00Z"), true, "last month across a year");
  assert.equal(occurs("2010-01-01T00:00:00Z", "this decade", NOW), true);
  assert.equal(occurs("2009-12-31T23:59:59Z", "this decade", NOW), false);
  assert.equal(occurs("2005-05-05", "last decade", NOW), true);
  assert.equal(occurs("2000-01-01", "this century", NOW), true);
  assert.equal(occurs("1999-12-31", "this century", NOW), false);
  assert.equal(occurs("2999-12-31", "this millennium", NOW), true);
  assert.equal(occurs("1500-01-01", "last millennium", NOW), true);
});

test("month arithmetic clamps the day to the target month (leap years included)", () => {
  assert.equal(addUnits(iso("2024-03-31T10:00:00Z"), -1, "month"), iso("2024-02-29T10:00:00Z"));
  assert.equal(addUnits(iso("2023-03-31T10:00:00Z"), -1, "month"), iso("2023-02-28T10:00:00Z"));
  assert.equal(addUnits(iso("2024-01-31T00:00:00Z"), 1, "month"), iso("2024-02-29T00:00:00Z"));
  assert.equal(addUnits(iso("2024-02-29T00:00:00Z"), 1, "year"), iso("2025-02-28T00:00:00Z"));
  assert.equal(addUnits(iso("2024-02-29T00:00:00Z"), 4, "year"), iso("2028-02-29T00:00:00Z"));
  assert.equal(addUnits(iso("2024-05-15T00:00:00Z"), -1, "decade"), iso("2014-05-15T00:00:00Z"));
  // Through occurs: one month before 31 March 2023 starts on 28 February.
  assert.equal(occurs("2023-02-28T00:00:00Z", "<= 1 month before today", "2023-03-31T10:00:00Z"), true);
  assert.equal(occurs("2023-02-27T23:59:59Z", "<= 1 month before today", "2023-03-31T10:00:00Z"), false);
});

test("leap years: date(y, 2, 29) exists only in leap years; Feb 29 birthdays count as Feb 28 in other years", () => {
  assert.equal(occurs("2024-02-29T12:00:00Z", "on date(2024, 2, 29)", NOW), true);
  assert.equal(occurs("2023-03-01T12:00:00Z", "on date(2023, 2, 29)", NOW), false, "not a date: nothing matches");
  assert.equal(evaluate("date(2023, 2, 29)", { profile: {}, now: NOW }), null);
  const birthday =
    "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()";
  const leapling = { person: { birthDate: "2000-02-29" } };
  const feb28 = { person: { birthDate: "1990-02-28" } };
  for (const q of [birthday]) {
    for (const f of [evaluate, (x: string, c: Parameters<typeof evaluate>[1]) => compile(x)(c)]) {
      assert.equal(f(q, { profile: leapling, now: "2027-02-28T09:00:00Z" }), true, "non-leap year: on 28 February");
      assert.equal(f(q, { profile: leapling, now: "2027-03-01T09:00:00Z" }), false);
      assert.equal(f(q, { profile: leapling, now: "2028-02-28T09:00:00Z" }), false, "leap year: not on the 28th");
      assert.equal(f(q, { profile: leapling, now: "2028-02-29T09:00:00Z" }), true, "leap year: on the 29th");
      assert.equal(f(q, { profile: feb28, now: "2028-02-28T09:00:00Z" }), true, "no day doubled in a leap year");
      assert.equal(f(q, { profile: feb28, now: "2028-02-29T09:00:00Z" }), false);
    }
  }
});

test("timestamps: epoch ms, ISO 8601 with offsets, XDM dates, offset-less ISO as UTC; garbage is null", () => {
  assert.equal(parseTimestamp("2011-12-03T10:15:30+01:00")?.start, iso("2011-12-03T09:15:30Z"));
  assert.equal(parseTimestamp("2011-12-03T10:15:30")?.start, iso("2011-12-03T10:15:30Z"));
  assert.equal(parseTimestamp("2011-12-03T10:15:30.123456Z")?.start, iso("2011-12-03T10:15:30.123Z"));
  assert.deepEqual(parseTimestamp("2011-12-03"), { start: iso("2011-12-03T00:00:00Z"), end: iso("2011-12-04T00:00:00Z"), day: true });
  assert.equal(parseTimestamp("2011-02-30"), null);
  assert.equal(parseTimestamp("2011-12-03T25:00:00Z"), null);
  assert.equal(parseTimestamp("yesterday at noon"), null);
  assert.equal(occurs(iso("2018-08-28T05:00:00Z"), "today", NOW), true);
  assert.equal(occurs("not a time", "today", NOW), false);
  assert.equal(occurs(true, "today", NOW), false);
});

test("a data-valued reference: an XDM date is its day, a timestamp an instant", () => {
  const q = "xEvent[timestamp occurs <= 2 hours after ^lastVisit].count()";
  const events = [
    { timestamp: "2018-08-20T10:00:00Z" },
    { timestamp: "2018-08-20T11:59:00Z" },
    { timestamp: "2018-08-20T12:00:01Z" },
  ];
  const ctx = { profile: { lastVisit: "2018-08-20T10:00:00Z" }, events, now: NOW };
  assert.equal(evaluate(q, ctx), 1, "strictly after the instant, within two hours");
  assert.equal(compile(q)(ctx), 1);
  const dayCtx = { ...ctx, profile: { lastVisit: "2018-08-19" } };
  assert.equal(evaluate(q, dayCtx), 0, "a day anchor: after its end, 2018-08-20 00:00 … 02:00");
  assert.equal(compile(q)(dayCtx), 0);
});

test("[LEG] select with two events within two hours", () => {
  const q =
    'select A from xEvent where A.eventType = "commerce.productListAdds", B from xEvent where B.eventType = "commerce.purchases" and B.timestamp occurs <= 2 hours after A.timestamp';
  const mk = (purchaseAt: string) => ({
    profile: {},
    now: NOW,
    events: [
      { eventType: "commerce.productListAdds", timestamp: "2018-08-20T10:00:00Z" },
      { eventType: "commerce.purchases", timestamp: purchaseAt },
    ],
  });
  assert.equal((evaluate(q, mk("2018-08-20T11:30:00Z")) as unknown[]).length, 1);
  assert.equal((compile(q)(mk("2018-08-20T11:30:00Z")) as unknown[]).length, 1);
  assert.deepEqual(evaluate(q, mk("2018-08-20T12:30:00Z")), []);
  assert.deepEqual(compile(q)(mk("2018-08-20T12:30:00Z")), []);
});

test("chain WHEN applies the tail to the step event's timestamp field", () => {
  const q = 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(< 24 hours before now), B: WHAT(eventType = "b") WHEN(today)])';
  const ctx = (ta: string, tb: string) => ({
    profile: {},
    now: NOW,
    events: [{ eventType: "a", timestamp: ta }, { eventType: "b", timestamp: tb }],
  });
  for (const f of [evaluate, (x: string, c: Parameters<typeof evaluate>[1]) => compile(x)(c)]) {
    assert.equal(f(q, ctx("2018-08-27T20:00:00Z", "2018-08-28T01:00:00Z")), true);
    assert.equal(f(q, ctx("2018-08-27T09:00:00Z", "2018-08-28T01:00:00Z")), false, "A is more than 24 hours ago");
    assert.equal(f(q, ctx("2018-08-28T02:00:00Z", "2018-08-28T01:00:00Z")), false, "B must come after A");
  }
});

test("resolveTimeRef and occursBounds give concrete UTC bounds for the SQL compiler", () => {
  const now = iso(NOW);
  assert.deepEqual(resolveTimeRef({ type: "RelPeriod", which: "last", unit: "month" }, now), {
    start: iso("2018-07-01T00:00:00Z"),
    end: iso("2018-08-01T00:00:00Z"),
    instant: false,
  });
  assert.deepEqual(resolveTimeRef({ type: "TimeWord", word: "now" }, now), { start: now, end: now, instant: true });
  const tailOf = (q: string) => (parse(`t occurs ${q}`).body as Occurs).tail;
  assert.deepEqual(occursBounds(tailOf("<= 30 days before now"), NOW), {
    lower: now - 30 * 86_400_000,
    lowerInclusive: true,
    upper: now,
    upperInclusive: false,
  });
  assert.deepEqual(occursBounds(tailOf("on date(2017, 10, 1)"), now), {
    lower: iso("2017-10-01T00:00:00Z"),
    lowerInclusive: true,
    upper: iso("2017-10-02T00:00:00Z"),
    upperInclusive: false,
  });
  assert.equal(occursBounds(tailOf("before ^lastVisit"), now), null, "a data-valued reference has no constant bounds");
  assert.equal(occursBounds(tailOf("< 0 days before today"), now)?.empty, true);
  assert.equal(periodStart(iso("2018-08-28T10:00:00Z"), "week"), iso("2018-08-27T00:00:00Z"));
});

test("property: the allocation-free instant reader agrees with the general timestamp parser", async () => {
  const fc = (await import("fast-check")).default;
  const { parseInstant } = await import("../src/runtime/timestamp.js");
  const two = (n: number) => String(n).padStart(2, "0");
  const arb = fc.record({
    y: fc.integer({ min: 100, max: 9999 }),
    mo: fc.integer({ min: 0, max: 13 }),
    d: fc.integer({ min: 0, max: 32 }),
    h: fc.integer({ min: 0, max: 24 }),
    mi: fc.integer({ min: 0, max: 60 }),
    s: fc.integer({ min: 0, max: 60 }),
    frac: fc.oneof(fc.constant(""), fc.stringMatching(/^\.[0-9]{1,10}$/)),
    zone: fc.constantFrom("Z", "+01:00", "-05:30", "+14:00", "", "z", "+0100", "+19:00"),
  });
  fc.assert(
    fc.property(arb, (x) => {
      const text = `${String(x.y).padStart(4, "0")}-${two(x.mo)}-${two(x.d)}T${two(x.h)}:${two(x.mi)}:${two(x.s)}${x.frac}${x.zone}`;
      assert.equal(parseInstant(text), parseTimestamp(text)?.start ?? null, text);
    }),
    { numRuns: 3000 },
  );
  assert.equal(parseInstant("2024-03-15T10:00:00.5Z"), iso("2024-03-15T10:00:00.500Z"));
});
