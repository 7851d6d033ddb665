/**
 * Core semantics of the interpreter (pql.md §5–§6): missing values, null
 * propagation, two-valued comparisons, boolean coercion, literal coercion,
 * numbers, path projection, scopes (items, ^, variables, parameters), and
 * hostile data. Each assertion also runs through the compiler.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluate, evaluatePredicate, type EvalContext } from "../src/evaluate.js";
import { compile } from "../src/compile.js";
import { PqlError } from "../src/errors.js";
import type { Expr, Query } from "../src/ast.js";
import { DateInterval, toBoolean } from "../src/runtime/values.js";

function both(q: string | Query, ctx: EvalContext): unknown {
  const a = evaluate(q, ctx);
  assert.deepStrictEqual(compile(q)(ctx), a, `compile disagrees on ${typeof q === "string" ? q : "tree"}`);
  return a;
}

const at = (profile: Record<string, unknown>, extra: Partial<EvalContext> = {}): EvalContext => ({
  profile,
  now: "2024-03-15T12:00:00Z",
  ...extra,
});

test("§6.1 a missing path is null; field access on null is null", () => {
  assert.equal(both("a.b.c", at({})), null);
  assert.equal(both("a.b.c", at({ a: null })), null);
  assert.equal(both("a.b.c", at({ a: 5 })), null);
  assert.equal(both("a.b.c", at({ a: { b: { c: 7 } } })), 7);
  assert.equal(both("a.toString", at({ a: {} })), null, "no prototype properties leak through");
  assert.equal(both("a.constructor", at({ a: { x: 1 } })), null);
});

test("§6.1 (R) projection through arrays maps, drops nulls and flattens one level", () => {
  const profile = {
    orders: [{ storeId: "s1", tags: ["x", "y"] }, { storeId: null }, { storeId: "s2", tags: ["z"] }, {}],
  };
  assert.deepStrictEqual(both("orders.storeId", at(profile)), ["s1", "s2"]);
  assert.deepStrictEqual(both("orders.tags", at(profile)), ["x", "y", "z"]);
  assert.deepStrictEqual(both("xEvent.device.model", at({}, { events: [{ device: { model: "A" } }, { device: { model: "B" } }, {}] })), ["A", "B"]);
});

test("§6.2 null propagates through arithmetic and becomes false in boolean positions", () => {
  assert.equal(both("a + 1", at({})), null);
  assert.equal(both("(a + 1) * 2", at({})), null);
  assert.equal(both("a / 0 = 1", at({ a: 1 })), false);
  assert.equal(both("not (a / 0 = 1)", at({ a: 1 })), true);
  assert.equal(evaluatePredicate("a + 1", at({})), false);
});

test("§6.3 comparisons are two-valued: != is not the negation of =; notIn is not the negation of in", () => {
  assert.equal(both('a != "US"', at({})), false);
  assert.equal(both('a = "US"', at({})), false);
  assert.equal(both('not (a = "US")', at({})), true);
  assert.equal(both("a notIn [1]", at({})), false);
  assert.equal(both("a in [1]", at({})), false);
  assert.equal(both("a notIn [1]", at({ a: 2 })), true);
  assert.equal(both("a != 1", at({ a: [2] })), false, "incomparable types: false, not true");
  assert.equal(both("a != b", at({ a: true, b: 1 })), false);
});

test("§6.4 boolean coercion: defined → true, arrays and maps by emptiness, empty string and 0 true", () => {
  const profile = { home: { city: "Oslo" }, empty: {}, list: [], full: [1], s: "", zero: 0, f: false };
  assert.equal(evaluatePredicate("home", at(profile)), true);
  assert.equal(evaluatePredicate("home.countryISO", at(profile)), false);
  assert.equal(evaluatePredicate("list", at(profile)), false);
  assert.equal(evaluatePredicate("full", at(profile)), true);
  assert.equal(evaluatePredicate("s", at(profile)), true);
  assert.equal(evaluatePredicate("zero", at(profile)), true);
  assert.equal(evaluatePredicate("f", at(profile)), false);
  assert.equal(evaluatePredicate("empty", at(profile)), true, "an empty object read from data is defined");
  assert.equal(both("full and s and zero", at(profile)), true);
  assert.equal(both("list or f", at(profile)), false);
  // A map built by PQL coerces by emptiness.
  assert.equal(evaluatePredicate("list.groupBy(x)", at(profile)), false);
  assert.equal(evaluatePredicate("full.groupBy(1)", at(profile)), true);
  assert.equal(toBoolean(new DateInterval(0, 1)), true);
});

test("§6.5 literal coercion towards the other operand's runtime type", () => {
  assert.equal(both('vip = "true"', at({ vip: true })), true);
  assert.equal(both('vip = "false"', at({ vip: true })), false);
  assert.equal(both('age = "35"', at({ age: 35 })), true);
  assert.equal(both('"35" = age', at({ age: 35 })), true);
  assert.equal(both('age > "30"', at({ age: 35 })), true);
  assert.equal(both("zip = 12345", at({ zip: "12345" })), true);
  assert.equal(both('age = "abc"', at({ age: 35 })), false);
  assert.equal(both('age in ["35", "36"]', at({ age: 35 })), true);
  assert.equal(both("age = other", at({ age: 35, other: "35" })), false, "only literals are coerced");
});

test("§7.7 integers and doubles: 5 = 5.0, / gives a double, % follows the dividend", () => {
  assert.equal(both("5 = 5.0", at({})), true);
  assert.equal(both("7 / 2", at({})), 3.5);
  assert.equal(both("-7 % 3", at({})), -1);
  assert.equal(both("7 % -3", at({})), 1);
  assert.equal(both("1 % 0", at({})), null);
  assert.equal(both('"a" + 1', at({})), null, "no string concatenation");
});

test("§7.2 equality of arrays is ordered element-wise; objects by their fields", () => {
  assert.equal(both("tags = [\"a\", \"b\"]", at({ tags: ["a", "b"] })), true);
  assert.equal(both("tags = [\"b\", \"a\"]", at({ tags: ["a", "b"] })), false);
  assert.equal(both("o = {\"x\": 1}", at({ o: { x: 1.0 } })), true);
  assert.equal(both('s < "b"', at({ s: "a" })), true, "strings order lexicographically");
  assert.equal(both("t < u", at({ t: "2024-01-01T10:00:00+02:00", u: "2024-01-01T09:00:00Z" })), true, "timestamps order as instants");
  assert.equal(both("t < now", at({ t: "2024-03-15T11:59:59Z" })), true);
  assert.equal(both("t = date(2024, 3, 15)", at({ t: "2024-03-15T11:59:59Z" })), true, "= with a day: within the day");
});

test("§5 implicit contexts: filters see the item; ^ climbs one level per caret", () => {
  const profile = { country: "US", orders: [{ price: 5, lines: [{ sku: "A" }, { sku: "B" }] }, { price: 50, lines: [{ sku: "B" }] }] };
  assert.equal(both('orders[lines[sku = "B" and ^price > 10]].count()', at(profile)), 1);
  assert.equal(both('orders[lines[^^country = "US"]].count()', at(profile)), 2, "two levels up is the profile");
  assert.equal(both('orders[lines[^^.country = "CA"]].count()', at(profile)), 0);
  assert.equal(both("orders[country = \"US\"].count()", at(profile)), 0, "no fallback to outer levels");
});

test("§1 parameters: $1 is the profile unless params say otherwise; the lambda head binds params", () => {
  const profile = { name: "p" };
  assert.equal(both("$1.name", at(profile)), "p");
  assert.equal(both("$2", at(profile)), null);
  assert.equal(both("(P) => P.name", at(profile)), "p");
  assert.equal(both("(A, B) => A.name = B.name", at(profile, { params: [{ name: "x" }, { name: "x" }] })), true);
  assert.equal(both("name", at(profile, { params: [{ name: "first" }] })), "first", "implicit paths use $1");
  assert.equal(both("$2.name", at(profile, { params: [{}, { name: "second" }] })), "second");
});

test("xEvent is the events array (absent = empty); chain needs distinct events in strictly increasing time", () => {
  assert.deepStrictEqual(both("xEvent", at({})), []);
  const events = [
    { eventType: "a", timestamp: 1000 },
    { eventType: "a", timestamp: 1000 },
    { eventType: "b", timestamp: 1000 },
    { eventType: "b", timestamp: 2000 },
  ];
  const q = (steps: string) => `chain(xEvent, timestamp, [${steps}])`;
  assert.equal(both(q('A: WHAT(eventType = "a"), B: WHAT(eventType = "a")'), at({}, { events })), false, "equal timestamps are not ordered");
  assert.equal(both(q('A: WHAT(eventType = "a") COUNT(2), B: WHAT(eventType = "b")'), at({}, { events })), true);
  assert.equal(both(q('A: WHAT(eventType = "a") COUNT(3)'), at({}, { events })), false);
  assert.equal(both(q('A: WHAT(true), B: WHAT(true)'), at({}, { events })), true);
  assert.equal(both(q('A: WHAT(true) WHERE(timestamp > 1500)'), at({}, { events })), true);
  assert.equal(both(q('A: WHAT(eventType = "b") WHERE(timestamp > 2500)'), at({}, { events })), false);
});

test("select yields items or tuples; the same item may bind twice; forall with several bindings is nested", () => {
  const profile = { xs: [1, 2] };
  assert.deepStrictEqual(both("select A from xs, B from xs where B >= A", at(profile)), [[1, 1], [1, 2], [2, 2]]);
  assert.equal(both("forall A from xs : A > 0, B from xs : B >= 1", at(profile)), true);
  assert.equal(both("forall A from xs : A > 0, B from xs : B > A", at(profile)), false);
  assert.equal(both("exists A from xs : A > 1, B from xs : B < A", at(profile)), true);
  assert.equal(both("exists A from xs", at(profile)), true);
  assert.equal(both("forall A from xs", at({ xs: [] })), true);
});

test("map over arrays (item context, object literal, lambda) and over maps", () => {
  const profile = { orders: [{ id: "o1", price: 2 }, { id: "o2", price: 3 }], prefs: { a: 1, b: 2 } };
  assert.deepStrictEqual(both("orders.map(price * 2)", at(profile)), [4, 6]);
  assert.deepStrictEqual(both('orders.map({"id": id, "double": price * 2})', at(profile)), [{ id: "o1", double: 4 }, { id: "o2", double: 6 }]);
  assert.deepStrictEqual(both("orders.map(O => O.id)", at(profile)), ["o1", "o2"]);
  assert.deepStrictEqual(both("prefs.map((K, V) => mapEntry(V, K))", at(profile)), { "1": "a", "2": "b" });
  assert.deepStrictEqual(both("prefs.map((K, V) => V * 10)", at(profile)), { a: 10, b: 20 });
  assert.deepStrictEqual(both("orders.groupBy(id).keys()", at(profile)), ["o1", "o2"]);
  assert.deepStrictEqual(both("[1, 2, 2, 1, 3].distinct()", at({})), [1, 2, 3]);
  assert.deepStrictEqual(both('[{"a": 1}, {"a": 1.0}, {"a": 2}].distinct()', at({})), [{ a: 1 }, { a: 2 }]);
  assert.deepStrictEqual(both("[3, 1, 3, 2].topN(X => X, 3)", at({})), [3, 3, 2], "highest first, stable");
});

test("data nested 10,000 levels deep neither overflows nor hangs", () => {
  let deep: Record<string, unknown> = { leaf: true };
  for (let i = 0; i < 10_000; i++) deep = { a: deep };
  let deepArr: unknown = [{ a: 1 }];
  for (let i = 0; i < 10_000; i++) deepArr = [deepArr];
  let deepArr2: unknown = [{ a: 1 }];
  for (let i = 0; i < 10_000; i++) deepArr2 = [deepArr2];
  const profile = { deep, deep2: deep, deepArr, deepArr2 };
  assert.equal(both("deep = deep2", at(profile)), true);
  assert.deepStrictEqual(both("deepArr.a", at(profile)), [1]);
  assert.equal(both("deepArr = deepArr2", at(profile)), true);
  assert.equal(both("[deep].distinct().count()", at(profile)), 1);
});

test("query problems throw PqlError up front with positions; data problems never throw", () => {
  assert.throws(
    () => evaluate("a = 1 and frobnicate(a)", at({})),
    (e: unknown) => e instanceof PqlError && e.code === "PQL_UNKNOWN_FUNCTION" && e.column === 11 && e.message === "unknown function frobnicate()",
  );
  assert.throws(
    () => compile("a.frobnicate()"),
    (e: unknown) => e instanceof PqlError && e.code === "PQL_UNKNOWN_FUNCTION" && e.message === "unknown method .frobnicate()",
  );
  const weird = { a: { b: [1, "x", null, { c: true }] }, n: Number.NaN, d: new Date(Number.NaN) };
  for (const q of ["a.b.c.d", "a.b.sum() + n", "d occurs today", "a.b.topN(X => X, 2)", "a.b.min()", "n = n", "a.b.c.getMonth()"]) {
    assert.doesNotThrow(() => both(q, at(weird)), q);
  }
});

test("an invalid `now` is a caller error (TypeError)", () => {
  assert.throws(() => evaluate("true", { profile: {}, now: "not a date" }), TypeError);
});

test("trees built by code evaluate without source positions", () => {
  const body: Expr = { type: "Binary", op: ">=", left: { type: "Field", name: "age" }, right: { type: "Literal", kind: "integer", value: 18 } };
  assert.equal(both({ type: "Query", params: [], body }, at({ age: 20 })), true);
});

test("trees as deep as the parser allows (and deeper, built by code) evaluate in both evaluators", () => {
  for (const depth of [200, 1000]) {
    let notChain: Expr = { type: "Binary", op: "=", left: { type: "Field", name: "a" }, right: { type: "Literal", kind: "integer", value: 1 } };
    let andChain: Expr = notChain;
    let sum: Expr = { type: "Field", name: "a" };
    for (let i = 0; i < depth; i++) {
      notChain = { type: "Not", operand: notChain };
      andChain = { type: "Binary", op: "and", left: andChain, right: { type: "Literal", kind: "boolean", value: true } };
      sum = { type: "Binary", op: "+", left: sum, right: { type: "Literal", kind: "integer", value: 1 } };
    }
    const q = (body: Expr): Query => ({ type: "Query", params: [], body });
    assert.equal(both(q(notChain), at({ a: 1 })), depth % 2 === 0);
    assert.equal(both(q(andChain), at({ a: 1 })), true);
    assert.equal(both(q(sum), at({ a: 1 })), depth + 1);
  }
});

test("lambda parameters: one binds the item, two bind (key, value) or (item, index), more are null", () => {
  const profile = { xs: ["a", "b"], m: { k: "v" } };
  assert.deepStrictEqual(both("xs.map((X, I) => I)", at(profile)), [0, 1]);
  assert.deepStrictEqual(both("m.map((K, V) => K)", at(profile)), { k: "k" });
  assert.deepStrictEqual(both("let C = 5 in xs.map((X, I, C) => C)", at(profile)), [null, null], "a third parameter shadows and is null");
});
