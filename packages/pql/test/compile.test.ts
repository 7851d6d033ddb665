/**
 * The compiler: compiled once, reusable across profiles and instants, same
 * results as the interpreter on the shapes it specialises (including the type
 * corner cases those shortcuts must not get wrong), errors at compile time.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { compile, compilePredicate } from "../src/compile.js";
import { evaluate } from "../src/evaluate.js";
import { PqlError } from "../src/errors.js";

const NOW = Date.UTC(2024, 2, 15, 12, 0, 0);
const DAY = 86_400_000;

test("field-with-literal comparisons: every runtime type of the field agrees with the interpreter", () => {
  const values: unknown[] = [35, 35.0, "35", "abc", true, false, null, undefined, [35], { v: 35 }, "2024-03-15", Number.NaN, new Date(NOW)];
  const queries = ['f = "35"', 'f != "35"', "f = 35", "f != 35", "f < 36", "f >= 35", '"35" = f', "36 > f", 'f = "true"', "f = true", 'f < "b"', "f in [35, \"x\"]"];
  for (const q of queries) {
    const compiled = compile(q);
    for (const f of values) {
      const ctx = { profile: { f }, now: NOW };
      assert.deepStrictEqual(compiled(ctx), evaluate(q, ctx), `${q} with f = ${String(f)}`);
    }
  }
});

test("field paths read plain objects directly and fall back to the general rules for anything else", () => {
  const q = compile("a.b.c");
  assert.equal(q({ profile: { a: { b: { c: 1 } } }, now: NOW }), 1);
  assert.deepStrictEqual(q({ profile: { a: [{ b: { c: 1 } }, { b: [{ c: 2 }, { c: 3 }] }] }, now: NOW }), [1, 2, 3]);
  assert.equal(q({ profile: { a: Object.assign(Object.create(null), { b: { c: 4 } }) }, now: NOW }), 4);
  assert.equal(q({ profile: { a: { b: "string" } }, now: NOW }), null);
  assert.equal(compile("a.b")({ profile: { a: new Date(NOW) }, now: NOW }), null);
  assert.equal(compile("constructor")({ profile: {}, now: NOW }), null);
  assert.equal(compile("a.__proto__")({ profile: { a: {} }, now: NOW }), null);
});

test("filter + count counts without building arrays and stops at the threshold with the same answer", () => {
  const events = Array.from({ length: 10 }, (_, i) => ({ eventType: i % 2 ? "a" : "b", timestamp: NOW - i * DAY }));
  const ctx = { profile: { notArray: { x: 1 } }, events, now: NOW };
  for (const q of [
    'xEvent[eventType = "a"].count()',
    'xEvent[eventType = "a"].count() >= 5',
    'xEvent[eventType = "a"].count() >= 6',
    'xEvent[eventType = "a"].count() > 4',
    'xEvent[eventType = "a"].count() > 5',
    "notArray[x = 1].count()",
    "missing[x = 1].count() >= 0",
    "notArray[x = 1].count() >= 0",
  ]) {
    assert.deepStrictEqual(compile(q)(ctx), evaluate(q, ctx), q);
  }
  assert.equal(compile('xEvent[eventType = "a"].count()')(ctx), 5);
  assert.equal(compile('xEvent[eventType = "a"].count() >= 5')(ctx), true);
  assert.equal(compile('xEvent[eventType = "a"].count() > 5')(ctx), false);
});

test("occurs bounds are cached per now and recomputed when now changes", () => {
  const q = compile("xEvent[timestamp occurs <= 1 day before now].count()");
  const events = [{ timestamp: NOW - 3_600_000 }, { timestamp: NOW - 2 * DAY }];
  assert.equal(q({ profile: {}, events, now: NOW }), 1);
  assert.equal(q({ profile: {}, events, now: NOW - DAY - 1_000 }), 1, "the older event is within a day of the earlier now");
  assert.equal(q({ profile: {}, events, now: NOW + 3 * DAY }), 0);
  assert.equal(q({ profile: {}, events, now: new Date(NOW) }), 1);
  assert.equal(q({ profile: {}, events, now: "2024-03-15T12:00:00Z" }), 1);
});

test("a compiled query is reusable: variables and item contexts do not leak between calls", () => {
  const q = compile("let T = orders.sum(price) in (select O from orders where O.price * 2 > T).count()");
  assert.equal(q({ profile: { orders: [{ price: 1 }, { price: 5 }] }, now: NOW }), 1);
  assert.equal(q({ profile: { orders: [] }, now: NOW }), 0);
  assert.equal(q({ profile: { orders: [{ price: 2 }, { price: 2 }] }, now: NOW }), 0);
  const lam = compile("(P) => P.a");
  assert.equal(lam({ profile: { a: 1 }, now: NOW }), 1);
  assert.equal(lam({ profile: { a: 2 }, now: NOW }), 2);
});

test("compilePredicate coerces the top level to a boolean (§6.4)", () => {
  const p = compilePredicate("orders");
  assert.equal(p({ profile: { orders: [] }, now: NOW }), false);
  assert.equal(p({ profile: { orders: [1] }, now: NOW }), true);
  assert.equal(p({ profile: {}, now: NOW }), false);
});

test("compile rejects query problems at compile time, not at the first call", () => {
  assert.throws(() => compile("a = 1 or nope(1)"), (e: unknown) => e instanceof PqlError && e.code === "PQL_UNKNOWN_FUNCTION" && e.column === 10);
  assert.throws(() => compile('a.matches("\\\\z")'), (e: unknown) => e instanceof PqlError && e.code === "PQL_REGEX_UNSUPPORTED");
  assert.throws(() => compile("a = "), PqlError, "syntax errors come from the parser");
});

test("a compiled predicate over many generated profiles matches the interpreter", () => {
  const q =
    'homeAddress.countryCode = "US" and person.age >= 30 and xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 2';
  const f = compile(q);
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let matches = 0;
  for (let i = 0; i < 2000; i++) {
    const events = Array.from({ length: Math.floor(rnd() * 5) }, () => ({
      eventType: rnd() < 0.5 ? "commerce.purchases" : "web",
      timestamp: rnd() < 0.5 ? NOW - Math.floor(rnd() * 60 * DAY) : new Date(NOW - Math.floor(rnd() * 60 * DAY)).toISOString(),
    }));
    const ctx = { profile: { homeAddress: { countryCode: rnd() < 0.5 ? "US" : "CA" }, person: { age: Math.floor(rnd() * 80) } }, events, now: NOW };
    const r = f(ctx);
    assert.equal(r, evaluate(q, ctx));
    if (r === true) matches++;
  }
  assert.ok(matches > 20 && matches < 1000, `the data exercises both outcomes (${matches} matches)`);
});

test("the hot subset is turned into generated code (and still agrees with the interpreter)", async () => {
  const { generate } = await import("../src/runtime/codegen.js");
  const { parse } = await import("../src/parser.js");
  const shapes = [
    'homeAddress.countryCode = "US" and person.age >= 30 and xEvent[eventType = "commerce.purchases" and timestamp occurs <= 30 days before now].count() >= 2',
    'not (a = 1) or xEvent[lines[sku = "x" and ^eventType = "a"]].count() > 0',
    'xEvent[tags.includes("a") and ^k = 1 and timestamp occurs this month].count() >= 1',
    "a.b < c",
  ];
  const ctx = {
    profile: { k: 1, a: 2, homeAddress: { countryCode: "US" }, person: { age: 40 } },
    events: [
      { eventType: "a", tags: ["a"], timestamp: NOW - DAY, lines: [{ sku: "x" }] },
      { eventType: "commerce.purchases", tags: [], timestamp: NOW - 2 * DAY, lines: [{ sku: "y" }] },
      { eventType: "commerce.purchases", timestamp: new Date(NOW - 3 * DAY).toISOString() },
    ],
    now: NOW,
  };
  for (const q of shapes) {
    assert.notEqual(generate(parse(q).body, () => () => null), null, q);
    assert.deepStrictEqual(compile(q)(ctx), evaluate(q, ctx), q);
  }
  assert.equal(compile(shapes[0]!)(ctx), true);
  assert.equal(compile(shapes[1]!)(ctx), true, "the ^ reference inside generated loops sees the event");
  assert.equal(compile(shapes[2]!)(ctx), true);
  assert.equal(generate(parse("orders.map(price)").body, () => () => null), null, "other roots keep the closure tree");
});
