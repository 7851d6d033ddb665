/**
 * Differential property tests of the columnar back end: for random profiles
 * with events (built into the layout by rowColumnarData) and random queries
 * from a grammar of the covered constructs — plus a few uncovered ones, so
 * that partial plans (columnar conjuncts + row fallback) are exercised —
 * `compileColumnar(q).run` must give, profile by profile, exactly
 * `toBoolean(evaluate(q, …))`.
 *
 * The data deliberately contains what the columns cannot say on their own:
 * arrays on a path (PQL projects through them), objects where a scalar is
 * expected, nulls, mixed kinds in one column (number and string ages, "35" vs
 * 35), unreadable timestamps, several segmentMembership namespaces.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { evaluate } from "../src/evaluate.js";
import { compileColumnar } from "../src/columnar/compile-columnar.js";
import { rowColumnarData, type RowInput } from "../src/columnar/row-data.js";
import { toBoolean } from "../src/runtime/values.js";
import type { CmpOp, Expr, OccursTail, Query, TimeUnit } from "../src/ast.js";

const DAY = 86_400_000;
const NOW = Date.UTC(2024, 2, 15, 12, 0, 0);

// Few distinct numbers, shared with the literals below, so that boundaries (=, <=) are hit often.
const smallInt = fc.oneof(fc.integer({ min: 0, max: 4 }), fc.constantFrom(17, 35, 50));
const scalar = fc.oneof(
  smallInt,
  fc.constantFrom(0.5, 35, 17.25),
  fc.constantFrom("a", "b", "US", "35", "true", "", "Oslo", "2024-03-14", "2024-03-15T10:00:00Z"),
  fc.boolean(),
  fc.constant(null),
);
const timestamp = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: NOW - 70 * DAY, max: NOW + 3 * DAY }).map((t) => new Date(t).toISOString()) },
  { weight: 1, arbitrary: fc.integer({ min: NOW - 70 * DAY, max: NOW + 3 * DAY }) },
  { weight: 1, arbitrary: fc.constantFrom("2024-03-15", "2024-02-29", "garbage", null) },
  // Shared instants, so that events tie (chain: equal times are not "after").
  { weight: 2, arbitrary: fc.constantFrom("2024-03-15T00:00:00Z", "2024-03-14T10:00:00Z", "2024-03-14T10:00:00.000+00:00", "2024-03-10T00:00:00Z") },
);
const eventArb = fc.record(
  {
    eventType: fc.constantFrom("commerce.purchases", "web.pageViews", "a"),
    timestamp,
    score: fc.oneof({ weight: 5, arbitrary: smallInt }, { weight: 1, arbitrary: scalar }),
    k: scalar,
    commerce: fc.oneof(
      fc.record({ order: fc.record({ priceTotal: fc.constantFrom(0, 20, 50, 100), currencyCode: fc.constantFrom("EUR", "USD") }, { requiredKeys: [] }) }),
      // An array on the way: `commerce.order.priceTotal` projects through it.
      fc.array(fc.record({ order: fc.record({ priceTotal: fc.constantFrom(20, 50) }) }), { maxLength: 2 }),
    ),
    tags: fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 3 }),
  },
  { requiredKeys: [] },
);
const status = fc.constantFrom("realized", "existing", "exited", "Realized", null, 5);
const membership = fc.record(
  {
    ups: fc.dictionary(fc.constantFrom("s1", "s2"), fc.oneof(fc.record({ status }, { requiredKeys: [] }), fc.constant("realized")), { maxKeys: 2 }),
    other: fc.dictionary(fc.constantFrom("s1", "s2"), fc.record({ status }), { maxKeys: 2 }),
  },
  { requiredKeys: [] },
);
const profileArb = fc.record(
  {
    age: scalar,
    person: fc.oneof(
      { weight: 5, arbitrary: fc.record({ age: scalar, city: fc.constantFrom("Oslo", "Lima", "oslo", null), name: fc.record({ firstName: fc.constantFrom("John", "joanna", "JOE", "Ann", "") }, { requiredKeys: [] }) }, { requiredKeys: [] }) },
      // Arrays and scalars where objects usually are.
      { weight: 1, arbitrary: fc.array(fc.record({ age: scalar, city: fc.constantFrom("Oslo", "Lima") }, { requiredKeys: [] }), { maxLength: 2 }) },
      { weight: 1, arbitrary: scalar },
    ),
    city: fc.oneof(fc.constantFrom("Oslo", "Lima", "Montreal", "2024-03-14"), fc.record({ name: fc.constant("Oslo") })),
    score: smallInt,
    k: scalar,
    zip: fc.constantFrom("12345", 12345, "54321", null),
    isVip: fc.oneof(fc.boolean(), fc.constant("true"), fc.constant(null)),
    tags: fc.array(fc.constantFrom("a", "b", "c"), { maxLength: 3 }),
    birthDate: fc.constantFrom("1990-03-15", "1985-12-01", "2000-02-29", "garbage", null),
    segmentMembership: membership,
  },
  { requiredKeys: [] },
);
const rowArb: fc.Arbitrary<RowInput> = fc.record({ profile: profileArb, events: fc.array(eventArb, { maxLength: 6 }) });

// --- query grammar -------------------------------------------------------------

const lit = (value: string | number | boolean): Expr => ({
  type: "Literal",
  kind: typeof value === "string" ? "string" : typeof value === "boolean" ? "boolean" : Number.isInteger(value) ? "integer" : "double",
  value,
});
const field = (...path: string[]): Expr =>
  path.slice(1).reduce<Expr>((obj, name) => ({ type: "Member", object: obj, name }), { type: "Field", name: path[0]! });
const varField = (v: string, ...path: string[]): Expr =>
  path.reduce<Expr>((obj, name) => ({ type: "Member", object: obj, name }), { type: "Var", name: v });
const cmpOp = fc.constantFrom<CmpOp>("=", "!=", "<", "<=", ">", ">=");
const litValue = fc.oneof(smallInt, fc.constantFrom(17.25, "35", "US", "true", "a", "Oslo", true, "2024-03-14", "12345", 12345));
const date = (y: number, m: number, d: number): Expr => ({ type: "Call", name: "date", args: [lit(y), lit(m), lit(d)] });

const tailArb: fc.Arbitrary<OccursTail> = fc.oneof(
  fc
    .tuple(cmpOp, fc.integer({ min: 0, max: 40 }), fc.constantFrom<TimeUnit>("day", "hour", "week", "month"), fc.constantFrom<"before" | "after">("before", "after"), fc.constantFrom<"now" | "today">("now", "today"))
    .map(([op, amount, unit, direction, word]): OccursTail => ({ kind: "relative", op, amount, unit, direction, ref: { type: "TimeWord", word } })),
  fc.constantFrom<"this" | "last" | "next">("this", "last", "next").map((which): OccursTail => ({ kind: "on", ref: { type: "RelPeriod", which, unit: "month" } })),
  fc.constantFrom<OccursTail>(
    { kind: "on", ref: { type: "TimeWord", word: "today" } },
    { kind: "direction", direction: "before", ref: { type: "TimeWord", word: "yesterday" } },
    { kind: "direction", direction: "after", ref: { type: "TimeWord", word: "now" } },
    { kind: "between", from: date(2024, 2, 1), to: date(2024, 3, 10) },
    { kind: "on", ref: date(2024, 3, 14) },
  ),
);

const profilePath = fc.constantFrom<string[]>(["age"], ["person", "age"], ["person", "city"], ["city"], ["score"], ["k"], ["zip"], ["isVip"], ["tags"], ["person"], ["person", "name", "firstName"]);
const eventPath = fc.constantFrom<string[]>(["score"], ["k"], ["eventType"], ["commerce", "order", "priceTotal"], ["commerce", "order", "currencyCode"], ["tags"]);

/** One-path predicates, over `mk(path)` (a profile field, an event field or a bound variable's field). */
function leafArb(paths: fc.Arbitrary<string[]>, mk: (p: string[]) => Expr): fc.Arbitrary<Expr> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.tuple(cmpOp, paths, litValue, fc.boolean()).map(([op, p, v, flip]): Expr => (flip ? { type: "Binary", op, left: lit(v), right: mk(p) } : { type: "Binary", op, left: mk(p), right: lit(v) })) },
    fc.tuple(fc.constantFrom<"in" | "notIn">("in", "notIn"), paths, fc.array(litValue, { maxLength: 3 })).map(([op, p, vs]): Expr => ({ type: "Binary", op, left: mk(p), right: { type: "List", elements: vs.map(lit) } })),
    fc.tuple(fc.constantFrom("isNull", "isNotNull"), paths).map(([name, p]): Expr => ({ type: "Method", name, receiver: mk(p), args: [] })),
    fc
      .tuple(fc.constantFrom("startsWith", "endsWith", "contains", "equals", "doesNotStartWith", "notEqualTo"), paths, fc.constantFrom("jo", "J", "Oslo", "o", "US", ""), fc.constantFrom<boolean | null>(true, false, null))
      .map(([name, p, s, cs]): Expr => ({ type: "Method", name, receiver: mk(p), args: cs === null ? [lit(s)] : [lit(s), lit(cs)] })),
    paths.map((p) => mk(p)),
    fc.tuple(paths, fc.constantFrom("%o%", "J%", "_s%")).map(([p, pat]): Expr => ({ type: "Binary", op: "like", left: mk(p), right: lit(pat) })),
    fc.tuple(paths, fc.constantFrom("a", "US", "Oslo")).map(([p, x]): Expr => ({ type: "Method", name: "includes", receiver: mk(p), args: [lit(x)] })),
    fc.tuple(cmpOp, paths).map(([op, p]): Expr => ({ type: "Binary", op, left: mk(p), right: date(2024, 3, 14) })),
    fc.tuple(paths, tailArb).map(([p, tail]): Expr => ({ type: "Occurs", subject: mk(p), tail })),
  );
}

function boolTree(leaf: fc.Arbitrary<Expr>, depth: number): fc.Arbitrary<Expr> {
  return fc.letrec<{ c: Expr }>((tie) => ({
    c: fc.oneof(
      { depthSize: "small", maxDepth: depth },
      { weight: 4, arbitrary: leaf },
      fc.tuple(tie("c"), tie("c"), fc.constantFrom<"and" | "or">("and", "or")).map(([l, r, op]): Expr => ({ type: "Binary", op, left: l, right: r })),
      tie("c").map((c): Expr => ({ type: "Not", operand: c })),
    ),
  })).c;
}

const eventLeaf = fc.oneof(
  { weight: 3, arbitrary: leafArb(eventPath, (p) => field(...p)) },
  { weight: 1, arbitrary: fc.constantFrom("commerce.purchases", "web.pageViews").map((t): Expr => ({ type: "Binary", op: "=", left: field("eventType"), right: lit(t) })) },
  { weight: 2, arbitrary: tailArb.map((tail): Expr => ({ type: "Occurs", subject: field("timestamp"), tail })) },
);
const eventCond = boolTree(eventLeaf, 2);
const varLeaf = fc.oneof(
  leafArb(eventPath, (p) => varField("X", ...p)),
  tailArb.map((tail): Expr => ({ type: "Occurs", subject: varField("X", "timestamp"), tail })),
);
const varCond = boolTree(varLeaf, 2);
const xFilter = (c: Expr): Expr => ({ type: "Filter", object: { type: "XEvent" }, condition: c });
const countCmp = fc.tuple(fc.constantFrom<CmpOp>(">=", ">", "=", "<", "!="), fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("2", "x")));

/** sum/average/min/max of an event field, as a method or in the legacy `over` form, compared with a literal. */
const numericAggregateArb: fc.Arbitrary<Expr> = fc.oneof(
  fc
    .tuple(fc.option(eventCond, { nil: undefined }), fc.constantFrom("sum", "average", "min", "max"), fc.constantFrom<string[]>(["score"], ["commerce", "order", "priceTotal"], ["k"], ["nothing"]), cmpOp, fc.constantFrom(0, 2, 17, 20, 50, 100, 120))
    .map(([c, fn, p, op, n]): Expr => ({ type: "Binary", op, left: { type: "Method", name: fn, args: [field(...p)], receiver: c === undefined ? { type: "XEvent" } : xFilter(c) }, right: lit(n) })),
  fc
    .tuple(fc.option(varCond, { nil: undefined }), fc.constantFrom<"sum" | "average" | "min" | "max">("sum", "average", "min", "max"), fc.constantFrom<string[]>(["score"], ["commerce", "order", "priceTotal"], ["k"]), cmpOp, fc.constantFrom(0, 2, 17, 50, 100))
    .map(([c, fn, p, op, n]): Expr => ({
      type: "Binary",
      op,
      left: { type: "AggregateOver", fn, value: varField("X", ...p), bindings: [{ variable: "X", source: { type: "XEvent" }, ...(c === undefined ? {} : { condition: c }) }] },
      right: lit(n),
    }))
);

const aggregateArb: fc.Arbitrary<Expr> = fc.oneof(
  fc.tuple(eventCond, countCmp).map(([c, [op, n]]): Expr => ({ type: "Binary", op, left: { type: "Method", name: "count", args: [], receiver: xFilter(c) }, right: lit(n) })),
  countCmp.map(([op, n]): Expr => ({ type: "Binary", op, left: { type: "Method", name: "count", args: [], receiver: { type: "XEvent" } }, right: lit(n) })),
  eventCond.map(xFilter),
  eventCond.map((c): Expr => ({ type: "Method", name: "exists", receiver: { type: "XEvent" }, args: [c] })),
  fc.tuple(varCond, fc.option(countCmp, { nil: undefined })).map(([c, cmp]): Expr => {
    const sel: Expr = { type: "Select", bindings: [{ variable: "X", source: { type: "XEvent" }, condition: c }] };
    return cmp === undefined ? sel : { type: "Binary", op: cmp[0], left: { type: "Method", name: "count", args: [], receiver: sel }, right: lit(cmp[1]) };
  }),
  fc.tuple(varCond, fc.constantFrom<"exists" | "forall">("exists", "forall")).map(([c, quantifier]): Expr => ({ type: "Quantifier", quantifier, bindings: [{ variable: "X", source: { type: "XEvent" }, condition: c }] })),
  numericAggregateArb,
);

/** Mostly absent: steps with WHEN and WHERE everywhere would rarely match and chains would stay short. */
const rarely = <T>(a: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
const simpleWhat = fc.constantFrom<Expr>(lit(true), ...["commerce.purchases", "web.pageViews", "a"].map((t): Expr => ({ type: "Binary", op: "=", left: field("eventType"), right: lit(t) })));
const chainArb: fc.Arbitrary<Expr> = fc
  .array(
    fc.record({
      what: fc.oneof({ weight: 1, arbitrary: eventCond }, { weight: 2, arbitrary: simpleWhat }),
      when: rarely(tailArb.filter((t) => t.kind !== "on" || t.ref.type !== "Call")),
      count: rarely(fc.integer({ min: 1, max: 3 })),
      where: rarely(eventCond),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((steps): Expr => ({
    type: "Chain",
    source: { type: "XEvent" },
    timestampField: "timestamp",
    steps: steps.map(({ what, when, count, where }, i) => ({
      label: `S${i}`,
      what,
      ...(when === undefined ? {} : { when }),
      ...(count === undefined ? {} : { count }),
      ...(where === undefined ? {} : { where }),
    })),
  }));

/** Constructs the columnar code leaves to the row path (partial plans). */
const uncovered: fc.Arbitrary<Expr> = fc.constantFrom<Expr>(
  { type: "Binary", op: ">", left: { type: "Binary", op: "+", left: field("score"), right: field("age") }, right: lit(40) },
  { type: "Chain", source: { type: "XEvent" }, timestampField: "timestamp", steps: [{ label: "A", what: { type: "Binary", op: "=", left: field("eventType"), right: lit("web.pageViews") } }, { label: "B", what: { type: "Binary", op: "=", left: field("eventType"), right: lit("commerce.purchases") } }] },
  xFilter({ type: "Binary", op: "=", left: { type: "Up", levels: 1, name: "city" }, right: lit("Oslo") }),
);

const inSegmentArb = fc.constantFrom("s1", "s2", "s.3").map((id): Expr => ({ type: "Call", name: "inSegment", args: [lit(id)] }));

const profileLeaf = fc.oneof(
  { weight: 4, arbitrary: leafArb(profilePath, (p) => field(...p)) },
  { weight: 1, arbitrary: inSegmentArb },
  { weight: 3, arbitrary: aggregateArb },
  { weight: 1, arbitrary: chainArb },
  { weight: 1, arbitrary: uncovered },
);
const queryArb: fc.Arbitrary<Query> = boolTree(profileLeaf, 3).map((body) => ({ type: "Query", params: [], body }));

/** Both back-end modes: fused generated loops, and node by node (no code generation). */
function check(q: Query, rows: RowInput[], now: number): void {
  const data = rowColumnarData(rows);
  const out = new Uint8Array(rows.length);
  compileColumnar(q, { now }).run(data, out);
  const stepwise = new Uint8Array(rows.length);
  compileColumnar(q, { now, codegen: false }).run(data, stepwise);
  assert.deepEqual(stepwise, out, "with and without code generation");
  for (let i = 0; i < rows.length; i++) {
    const events: Record<string, unknown>[] = [];
    for (let r = data.eventStart[i]!; r < data.eventStart[i + 1]!; r++) events.push(data.event(r));
    const expected = toBoolean(evaluate(q, { profile: rows[i]!.profile, events, now }));
    assert.equal(out[i] === 1, expected, `profile ${i}: ${JSON.stringify(rows[i])}`);
  }
}

test("property: compileColumnar agrees with evaluate on covered constructs and partial plans", () => {
  fc.assert(
    fc.property(queryArb, fc.array(rowArb, { minLength: 1, maxLength: 8 }), fc.integer({ min: NOW - 40 * DAY, max: NOW }), (q, rows, now) => check(q, rows, now)),
    { numRuns: 600 },
  );
});

test("property: event aggregates agree with evaluate over many profiles sharing one layout", () => {
  fc.assert(
    fc.property(boolTree(fc.oneof(aggregateArb, chainArb), 2).map((body): Query => ({ type: "Query", params: [], body })), fc.array(rowArb, { minLength: 5, maxLength: 20 }), (q, rows) => check(q, rows, NOW)),
    { numRuns: 200 },
  );
});

test("property: chain agrees with evaluate (greedy walk, ties, COUNT, WHEN, WHERE)", () => {
  fc.assert(
    fc.property(chainArb.map((body): Query => ({ type: "Query", params: [], body })), fc.array(rowArb, { minLength: 1, maxLength: 10 }), (q, rows) => check(q, rows, NOW)),
    { numRuns: 300 },
  );
});

test("property: sum/average/min/max (method and over forms) agree with evaluate", () => {
  fc.assert(
    fc.property(numericAggregateArb.map((body): Query => ({ type: "Query", params: [], body })), fc.array(rowArb, { minLength: 1, maxLength: 10 }), (q, rows) => check(q, rows, NOW)),
    { numRuns: 300 },
  );
});
