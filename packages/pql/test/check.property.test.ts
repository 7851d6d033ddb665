/**
 * Properties of check(): it never throws, whatever the text (random strings,
 * PQL token soup, random well-formed trees, hostile sizes), and every
 * diagnostic it returns lies inside the text with a stable code.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { check } from "../src/check.js";
import { PqlError } from "../src/errors.js";
import { format } from "../src/format.js";
import { queryArbitrary } from "./support/ast-arbitrary.js";

/** Each diagnostic is well formed and points inside `text`. */
function assertWellFormed(text: string): void {
  const lines = text.split("\n");
  for (const d of check(text)) {
    assert.ok(d.severity === "error" || d.severity === "warning", JSON.stringify(d));
    assert.match(d.code, /^PQL_[A-Z_]+$/);
    assert.ok(d.message.length > 0);
    assert.ok(d.line >= 1 && d.line <= lines.length, `line out of range: ${JSON.stringify(d)} in ${JSON.stringify(text)}`);
    assert.ok(d.endLine >= d.line && d.endLine <= lines.length, JSON.stringify(d));
    assert.ok(d.column >= 1 && d.column <= lines[d.line - 1]!.length + 1, JSON.stringify(d));
    assert.ok(d.endColumn >= 1 && d.endColumn <= lines[d.endLine - 1]!.length + 1, JSON.stringify(d));
    if (d.endLine === d.line) assert.ok(d.endColumn >= d.column, JSON.stringify(d));
  }
}

const TOKENS = [
  "person.age", "xEvent", "timestamp", "eventType", "orders", "(", ")", "[", "]", "{", "}", ",", ":", ".", "=>", "^", "^^",
  "and", "OR", "not", "!", "=", "!=", "<", ">=", "+", "-", "*", "/", "%", "in", "notIn", "like", "matches",
  "occurs", "before", "after", "between", "today", "now", "this", "last", "month", "hours", "24",
  "select", "X", "from", "where", "exists", "forall", "let", "sum", "over", "chain", "WHAT", "WHEN", "COUNT", "WHERE",
  '"a"', '"(a+)+"', "3.5", "true", "$1", "count()", ".count()", "getMonth()", "inSegment", "date", "if",
];

describe("check: properties", () => {
  it("never throws on arbitrary strings", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 200 }), (text) => assertWellFormed(text)),
      { numRuns: 500 },
    );
  });

  it("never throws on PQL token soup", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TOKENS), { maxLength: 40 }), (tokens) => assertWellFormed(tokens.join(" "))),
      { numRuns: 1000 },
    );
  });

  it("never throws on random well-formed trees, and formatting keeps the set of codes", () => {
    fc.assert(
      fc.property(queryArbitrary({ maxDepth: 4 }), (q) => {
        const text = format(q);
        assertWellFormed(text);
        // A random tree may print as text PQL refuses (a binding reading a variable declared to its
        // right): formatting that text then throws the error check reports, and nothing else.
        let again: string;
        try {
          again = format(text);
        } catch (err) {
          assert.ok(err instanceof PqlError, String(err));
          assert.ok(check(text).some((d) => d.severity === "error" && d.code === err.code), `${err.code} is among check's errors for ${text}`);
          return;
        }
        assert.deepEqual(
          check(again).map((d) => d.code).sort(),
          check(text).map((d) => d.code).sort(),
          text,
        );
      }),
      { numRuns: 300 },
    );
  });

  it("never throws on hostile sizes and shapes", () => {
    const hostile = [
      "(".repeat(10_000),
      "not ".repeat(10_000) + "a",
      "a" + ".b".repeat(10_000),
      "x" + "[y".repeat(5_000) + "]".repeat(5_000),
      Array.from({ length: 30_000 }, (_, i) => `a${i}`).join(" or "),
      Array.from({ length: 30_000 }, () => "1").join(" - ") + " = 0",
      `name.matches("${"(a+)+".repeat(2_000)}")`,
      `name.matches("${"[".repeat(5_000)}")`,
      `"${"\\u0041".repeat(100_000)}"`,
      "x".repeat(1_000_000),
    ];
    for (const text of hostile) assertWellFormed(text);
  });
});
