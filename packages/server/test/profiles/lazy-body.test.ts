import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { withLazyBody } from "../../src/profiles/lazy-body.js";

describe("withLazyBody", () => {
  it("parses body from json on first read only, as an own enumerable property", () => {
    const json = JSON.stringify({ a: 1, b: { c: "é\u2028" } });
    const r = withLazyBody({ index: 0, kind: "profile", primary: { namespace: "ecid", id: "x" }, identities: [{ namespace: "ecid", id: "x" }], timestamp: null, eventId: null, size: json.length, json });
    assert.equal(typeof Object.getOwnPropertyDescriptor(r, "body")?.get, "function", "not parsed before it is read");
    const first = r.body;
    assert.deepEqual(first, { a: 1, b: { c: "é\u2028" } });
    assert.equal(r.body, first, "parsed once: later reads return the same object");
    assert.equal(Object.getOwnPropertyDescriptor(r, "body")?.value, first, "the getter replaced itself with the value");
    assert.deepEqual({ ...r }.body, first, "a spread copies it");
    assert.ok(Object.keys(r).includes("body"));
  });

  it("throws the JSON error when the text is not JSON, on read", () => {
    const r = withLazyBody({ index: 0, kind: "profile", primary: { namespace: "ecid", id: "x" }, identities: [], timestamp: null, eventId: null, size: 1, json: "{" });
    assert.throws(() => r.body, SyntaxError);
  });
});
