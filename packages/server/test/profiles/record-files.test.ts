import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { schemaClassOf } from "../../src/profiles/http/catalog-routes.js";
import { pickFields } from "../../src/profiles/http/access-routes.js";
import { detectRecordFileFormat, parseRecordFile } from "../../src/profiles/record-files.js";

describe("record files", () => {
  it("detects JSON arrays, pretty-printed single objects and NDJSON", () => {
    assert.equal(detectRecordFileFormat('  [{"a":1}]'), "json");
    assert.equal(detectRecordFileFormat('{\n  "a": 1\n}\n'), "json");
    assert.equal(detectRecordFileFormat('{"a":1}\n{"a":2}\n'), "ndjson");
    assert.equal(detectRecordFileFormat('{"a":1}'), "ndjson");
  });

  it("parses NDJSON line by line, skipping blank lines and indexing records", () => {
    const r = parseRecordFile('{"a":1}\n\n{oops\n{"a":3}\n', "ndjson");
    assert.deepEqual(r.records, [{ index: 0, value: { a: 1 } }, { index: 2, value: { a: 3 } }]);
    assert.equal(r.errors.length, 1);
    assert.equal(r.errors[0]!.index, 1);
    assert.equal(r.errors[0]!.code, "MALFORMED_JSON");
    assert.match(r.errors[0]!.message, /^line 3 is not valid JSON: /);
  });

  it("parses a JSON file whole or not at all", () => {
    assert.deepEqual(parseRecordFile('[{"a":1},{"a":2}]', "json").records.map((x) => x.index), [0, 1]);
    assert.deepEqual(parseRecordFile('{"a":1}', "json").records, [{ index: 0, value: { a: 1 } }]);
    const bad = parseRecordFile('[{"a":1},', "json");
    assert.deepEqual(bad.records, []);
    assert.equal(bad.errors[0]!.code, "MALFORMED_FILE");
    assert.equal(bad.errors[0]!.index, -1);
  });
});

describe("HTTP helpers", () => {
  it("derives the XDM class of a dataset from its schemaRef or schemaClass", () => {
    assert.equal(schemaClassOf({ name: "x", schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent" } }), "experienceevent");
    assert.equal(schemaClassOf({ name: "x", schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } }), "profile");
    assert.equal(schemaClassOf({ name: "x", schemaRef: { id: "https://ns.adobe.com/acme/schemas/123" }, schemaClass: "profile" }), "profile");
    assert.throws(() => schemaClassOf({ name: "x", schemaRef: { id: "https://ns.adobe.com/acme/schemas/123" } }),
      (e: unknown) => e instanceof Error && e.message.startsWith('Cannot tell the XDM class of schemaRef.id "https://ns.adobe.com/acme/schemas/123"'));
  });

  it("keeps only the requested fields", () => {
    const entity = { person: { name: { firstName: "A", lastName: "B" } }, loyalty: { tier: "gold" }, x: 1 };
    assert.deepEqual(pickFields(entity, "person.name.firstName,loyalty,missing"), { person: { name: { firstName: "A" } }, loyalty: { tier: "gold" } });
    assert.equal(pickFields(entity, undefined), entity);
    assert.equal(pickFields(entity, " "), entity);
  });
});
