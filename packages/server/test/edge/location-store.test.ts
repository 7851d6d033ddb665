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

describe("location store: bounded memory", () => {
  const ev = (id: string, ts: number) => ({ id, ts, body: { _id: id, eventType: "page.view", timestamp: new Date(ts).toISOString() } });
  const who = (id: string) => ({ namespace: "crmid", id });

  it("keeps at most maxProfiles profiles, dropping the least recently requested first", () => {
    const store = new InMemoryLocationStore("edge", { maxProfiles: 3, idleMs: 0 });
    for (const [k, id] of ["a", "b", "c"].entries()) store.collectNow(TK, who(id), ev(`e-${id}`, T + k), T + k);
    // a is requested again: b is now the least recently requested.
    store.collectNow(TK, who("a"), ev("e-a2", T + 10), T + 10);
    store.collectNow(TK, who("d"), ev("e-d", T + 11), T + 11);
    assert.equal(store.size, 3);
    assert.deepEqual(["a", "b", "c", "d"].map((id) => store.lookupNow(TK, who(id)) !== undefined), [true, false, true, true]);
    store.collectNow(TK, who("e"), ev("e-e", T + 12), T + 12);
    assert.deepEqual(["a", "c", "d", "e"].map((id) => store.lookupNow(TK, who(id)) !== undefined), [true, false, true, true]);
    assert.equal(store.evicted, 2);
    assert.deepEqual(store.sizes(), { profiles: 3, entries: 3, events: 4, evicted: 2 });
  });

  it("drops profiles no request touched for idleMs, whatever the bound, and every identity of a dropped one", async () => {
    const store = new InMemoryLocationStore("edge", { maxProfiles: 1000, idleMs: 60_000 });
    store.collectNow(TK, who("old"), ev("e-old", T), T);
    // Projected with a second identity: one profile under two keys.
    await store.project(TK, { profileId: "p-old", identities: [who("old"), who("old-2")], attributes: {}, optedOut: false, memberships: {}, events: [], at: T + 1 });
    store.collectNow(TK, who("warm"), ev("e-warm", T + 30_000), T + 30_000);
    assert.ok(store.lookupNow(TK, who("old-2")));
    store.collectNow(TK, who("new"), ev("e-new", T + 61_000), T + 61_000);
    assert.equal(store.lookupNow(TK, who("old")), undefined, "idle for 61 s");
    assert.equal(store.lookupNow(TK, who("old-2")), undefined, "with its other identity");
    assert.ok(store.lookupNow(TK, who("warm")));
    assert.deepEqual(store.sizes(), { profiles: 2, entries: 2, events: 2, evicted: 1 });
    assert.deepEqual(await store.profiles(TK), [store.lookupNow(TK, who("warm")), store.lookupNow(TK, who("new"))]);
  });

  it("counts a forgotten or merged profile out of the bound", async () => {
    const store = new InMemoryLocationStore("edge", { maxProfiles: 2, idleMs: 0 });
    store.collectNow(TK, who("x"), ev("e-x", T), T);
    store.collectNow(TK, who("y"), ev("e-y", T + 1), T + 1);
    // The hub links x and y: one profile.
    await store.project(TK, { profileId: "p-xy", identities: [who("x"), who("y")], attributes: {}, optedOut: false, memberships: {}, events: [], at: T + 2 });
    assert.equal(store.size, 1);
    store.collectNow(TK, who("z"), ev("e-z", T + 3), T + 3);
    assert.ok(store.lookupNow(TK, who("x")), "two profiles fit: nothing dropped");
    assert.equal(await store.forget(TK, new Set(["p-xy"])), 1);
    assert.equal(store.size, 1);
    assert.deepEqual(store.sizes(), { profiles: 1, entries: 1, events: 1, evicted: 0 });
  });
});
