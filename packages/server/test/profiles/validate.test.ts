import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { DEFAULT_LIMITS, parseTimestamp, validateRecord, validateRecords, type ValidationTarget } from "../../src/profiles/validate.js";

const profileDs: ValidationTarget = { id: "ds-profile", schemaClass: "profile", identityFields: [] };
const eventDs: ValidationTarget = { id: "ds-event", schemaClass: "experienceevent", identityFields: [] };

function errorsOf(raw: unknown, target: ValidationTarget = profileDs, limits = DEFAULT_LIMITS) {
  const r = validateRecord(raw, 3, target, limits);
  assert.equal(r.ok, false, "expected the record to be rejected");
  return r.ok ? [] : r.errors;
}

describe("validateRecord: identities", () => {
  it("accepts an identityMap and picks the marked primary first", () => {
    const r = validateRecord({ identityMap: { ECID: [{ id: "e1" }], Email: [{ id: "a@x.com", primary: true }] } }, 0, profileDs);
    assert.ok(r.ok);
    assert.deepEqual(r.record.primary, { namespace: "email", id: "a@x.com" });
    assert.deepEqual(r.record.identities, [{ namespace: "email", id: "a@x.com" }, { namespace: "ecid", id: "e1" }]);
    assert.equal(r.record.timestamp, null);
  });

  it("uses the first identity when none is marked primary", () => {
    const r = validateRecord({ identityMap: { CRMID: [{ id: "c1" }, { id: "c2" }] } }, 0, profileDs);
    assert.ok(r.ok);
    assert.deepEqual(r.record.primary, { namespace: "crmid", id: "c1" });
  });

  it("rejects a record without identity, naming the record", () => {
    const errors = errorsOf({ person: { name: { firstName: "Ann" } } });
    assert.deepEqual(errors, [{ index: 3, code: "IDENTITY_MISSING", message: "record has no identity: send an identityMap with at least one id" }]);
  });

  it("rejects empty ids with the path of the entry", () => {
    const errors = errorsOf({ identityMap: { ECID: [{ id: "  " }] } });
    assert.deepEqual(errors, [{ index: 3, code: "IDENTITY_ID_EMPTY", path: "identityMap.ECID[0].id", message: "identityMap.ECID[0].id must be a non-empty string" }]);
  });

  it("rejects a malformed identityMap", () => {
    assert.equal(errorsOf({ identityMap: [] })[0]!.code, "IDENTITY_MAP_INVALID");
    assert.deepEqual(errorsOf({ identityMap: { ECID: [] } })[0], { index: 3, code: "IDENTITY_MAP_INVALID", path: "identityMap.ECID",
      message: "identityMap.ECID must be a non-empty array of {id, primary?, authenticatedState?}" });
    assert.equal(errorsOf({ identityMap: { ECID: [{ id: "x", authenticatedState: "maybe" }] } })[0]!.path, "identityMap.ECID[0].authenticatedState");
    assert.equal(errorsOf({ identityMap: { ECID: [{ id: "x", primary: "yes" }] } })[0]!.path, "identityMap.ECID[0].primary");
  });

  it("rejects more than one primary identity", () => {
    const errors = errorsOf({ identityMap: { ECID: [{ id: "e", primary: true }], Email: [{ id: "m", primary: true }] } });
    assert.deepEqual(errors, [{ index: 3, code: "IDENTITY_MULTIPLE_PRIMARY", path: "identityMap", message: "record marks 2 identities as primary; at most one is allowed" }]);
  });

  it("treats namespace codes case-insensitively and de-duplicates identities", () => {
    const r = validateRecord({ identityMap: { ECID: [{ id: "e" }], ecid: [{ id: "e" }] } }, 0, profileDs);
    assert.ok(r.ok);
    assert.deepEqual(r.record.identities, [{ namespace: "ecid", id: "e" }]);
  });

  it("reads identity fields declared by the dataset", () => {
    const target: ValidationTarget = { id: "d", schemaClass: "profile", identityFields: [{ path: "personalEmail.address", namespace: "Email", primary: true }] };
    const r = validateRecord({ personalEmail: { address: "z@x.com" }, identityMap: { ECID: [{ id: "e" }] } }, 0, target);
    assert.ok(r.ok);
    assert.deepEqual(r.record.primary, { namespace: "email", id: "z@x.com" });
    const bad = validateRecord({ personalEmail: { address: 42 } }, 1, target);
    assert.ok(!bad.ok);
    assert.deepEqual(bad.errors, [{ index: 1, code: "IDENTITY_FIELD_INVALID", path: "personalEmail.address", message: "identity field personalEmail.address (Email) must be a non-empty string" }]);
  });

  it("rejects a record with more identities than a graph may hold", () => {
    const ids = Array.from({ length: 4 }, (_, i) => ({ id: `e${i}` }));
    const errors = errorsOf({ identityMap: { ECID: ids } }, profileDs, { ...DEFAULT_LIMITS, maxIdentitiesPerGraph: 3 });
    assert.deepEqual(errors, [{ index: 3, code: "IDENTITY_LIMIT_EXCEEDED", path: "identityMap", message: "record carries 4 identities; the limit per identity graph is 3" }]);
  });
});

describe("validateRecord: events and classes", () => {
  const id = { ECID: [{ id: "e1" }] };

  it("accepts an event with ISO timestamp and normalises it", () => {
    const r = validateRecord({ _id: "ev1", timestamp: "2026-11-20T10:00:00+01:00", eventType: "web.webpagedetails.pageViews", identityMap: id }, 0, eventDs);
    assert.ok(r.ok);
    assert.equal(r.record.timestamp, Date.UTC(2026, 10, 20, 9));
    assert.equal(r.record.body["timestamp"], "2026-11-20T09:00:00.000Z");
    assert.equal(r.record.eventId, "ev1");
  });

  it("accepts epoch milliseconds", () => {
    const r = validateRecord({ _id: "ev1", timestamp: 1_700_000_000_000, identityMap: id }, 0, eventDs);
    assert.ok(r.ok);
    assert.equal(r.record.timestamp, 1_700_000_000_000);
  });

  it("requires _id and timestamp on events", () => {
    const errors = errorsOf({ identityMap: id }, eventDs);
    assert.deepEqual(errors.map((e) => [e.code, e.path]), [["EVENT_ID_MISSING", "_id"], ["EVENT_TIMESTAMP_MISSING", "timestamp"]]);
  });

  it("rejects zone-less or garbage timestamps", () => {
    for (const ts of ["2026-11-20T10:00:00", "yesterday", -5, 1.5, true]) {
      const errors = errorsOf({ _id: "x", timestamp: ts, identityMap: id }, eventDs);
      assert.equal(errors[0]!.code, "TIMESTAMP_INVALID", `timestamp ${String(ts)}`);
      assert.equal(errors[0]!.path, "timestamp");
    }
  });

  it("takes a profile record's time from _repo.modifyDate", () => {
    const r = validateRecord({ identityMap: id, _repo: { modifyDate: "2026-01-02T03:04:05Z" } }, 0, profileDs);
    assert.ok(r.ok);
    assert.equal(r.record.timestamp, Date.UTC(2026, 0, 2, 3, 4, 5));
    assert.equal(errorsOf({ identityMap: id, _repo: { modifyDate: "soon" } })[0]!.path, "_repo.modifyDate");
  });

  it("rejects an event sent to a profile dataset and a declared class mismatch", () => {
    assert.deepEqual(errorsOf({ _id: "x", timestamp: 1, eventType: "commerce.purchases", identityMap: id }), [{ index: 3, code: "WRONG_DATASET_CLASS", path: "eventType",
      message: "record has eventType, an experience event field, but dataset ds-profile holds profile records" }]);
    const r = validateRecord({ _id: "x", timestamp: 1, identityMap: id }, 0, eventDs, DEFAULT_LIMITS, "profile");
    assert.ok(!r.ok);
    assert.equal(r.errors[0]!.message, "record declares class profile but dataset ds-event holds experienceevent records");
  });

  it("rejects oversized records against the class limit", () => {
    const big = { _id: "x", timestamp: 1, identityMap: id, blob: "a".repeat(10 * 1024) };
    const errors = errorsOf(big, eventDs);
    assert.equal(errors[0]!.code, "RECORD_TOO_LARGE");
    assert.match(errors[0]!.message, /^record is \d+ bytes; the limit for an experience event is 10240 bytes$/);
    // The same record is fine as a profile record (100 KB limit) apart from eventType rules.
    assert.ok(validateRecord({ identityMap: id, blob: "a".repeat(10 * 1024) }, 0, profileDs).ok);
    assert.equal(errorsOf({ identityMap: id, blob: "a".repeat(200) }, profileDs, { ...DEFAULT_LIMITS, maxProfileBytes: 100 })[0]!.code, "RECORD_TOO_LARGE");
  });

  it("rejects non-objects and ingested segmentMembership.ups; external audiences' memberships are checked", () => {
    assert.deepEqual(errorsOf(null), [{ index: 3, code: "RECORD_NOT_OBJECT", message: "record 3 must be a JSON object, got null" }]);
    assert.equal(errorsOf([1])[0]!.message, "record 3 must be a JSON object, got an array");
    assert.deepEqual(errorsOf({ identityMap: id, segmentMembership: { ups: {} } }), [{
      index: 3, code: "SEGMENT_MEMBERSHIP_READ_ONLY", path: "segmentMembership.ups",
      message: "segmentMembership.ups is maintained by the segmentation service and cannot be ingested; external audiences' memberships go under their own namespace",
    }]);
    const invalid: [unknown, string, string][] = [
      [[], "segmentMembership", "segmentMembership must be an object of namespaces"],
      [{ AAM: "x" }, "segmentMembership.AAM", "a namespace must map audience ids to {status, lastQualificationTime}"],
      [{ AAM: { a1: { status: "maybe" } } }, "segmentMembership.AAM.a1", 'a membership needs status "realized" or "exited"'],
      [{ AAM: { a1: { status: "exited", lastQualificationTime: "yesterday" } } }, "segmentMembership.AAM.a1.lastQualificationTime", "lastQualificationTime must be an ISO-8601 time"],
    ];
    for (const [sm, path, message] of invalid) {
      assert.deepEqual(errorsOf({ identityMap: id, segmentMembership: sm }), [{ index: 3, code: "SEGMENT_MEMBERSHIP_INVALID", path, message }]);
    }
    assert.ok(validateRecord({ identityMap: id, segmentMembership: {} }, 3, profileDs).ok);
    assert.ok(validateRecord({ identityMap: id, segmentMembership: { CustomerAudienceUpload: { vip: { status: "realized", lastQualificationTime: "2026-11-20T10:00:00Z" } } } }, 3, profileDs).ok);
  });

  it("validateRecords keeps good records and indexes errors by position", () => {
    const { valid, errors } = validateRecords([{ identityMap: id }, { nope: 1 }, { identityMap: { X: [{ id: "y" }] } }], profileDs, DEFAULT_LIMITS, undefined, 10);
    assert.deepEqual(valid.map((v) => v.index), [10, 12]);
    assert.deepEqual(errors.map((e) => [e.index, e.code]), [[11, "IDENTITY_MISSING"]]);
  });
});

describe("parseTimestamp", () => {
  it("round-trips any ISO string produced by Date", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), (ms) => {
      assert.equal(parseTimestamp(new Date(ms).toISOString()), ms);
      assert.equal(parseTimestamp(ms), ms);
    }));
  });
});
