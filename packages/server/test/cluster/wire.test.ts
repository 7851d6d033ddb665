// What crosses between edge nodes and the hub: subject tokens round-trip any id, and the hub
// refuses a message that is not what an edge node writes (it is dropped and logged, never
// half-applied).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { configSubject, projectionSubject, token, untoken } from "../../src/cluster/subjects.js";
import { decodeEdgeMessage, encode, encodeEventMessage, recordOf, type EdgeEventMessage } from "../../src/cluster/wire.js";
import type { ForwardItem } from "../../src/edge/hub-forwarder.js";
import type { JsonObject, ValidRecord } from "../../src/profiles/types.js";
import type { TenantContext } from "../../src/services/tenancy.js";

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
    assert.equal(r.size, Buffer.byteLength((event.record as { json: string }).json));
  });

  it("an event message of version 2 carries the record's JSON once and decodes to the same record", () => {
    // Quotes, escapes, non-ASCII, a lone surrogate, nesting: the JSON text comes back byte for byte.
    const body: JsonObject = { _id: "e\"2", eventType: "web.page\nviews", name: "Zoë 🎉 \ud800", nested: { a: [1, 2.5, -0, 1e21, null, true], "": "" }, timestamp: "2026-11-29T12:00:00.000Z" };
    const json = JSON.stringify(body);
    const record: ValidRecord = { index: 0, kind: "experienceevent", body, primary: { namespace: "crmid", id: "dora" }, identities: [{ namespace: "crmid", id: "dora" }], timestamp: 1_800_000_000_000, eventId: 'e"2', size: Buffer.byteLength(json), json };
    const item: ForwardItem = {
      tenant: { orgId: "ORG@AdobeOrg", sandbox: { sandboxName: "prod" } } as unknown as TenantContext,
      datasetId: "ds1",
      record,
      identity: { namespace: "crmid", id: "dora" },
      location: "site-a",
      newAtLocation: false,
      edgeChanges: [{ definitionId: "d1", status: "exited", at: 5 }],
    };
    const data = encodeEventMessage(item);
    // The body is JSON in the envelope, not a string of it: no escaped copy of the record's quotes.
    assert.ok(data.toString("utf8").includes(`"body":${json}}}`));
    assert.ok(data.byteLength < Buffer.byteLength(JSON.stringify({ json })) + 400);
    const m = decodeEdgeMessage(data);
    assert.ok(!("error" in m) && m.kind === "event", JSON.stringify(m));
    assert.equal(m.v, 2);
    assert.deepEqual([m.orgId, m.sandboxName, m.datasetId, m.location, m.newAtLocation, m.identity, m.edgeChanges], ["ORG@AdobeOrg", "prod", "ds1", "site-a", false, { namespace: "crmid", id: "dora" }, [{ definitionId: "d1", status: "exited", at: 5 }]]);
    const r = recordOf(m);
    assert.equal(r.json, json);
    assert.equal(r.size, record.size);
    assert.deepEqual(r.body, JSON.parse(json));
    assert.deepEqual({ ...r, body: null }, { ...record, body: null });
  });

  it("refuses what an edge node does not write, saying why", () => {
    const bad = (v: unknown) => decodeEdgeMessage(typeof v === "string" ? Buffer.from(v) : encode(v));
    assert.deepEqual(bad("{not json"), { error: "not JSON" });
    assert.deepEqual(bad({ ...event, v: 3 }), { error: "not an edge message of version 1 or 2" });
    // Version 1 carries the body's JSON text, version 2 the body itself: not the other's form.
    assert.deepEqual(bad({ ...event, v: 2 }), { error: "bad record" });
    const { json: _json, ...fields } = event.record as { json: string };
    assert.deepEqual(bad({ ...event, record: { ...fields, body: { _id: "e1" } } }), { error: "bad record" });
    assert.deepEqual(bad({ ...event, v: 2, record: { ...fields, body: [1] } }), { error: "record body is not an object" });
    assert.deepEqual(bad({ ...event, v: 2, record: { ...fields } }), { error: "record body is not an object" });
    assert.ok(!("error" in bad({ ...event, v: 2, record: { ...fields, body: { _id: "e1" } } })));
    assert.deepEqual(bad({ ...event, kind: "other" }), { error: "unknown kind other" });
    assert.deepEqual(bad({ ...event, identity: { namespace: "crmid" } }), { error: "bad event envelope" });
    assert.deepEqual(bad({ ...event, record: { ...event.record, json: "[1]" } }), { error: "record body is not an object" });
    assert.deepEqual(bad({ ...event, record: { ...event.record, json: "{" } }), { error: "record body is not JSON" });
    assert.deepEqual(bad({ ...event, edgeChanges: [{ definitionId: "d", status: "maybe", at: 1 }] }), { error: "bad edge changes" });
    assert.deepEqual(bad({ v: 1, kind: "memberships", orgId: "o", sandboxName: "s", location: "l", changes: [{ profileId: 1 }] }), { error: "bad membership changes" });
  });
});
