/**
 * A scan chunk crosses from the embedded store's worker as bytes (wire-scan.ts: its texts would
 * otherwise be deserialized straight into the old generation). Every text — non-ASCII, empty,
 * astral — comes back exactly; a body that does not parse is reported with its exact text, and
 * the events around it are kept.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { unwireScan, wireScan, textedEvent } from "../../src/profiles/embedded/wire-scan.js";
import type { ScannedProfile } from "../../src/profiles/store.js";

const event = (datasetId: string, eventId: string, ns: string, id: string, text: string) => textedEvent(datasetId, eventId, { namespace: ns, id }, 1_700_000_000_000, text);

test("a chunk's texts cross as bytes and come back exactly", () => {
  const chunk: ScannedProfile[] = [
    {
      profileId: "1", entity: { person: { name: "Zoë" } }, identities: [{ namespace: "ECID", id: "é-1" }], optedOut: false,
      events: [
        event("ds1", "ev-1", "ECID", "é-1", JSON.stringify({ eventType: "web.pageViews", note: "naïve — 日本 😀" })),
        event("ds1", "", "Émail", "😀@x.example", "{}"),
      ],
    },
    { profileId: "2", entity: {}, identities: [], optedOut: true, events: [] },
    {
      profileId: "3", entity: { a: 1 }, identities: [{ namespace: "ECID", id: "3" }], optedOut: false,
      events: [
        event("ds2", "ev-3", "ECID", "3", "{not json"),
        event("ds2", "ev-4", "ECID", "3", JSON.stringify({ n: 4, s: "\u0000\u00ff\u0100" })),
      ],
    },
  ] as unknown as ScannedProfile[];
  const wire = wireScan(chunk);
  assert.ok(wire.bytes instanceof Uint8Array && wire.ends.length === 4 * 5, "four events, five texts each, as bytes");
  assert.ok(!Object.values(wire).some((v) => Array.isArray(v) && v.some((x) => typeof x === "string")), "no list of strings on the wire");
  const back = unwireScan(structuredClone(wire));
  assert.deepEqual(back.profiles.map((p) => [p.profileId, p.entity, p.identities, p.optedOut]), chunk.map((p) => [p.profileId, p.entity, p.identities, p.optedOut]));
  assert.deepEqual(back.profiles[0]!.events.map((e) => [e.datasetId, e.eventId, e.primary, e.timestamp, e.body]), [
    ["ds1", "ev-1", { namespace: "ECID", id: "é-1" }, 1_700_000_000_000, { eventType: "web.pageViews", note: "naïve — 日本 😀" }],
    ["ds1", "", { namespace: "Émail", id: "😀@x.example" }, 1_700_000_000_000, {}],
  ]);
  assert.deepEqual(back.profiles[1]!.events, []);
  assert.deepEqual(back.profiles[2]!.events.map((e) => [e.eventId, e.body]), [["ev-4", { n: 4, s: "\u0000\u00ff\u0100" }]]);
  assert.deepEqual(back.unreadable, [{ pid: 3, datasetId: "ds2", eventId: "ev-3", primary: { namespace: "ECID", id: "3" }, text: "{not json" }]);
});

test("an empty chunk crosses too", () => {
  const back = unwireScan(structuredClone(wireScan([])));
  assert.deepEqual(back, { profiles: [], unreadable: [] });
});
