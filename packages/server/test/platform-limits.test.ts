/** platform/limits.ts: each limit, the paths the messages name, and the text depth scan against the parsed depth. */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { BODY_LIMITS, findViolation, LIMIT_CODES, RECORD_LIMITS, textNestsDeeperThan, unstorableReason, type JsonLimits } from "../src/platform/limits.js";

const small: JsonLimits = { maxDepth: 3, maxStringLength: 5, maxKeyLength: 4, maxArrayLength: 3, maxObjectKeys: 2 };

test("each limit: the first violation, with its code and the path of the value", () => {
  const cases: Array<[unknown, string, string]> = [
    [{ a: { b: { c: {} } } }, LIMIT_CODES.depth, "The value at $.a.b.c nests deeper than the limit of 3 levels"],
    [[[[1]]], "", ""],
    [{ s: "toolong" }, LIMIT_CODES.string, "A string at $.s is 7 characters long, over the limit of 5"],
    [{ longkey: 1 }, LIMIT_CODES.key, "A key at $.longkey is 7 characters long, over the limit of 4"],
    [{ a: [1, 2, 3, 4] }, LIMIT_CODES.array, "The array at $.a has 4 items, over the limit of 3"],
    [{ a: 1, b: 2, c: 3 }, LIMIT_CODES.keys, "The object at $ has more than 2 keys, over the limit"],
    [{ a: [0, Infinity] }, LIMIT_CODES.number, "The number at $.a[1] is outside the range of a double-precision number"],
    [{ "x y": ["a\u0000"] }, LIMIT_CODES.unstorable, 'The string at $["x y"][0] contains NUL (\\u0000) and cannot be stored'],
    [{ a: "\ud800" }, LIMIT_CODES.unstorable, "The string at $.a contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored"],
    [{ "\udc00": 1 }, LIMIT_CODES.unstorable, 'The key at $["\\udc00"] contains a lone UTF-16 surrogate (not valid Unicode) and cannot be stored'],
    ["😀 ok", "", ""],
  ];
  for (const [value, code, message] of cases) {
    const v = findViolation(value, small);
    if (code === "") assert.equal(v, null, JSON.stringify(value));
    else assert.deepEqual([v?.code, v?.message], [code, message], JSON.stringify(value));
  }
  assert.equal(findViolation({ a: "\ud800" }, { ...small, allowUnstorable: true }), null);
  assert.equal(unstorableReason("a😀b"), null);
});

test("depth: the root container is level 1; exactly at the limit passes, one more fails", () => {
  const nest = (n: number): unknown => (n === 0 ? 1 : { n: nest(n - 1) });
  assert.equal(findViolation(nest(RECORD_LIMITS.maxDepth), RECORD_LIMITS), null);
  assert.equal(findViolation(nest(RECORD_LIMITS.maxDepth + 1), RECORD_LIMITS)?.code, LIMIT_CODES.depth);
  // A value far deeper than the limit is refused without walking it all (no stack overflow).
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.equal(findViolation(deep, BODY_LIMITS)?.code, LIMIT_CODES.depth);
});

test("the text depth scan agrees with the parsed value's depth, brackets inside strings ignored", () => {
  const depthOf = (v: unknown): number => (typeof v !== "object" || v === null ? 0 : 1 + Math.max(0, ...Object.values(v).map(depthOf)));
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8 }), fc.nat({ max: 9 }), (v, max) => {
      const text = JSON.stringify(v);
      assert.equal(textNestsDeeperThan(text, max), depthOf(v) > max, text);
    }),
    { numRuns: 500 },
  );
  assert.equal(textNestsDeeperThan(`{"a":"${"[".repeat(600)}"}`, 512), false);
  assert.equal(textNestsDeeperThan(`{"a":"\\"${"{".repeat(600)}"}`, 512), false);
  assert.equal(textNestsDeeperThan("[".repeat(513) + "]".repeat(513), 512), true);
  assert.equal(textNestsDeeperThan("[".repeat(512) + "]".repeat(512), 512), false);
});
