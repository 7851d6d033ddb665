import { test } from "node:test";
import assert from "node:assert/strict";
import { toPqlJson, fromPqlJson, type PqlJsonNode } from "../src/pqljson.js";
import { format } from "../src/format.js";
import { parse } from "../src/parser.js";
import { astEqual } from "../src/ast.js";
import { PqlError } from "../src/errors.js";

const lit = (literalType: string, value: unknown) => ({ nodeType: "literal", literalType, value });
const field = (fieldName: string, object?: unknown) =>
  object === undefined ? { nodeType: "fieldLookup", fieldName } : { nodeType: "fieldLookup", fieldName, object };
const apply = (fnName: string, ...params: unknown[]) => ({ nodeType: "fnApply", fnName, params });

/** text → json → text is the identity after format, through a JSON string. */
function roundTrip(src: string): void {
  const json = JSON.stringify(toPqlJson(src));
  const back = fromPqlJson(json);
  assert.ok(astEqual(back, parse(src)), `tree differs for ${src}`);
  assert.equal(format(back), format(src));
}

test("the documented shapes: fnApply with operator names, fieldLookup, literals", () => {
  assert.deepEqual(toPqlJson('person.birthYear >= 1980 and homeAddress.countryCode in ["CA", "US"]'), {
    nodeType: "fnApply",
    fnName: "and",
    params: [
      apply(">=", field("birthYear", field("person")), lit("Integer", 1980)),
      apply("in", field("countryCode", field("homeAddress")), lit("List", ["CA", "US"])),
    ],
  });
});

test("built-ins are fnApply{fnName, params: [receiver, ...args]}", () => {
  assert.deepEqual(toPqlJson('x.startsWith("a")'), apply("startsWith", field("x"), lit("String", "a")));
  assert.deepEqual(toPqlJson("workAddress.isNull()"), apply("isNull", field("workAddress")));
  assert.deepEqual(toPqlJson("date(2024, 1, 2)"), apply("date", lit("Integer", 2024), lit("Integer", 1), lit("Integer", 2)));
  assert.deepEqual(toPqlJson("not a"), apply("not", field("a")));
  assert.deepEqual(toPqlJson("$2"), { nodeType: "parameterReference", position: 2 });
  assert.deepEqual(toPqlJson("2.0"), lit("Double", 2));
  assert.deepEqual(toPqlJson("[1, 2.5]"), lit("List", [lit("Integer", 1), lit("Double", 2.5)]));
});

test("runs of one left-associative operator are written n-ary", () => {
  assert.deepEqual(toPqlJson("a or b or c"), apply("or", field("a"), field("b"), field("c")));
  assert.deepEqual(toPqlJson("a or (b or c)"), apply("or", field("a"), apply("or", field("b"), field("c"))));
  assert.deepEqual(toPqlJson("a - b + c"), apply("+", apply("-", field("a"), field("b")), field("c")));
});

test("names that mean several things carry a form only when needed", () => {
  assert.deepEqual(toPqlJson('a matches "x"'), apply("matches", field("a"), lit("String", "x")));
  assert.deepEqual(toPqlJson('a.matches("x")'), { ...apply("matches", field("a"), lit("String", "x")), form: "method" });
  assert.deepEqual(toPqlJson("xs.exists(k)"), apply("exists", field("xs"), field("k")));
  assert.deepEqual(toPqlJson('last("day")'), { ...apply("last", lit("String", "day")), form: "function" });
  assert.deepEqual(toPqlJson("last day"), apply("last", lit("String", "day")));
  assert.deepEqual(toPqlJson("myFn(1)"), { ...apply("myFn", lit("Integer", 1)), form: "function" });
  assert.deepEqual(toPqlJson("x.myFn(1)"), apply("myFn", field("x"), lit("Integer", 1)));
});

test("every construct survives text → json → text", () => {
  const sources = [
    'person.birthYear >= 1980 and homeAddress.countryCode in ["CA", "US"]',
    "X.timestamp occurs <= 3 days before now",
    "t occurs = 1 day after x.ts and t occurs > 0 millennia from today",
    "t occurs between date(2024, 1, 1) and date(2024, 1, 31) and a = 1",
    "t occurs before today or t occurs after yesterday or t occurs from tomorrow",
    "t occurs this month or t occurs on date(2020, 1, 1) or t occurs on x",
    'select A from xEvent where A.eventType = "x", B from xEvent where B.t occurs <= 2 hours after A.timestamp',
    "exists X from a : X > 1, Y from X.b and forall Z from c",
    "let T = orders.sum(price) in T > 100 and T < 500",
    '(sum E.commerce.order.priceTotal over E from xEvent where E.c = "EUR") > 100',
    "average X from nums where X > 1, Y from X.k",
    'chain(xEvent, timestamp, [A: WHAT(eventType = "x") WHEN(< 8 days before now) COUNT(5) WHERE(a = 1), B: WHAT(true) WHEN(between last week and today)])',
    'xEvent[productListItems[SKU = "ZZ" or ^eventType = "x" or ^^.a.b]].count() > -3',
    'orders.groupBy(storeId).map((K, G) => mapEntry(K, G.count())).get("s1") = 2',
    "(p, q) => p.a = $1 and q",
    "not a and -b < -(5) and - -5 = 2.5 and -0.5 = .5",
    '{"count": 1, "2": [1.5, x], "": {}} = y',
    'a matches "x" and a.matches("y") and x.last("month") and last("month") and xs.exists(a) and f() and x.not()',
    "a - b + c - d * e / f % g and x notIn [1] and y like \"%\"",
    "now = today or yesterday = tomorrow or this year = next decade or last century",
    "xEvent.x.count() = if(a, 1, 2) and inSegment(\"s\") and currentMonth() = 1",
    "select X from a, Y from b where (exists Z from c : Z), W from d",
  ];
  for (const src of sources) roundTrip(src);
});

test("a 50,000-term disjunction round-trips as one flat node", () => {
  const src = Array.from({ length: 50_000 }, (_, i) => `f${i} = ${i}`).join(" or ");
  const json = toPqlJson(src);
  assert.equal(json.nodeType === "fnApply" && json.params.length, 50_000);
  assert.ok(astEqual(fromPqlJson(JSON.stringify(json)), parse(src)));
});

test("Adobe's forms are accepted: NOT, n-ary AND, case-insensitive literalType, integers as strings", () => {
  const json = apply(
    "AND",
    apply("NOT", apply("isNull", field("email"))),
    apply("=", lit("string", "US"), field("country")),
    apply(">", field("age"), lit("integer", "6")),
    apply("!", field("vip")),
  );
  assert.equal(format(fromPqlJson(json)), 'not email.isNull() and "US" = country and age > 6 and not vip');
});

test("legacy roots: parameterReference 1, XDMObject profile and varRef _ all mean $1", () => {
  const viaParam = field("birthYear", field("person", { nodeType: "parameterReference", position: 1 }));
  const viaXdm = field("birthYear", field("person", lit("XDMObject", "profile")));
  const viaVar = field("birthYear", field("person", { nodeType: "varRef", varName: "_" }));
  for (const j of [viaParam, viaXdm, viaVar]) assert.equal(format(fromPqlJson(j)), "$1.person.birthYear");
});

test("raw JSON values and literals without literalType are literals", () => {
  assert.equal(format(fromPqlJson(apply("in", field("c"), ["CA", 1, 2.5, true]))), 'c in ["CA", 1, 2.5, true]');
  assert.equal(format(fromPqlJson(apply("=", field("a"), { nodeType: "literal", value: 3 }))), "a = 3");
  assert.equal(format(fromPqlJson(lit("Boolean", "true"))), "true");
  assert.equal(format(fromPqlJson(lit("Double", "2.5"))), "2.5");
});

test("legacy nested binary trees are read iteratively", () => {
  let json: unknown = field("f0");
  for (let i = 1; i < 20_000; i++) json = apply("or", json, field(`f${i}`));
  // (Passed as an object: JSON.stringify itself overflows on a tree this deep.)
  const q = fromPqlJson(json as object);
  assert.equal(format(q), Array.from({ length: 20_000 }, (_, i) => `f${i}`).join(" or "));
});

test("the JSON text form and a lambda head", () => {
  const q = fromPqlJson('{"nodeType":"fnCreate","params":[{"varName":"p"}],"body":{"nodeType":"varRef","varName":"p"}}');
  assert.deepEqual(q.params, ["p"]);
  assert.equal(format(q), "(p) => p");
});

test("malformed pql/json throws PQL_JSON_INVALID with the path of the bad node", () => {
  const cases: [unknown, string][] = [
    ["{not json", "Invalid pql/json: not JSON"],
    [{ nodeType: "bogus" }, 'Invalid pql/json at $.nodeType: unknown nodeType "bogus"'],
    [{}, "Invalid pql/json at $.nodeType: unknown nodeType undefined"],
    [null as unknown, "Invalid pql/json at $: expected a node object but found null"],
    [apply("and", field("a"), { nodeType: "fieldLookup" }), "Invalid pql/json at $.params[1].fieldName: fieldName must be an identifier"],
    [apply("=", field("a"), lit("Integer", 1.5)), "Invalid pql/json at $.params[1].value: an Integer literal needs an integer value"],
    [apply("=", field("a"), lit("Integer", 2 ** 60)), "Invalid pql/json at $.params[1].value: integer 1152921504606847000 is outside the supported range"],
    [apply("=", field("a"), lit("Date", "x")), 'Invalid pql/json at $.params[1].literalType: unknown literalType "Date"'],
    [{ nodeType: "fnApply", fnName: "and" }, "Invalid pql/json at $.params: fnApply needs a params array"],
    [{ nodeType: "fnApply", params: [] }, "Invalid pql/json at $.fnName: fnApply needs a fnName string"],
    [apply("<", field("a"), field("b"), field("c")), "Invalid pql/json at $.params: '<' takes exactly two params"],
    [apply("occurs", field("t"), lit("String", "<"), lit("Integer", 3), lit("String", "fortnight"), lit("String", "before"), apply("now")), 'Invalid pql/json at $.params[3]: unknown time unit "fortnight"'],
    [apply("chain", { nodeType: "varRef", varName: "xEvent" }, lit("String", "timestamp"), apply("and")), 'Invalid pql/json at $.params[2]: expected a chain step fnApply{fnName: "step"}'],
    [apply("chain", { nodeType: "varRef", varName: "xEvent" }, lit("String", "ts"), apply("step", lit("String", "A"), true, apply("COUNT", lit("Integer", 0)))), "Invalid pql/json at $.params[2].params[2].params[0]: COUNT must be a positive integer"],
    [{ nodeType: "varDecl", varName: "X", range: field("a") }, "Invalid pql/json at $: a varDecl is only allowed as a binding of select/exists/forall/let/sum…over"],
    [{ nodeType: "parameterReference", position: 0 }, "Invalid pql/json at $.position: position must be a positive integer"],
    [{ nodeType: "set", variables: [] }, "Invalid pql/json at $: the legacy 'set' node is not supported"],
    [{ nodeType: "fnApply", function: { nodeType: "fnCreate" }, params: [] }, "Invalid pql/json at $.function: applying a function value (fnApply.function) is not supported"],
    [apply("a-b", field("x")), 'Invalid pql/json at $.fnName: unknown operator or function "a-b"'],
    [apply("=", field("a"), lit("Double", Number.NaN)), "Invalid pql/json at $.params[1].value: a Double literal needs a finite number"],
    [{ ...apply("x", field("a")), form: "static" }, 'Invalid pql/json at $.form: form must be "method" or "function"'],
  ];
  for (const [input, message] of cases) {
    assert.throws(
      () => fromPqlJson(input as object),
      (e: unknown) => {
        assert.ok(e instanceof PqlError, `expected a PqlError for ${JSON.stringify(input)}, got ${String(e)}`);
        assert.equal(e.code, "PQL_JSON_INVALID");
        assert.ok(e.message.startsWith(message), `${e.message}\n  does not start with\n${message}`);
        return true;
      },
    );
  }
});

test("hostile json: deep nesting is refused cleanly, never a RangeError", () => {
  let json: unknown = field("a");
  for (let i = 0; i < 100_000; i++) json = apply("not", json);
  assert.throws(() => fromPqlJson(json as object), (e: unknown) => e instanceof PqlError && /nesting exceeds the limit of 1000/.test(e.message));
});

test("the exported type describes what toPqlJson returns", () => {
  const node: PqlJsonNode = toPqlJson("a");
  assert.equal(node.nodeType, "fieldLookup");
});
