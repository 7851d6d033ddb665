/** RFC 6902 JSON Patch: the operations and their failure cases (the input is never modified). */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { applyPatch, JsonPatchError, type JsonValue } from "../src/services/json-patch.js";

test("RFC 6902 appendix examples", () => {
  assert.deepEqual(applyPatch({ foo: "bar" }, [{ op: "add", path: "/baz", value: "qux" }]), { foo: "bar", baz: "qux" });
  assert.deepEqual(applyPatch({ foo: ["bar", "baz"] }, [{ op: "add", path: "/foo/1", value: "qux" }]), { foo: ["bar", "qux", "baz"] });
  assert.deepEqual(applyPatch({ foo: ["bar"] }, [{ op: "add", path: "/foo/-", value: "x" }]), { foo: ["bar", "x"] });
  assert.deepEqual(applyPatch({ baz: "qux", foo: "bar" }, [{ op: "remove", path: "/baz" }]), { foo: "bar" });
  assert.deepEqual(applyPatch({ baz: "qux" }, [{ op: "replace", path: "/baz", value: "boo" }]), { baz: "boo" });
  assert.deepEqual(applyPatch({ foo: { bar: "baz", waldo: "fred" }, qux: { corge: "grault" } }, [{ op: "move", from: "/foo/waldo", path: "/qux/thud" }]),
    { foo: { bar: "baz" }, qux: { corge: "grault", thud: "fred" } });
  assert.deepEqual(applyPatch({ a: { b: 1 } }, [{ op: "copy", from: "/a", path: "/c" }]), { a: { b: 1 }, c: { b: 1 } });
  assert.deepEqual(applyPatch({ "a/b": 1, "m~n": 2 }, [{ op: "replace", path: "/a~1b", value: 3 }, { op: "remove", path: "/m~0n" }]), { "a/b": 3 });
  assert.deepEqual(applyPatch({ baz: "qux", foo: ["a", 2, "c"] }, [{ op: "test", path: "/foo", value: ["a", 2, "c"] }]), { baz: "qux", foo: ["a", 2, "c"] });
});

test("failures name the operation and leave the input unchanged", () => {
  const doc = { a: 1, list: [1] };
  const cases: [Parameters<typeof applyPatch>[1], string][] = [
    [[{ op: "remove", path: "/missing" }], 'operation 0: path "/missing" does not exist'],
    [[{ op: "replace", path: "/missing", value: 1 }], 'operation 0: path "/missing" does not exist'],
    [[{ op: "add", path: "/a", value: 2 }, { op: "test", path: "/a", value: 1 }], 'operation 1: test failed: the value at "/a" differs'],
    [[{ op: "add", path: "/list/5", value: 1 }], 'operation 0: index 5 is out of range in "/list/5"'],
    [[{ op: "add", path: "no-slash", value: 1 }], 'operation 0: "no-slash" is not a JSON pointer (it must start with "/")'],
    [[{ op: "move", from: "/list", path: "/list/0" }], "operation 0: cannot move a value into itself"],
  ];
  for (const [ops, message] of cases) {
    assert.throws(() => applyPatch(doc, ops), (e: unknown) => e instanceof JsonPatchError && e.message === message);
  }
  assert.deepEqual(doc, { a: 1, list: [1] });
});

test("__proto__ and constructor paths are refused and never reach Object.prototype or Object", () => {
  const cases: [Parameters<typeof applyPatch>[1], string][] = [
    [[{ op: "add", path: "/__proto__/polluted", value: true }], 'operation 0: path "/__proto__/polluted" is refused: "__proto__" may not be patched'],
    [[{ op: "add", path: "/a/__proto__", value: { polluted: true } }], 'operation 0: path "/a/__proto__" is refused: "__proto__" may not be patched'],
    [[{ op: "copy", from: "/a", path: "/__proto__" }], 'operation 0: path "/__proto__" is refused: "__proto__" may not be patched'],
    [[{ op: "add", path: "/a/constructor/prototype/polluted", value: true }], 'operation 0: path "/a/constructor/prototype/polluted" does not exist'],
    // Inherited names are not there (fast-json-patch alone counts them as present).
    [[{ op: "add", path: "/a/constructor/polluted", value: true }], 'operation 0: path "/a/constructor/polluted" does not exist'],
    [[{ op: "remove", path: "/a/toString" }], 'operation 0: path "/a/toString" does not exist'],
    [[{ op: "replace", path: "/constructor", value: 1 }], 'operation 0: path "/constructor" does not exist'],
    [[{ op: "move", from: "/a/hasOwnProperty", path: "/b" }], 'operation 0: path "/a/hasOwnProperty" does not exist'],
  ];
  for (const [ops, message] of cases) {
    const doc = { a: {} };
    assert.throws(() => applyPatch(doc, ops), (e: unknown) => e instanceof JsonPatchError && e.message === message, message);
    assert.deepEqual(doc, { a: {} });
  }
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal((Object as unknown as Record<string, unknown>).polluted, undefined);
  // A key named like an inherited member can still be added as the document's own.
  const out = applyPatch({ a: {} }, [{ op: "add", path: "/a/constructor", value: 1 }]);
  assert.deepEqual(out, { a: { constructor: 1 } });
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
});

test("array indices, root operations and the value's independence from the caller", () => {
  assert.throws(() => applyPatch({ l: [1, 2] }, [{ op: "remove", path: "/l/2" }]), (e: unknown) => e instanceof JsonPatchError && e.message === 'operation 0: index 2 is out of range in "/l/2"');
  assert.throws(() => applyPatch({ l: [1, 2] }, [{ op: "replace", path: "/l/01", value: 0 }]), (e: unknown) => e instanceof JsonPatchError && e.message === 'operation 0: "01" is not an array index in "/l/01"');
  assert.throws(() => applyPatch({ l: [1] }, [{ op: "remove", path: "" }]), (e: unknown) => e instanceof JsonPatchError && e.message === "operation 0: cannot remove the whole document");
  assert.throws(() => applyPatch({ l: [1] }, [{ op: "copy", path: "/m" } as never]), (e: unknown) => e instanceof JsonPatchError && e.message === 'operation 0: "from" is required');
  assert.throws(() => applyPatch({ l: [1] }, [{ op: "add", path: "/m" }]), (e: unknown) => e instanceof JsonPatchError && e.message === 'operation 0: "value" is required');
  assert.throws(() => applyPatch({ l: [1] }, [{ op: "merge", path: "/m", value: 1 } as never]), (e: unknown) => e instanceof JsonPatchError && e.message === 'operation 0: unknown op "merge"');
  assert.deepEqual(applyPatch({ l: [1, 2] }, [{ op: "replace", path: "/l/1", value: 3 }, { op: "remove", path: "/l/0" }]), { l: [3] });
  assert.deepEqual(applyPatch({ a: 1 }, [{ op: "replace", path: "", value: [1] }, { op: "add", path: "/-", value: 2 }]), [1, 2]);
  const value = { deep: [1] };
  const out = applyPatch({}, [{ op: "add", path: "/v", value }, { op: "add", path: "/v/deep/-", value: 2 }]);
  assert.deepEqual(out, { v: { deep: [1, 2] } });
  assert.deepEqual(value, { deep: [1] });
});

test("property: add then remove of a new key restores the document", () => {
  fc.assert(
    fc.property(fc.dictionary(fc.string().filter((k) => k !== "__new"), fc.jsonValue()), fc.jsonValue(), (d, v) => {
      const doc = d as { [k: string]: JsonValue };
      const out = applyPatch(doc, [{ op: "add", path: "/__new", value: v as JsonValue }, { op: "remove", path: "/__new" }]);
      assert.deepEqual(out, structuredClone(doc));
    }),
  );
});
