/**
 * Differential test of the parser against pinned outcomes (#42): fixtures/parse-snapshots.json
 * holds what the pre-split parser (commit 173d13a) gave for the bench corpus (each AST as JSON)
 * and for ~1,400 generated inputs (the SHA-256 of each AST's JSON, or the error's code, message
 * and positions). The parser, however it is made faster, must give exactly the same.
 * support/gen-parse-snapshots.ts writes the fixture.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parse } from "../src/parser.js";
import { outcomeOf, type ParseSnapshots } from "./support/gen-parse-snapshots.js";

const snapshots = JSON.parse(
  readFileSync(new URL("./fixtures/parse-snapshots.json", import.meta.url), "utf8"),
) as ParseSnapshots;

test("the fixture is a real oracle: the corpus, and generated inputs that parse and that fail", () => {
  assert.equal(snapshots.corpus.length, 250);
  const errors = snapshots.generated.filter((g) => "error" in g.outcome);
  assert.ok(snapshots.generated.length - errors.length >= 400, "generated inputs that parse");
  assert.ok(errors.length >= 400, "generated inputs that fail");
  // Many error kinds, not one repeated.
  const codes = new Set(errors.map((g) => ("error" in g.outcome ? g.outcome.error.code : "")));
  assert.ok(codes.size >= 15, `error codes: ${[...codes].join(", ")}`);
});

test("every corpus expression parses to the same AST (JSON, positions included) as the pre-split parser", () => {
  for (const { text, ast } of snapshots.corpus) {
    assert.equal(JSON.stringify(parse(text)), JSON.stringify(ast), text);
  }
});

test("every generated input gives the same AST or the same error (code, message, positions)", () => {
  let differ = 0;
  for (const { text, outcome } of snapshots.generated) {
    const now = outcomeOf(parse, text);
    if (JSON.stringify(now) === JSON.stringify(outcome)) continue;
    // Report the first few in full; count the rest.
    if (++differ <= 5) {
      const got = "error" in now ? JSON.stringify(now.error) : JSON.stringify(parse(text));
      console.log(`differs: ${JSON.stringify(text)}\n  expected ${JSON.stringify(outcome)}\n  got ${got}`);
    }
  }
  assert.equal(differ, 0, `${differ} of ${snapshots.generated.length} generated inputs differ`);
});

test("a parse that fails leaves nothing behind: the next parse of the same text is unchanged", () => {
  // The parser object is reused between calls (parser.ts): a failure deep inside binders
  // must not leave variables in scope for the next query.
  const failing = "exists X from xEvent : (let Y = X.a in (Y > ";
  assert.throws(() => parse(failing), { code: "PQL_EXPECTED_EXPRESSION" });
  // X and Y are not in scope here: fields of the context, not variables.
  const body = parse("X.a = Y").body as unknown as { left: { object: { type: string } }; right: { type: string } };
  assert.deepEqual([body.left.object.type, body.right.type], ["Field", "Field"]);
});
