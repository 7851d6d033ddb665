/**
 * LocationStore.heldProfiles: what a batch job's changes are matched against (batch/jobs/edge-projection.ts).
 * An in-process location lists the hub profiles projected to it and the identities of entries no
 * projection named yet; the hub's view of an edge node's location lists the profiles it sent the
 * site and the identities the site reported.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { InMemoryLocationStore, type Projection } from "../../src/edge/location-store.js";
import { RemoteLocationStore } from "../../src/cluster/remote-location.js";

const TK = "org\u0000prod";
const ecid = (id: string) => ({ namespace: "ECID", id });
const projection = (profileId: string, ids: string[]): Projection => ({ profileId, identities: ids.map(ecid), attributes: {}, optedOut: false, memberships: {}, events: [], at: 1_000 });

describe("the profiles a location holds", () => {
  test("in process: projected ids, and the identities of entries collected but not projected yet", async () => {
    const loc = new InMemoryLocationStore("edge", { idleMs: 0 });
    await loc.collect(TK, ecid("a"), { id: "e1", ts: 900, body: {} }, 900);
    await loc.collect(TK, ecid("b"), { id: "e2", ts: 900, body: {} }, 900);
    // a is projected under hub profile 7, with a second identity of its graph.
    await loc.project(TK, projection("7", ["a", "a2"]));
    const held = await loc.heldProfiles(TK);
    assert.deepEqual(held, { profileIds: ["7"], identities: [ecid("b")] });
    assert.deepEqual(await loc.heldProfiles("other\u0000prod"), { profileIds: [], identities: [] });
  });

  test("an edge node's location: the profiles sent to the site and the identities it reported", async () => {
    const sent: string[] = [];
    const loc = new RemoteLocationStore("site-1", async (subject) => {
      sent.push(subject);
    });
    loc.note(TK, ecid("x"));
    loc.note(TK, ecid("y"));
    loc.noteProjected(TK, "40");
    await loc.project(TK, projection("41", ["x"]));
    await loc.idle();
    const held = await loc.heldProfiles(TK);
    assert.deepEqual({ profileIds: held.profileIds.sort(), identities: held.identities }, { profileIds: ["40", "41"], identities: [ecid("y")] });
    assert.equal(sent.length, 1);
  });
});
