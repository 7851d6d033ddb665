/**
 * The in-memory location store keeps each profile's evaluation view (what the
 * edge definitions read: attributes + segmentMembership.ups, edge results over
 * the hub's) current as it changes the profile, so that a request reads it
 * instead of building it: after collect, projection, the location's own
 * memberships, and a re-projection (edge results still win).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InMemoryLocationStore, isLocalLocationStore, type LocationStore, type Projection } from "../../src/edge/location-store.js";
import { evaluationProfile } from "../../src/edge/interact.js";
import { asyncOnly } from "../helpers/async-location-store.js";

const T = Date.parse("2026-05-20T12:00:00Z");
const TK = "org\u0000sandbox";
const ana = { namespace: "crmid", id: "ana" };

function projection(attributes: Record<string, unknown>, memberships: Projection["memberships"]): Projection {
  return { profileId: "p1", identities: [ana], attributes: attributes as Projection["attributes"], optedOut: false, memberships, events: [], at: T };
}

describe("location store: evaluation view", () => {
  it("is empty for a profile first seen by an event, and follows projection and the location's own memberships", async () => {
    const store = new InMemoryLocationStore("edge");
    await store.collect(TK, ana, { id: "e1", ts: T - 1000, body: { eventType: "page.view" } }, T);
    const p = (await store.lookup(TK, ana))!;
    assert.deepEqual(p.view.profile, { segmentMembership: { ups: {} } });
    assert.equal(p.view.ups, (p.view.profile["segmentMembership"] as { ups: unknown }).ups, "ups is the object inSegment reads");

    await store.project(TK, projection({ tier: "gold" }, { hubOnly: { status: "realized", lastQualificationTime: "2026-05-19T00:00:00.000Z" }, both: { status: "exited", lastQualificationTime: "2026-05-18T00:00:00.000Z" } }));
    const revision = p.revision;
    await store.setEdgeMemberships(TK, ana, [{ definitionId: "both", entry: { status: "realized", lastQualificationTime: "2026-05-20T12:00:00.000Z" } }]);
    assert.equal(p.revision, revision + 1, "a membership change bumps the revision (cached results are dropped)");
    assert.deepEqual(p.view.profile, {
      tier: "gold",
      segmentMembership: {
        ups: {
          hubOnly: { status: "realized", lastQualificationTime: "2026-05-19T00:00:00.000Z" },
          both: { status: "realized", lastQualificationTime: "2026-05-20T12:00:00.000Z" },
        },
      },
    });
    assert.equal(evaluationProfile(p), p.view, "a request reads the store's view, it builds none");

    // A new projection replaces attributes and hub memberships; the location's own results still win.
    await store.project(TK, projection({ tier: "silver" }, { both: { status: "exited", lastQualificationTime: "2026-05-18T00:00:00.000Z" } }));
    assert.deepEqual(p.view.profile, { tier: "silver", segmentMembership: { ups: { both: { status: "realized", lastQualificationTime: "2026-05-20T12:00:00.000Z" } } } });
    assert.equal(p.view.ups, (p.view.profile["segmentMembership"] as { ups: unknown }).ups);
    assert.deepEqual(p.attributes, { tier: "silver" }, "the projected attributes themselves carry no segmentMembership");
  });

  it("gives a profile the location does not hold an empty view of its own", () => {
    const a = evaluationProfile(undefined);
    const b = evaluationProfile(undefined);
    assert.deepEqual(a.profile, { segmentMembership: { ups: {} } });
    assert.notEqual(a.ups, b.ups, "not one shared mutable object");
  });

  it("keeps the view's memberships a plain object as the location adds its own (order, prototype, JSON)", async () => {
    const store = new InMemoryLocationStore("edge");
    await store.project(TK, projection({}, { h1: { status: "realized", lastQualificationTime: "2026-05-19T00:00:00.000Z" } }), { adopt: true });
    const ids = Array.from({ length: 40 }, (_, i) => `def-${(i * 7) % 40}`);
    for (const id of ids) await store.setEdgeMemberships(TK, ana, [{ definitionId: id, entry: { status: "realized", lastQualificationTime: "2026-05-20T00:00:00.000Z" } }]);
    const p = (await store.lookup(TK, ana))!;
    assert.equal(Object.getPrototypeOf(p.view.ups), Object.prototype);
    assert.deepEqual(Object.keys(p.view.ups), ["h1", ...ids], "insertion order, and no trace of the storage-mode switch");
    assert.equal(JSON.stringify(Object.keys(JSON.parse(JSON.stringify(p.view.profile)) as object)), JSON.stringify(["segmentMembership"]));
    assert.ok(!Object.keys(p.view.ups).some((k) => k.includes("\u0000")));
  });
});

describe("location store: the synchronous request path", () => {
  const event = (id: string, ts: number) => ({ id, ts, body: { _id: id, eventType: "page.view", timestamp: new Date(ts).toISOString() } });
  const entry = (status: "realized" | "exited") => ({ status, lastQualificationTime: "2026-05-20T12:00:00.000Z" });

  it("has the effects of the asynchronous methods", async () => {
    const a = new InMemoryLocationStore("a");
    const b = new InMemoryLocationStore("b");
    const bob = { namespace: "crmid", id: "bob" };
    // a: the asynchronous interface; b: the synchronous one, on the entries it returns.
    await a.collect(TK, ana, event("e2", T - 500), T);
    await a.collect(TK, ana, event("e1", T - 900), T);
    await a.setEdgeMemberships(TK, ana, [{ definitionId: "d1", entry: entry("realized") }]);
    await a.setEdgeMemberships(TK, bob, [{ definitionId: "d1", entry: entry("realized") }]);
    await a.project(TK, projection({ tier: "gold" }, { d2: entry("exited") }));
    await a.setEdgeMemberships(TK, ana, [{ definitionId: "d2", entry: entry("realized") }, { definitionId: "d1", entry: entry("exited") }]);

    assert.equal(b.lookupNow(TK, ana), undefined);
    const p = b.collectNow(TK, ana, event("e2", T - 500), T);
    assert.equal(b.collectNow(TK, ana, event("e1", T - 900), T), p, "the entry the first event created");
    assert.equal(b.lookupNow(TK, ana), p);
    b.applyEdgeMemberships(p, [{ definitionId: "d1", entry: entry("realized") }]);
    assert.equal(b.lookupNow(TK, bob), undefined, "a profile the location does not hold: nothing to apply to");
    await b.project(TK, projection({ tier: "gold" }, { d2: entry("exited") }));
    b.applyEdgeMemberships(b.lookupNow(TK, ana)!, [{ definitionId: "d2", entry: entry("realized") }, { definitionId: "d1", entry: entry("exited") }]);

    const pa = (await a.lookup(TK, ana))!;
    const pb = b.lookupNow(TK, ana)!;
    assert.deepEqual(pb.view, pa.view);
    assert.deepEqual(pb.events, pa.events);
    assert.deepEqual([...pb.edgeMemberships], [...pa.edgeMemberships]);
    assert.equal(pb.revision, pa.revision);
    assert.equal(await a.lookup(TK, bob), undefined);
  });

  it("is used only by stores that offer all of it", () => {
    const local = new InMemoryLocationStore("edge");
    assert.ok(isLocalLocationStore(local));
    const remote: LocationStore = asyncOnly(local, "remote");
    assert.ok(!isLocalLocationStore(remote));
    assert.ok(!isLocalLocationStore(Object.assign(Object.create(remote) as LocationStore, { lookupNow: () => undefined })));
  });
});
