/**
 * classify(): a table of definitions with the expected edge (synchronous) and
 * streaming (continuous) eligibility, query type and reasons (issue #3), plus
 * the window arithmetic at its boundaries and the reference resolution rules.
 * The rules are decisions.md §1; every other choice is in docs/eligibility.md.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { classify, type ClassifyOptions, type QueryType } from "../src/classify.js";
import { check } from "../src/check.js";
import { parse } from "../src/parser.js";

const R = {
  ignoreYear:
    "the definition uses 'ignore year' on a date (getMonth/getDayOfMonth/currentMonth/currentDayOfMonth), which only batch evaluation supports",
  negated: "the definition requires an event not to happen (a negated event), which edge and streaming evaluation do not support",
  noWindow: "an event has no time window; edge and streaming evaluation need a window of less than 24 hours before now",
  fixedDate: "an event's time window is a fixed date, not relative to now; edge and streaming evaluation need a window of less than 24 hours before now",
  profileDate:
    "an event's time window is relative to a profile date, not to now; edge and streaming evaluation need a window of less than 24 hours before now",
  long: (d: string) => `the event window is ${d}; edge and streaming evaluation need less than 24 hours`,
  combines: (id: string) => `it combines an event with the audience '${id}', which is not profile-only`,
  combinesMany: (id: string) => `it combines events with the audience '${id}', which is not profile-only`,
  unknown: (id: string) => `it refers to the audience '${id}', which does not exist`,
  invalid: (id: string) => `it refers to the audience '${id}', whose expression cannot be read`,
  cycle: (...ids: string[]) => `its audience references form a cycle: ${ids.map((i) => `'${i}'`).join(" → ")}`,
  onlyRefs: "it is made only of audience references (inSegment), which streaming evaluation does not support (edge evaluation does)",
  unsupported: (what: string) => `the definition uses ${what}, which edge and streaming evaluation cannot check`,
};

const DEFINITIONS: Record<string, string> = {
  "profile-a": "person.age > 30",
  "profile-b": 'inSegment("profile-a") and homeAddress.countryCode = "US"',
  "event-a": 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(today)])',
  "batch-birthday": "person.birthDate.getMonth() = currentMonth()",
  "via-event": 'inSegment("event-a")',
  "loop-1": 'inSegment("loop-2")',
  "loop-2": 'inSegment("loop-1")',
  broken: "person.age >",
  "uses-unknown": 'inSegment("nope")',
};
const OPTIONS: ClassifyOptions = { resolveSegment: (id) => DEFINITIONS[id] };

const today = (what = 'eventType = "a"') => `chain(xEvent, timestamp, [A: WHAT(${what}) WHEN(today)])`;
const when = (w: string) => `chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(${w})])`;

interface Row {
  q: string;
  type: QueryType | null;
  /** Streaming eligibility when it differs from edge. */
  continuous?: boolean;
  reasons?: string[];
}

const ROWS: Row[] = [
  // ---- profile-only
  { q: 'homeAddress.country.equals("US", false)', type: "profile-only" },
  { q: 'person.age >= 21 AND homeAddress.countryCode IN ["US", "CA"]', type: "profile-only" },
  { q: "orders.count() > 2", type: "profile-only" },
  { q: "xEventCount > 3", type: "profile-only" },
  { q: 'address.last = "Smith"', type: "profile-only" },
  { q: 'date.year = 2020 and from.city = "Oslo"', type: "profile-only" },
  { q: "person.birthDate occurs <= 7 days before today", type: "profile-only" },
  { q: "person.birthDate occurs this month", type: "profile-only" },
  { q: "exists O from orders : O.price > 100", type: "profile-only" },
  { q: "orders[price > 100].count() > 0", type: "profile-only" },
  { q: "select O from orders where O.total > 10", type: "profile-only" },
  { q: "(sum O.price over O from orders where O.price > 0) > 100", type: "profile-only" },
  { q: "forall O from orders : O.price > 1", type: "profile-only" },
  { q: 'NOT (homeAddress.countryCode = "US")', type: "profile-only" },
  { q: "true", type: "profile-only" },
  { q: "(p) => p.person.age > 30", type: "profile-only" },
  { q: "$1.person.age > 30", type: "profile-only" },
  { q: "let T = (orders.sum(price)) in (T > 100 and T < 500)", type: "profile-only" },
  { q: "person.birthYear + 18 > currentYear()", type: "profile-only" },
  { q: 'identityMap.keys().includes("ECID")', type: "profile-only" },
  { q: 'orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get("s1") = 2', type: "profile-only" },
  { q: 'orders.exists(items[sku = "x"])', type: "profile-only" },

  // ---- single-event: every spelling
  { q: 'CHAIN(xEvent, timestamp, [C0: WHAT(eventType.equals("commerce.checkouts", false)) WHEN(today)])', type: "single-event" },
  { q: when("< 23 hours before now"), type: "single-event" },
  { q: when("< 24 hours before now"), type: "single-event" },
  { q: when("< 1 day before now"), type: "single-event" },
  { q: when("<= 1439 minutes before now"), type: "single-event" },
  { q: when("= 3 hours before now"), type: "single-event" },
  { q: when("this hour"), type: "single-event" },
  { q: when("last hour"), type: "single-event" },
  { q: when("on today"), type: "single-event" },
  { q: when("between today and tomorrow"), type: "single-event" },
  { q: when("after now"), type: "single-event" },
  { q: 'select X from xEvent where X.eventType = "a" and X.timestamp occurs < 2 hours before now', type: "single-event" },
  { q: "SELECT X FROM xEvent WHERE X.timestamp OCCURS TODAY", type: "single-event" },
  { q: 'xEvent[eventType = "a" and timestamp occurs today].count() > 0', type: "single-event" },
  { q: "xEvent[timestamp occurs today].count() >= 1", type: "single-event" },
  { q: "0 < xEvent[timestamp occurs today].count()", type: "single-event" },
  { q: "xEvent[timestamp occurs today].count() != 0", type: "single-event" },
  { q: 'xEvent[eventType = "a"].exists(timestamp occurs < 1 hour before now)', type: "single-event" },
  { q: 'xEvent.exists(eventType = "a" and timestamp occurs today)', type: "single-event" },
  { q: 'xEvent[timestamp occurs today and commerce.from = "web"]', type: "single-event" },
  { q: "exists E from xEvent : E.timestamp occurs < 6 hours before now", type: "single-event" },
  { q: "EXISTS E FROM xEvent : E.timestamp occurs TODAY", type: "single-event" },
  { q: "(sum E.commerce.order.priceTotal over E from xEvent where E.timestamp occurs today) > 100", type: "single-event" },
  { q: "xEvent[timestamp occurs today].sum(commerce.order.priceTotal) > 50", type: "single-event" },
  { q: "xEvent[timestamp occurs today].average(commerce.order.priceTotal) < 50", type: "single-event" },
  { q: 'xEvent.filter(timestamp occurs today).count() > 0', type: "single-event" },
  { q: "let E = xEvent[timestamp occurs today] in E.count() > 0", type: "single-event" },
  { q: `not (not ${today()})`, type: "single-event" },
  { q: 'xEvent[timestamp occurs today and eventType = "a" and (channel = "web" or channel = "app")].count() > 0', type: "single-event" },
  { q: "xEvent[(timestamp occurs today or timestamp occurs this hour)].count() > 0", type: "single-event" },

  // ---- single-event-with-profile
  { q: `homeAddress.countryCode = "US" and ${today()}`, type: "single-event-with-profile" },
  { q: "person.age > 30 AND xEvent[timestamp occurs today].count() > 0", type: "single-event-with-profile" },
  { q: 'xEvent[eventType = "a" and ^person.vip = true and timestamp occurs today].count() > 0', type: "single-event-with-profile" },
  { q: "person.vip = true and (select X from xEvent where X.timestamp occurs today)", type: "single-event-with-profile" },
  { q: "xEvent[timestamp occurs today].sum(commerce.order.priceTotal * ^person.discount) > 50", type: "single-event-with-profile" },
  { q: "(sum E.commerce.order.priceTotal + person.bonus over E from xEvent where E.timestamp occurs today) > 100", type: "single-event-with-profile" },
  { q: `${today()} and inSegment("profile-a")`, type: "single-event-with-profile" },
  { q: `${today()} and inSegment("profile-b")`, type: "single-event-with-profile" },
  { q: `${today()} and inSegment("batch-birthday")`, type: "single-event-with-profile" },

  // ---- multiple-events
  { q: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(today), B: WHAT(eventType = "b") WHEN(today)])', type: "multiple-events" },
  { q: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(< 2 hours before now), B: WHAT(eventType = "b")])', type: "multiple-events" },
  { q: `${when("< 24 hours before now")} and ${when("< 24 hours before now")}`, type: "multiple-events" },
  { q: `${today('eventType = "a"')} OR ${today('eventType = "b"')}`, type: "multiple-events" },
  { q: `${today()} and xEvent[timestamp occurs this hour].count() > 0`, type: "multiple-events" },
  {
    q: 'select A from xEvent where A.eventType = "add" and A.timestamp occurs < 1 hour before now, B from xEvent where B.timestamp occurs <= 2 hours after A.timestamp',
    type: "multiple-events",
  },
  { q: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a") COUNT(3) WHEN(today)])', type: "multiple-events" },
  { q: "xEvent[timestamp occurs today].count() >= 3", type: "multiple-events" },
  { q: "xEvent[timestamp occurs today].count() > 1", type: "multiple-events" },
  { q: `person.age > 1 and ${today('eventType = "a"')} and ${today('eventType = "b"')}`, type: "multiple-events" },
  { q: `${today('eventType = "a"')} and ${today('eventType = "b"')} and inSegment("profile-a")`, type: "multiple-events" },
  {
    q: "exists E from xEvent : E.timestamp occurs today and (exists F from xEvent : F.timestamp occurs after E.timestamp)",
    type: "multiple-events",
  },

  // ---- segment-of-segments
  { q: 'inSegment("profile-a") and inSegment("event-a")', type: "segment-of-segments", continuous: false, reasons: [R.onlyRefs] },
  { q: 'inSegment("profile-a") OR inSegment("profile-b")', type: "segment-of-segments", continuous: false, reasons: [R.onlyRefs] },
  { q: 'inSegment("uses-unknown")', type: "segment-of-segments", continuous: false, reasons: [R.onlyRefs] },
  { q: 'inSegment("event-a") and person.age > 3', type: "segment-of-segments" },
  { q: 'not inSegment("profile-a") and homeAddress.countryCode = "US"', type: "segment-of-segments" },
  { q: 'inSegment("batch-birthday") and inSegment("via-event") and person.vip = true', type: "segment-of-segments" },

  // ---- exclusion (1): a single event with a reference that is not profile-only
  { q: `${today()} and inSegment("event-a")`, type: null, reasons: [R.combines("event-a")] },
  { q: `${today()} and inSegment("via-event")`, type: null, reasons: [R.combines("via-event")] },
  { q: `${today('eventType = "a"')} and ${today('eventType = "b"')} and inSegment("event-a")`, type: null, reasons: [R.combinesMany("event-a")] },

  // ---- exclusion (2): ignore year
  {
    q: "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()",
    type: null,
    reasons: [R.ignoreYear],
  },
  { q: "person.birthDate.getDayOfMonth() = 1", type: null, reasons: [R.ignoreYear] },
  { q: "currentMonth() = 12 and person.age > 3", type: null, reasons: [R.ignoreYear] },
  { q: "xEvent[timestamp.getMonth() = 5 and timestamp occurs today].count() > 0", type: null, reasons: [R.ignoreYear] },

  // ---- exclusion (3): no window or a window of 24 hours or more
  { q: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a")])', type: null, reasons: [R.noWindow] },
  { q: when("<= 24 hours before now"), type: null, reasons: [R.long("24 hours")] },
  { q: when("<= 2 days before now"), type: null, reasons: [R.long("48 hours")] },
  { q: when("< 8 days before now"), type: null, reasons: [R.long("8 days")] },
  { q: when("this month"), type: null, reasons: [R.long("31 days")] },
  { q: when("last week"), type: null, reasons: [R.long("14 days")] },
  { q: when("yesterday"), type: null, reasons: [R.long("48 hours")] },
  { q: when("between yesterday and today"), type: null, reasons: [R.long("48 hours")] },
  { q: when("between date(2024, 1, 1) and date(2024, 1, 2)"), type: null, reasons: [R.fixedDate] },
  { q: when("on date(2024, 1, 1)"), type: null, reasons: [R.fixedDate] },
  { q: when("before now"), type: null, reasons: [R.noWindow] },
  { q: when("> 2 hours before now"), type: null, reasons: [R.noWindow] },
  { q: 'chain(xEvent, timestamp, [A: WHAT(eventType = "a"), B: WHAT(eventType = "b") WHEN(today)])', type: null, reasons: [R.noWindow] },
  { q: 'select X from xEvent where X.timestamp occurs today or X.eventType = "a"', type: null, reasons: [R.noWindow] },
  { q: 'xEvent[eventType = "a"].count() > 0', type: null, reasons: [R.noWindow] },
  { q: "xEvent", type: null, reasons: [R.noWindow] },
  { q: "xEvent[not (timestamp occurs before today)].count() > 0", type: null, reasons: [R.noWindow] },
  { q: "select X from xEvent where X.timestamp occurs < 1 hour after person.birthDate", type: null, reasons: [R.profileDate] },
  {
    q: "select A from xEvent where A.timestamp occurs today, B from xEvent where B.timestamp occurs < 2 hours before A.timestamp",
    type: null,
    reasons: [R.long("26 hours")],
  },
  {
    q: 'select A from xEvent where A.eventType = "a", B from xEvent where B.timestamp occurs <= 2 hours after A.timestamp',
    type: null,
    reasons: [R.noWindow],
  },
  { q: `${when("<= 7 days before now")} and person.age > 3`, type: null, reasons: [R.long("7 days")] },

  // ---- exclusion (4): negated events
  { q: `not ${today()}`, type: null, reasons: [R.negated] },
  { q: `NOT(${today()})`, type: null, reasons: [R.negated] },
  { q: `!${today()}`, type: null, reasons: [R.negated] },
  { q: "not exists E from xEvent : E.timestamp occurs today", type: null, reasons: [R.negated] },
  { q: "not (xEvent[timestamp occurs today].count() > 0)", type: null, reasons: [R.negated] },
  { q: "xEvent[timestamp occurs today].count() = 0", type: null, reasons: [R.negated] },
  { q: "xEvent[timestamp occurs today].count() < 3", type: null, reasons: [R.negated] },
  { q: "xEvent[timestamp occurs today].sum(value) < 50", type: null, reasons: [R.negated] },
  { q: "forall E from xEvent : E.timestamp occurs today", type: null, reasons: [R.negated] },
  { q: `person.age > 3 or not ${today()}`, type: null, reasons: [R.negated] },
  { q: `person.age > 3 and not ${when("<= 7 days before now")}`, type: null, reasons: [R.negated, R.long("7 days")] },

  // ---- exclusion (5) and reference problems
  { q: 'inSegment("nope")', type: null, reasons: [R.unknown("nope")] },
  { q: `${today()} and inSegment("nope")`, type: null, reasons: [R.unknown("nope")] },
  { q: 'inSegment("loop-1")', type: null, reasons: [R.cycle("loop-1", "loop-2", "loop-1")] },
  { q: 'inSegment("broken") and person.age > 1', type: null, reasons: [R.invalid("broken")] },

  // ---- event uses that are not recognised, and several reasons at once
  { q: 'xEvent[timestamp occurs today].head().eventType = "a"', type: null, reasons: [R.unsupported("the method 'head' applied to events")] },
  {
    q: "xEvent[timestamp occurs today].count() > person.minPurchases",
    type: null,
    reasons: [R.unsupported("a number of events compared with a value that is not a fixed number")],
  },
  { q: "if(xEvent[timestamp occurs today].count() > 0, 1, 0) = 1", type: null, reasons: [R.unsupported("the method 'count' applied to events")] },
  {
    q: `not ${when("<= 7 days before now")} and person.birthDate.getMonth() = 1 and inSegment("nope")`,
    type: null,
    reasons: [R.ignoreYear, R.negated, R.long("7 days"), R.unknown("nope")],
  },
];

describe("classify: the table", () => {
  it("has at least 80 rows, each accepted by check", () => {
    assert.ok(ROWS.length >= 80, `only ${ROWS.length} rows`);
    for (const row of ROWS) {
      const errors = check(row.q).filter((d) => d.severity === "error");
      assert.deepEqual(errors, [], row.q);
    }
  });

  for (const row of ROWS) {
    it(row.q, () => {
      const c = classify(row.q, OPTIONS);
      const synchronous = row.type !== null;
      const continuous = row.continuous ?? synchronous;
      assert.equal(c.batch, true);
      assert.equal(c.synchronous, synchronous, "synchronous");
      assert.equal(c.continuous, continuous, "continuous");
      assert.equal(c.queryType, row.type, "queryType");
      assert.deepEqual(c.reasons, row.reasons ?? [], "reasons");
    });
  }
});

describe("classify: window arithmetic", () => {
  const windowOf = (q: string) => classify(q).events.map((e) => e.windowMs);

  it("measures the longest lookback in ms", () => {
    assert.deepEqual(windowOf(when("< 23 hours before now")), [23 * 3_600_000 - 1]);
    assert.deepEqual(windowOf(when("<= 23 hours before now")), [23 * 3_600_000]);
    assert.deepEqual(windowOf(when("< 24 hours before now")), [86_400_000 - 1]);
    assert.deepEqual(windowOf(when("<= 24 hours before now")), [86_400_000]);
    assert.deepEqual(windowOf(when("today")), [86_400_000 - 1]);
    assert.deepEqual(windowOf(when("yesterday")), [2 * 86_400_000 - 1]);
    assert.deepEqual(windowOf(when("this hour")), [3_600_000 - 1]);
    assert.deepEqual(windowOf(when("tomorrow")), [0]);
    assert.deepEqual(windowOf(when("= 0 days before today")), [86_400_000 - 1]);
    assert.deepEqual(windowOf(when("< 2 hours after yesterday")), [86_400_000 - 1]);
    assert.deepEqual(windowOf(when("before now")), [null]);
  });

  it("reports the anchor of an unbounded window", () => {
    assert.deepEqual(classify(when("on date(2024, 1, 1)")).events[0]!.anchor, "fixed-date");
    assert.deepEqual(classify(when("before today")).events[0]!.anchor, "none");
    assert.deepEqual(classify(when("today")).events[0]!.anchor, "now");
  });

  it("a later chain step is bounded by the earlier one", () => {
    const c = classify('chain(xEvent, timestamp, [A: WHAT(true) WHEN(< 2 hours before now), B: WHAT(true), C: WHAT(true) WHEN(this minute)])');
    assert.deepEqual(
      c.events.map((e) => e.windowMs),
      [2 * 3_600_000 - 1, 2 * 3_600_000 - 1, 60_000 - 1],
    );
  });

  it("an event relative to another adds up the two windows", () => {
    const c = classify(
      "select A from xEvent where A.timestamp occurs < 3 hours before now, B from xEvent where B.timestamp occurs < 30 minutes before A.timestamp",
    );
    assert.deepEqual(
      c.events.map((e) => e.windowMs),
      [3 * 3_600_000 - 1, 3 * 3_600_000 - 1 + 30 * 60_000 - 1],
    );
  });

  it("'and' takes the tightest window, 'or' the loosest", () => {
    assert.deepEqual(windowOf("xEvent[timestamp occurs this hour and timestamp occurs this month].count() > 0"), [3_600_000 - 1]);
    assert.deepEqual(windowOf("xEvent[timestamp occurs this hour or timestamp occurs this month].count() > 0"), [31 * 86_400_000 - 1]);
  });

  it("COUNT(n) and count thresholds give the number of events", () => {
    assert.deepEqual(classify('chain(xEvent, timestamp, [A: WHAT(true) COUNT(5) WHEN(today)])').events.map((e) => e.count), [5]);
    assert.deepEqual(classify("xEvent[timestamp occurs today].count() > 2").events.map((e) => e.count), [3]);
    assert.deepEqual(classify("3 <= xEvent[timestamp occurs today].count()").events.map((e) => e.count), [3]);
  });
});

describe("classify: references and options", () => {
  it("a reference back to the definition itself is a cycle", () => {
    const c = classify('inSegment("self") and person.age > 1', { id: "self", resolveSegment: () => "person.age > 1" });
    assert.equal(c.synchronous, false);
    assert.deepEqual(c.reasons, [R.cycle("self", "self")]);
  });

  it("resolveSegment may return a parsed tree", () => {
    const c = classify(`${today()} and inSegment("t")`, { resolveSegment: (id) => (id === "t" ? parse("person.vip = true") : undefined) });
    assert.equal(c.queryType, "single-event-with-profile");
  });

  it("without a resolver a reference is assumed to exist but cannot be shown profile-only", () => {
    assert.equal(classify('inSegment("x") and person.age > 1').queryType, "segment-of-segments");
    assert.deepEqual(classify(`${today()} and inSegment("x")`).reasons, [
      "it combines an event with the audience 'x', which could not be checked to be profile-only",
    ]);
  });

  it("reports references, profile attributes and ignore-year in its details", () => {
    const c = classify('inSegment("a") and inSegment("b") and inSegment("a") and person.birthDate.getMonth() = 1');
    assert.deepEqual(c.segmentRefs, ["a", "b"]);
    assert.equal(c.profileAttributes, true);
    assert.equal(c.ignoreYear, true);
  });

  it("throws the parser's error for text that does not parse", () => {
    assert.throws(() => classify("person.age >"), (e: unknown) => e instanceof Error && e.name === "PqlError");
  });

  it("accepts a parsed tree as well as text", () => {
    const text = `person.age > 3 and ${today()}`;
    assert.deepEqual(classify(parse(text)), classify(text));
  });
});

describe("classify: hostile input", () => {
  it("handles thousands of events and long operator chains without overflowing", () => {
    const manyEvents = Array.from({ length: 5_000 }, (_, i) => `xEvent[eventType = "e${i}" and timestamp occurs today].count() > 0`).join(" or ");
    const c = classify(manyEvents);
    assert.equal(c.events.length, 5_000);
    assert.equal(c.queryType, "multiple-events");

    const arithmetic = `${today()} and ` + Array.from({ length: 30_000 }, (_, i) => `person.a${i}`).join(" + 1 - ") + " > 0";
    assert.equal(classify(arithmetic).queryType, "single-event-with-profile");
  });
});
