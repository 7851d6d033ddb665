/**
 * Edge locations over real HTTP: an event collected at A is stored at A, not
 * at B, and the hub's copy of the profile has it; a request at B does not see
 * A's edge-only events until the hub projects them to B. Also the 24-hourly
 * segment-of-segments disqualification pass.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EVENTS_DS, PROFILES_DS, profile } from "../streaming/fixtures.js";
import { segmentsOf, startEdgeHarness, type EdgeHarness } from "./harness.js";

const T0 = Date.parse("2026-05-20T12:00:00Z");
const LAG = 1000;

describe("edge locations", () => {
  let h: EdgeHarness;
  let ds: string;
  let tk: string;
  const scope = { orgId: "", sandboxName: "prod" };
  const dora = { namespace: "crmid", id: "dora" };

  before(async () => {
    h = await startEdgeHarness(T0, { names: ["va6", "irl1"] });
    scope.orgId = h.f.tenant.orgId;
    tk = `${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  const send = (location: string, id: string, eventId: string, eventType: string) =>
    h.post(`/ee/${location}/v2/interact?dataStreamId=${ds}`, {
      event: { xdm: { _id: eventId, identityMap: { CRMID: [{ id, primary: true }] }, eventType, timestamp: new Date(h.f.clock.now() - LAG).toISOString() } },
    });

  it("an event collected at A is stored at A, not at B, and the hub has it; B sees it only after the hub projects it", async () => {
    const def = await h.f.define("searched here", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "site.search") WHEN(< 2 hours before now)])', { synchronous: true });
    const atA = await send("va6", "dora", "e-a-1", "site.search");
    assert.deepEqual(segmentsOf(atA.json), [def]);
    await h.rt.flush();
    const a = h.rt.locations.get("va6")!;
    const b = h.rt.locations.get("irl1")!;
    assert.deepEqual((await a.lookup(tk, dora))!.events.map((e) => e.id), ["e-a-1"]);
    assert.equal(await b.lookup(tk, dora), undefined, "B holds nothing of dora");
    const hubEvents = await h.f.hub.getEvents(scope, dora, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    assert.deepEqual(hubEvents.events.map((e) => e.eventId), ["e-a-1"]);

    h.f.clock.advance(60_000);
    const atB = await send("irl1", "dora", "e-b-1", "page.view");
    assert.deepEqual(segmentsOf(atB.json), [], "B does not see A's search before the projection");
    // The forward of B's event makes B hold dora; the hub then projects dora (with A's event) to B.
    await h.rt.flush();
    assert.deepEqual((await b.lookup(tk, dora))!.events.map((e) => e.id).sort(), ["e-a-1", "e-b-1"]);
    // A keeps only what it collected plus earlier projections: B's event reached A through the hub too.
    assert.deepEqual((await a.lookup(tk, dora))!.events.map((e) => e.id).sort(), ["e-a-1", "e-b-1"]);

    h.f.clock.advance(60_000);
    const atB2 = await send("irl1", "dora", "e-b-2", "page.view");
    assert.deepEqual(segmentsOf(atB2.json), [def], "after the projection B sees the search");
  });

  it("an event at B for a profile only B holds is not at A until A holds the profile", async () => {
    h.f.clock.advance(60_000);
    await send("irl1", "erin", "e-erin-1", "page.view");
    await h.rt.flush();
    assert.equal(await h.rt.locations.get("va6")!.lookup(tk, { namespace: "crmid", id: "erin" }), undefined);
    assert.ok(await h.rt.locations.get("irl1")!.lookup(tk, { namespace: "crmid", id: "erin" }));
  });

  it("hub attribute changes reach the locations that hold the profile", async () => {
    const us = await h.f.define("US only", 'homeAddress.country = "US"', { synchronous: true });
    h.f.clock.advance(60_000);
    assert.ok(!segmentsOf((await send("va6", "dora", "e-a-2", "page.view")).json).includes(us), "no country yet");
    await h.rt.flush();
    await h.f.store(PROFILES_DS, [profile("dora", { homeAddress: { country: "US" } })]);
    const pid = await h.f.hub.findProfileId(scope, dora);
    // What the ingestion path does after a durable append: project the changed profiles.
    await h.rt.projector.project(h.f.tenant, [pid!]);
    h.f.clock.advance(60_000);
    assert.ok(segmentsOf((await send("irl1", "dora", "e-b-3", "page.view")).json).includes(us), "B sees the hub's new attribute");
  });
});

describe("opt-out at the edge", () => {
  let h: EdgeHarness;
  let ds: string;

  before(async () => {
    h = await startEdgeHarness(T0);
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  it("a profile that opted out of marketing qualifies for nothing that excludes opt-outs", async () => {
    const us = await h.f.define("US", 'homeAddress.country = "US"', { synchronous: true });
    await h.f.store(PROFILES_DS, [
      profile("olga", { homeAddress: { country: "US" }, consents: { marketing: { preferred: "n" } } }),
      profile("otto", { homeAddress: { country: "US" } }),
    ]);
    await h.rt.projector.projectAll(h.f.tenant, "edge");
    const send = async (id: string) => {
      h.f.clock.advance(1000);
      const r = await h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { identityMap: { CRMID: [{ id, primary: true }] }, eventType: "page.view", timestamp: new Date(h.f.clock.now() - LAG).toISOString() } } });
      return segmentsOf(r.json);
    };
    assert.deepEqual(await send("otto"), [us]);
    assert.deepEqual(await send("olga"), []);
  });
});

describe("segment of segments at the edge", () => {
  let h: EdgeHarness;
  let ds: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    h = await startEdgeHarness(T0);
    scope.orgId = h.f.tenant.orgId;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  it("qualifies at request time and is disqualified only by the 24-hourly pass", async () => {
    const gold = await h.f.define("gold (batch)", 'loyalty.tier = "gold"', {});
    const sos = await h.f.define("gold at the edge", `inSegment("${gold}")`, { synchronous: true });
    await h.f.store(PROFILES_DS, [profile("gus", { loyalty: { tier: "gold" } })]);
    const pid = (await h.f.hub.findProfileId(scope, { namespace: "crmid", id: "gus" }))!;
    await h.f.hub.applyMembershipChanges(scope, [{ profileId: pid, definitionId: gold, status: "realized", source: "batch", at: T0 - 1000 }]);
    const send = async () => {
      h.f.clock.advance(60_000);
      const r = await h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { identityMap: { CRMID: [{ id: "gus", primary: true }] }, eventType: "page.view", timestamp: new Date(h.f.clock.now() - LAG).toISOString() } } });
      await h.rt.flush();
      return segmentsOf(r.json);
    };
    assert.deepEqual(await send(), [], "first request: the location does not hold gus yet");
    assert.deepEqual(await send(), [sos], "projected batch membership qualifies");
    // The batch job takes gus out of gold; the hub projects that.
    await h.f.hub.applyMembershipChanges(scope, [{ profileId: pid, definitionId: gold, status: "exited", source: "batch", at: h.f.clock.now() }]);
    await h.rt.projector.project(h.f.tenant, [pid]);
    assert.deepEqual(await send(), [sos], "still in: requests never disqualify a segment of segments");
    const pass = await h.rt.disqualification.run();
    assert.deepEqual(pass.exits, [{ location: "edge", profileId: pid, definitionId: sos }]);
    assert.deepEqual(await send(), [], "out after the pass");
    const edgeTransitions = (await h.f.hub.listTransitions(scope, { definitionId: sos })).map((t) => [t.from, t.to, t.source]);
    assert.deepEqual(edgeTransitions, [[null, "realized", "edge"], ["realized", "exited", "edge"]]);
  });
});
