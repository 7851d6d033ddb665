/** The PQL editor's pure parts: the display lexer, diagnostic segments and the "ignore year" helper. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { check, classify } from "@segmentd/pql";
import { tokenize } from "../src/editor/highlight.js";
import { offsetOf, segmentsOf } from "../src/editor/segments.js";
import { ignoreYearCondition, isFieldPath, withIgnoreYear } from "../src/editor/ignore-year.js";

describe("tokenize", () => {
  const samples = [
    'homeAddress.countryCode = "US"',
    'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 2 hours before now)])',
    'person.name.firstName.startsWith("A") and\n  loyalty.points >= 1.5e3',
    '"unfinished string',
    "weird § chars ¤ and tabs\t\t",
  ];
  it("covers every character exactly once, so the overlay lines up with the textarea", () => {
    for (const s of samples) assert.equal(tokenize(s).map((t) => t.text).join(""), s);
  });
  it("tells keywords, calls, fields, strings, numbers and operators apart", () => {
    const kinds = (s: string) => tokenize(s).filter((t) => t.kind !== "space").map((t) => `${t.kind}:${t.text}`);
    assert.deepEqual(kinds('a.b >= 10 and c = currentMonth() or d = "x"'), [
      "field:a", "punct:.", "field:b", "operator:>=", "number:10", "keyword:and", "field:c", "operator:=", "function:currentMonth", "punct:(", "punct:)",
      "keyword:or", "field:d", "operator:=", 'string:"x"',
    ]);
    // A builtin name not followed by "(" is an ordinary field step.
    assert.deepEqual(kinds("person.count"), ["field:person", "punct:.", "field:count"]);
    assert.deepEqual(kinds("x.count()").slice(2, 3), ["function:count"]);
  });
  it("keeps an unfinished string as one string token while the user types", () => {
    const t = tokenize('a = "US');
    assert.deepEqual(t[t.length - 1], { kind: "string", text: '"US' });
  });
});

describe("diagnostic segments", () => {
  it("converts 1-based line/column to offsets, clamped to the line", () => {
    const text = "ab\ncdef\ng";
    assert.equal(offsetOf(text, 1, 1), 0);
    assert.equal(offsetOf(text, 2, 3), 5);
    assert.equal(offsetOf(text, 2, 99), 7);
    assert.equal(offsetOf(text, 9, 1), text.length);
  });
  it("marks exactly the characters a diagnostic covers and keeps the text intact", () => {
    const text = 'a = unknownFn("x")';
    const segs = segmentsOf(text, [{ line: 1, column: 5, endLine: 1, endColumn: 14 }]);
    assert.equal(segs.map((s) => s.text).join(""), text);
    assert.equal(segs.filter((s) => s.error).map((s) => s.text).join(""), "unknownFn");
  });
  it("puts a zero-width marker where a diagnostic has no extent", () => {
    const text = "a = ";
    const segs = segmentsOf(text, [{ line: 1, column: 5, endLine: 1, endColumn: 5 }]);
    assert.deepEqual(segs[segs.length - 1], { kind: "marker", text: "", error: true });
    assert.equal(segs.map((s) => s.text).join(""), text);
  });
  it("draws the real checker's diagnostics where they point", () => {
    const text = 'homeAddress.countryCode = "US" and';
    const d = check(text);
    assert.ok(d.length > 0);
    const segs = segmentsOf(text, d);
    assert.ok(segs.some((s) => s.error), "an error is visible");
  });
});

describe("ignore year helper", () => {
  it("writes the month/day condition for a field", () => {
    assert.equal(ignoreYearCondition("person.birthDate"), "person.birthDate.getMonth() = currentMonth() and person.birthDate.getDayOfMonth() = currentDayOfMonth()");
  });
  it("adds to an existing expression with and, parenthesising it", () => {
    assert.equal(withIgnoreYear("", "person.birthDate"), ignoreYearCondition("person.birthDate"));
    assert.equal(withIgnoreYear('a = 1 or b = 2', "x.d"), `(a = 1 or b = 2) and ${ignoreYearCondition("x.d")}`);
  });
  it("refuses what is not a field path", () => {
    assert.equal(isFieldPath("person.birthDate"), true);
    assert.equal(isFieldPath("person..birthDate"), false);
    assert.throws(() => ignoreYearCondition('x") or true or ("'), /not a field path/);
  });
  it("produces valid PQL that classifies as ignore-year, hence batch-only", () => {
    const text = withIgnoreYear('homeAddress.countryCode = "US"', "person.birthDate");
    assert.deepEqual(check(text).filter((d) => d.severity === "error"), []);
    const c = classify(text);
    assert.equal(c.ignoreYear, true);
    assert.equal(c.synchronous, false);
    assert.equal(c.continuous, false);
  });
});
