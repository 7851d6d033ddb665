/**
 * A location's profiles are a cache of the hub with a memory bound (issue #22, "Bounded
 * memory"), over real HTTP: past `maxProfiles` a least recently requested profile is
 * dropped (second chance); its next request is decided like a first request at the location (what the
 * request carries), and the forward of that event has the hub project the profile there
 * again, with the events the location had collected before, so the request after is decided
 * on everything. Another tenant's requests meanwhile are served.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { InMemoryLocationStore } from "../../src/edge/location-store.js";
import { EVENTS_DS, PROFILES_DS, profile } from "../streaming/fixtures.js";
import { OTHER_ORG, segmentsOf, startEdgeHarness, type EdgeHarness } from "./harness.js";

const T0 = Date.parse("2026-10-02T12:00:00Z");
const LAG = 1000;

describe("edge location memory bound", () => {
  let h: EdgeHarness;
  let ds: string;
  let otherDs: string;

  before(async () => {
    h = await startEdgeHarness(T0, { names: ["edge"], maxProfiles: 2 });
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
    await h.f.hub.createDataset({ orgId: OTHER_ORG, sandboxName: "prod" }, { id: EVENTS_DS, name: "events", schemaClass: "experienceevent", profileEnabled: true }, T0);
    otherDs = ((await h.post("/data/core/edge/datastreams", { name: "other web", eventDatasetId: EVENTS_DS }, h.headers(OTHER_ORG))).json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  async function send(dataStreamId: string, crmId: string, eventType = "page.view"): Promise<string[]> {
    h.f.clock.advance(1000);
    const r = await h.post(`/ee/v2/interact?dataStreamId=${dataStreamId}`, { event: { xdm: { identityMap: { CRMID: [{ id: crmId, primary: true }] }, eventType, timestamp: new Date(h.f.clock.now() - LAG).toISOString() } } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    await h.rt.flush();
    return segmentsOf(r.json);
  }

  it("drops the least recently requested profile and projects it again after its next request", async () => {
    const gold = await h.f.define("gold at the edge", 'loyalty.tier = "gold"', { synchronous: true });
    const twice = await h.f.define("two cart adds at the edge", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "cart.add") WHEN(< 1 hours before now), C1: WHAT(eventType = "cart.add") WHEN(< 1 hours before now)])', { synchronous: true });
    await h.f.store(PROFILES_DS, [profile("gus", { loyalty: { tier: "gold" } })]);
    const store = h.rt.locations.get("edge") as InMemoryLocationStore;

    assert.deepEqual(await send(ds, "gus", "cart.add"), [], "first request: the location does not hold gus yet");
    assert.deepEqual(await send(ds, "gus"), [gold], "projected: gold");
    // Other profiles (one of another tenant) push gus out: two profiles fit. (A profile requested
    // since it was queued gets a second chance: gus outlives ann, then goes.)
    assert.deepEqual(await send(ds, "ann"), []);
    assert.deepEqual(await send(otherDs, "olga"), []);
    assert.deepEqual(await send(ds, "pia"), []);
    assert.equal(store.size, 2);
    assert.equal(store.evicted, 2);
    assert.equal(await store.holds(`${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`, [{ namespace: "crmid", id: "gus" }]), false, "gus was dropped");

    // Decided like a first request (the location knows nothing of gus), then projected again.
    assert.deepEqual(await send(ds, "gus", "cart.add"), [], "after the drop: decided on the request alone");
    assert.deepEqual(await send(ds, "gus"), [gold, twice].sort(), "projected again: gold, and both cart adds (the first collected before the drop) count");
    assert.equal(store.size, 2);
  });
});
