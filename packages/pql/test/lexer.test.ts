import { test } from "node:test";
import assert from "node:assert/strict";
import { tokenize, timeUnitOf } from "../src/lexer.js";
import { PqlError } from "../src/errors.js";

const kinds = (src: string) => tokenize(src).map((t) => [t.kind, t.text]);
const values = (src: string) => tokenize(src).slice(0, -1).map((t) => t.value);

test("identifiers, punctuation and operators with their offsets", () => {
  const toks = tokenize("_acme.a1 >= $12 => x!=y");
  assert.deepEqual(
    toks.map((t) => [t.kind, t.text, t.start, t.end]),
    [
      ["ident", "_acme", 0, 5],
      ["punct", ".", 5, 6],
      ["ident", "a1", 6, 8],
      ["punct", ">=", 9, 11],
      ["param", "$12", 12, 15],
      ["punct", "=>", 16, 18],
      ["ident", "x", 19, 20],
      ["punct", "!=", 20, 22],
      ["ident", "y", 22, 23],
      ["eof", "", 23, 23],
    ],
  );
  assert.equal(toks[4]!.value, 12);
});

test("identifiers keep their spelling and carry a lower-case copy for keywords", () => {
  const [t] = tokenize("CHAIN");
  assert.equal(t!.text, "CHAIN");
  assert.equal(t!.lower, "chain");
});

test("all bracket and operator symbols", () => {
  assert.deepEqual(
    kinds("( ) [ ] { } , : . = < > + - * / % ! ^ <= != >=").map(([, t]) => t),
    ["(", ")", "[", "]", "{", "}", ",", ":", ".", "=", "<", ">", "+", "-", "*", "/", "%", "!", "^", "<=", "!=", ">=", ""],
  );
});

test("integers, doubles, leading-dot and exponent forms", () => {
  assert.deepEqual(values("0 412 3.14 1e3 2.02E-12 2.02E12 1e+21"), [0, 412, 3.14, 1000, 2.02e-12, 2.02e12, 1e21]);
  assert.deepEqual(values("= .45"), ["=", 0.45]);
  assert.deepEqual(
    tokenize("5 5.0 1e3").slice(0, -1).map((t) => t.kind),
    ["int", "double", "double"],
  );
});

test("a dot after an operand is member access, after an operator it starts a number", () => {
  assert.deepEqual(kinds("a.5").slice(0, 3), [["ident", "a"], ["punct", "."], ["int", "5"]]);
  assert.deepEqual(kinds("x or .5").slice(0, 3), [["ident", "x"], ["ident", "or"], ["double", ".5"]]);
  assert.deepEqual(kinds("[.5]").slice(0, 3), [["punct", "["], ["double", ".5"], ["punct", "]"]]);
  // `1.foo` is the integer 1 followed by `.foo`, not a malformed double.
  assert.deepEqual(kinds("1.foo").slice(0, 3), [["int", "1"], ["punct", "."], ["ident", "foo"]]);
});

test("the minus sign is never part of a number token", () => {
  assert.deepEqual(kinds("-5"), [["punct", "-"], ["int", "5"], ["eof", ""]]);
});

test("the largest safe integer is accepted; one more is refused", () => {
  assert.deepEqual(values("9007199254740991"), [9007199254740991]);
  assert.throws(() => tokenize("9007199254740992"), { code: "PQL_NUMBER_RANGE" });
  assert.throws(() => tokenize("1e999"), { code: "PQL_NUMBER_RANGE", message: "Number '1e999' is too large" });
});

test("strings decode the Java escapes", () => {
  assert.deepEqual(values(String.raw`"a\\b\"c\nd\te\rf\bg\fh\u00e9\u0041"`), ["a\\b\"c\nd\te\rf\bg\fhéA"]);
  assert.deepEqual(values('"" "日本"'), ["", "日本"]);
  assert.deepEqual(values(String.raw`"\\w+"`), ["\\w+"]);
});

test("strings may span lines and hold any non-escape character", () => {
  assert.deepEqual(values('"a\nb\'c"'), ["a\nb'c"]);
});

test("whitespace of all kinds separates tokens", () => {
  assert.deepEqual(kinds("a\t\r\n\u00a0b").map(([, t]) => t), ["a", "b", ""]);
});

test("lexical errors carry code and position", () => {
  const cases: [string, string, number][] = [
    ['"abc', "PQL_UNTERMINATED_STRING", 0],
    ['"abc\\', "PQL_UNTERMINATED_STRING", 0],
    ['"\\x"', "PQL_BAD_ESCAPE", 1],
    ['"\\uZZZZ"', "PQL_BAD_ESCAPE", 1],
    ["'a'", "PQL_SINGLE_QUOTE", 0],
    ["a == b", "PQL_DOUBLE_EQUALS", 2],
    ["a // b", "PQL_COMMENT", 2],
    ["a /* b */", "PQL_COMMENT", 2],
    ["a -- b", "PQL_COMMENT", 2],
    ["# b", "PQL_COMMENT", 0],
    ["$", "PQL_BAD_PARAMETER", 0],
    ["$0", "PQL_BAD_PARAMETER", 0],
    ["12abc", "PQL_BAD_NUMBER", 0],
    ["1e+", "PQL_BAD_NUMBER", 0],
    ["a ~ b", "PQL_UNEXPECTED_CHARACTER", 2],
    ["a || b", "PQL_UNEXPECTED_CHARACTER", 2],
  ];
  for (const [src, code, start] of cases) {
    assert.throws(
      () => tokenize(src),
      (e: unknown) => e instanceof PqlError && e.code === code && e.start === start,
      `${src} should fail with ${code} at ${start}`,
    );
  }
});

test("non-printable and astral characters are named readably", () => {
  assert.throws(() => tokenize("a \u0007"), { message: "Unexpected character '\\u0007'" });
  assert.throws(() => tokenize("a 😀"), { message: "Unexpected character '😀'" });
});

test("time unit words: singular, plural, any case, and the legacy 'millenium'", () => {
  assert.equal(timeUnitOf("Days"), "day");
  assert.equal(timeUnitOf("centuries"), "century");
  assert.equal(timeUnitOf("millenium"), "millennium");
  assert.equal(timeUnitOf("millennia"), "millennium");
  assert.equal(timeUnitOf("MILLISECONDS"), "millisecond");
  assert.equal(timeUnitOf("fortnight"), undefined);
});

test("a 1 MB input lexes in linear time", () => {
  const src = Array.from({ length: 50_000 }, (_, i) => `f${i} = "v${i}"`).join(" or ");
  const t0 = performance.now();
  const toks = tokenize(src);
  assert.equal(toks.length, 50_000 * 4 - 1 + 1);
  assert.ok(performance.now() - t0 < 10_000); // linear: a quadratic lexer takes minutes
});
