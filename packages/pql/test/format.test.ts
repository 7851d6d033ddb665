import { test } from "node:test";
import assert from "node:assert/strict";
import { format } from "../src/format.js";
import { parse } from "../src/parser.js";
import { astEqual, type Expr, type Query } from "../src/ast.js";

/** format gives `expected`, and formatting that again changes nothing. */
function canon(src: string, expected: string): void {
  const out = format(src);
  assert.equal(out, expected);
  assert.equal(format(out), out, "format is idempotent");
  assert.ok(astEqual(parse(out), parse(src)), "formatting preserves the tree");
}

const q = (body: Expr, params: string[] = []): Query => ({ type: "Query", params, body });

test("keywords lower case, canonical built-in names, 'not' for '!'", () => {
  canon("NOT(a) AND b.COUNT() > 2 OR !c", "not a and b.count() > 2 or not c");
  canon('CHAIN(XEVENT, timestamp, [a: what(TRUE)])', "chain(xEvent, timestamp, [a: WHAT(true)])");
  canon("x NOTIN [1,2] and y Like \"a%\"", 'x notIn [1, 2] and y like "a%"');
  canon("currentyear() - person.birthYear >= 30", "currentYear() - person.birthYear >= 30");
});

test("minimal parentheses from the precedence table", () => {
  canon("((a = 1) and (b = 2)) or (c = 3)", "a = 1 and b = 2 or c = 3");
  canon("a and (b or c)", "a and (b or c)");
  canon("(a and b) and c", "a and b and c");
  canon("a and (b and c)", "a and (b and c)");
  canon("x - (y + z)", "x - (y + z)");
  canon("(x - y) + z", "x - y + z");
  canon("(a * b) + (c % d)", "a * b + c % d");
  canon("not (a = 1)", "not a = 1");
  canon("(not a) = b", "(not a) = b");
  canon("-(a + b)", "-(a + b)");
  canon("(-a).b", "(-a).b");
  canon("(a + b).c()", "(a + b).c()");
  canon("(a = b) = c", "(a = b) = c");
});

test("numbers: doubles always show a '.', negatives, and negated literals", () => {
  canon("5.0 + .5 + 1e3 + 2.02E-12 + 1e21", "5.0 + 0.5 + 1000.0 + 2.02e-12 + 1e+21");
  canon("-5 * - 2.5", "-5 * -2.5");
  canon("-(5)", "-(5)");
  canon("- -5", "-(-5)");
  canon("- -x", "- -x");
  canon("3 - -x", "3 - -x");
  canon("(-5).abs()", "(-5).abs()");
  canon("-5.abs()", "-5.abs()");
  assert.equal(format(q({ type: "Literal", kind: "double", value: -0 })), "-0.0");
});

test("strings use double quotes and Java escapes", () => {
  canon('"a\\"b\\\\c\\n\\t\\r\\b\\f"', '"a\\"b\\\\c\\n\\t\\r\\b\\f"');
  assert.equal(format(q({ type: "Literal", kind: "string", value: "\u0001é😀\u007f" })), '"\\u0001é😀\\u007f"');
  canon('"\\u0041"', '"A"');
});

test("occurs tails: plural units unless the amount is 1, 'on' only before values", () => {
  canon("t OCCURS <= 1 days before NOW", "t occurs <= 1 day before now");
  canon("t occurs = 3 day after today", "t occurs = 3 days after today");
  canon("t occurs < 2 millenium from x.ts", "t occurs < 2 millennia from x.ts");
  canon("t occurs on today", "t occurs today");
  canon("t occurs last week", "t occurs last week");
  canon("t occurs date(2024,1,1)", "t occurs on date(2024, 1, 1)");
  canon("t occurs between date(2024,1,1) and today and a", "t occurs between date(2024, 1, 1) and today and a");
  canon("(a + b) occurs before (x + y)", "a + b occurs before (x + y)");
});

test("binders: select/over with 'where', quantifiers with ':', parenthesised unless last", () => {
  canon("select X from a : X > 1", "select X from a where X > 1");
  canon("exists X from a where X > 1, Y from b", "exists X from a : X > 1, Y from b");
  canon("a and (select X from b where X)", "a and select X from b where X");
  canon("(select X from b where X) and a", "(select X from b where X) and a");
  canon("(select X from b where X).count() > 1", "(select X from b where X).count() > 1");
  canon("f((exists X from a), 2)", "f((exists X from a), 2)");
  canon("f(2, (exists X from a))", "f(2, exists X from a)");
  canon("[let X = 1 in X, 2]", "[let X = 1 in X, 2]");
  canon("(let X = 1 in X) + 2", "(let X = 1 in X) + 2");
  canon("(let X = 1 in X) and a", "(let X = 1 in X) and a");
  canon("select X from a where (exists Y from b : Y), Z from c", "select X from a where (exists Y from b : Y), Z from c");
  canon("(sum E.p over E from xEvent where E.c = \"EUR\") > 100", '(sum E.p over E from xEvent where E.c = "EUR") > 100');
  canon("sum (-E) over E from a", "sum (-E) over E from a");
  canon("min X from a where X > 1", "min X from a where X > 1");
  canon("let T = (a or b) in T", "let T = (a or b) in T");
});

test("chain clauses in the order WHAT WHEN COUNT WHERE", () => {
  canon(
    'chain(xEvent,timestamp,[A:WHAT(eventType="x") WHERE(k=1) COUNT(5) WHEN(<8 days before now),B:WHAT(true)])',
    'chain(xEvent, timestamp, [A: WHAT(eventType = "x") WHEN(< 8 days before now) COUNT(5) WHERE(k = 1), B: WHAT(true)])',
  );
});

test("lambdas and the lambda head always parenthesise their parameters", () => {
  canon("p => p.a", "(p) => p.a");
  canon("m.map(x => x * 2)", "m.map((x) => x * 2)");
  canon("m.map((K,G) => mapEntry(K, G.count()))", "m.map((K, G) => mapEntry(K, G.count()))");
});

test("filters, up references, objects, parameters", () => {
  canon('xEvent[productListItems[SKU = "PS" or ^^.eventType = "x"]]', 'xEvent[productListItems[SKU = "PS" or ^^eventType = "x"]]');
  canon('{ "count" : x.count(), "v":[1] }', '{"count": x.count(), "v": [1]}');
  canon("$1.a = $2", "$1.a = $2");
});

test("a 50,000-term disjunction formats without overflowing the stack", () => {
  const src = Array.from({ length: 50_000 }, (_, i) => `person.field${i} = "value${i}"`).join(" or ");
  const tree = parse(src);
  const t0 = performance.now();
  assert.equal(format(tree), src);
  assert.ok(performance.now() - t0 < 10_000); // linear: a quadratic formatter takes minutes
  const sums = Array.from({ length: 50_000 }, (_, i) => `a${i}`).join(" + ");
  assert.equal(format(`x = ${sums}`), `x = ${sums}`);
});

test("a tree that has no text form is refused with a PqlError", () => {
  assert.throws(() => format(q({ type: "Literal", kind: "double", value: Infinity })), { code: "PQL_UNFORMATTABLE" });
});
