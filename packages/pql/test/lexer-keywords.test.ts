/**
 * The lexer classifies keywords, unit words and built-in names by a hash over
 * the identifier's characters, and reuses its token buffers between scans:
 * these tests pin both against the plain definitions.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { parse } from "../src/parser.js";
import { timeUnitOf, tokenize } from "../src/lexer.js";
import { BUILTINS, canonicalName } from "../src/catalog.js";
import { stripPositions, type Expr } from "../src/ast.js";

const body = (src: string): Expr => stripPositions(parse(src).body);

/** Alternating case: `millennium` → `MiLlEnNiUm`. */
const mixed = (w: string) => [...w].map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join("");

const UNIT_WORDS = [
  "millisecond", "milliseconds", "second", "seconds", "minute", "minutes", "hour", "hours", "day", "days",
  "week", "weeks", "month", "months", "year", "years", "decade", "decades", "century", "centuries",
  "millennium", "millennia", "millenniums", "millenium", "millenia", "milleniums",
];

test("every unit word is a unit in any case, in occurs tails and relative periods", () => {
  for (const word of UNIT_WORDS) {
    const unit = timeUnitOf(word);
    assert.ok(unit, word);
    for (const spelling of [word, word.toUpperCase(), mixed(word)]) {
      const occurs = body(`t occurs < 3 ${spelling} before now`) as { tail: { unit: string } };
      assert.equal(occurs.tail.unit, unit, spelling);
      assert.deepEqual(body(`last ${spelling}`), { type: "RelPeriod", which: "last", unit }, spelling);
    }
  }
});

test("every built-in name is canonicalised in any case, as a method or a function", () => {
  for (const b of BUILTINS) {
    for (const spelling of [b.name, b.name.toUpperCase(), b.name.toLowerCase(), mixed(b.name)]) {
      if (b.form === "method") {
        const e = body(`x.${spelling}()`) as { type: string; name: string };
        assert.equal(e.type, "Method", spelling);
        assert.equal(e.name, canonicalName(spelling, "method"), spelling);
        assert.equal(e.name, b.name, spelling);
      } else {
        const e = body(`${spelling}()`) as { type: string; name: string };
        assert.equal(e.type, "Call", spelling);
        assert.equal(e.name, b.name, spelling);
      }
    }
  }
  // A name that is a built-in in the other form only keeps its spelling.
  assert.deepEqual(body("x.InSegment()"), { type: "Method", receiver: { type: "Field", name: "x" }, name: "InSegment", args: [] });
  assert.deepEqual(body("STARTSWITH()"), { type: "Call", name: "STARTSWITH", args: [] });
});

test("identifiers that merely resemble keywords are plain names", () => {
  for (const name of ["an", "ands", "_and", "and1", "nowx", "todays", "millisecondss", "lastt", "xevents", "chains", "nul"]) {
    assert.deepEqual(body(name), { type: "Field", name }, name);
    assert.deepEqual(tokenize(name)[0]!.lower, name.toLowerCase());
  }
  assert.deepEqual(body("AND1 = 1"), {
    type: "Binary",
    op: "=",
    left: { type: "Field", name: "AND1" },
    right: { type: "Literal", kind: "integer", value: 1 },
  });
});

test("token buffers are reused safely across large, small and failing parses", () => {
  const big = Array.from({ length: 20_000 }, (_, i) => `a${i} = "s${i}"`).join(" or ");
  const small = 'x = "y"';
  const smallAst = body(small);
  assert.equal(parse(big).end, big.length);
  assert.deepEqual(body(small), smallAst);
  assert.throws(() => parse(`${big} and (`), { code: "PQL_EXPECTED_EXPRESSION" });
  assert.deepEqual(body(small), smallAst);
  assert.throws(() => parse('a = "unterminated'), { code: "PQL_UNTERMINATED_STRING" });
  assert.deepEqual(body('"a\\nb" = x'), {
    type: "Binary",
    op: "=",
    left: { type: "Literal", kind: "string", value: "a\nb" },
    right: { type: "Field", name: "x" },
  });
});
