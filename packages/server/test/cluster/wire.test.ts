// What crosses between edge nodes and the hub: subject tokens round-trip any id, and the hub
// refuses a message that is not what an edge node writes (it is dropped and logged, never
// half-applied).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { configSubject, projectionSubject, token, untoken } from "../../src/cluster/subjects.js";
import { decodeEdgeMessage, encode, recordOf, type EdgeEventMessage } from "../../src/cluster/wire.js";

const event: EdgeEventMessage = {
  v: 1,
  kind: "event",
  orgId: "ORG@AdobeOrg",
  sandboxName: "prod",
  datasetId: "ds1",
  location: "site-a",
  newAtLocation: true,
  identity: { namespace: "crmid", id: "dora" },
  record: { kind: "experienceevent", json: JSON.stringify({ _id: "e1", eventType: "page.view" }), primary: { namespace: "crmid", id: "dora" }, identities: [{ namespace: "crmid", id: "dora" }], timestamp: 1, eventId: "e1" },
  edgeChanges: [{ definitionId: "d1", status: "realized", at: 1 }],
};

describe("cluster wire format", () => {
  it("a subject token holds any string and reads back the same", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), (s) => {
        const t = token(s);
        assert.match(t, /^[A-Za-z0-9_~-]+$/);
        assert.equal(untoken(t), s);
      }),
    );
    assert.equal(token("a.b*c>d e"), "a~2eb~2ac~3ed~20e");
    assert.equal(configSubject("definition", "sb.1", "id>2"), "segmentd.cfg.definition.sb~2e1.id~3e2");
    assert.equal(projectionSubject("site-a", "org\u0000sb", "42"), "segmentd.proj.site-a.org~00sb.42");
  });

  it("an event message decodes to the record validation made at the edge", () => {
    const m = decodeEdgeMessage(encode(event));
    assert.ok(!("error" in m));
    assert.equal(m.kind, "event");
    const r = recordOf(m as EdgeEventMessage);
    assert.deepEqual(r.body, { _id: "e1", eventType: "page.view" });
    assert.equal(r.eventId, "e1");
    assert.equal(r.size, Buffer.byteLength(event.record.json));
  });

  it("refuses what an edge node does not write, saying why", () => {
    const bad = (v: unknown) => decodeEdgeMessage(typeof v === "string" ? Buffer.from(v) : encode(v));
    assert.deepEqual(bad("{not json"), { error: "not JSON" });
    assert.deepEqual(bad({ ...event, v: 2 }), { error: "not an edge message of version 1" });
    assert.deepEqual(bad({ ...event, kind: "other" }), { error: "unknown kind other" });
    assert.deepEqual(bad({ ...event, identity: { namespace: "crmid" } }), { error: "bad event envelope" });
    assert.deepEqual(bad({ ...event, record: { ...event.record, json: "[1]" } }), { error: "record body is not an object" });
    assert.deepEqual(bad({ ...event, record: { ...event.record, json: "{" } }), { error: "record body is not JSON" });
    assert.deepEqual(bad({ ...event, edgeChanges: [{ definitionId: "d", status: "maybe", at: 1 }] }), { error: "bad edge changes" });
    assert.deepEqual(bad({ v: 1, kind: "memberships", orgId: "o", sandboxName: "s", location: "l", changes: [{ profileId: 1 }] }), { error: "bad membership changes" });
  });
});
