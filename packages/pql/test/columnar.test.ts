/**
 * The columnar back end on hand-written data: each covered construct with the
 * expected member set (checked against `evaluate` too), proof that covered
 * queries read no row objects, and queries that must take the row fallback —
 * alone or behind columnar conjuncts — with their results.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileColumnar } from "../src/columnar/compile-columnar.js";
import { rowColumnarData, type RowInput } from "../src/columnar/row-data.js";
import type { ColumnarData } from "../src/columnar/layout.js";
import { evaluate } from "../src/evaluate.js";
import { toBoolean } from "../src/runtime/values.js";
import { PqlError } from "../src/errors.js";
import { parse } from "../src/parser.js";
import { planBool } from "../src/columnar/plan.js";
import { EventAggregateNode } from "../src/columnar/event-aggregate.js";
import { ChainNode } from "../src/columnar/chain.js";

const DAY = 86_400_000;
const NOW = Date.UTC(2024, 2, 15, 12, 0, 0); // Friday 15 March 2024, 12:00 UTC
const ago = (days: number) => new Date(NOW - days * DAY).toISOString();
const purchase = (days: number, priceTotal: number) => ({ eventType: "commerce.purchases", timestamp: ago(days), commerce: { order: { priceTotal } } });

const ROWS: RowInput[] = [
  {
    profile: {
      homeAddress: { countryCode: "US", city: "Oslo" },
      person: { age: 35, isVip: true, name: { firstName: "John" }, birthDate: "1990-03-15" },
      zip: "12345",
      segmentMembership: { ups: { "seg-1": { status: "realized" } } },
    },
    events: [purchase(2, 100), { eventType: "web.pageViews", timestamp: ago(1) }, purchase(10, 50)],
  },
  {
    profile: {
      homeAddress: { countryCode: "CA" },
      person: { age: "35", isVip: false, name: { firstName: "joanna" } },
      segmentMembership: { ups: { "seg-1": { status: "exited" } }, other: { "seg-2": { status: "existing" } } },
    },
    events: [purchase(40, 300), purchase(3, 20)],
  },
  {
    profile: { homeAddress: { countryCode: "us" }, person: { age: 17 }, zip: 12345, segmentMembership: { ups: { "seg-1": { status: "Existing" } } } },
    events: [],
  },
  {
    profile: { person: { age: null }, homeAddress: null, tags: ["a", "b"] },
    events: [{ eventType: "web.pageViews", timestamp: "garbage" }, purchase(1 / 24, 7)],
  },
  {
    profile: { homeAddress: { countryCode: "FR" }, person: { age: 60.5, birthDate: "1985-12-01" } },
    events: [purchase(5, 10), purchase(6, 20), purchase(7, 30)],
  },
  {
    profile: { homeAddress: { countryCode: "US" }, person: { age: 40, name: { firstName: "JOE" } }, segmentMembership: { ups: {} } },
    events: [{ eventType: "web.pageViews", timestamp: "2024-02-10T08:00:00Z" }],
  },
];

/** Data whose row objects must not be read (covered queries stay in the columns). */
function columnsOnly(data: ColumnarData): ColumnarData {
  return {
    profiles: data.profiles,
    events: data.events,
    eventStart: data.eventStart,
    eventTime: data.eventTime,
    profile: () => assert.fail("row object of a profile read"),
    event: () => assert.fail("row object of an event read"),
  };
}

function members(query: string, rows: RowInput[], data: ColumnarData = rowColumnarData(rows), codegen = true): { ids: number[]; columnar: boolean; reason?: string } {
  const c = compileColumnar(query, { now: NOW, codegen });
  const out = new Uint8Array(rows.length);
  c.run(data, out);
  const ids: number[] = [];
  out.forEach((v, i) => {
    if (v === 1) ids.push(i);
  });
  return c.reason === undefined ? { ids, columnar: c.columnar } : { ids, columnar: c.columnar, reason: c.reason };
}

function reference(query: string, rows: RowInput[]): number[] {
  const data = rowColumnarData(rows);
  const ids: number[] = [];
  rows.forEach((row, i) => {
    const events: Record<string, unknown>[] = [];
    for (let r = data.eventStart[i]!; r < data.eventStart[i + 1]!; r++) events.push(data.event(r));
    if (toBoolean(evaluate(query, { profile: row.profile, events, now: NOW }))) ids.push(i);
  });
  return ids;
}

/** [query, expected members, reads no row objects] */
const COVERED: [string, number[], boolean][] = [
  ['homeAddress.countryCode = "US"', [0, 5], true],
  ['homeAddress.countryCode != "US"', [1, 2, 4], true],
  ['not (homeAddress.countryCode = "US")', [1, 2, 3, 4], true],
  ["person.age >= 35", [0, 1, 4, 5], true], // "35" >= "35": the literal becomes a string for a string (§6.5)
  ['person.age = "35"', [0, 1], true],
  ["person.age < 18", [2], true],
  ["18 > person.age", [2], true],
  ['homeAddress.countryCode in ["US", "CA"]', [0, 1, 5], true],
  ['homeAddress.countryCode notIn ["US", "CA"]', [2, 4], true],
  ["person.age.isNull()", [3], true],
  ["person.age.isNotNull()", [0, 1, 2, 4, 5], true],
  ["homeAddress.isNull()", [3], false], // objects at the path: those rows read the row object
  ["homeAddress", [0, 1, 2, 4, 5], false],
  ["person.isVip = true", [0], true],
  ['person.isVip = "true"', [0], true],
  ["person.isVip", [0], true],
  ["not person.isVip", [1, 2, 3, 4, 5], true],
  ['person.name.firstName.startsWith("jo", false)', [0, 1, 5], true],
  ['person.name.firstName.startsWith("Jo")', [0], true],
  ['person.name.firstName.equals("joe", false)', [5], true],
  ['person.name.firstName.contains("an")', [1], true],
  ['person.name.firstName.endsWith("E", false)', [5], true],
  ['person.name.firstName like "jo%"', [1], true],
  ["zip = 12345", [0, 2], true],
  ["person.birthDate occurs between date(1990, 1, 1) and date(1990, 12, 31)", [0], true],
  ["person.birthDate < date(1989, 1, 1)", [4], true],
  ['person.age > 30 and homeAddress.countryCode = "US" or person.age < 18', [0, 2, 5], true],
  ['inSegment("seg-1")', [0, 2], true],
  ['inSegment("seg-2")', [1], false], // held by a namespace other than ups: decided on the row
  ['xEvent[eventType = "commerce.purchases"].count() >= 2', [0, 1, 4], true],
  ['xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() >= 2', [0, 4], true],
  ['xEvent[eventType = "commerce.purchases"].count() = 0', [2, 5], true],
  ['xEvent[eventType = "web.pageViews"]', [0, 3, 5], true],
  ['xEvent.exists(eventType = "web.pageViews" and timestamp occurs last month)', [5], true],
  ['exists X from xEvent : X.eventType = "commerce.purchases" and X.commerce.order.priceTotal > 200', [1], true],
  ['(select X from xEvent where X.eventType = "commerce.purchases" and X.timestamp occurs today).count() = 1', [3], true],
  ['forall X from xEvent : X.eventType = "commerce.purchases"', [1, 2, 4], true],
  ['xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal) >= 150', [0, 1], true],
  ['xEvent[eventType = "commerce.purchases"].average(commerce.order.priceTotal) < 25', [3, 4], true],
  ["xEvent.max(commerce.order.priceTotal) = 300", [1], true],
  ["xEvent.min(commerce.order.priceTotal) <= 10", [3, 4], true],
  ['(sum E.commerce.order.priceTotal over E from xEvent where E.eventType = "commerce.purchases") > 100', [0, 1], true],
  ["(max E.commerce.order.priceTotal over E from xEvent) < 50", [3, 4], true],
  ['homeAddress.countryCode = "US" and xEvent[eventType = "commerce.purchases" and timestamp occurs < 30 days before now].count() >= 2', [0], true],
  ["xEvent[timestamp occurs = 2 days before today].count() > 0", [0], true],
  ["xEvent[timestamp occurs this month].count() >= 3", [0, 4], true],
  ["xEvent[timestamp occurs between date(2024, 2, 1) and date(2024, 2, 29)]", [1, 5], true],
  ["xEvent.count() = 3", [0, 4], true],
  ['not (exists X from xEvent : X.eventType = "web.pageViews")', [1, 2, 4], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases"), B: WHAT(eventType = "web.pageViews")])', [0], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") COUNT(2), B: WHAT(eventType = "web.pageViews")])', [0], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") WHEN(< 8 days before now), B: WHAT(eventType = "web.pageViews")])', [0], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") WHEN(< 2 days before now), B: WHAT(eventType = "web.pageViews")])', [], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") COUNT(3)])', [4], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") WHERE(commerce.order.priceTotal >= 20), B: WHAT(eventType = "commerce.purchases")])', [0, 1, 4], true],
  // One step: an event count (a readable timestamp required: row 3's "garbage" page view is not in any chain).
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews")])', [0, 5], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") WHEN(< 2 days before now)])', [3], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") COUNT(2) WHEN(< 8 days before now)])', [4], true],
  ['chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") COUNT(2) WHERE(commerce.order.priceTotal >= 20)])', [0, 1, 4], true],
  ['not chain(xEvent, timestamp, [A: WHAT(eventType = "commerce.purchases") WHEN(< 4 days before now)])', [2, 4, 5], true],
];

test("a one-step chain is planned as an event count (one fused loop); several steps as the chain walk", () => {
  const plan = (q: string) => planBool(parse(q).body, NOW, []);
  assert.ok(plan('chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews") WHEN(< 2 days before now)])') instanceof EventAggregateNode);
  assert.ok(plan('chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews"), B: WHAT(true)])') instanceof ChainNode);
});

for (const [query, expected, columnsAlone] of COVERED) {
  test(`columnar: ${query}`, () => {
    const r = members(query, ROWS);
    assert.equal(r.columnar, true, r.reason);
    assert.deepEqual(r.ids, expected);
    assert.deepEqual(reference(query, ROWS), expected);
    if (columnsAlone) assert.deepEqual(members(query, ROWS, columnsOnly(rowColumnarData(ROWS))).ids, expected);
    assert.deepEqual(members(query, ROWS, rowColumnarData(ROWS), false).ids, expected, "without code generation");
  });
}

/** [query, expected members]: constructs the columnar code leaves to the row path. */
const FALLBACK: [string, number[]][] = [
  ['chain(xEvent[eventType = "commerce.purchases"], timestamp, [A: WHAT(true), B: WHAT(true)])', [0, 1, 4]],
  ["(P) => P.person.age > 30", [0, 1, 4, 5]],
  ['homeAddress.countryCode = "US" and xEvent[^homeAddress.city = "Oslo"].count() > 0', [0]],
  ["person.age > person.name.firstName.count()", [2, 4]], // count() of a string is null, of null 0
  ['xEvent[eventType = "commerce.purchases"].count() > person.age', []],
  ["xEvent.map(eventType).distinct().count() = 2", [0, 3]],
];

for (const [query, expected] of FALLBACK) {
  test(`row fallback: ${query}`, () => {
    const r = members(query, ROWS);
    assert.equal(r.columnar, false);
    assert.ok(r.reason !== undefined && r.reason.length > 0);
    assert.deepEqual(r.ids, expected);
    assert.deepEqual(reference(query, ROWS), expected);
  });
}

test("partial plan: the row fallback only sees the survivors of the columnar conjuncts", () => {
  const data = rowColumnarData(ROWS);
  const read: number[] = [];
  const counting: ColumnarData = { ...data, profiles: data.profiles, events: data.events, profile: (i) => (read.push(i), data.profile(i)), event: (r) => data.event(r) };
  const r = members('homeAddress.countryCode = "US" and xEvent[^homeAddress.city = "Oslo"].count() > 0', ROWS, counting);
  assert.deepEqual(r.ids, [0]);
  assert.deepEqual(read, [0, 5]);
  read.length = 0;
  // In an or, the rows already true skip the fallback.
  members('homeAddress.countryCode = "US" or xEvent[^homeAddress.city = "Oslo"].count() > 0', ROWS, counting);
  assert.deepEqual(read, [1, 2, 3, 4]);
});

test("values the columns cannot hold alone: arrays on the path, objects, nulls", () => {
  const rows: RowInput[] = [
    { profile: { person: [{ age: 35 }, { age: 40 }] } },
    { profile: { person: "x" } },
    { profile: { person: { age: 35 } } },
    { profile: { person: null } },
    { profile: {} },
  ];
  const cases: [string, number[]][] = [
    ["person.age.includes(35)", [0]],
    ["person.age = 35", [2]],
    ["person.isNull()", [3, 4]],
    ["person", [0, 1, 2]],
    ['person = "x"', [1]],
    ["person.age.isNotNull()", [0, 2]],
  ];
  for (const [q, expected] of cases) {
    assert.deepEqual(members(q, rows).ids, expected, q);
    assert.deepEqual(reference(q, rows), expected, q);
  }
});

test("inSegment: ups decides when it holds the id, other namespaces otherwise, statuses in any case", () => {
  const rows: RowInput[] = [
    { profile: { segmentMembership: { ups: { s: { status: "REALIZED" } } } } },
    { profile: { segmentMembership: { ups: { s: { status: "exited" } }, x: { s: { status: "realized" } } } } },
    { profile: { segmentMembership: { x: { s: { status: "existing" } } } } },
    { profile: { segmentMembership: { ups: { s: "realized" } } } },
    { profile: { segmentMembership: { ups: { s: { status: 1 } } } } },
    { profile: {} },
  ];
  assert.deepEqual(members('inSegment("s")', rows).ids, [0, 2]);
  assert.deepEqual(reference('inSegment("s")', rows), [0, 2]);
  assert.deepEqual(members('not inSegment("s")', rows).ids, [1, 3, 4, 5]);
});

test("chain: equal timestamps are not after each other; unreadable timestamps take no part", () => {
  const t = ago(1);
  const rows: RowInput[] = [
    { profile: {}, events: [{ eventType: "a", timestamp: t }, { eventType: "b", timestamp: t }] },
    { profile: {}, events: [{ eventType: "b", timestamp: t }, { eventType: "a", timestamp: ago(2) }] },
    { profile: {}, events: [{ eventType: "a", timestamp: "garbage" }, { eventType: "b", timestamp: t }] },
    { profile: {}, events: [{ eventType: "a", timestamp: ago(3) }, { eventType: "b", timestamp: "garbage" }, { eventType: "b", timestamp: t }] },
  ];
  const q = 'chain(xEvent, timestamp, [A: WHAT(eventType = "a"), B: WHAT(eventType = "b")])';
  const r = members(q, rows, columnsOnly(rowColumnarData(rows)));
  assert.equal(r.columnar, true);
  assert.deepEqual(r.ids, [1, 3]);
  assert.deepEqual(reference(q, rows), [1, 3]);
});

test("rowColumnarData: columns by kind, events oldest first, eventTime as PQL reads timestamps", () => {
  const data = rowColumnarData([
    { profile: { a: 1, b: "x", c: true, m: [1], n: { o: 2 } }, events: [{ timestamp: "2024-03-02T00:00:00Z" }, { timestamp: "bad" }, { timestamp: Date.UTC(2024, 2, 1) }] },
    { profile: { a: null, b: "y", m: "s" } },
  ]);
  assert.equal(data.profiles.column("a")?.kind, "number");
  assert.equal(data.profiles.column("b")?.kind, "string");
  assert.equal(data.profiles.column("c")?.kind, "boolean");
  assert.equal(data.profiles.column("m")?.kind, "mixed");
  assert.equal(data.profiles.column("n"), undefined);
  assert.equal(data.profiles.hasChildren("n"), true);
  assert.equal(data.profiles.column("n.o")?.kind, "number");
  assert.deepEqual([...data.eventStart], [0, 3, 3]);
  assert.deepEqual([...data.eventTime], [Date.UTC(2024, 2, 1), Date.UTC(2024, 2, 2), NaN]);
  assert.equal(data.event(2)["timestamp"], "bad");
});

test("a ColumnarData implemented as a class (methods using this) works on every path", () => {
  class ClassData implements ColumnarData {
    constructor(private readonly inner: ColumnarData) {}
    get profiles() {
      return this.inner.profiles;
    }
    get events() {
      return this.inner.events;
    }
    get eventStart() {
      return this.inner.eventStart;
    }
    get eventTime() {
      return this.inner.eventTime;
    }
    profile(i: number) {
      return this.inner.profile(i);
    }
    event(r: number) {
      return this.inner.event(r);
    }
  }
  const data = new ClassData(rowColumnarData(ROWS));
  for (const q of ["homeAddress.isNull()", 'inSegment("seg-2")', "xEvent[^homeAddress.city = \"Oslo\"].count() > 0", "xEvent[commerce.order.isNull()]"]) {
    assert.deepEqual(members(q, ROWS, data).ids, reference(q, ROWS), q);
  }
});

test("query errors are thrown by compileColumnar, before any data", () => {
  assert.throws(() => compileColumnar("nope(1)", { now: NOW }), PqlError);
  assert.throws(() => compileColumnar('a.matches("(")', { now: NOW }), PqlError);
});
