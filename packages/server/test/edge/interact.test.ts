/**
 * Edge interact over real HTTP: the exactly-one-primary rule (400, nothing
 * stored), request validation, and responses that list exactly the audiences
 * `evaluate` says the profile + events qualify for — only for definitions that
 * are edge-enabled, edge-eligible and on the merge policy active on edge.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { evaluate } from "@segmentd/pql";
import { PROFILE_SCHEMA_CLASS } from "../../src/services/merge-policies.js";
import { EVENTS_DS, PROFILES_DS, profile } from "../streaming/fixtures.js";
import { segmentsOf, startEdgeHarness, type EdgeHarness } from "./harness.js";

const T0 = Date.parse("2026-04-01T09:00:00Z");
const LAG = 1000;
const MIN = 60_000;

describe("edge interact", () => {
  let h: EdgeHarness;
  let dataStreamId: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    h = await startEdgeHarness(T0, { names: ["va6", "irl1"], defaultLocation: "va6" });
    scope.orgId = h.f.tenant.orgId;
    const r = await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers());
    assert.equal(r.status, 201, JSON.stringify(r.json));
    dataStreamId = (r.json as { id: string }).id;
  });
  after(async () => {
    await h.close();
  });

  const interact = (body: unknown, location?: string, ds: string | null = dataStreamId) =>
    h.post(`/ee/${location ? `${location}/` : ""}v2/interact${ds === null ? "" : `?dataStreamId=${encodeURIComponent(ds)}`}`, body);

  const xdm = (identityMap: unknown, eventType: string, at: number) => ({ event: { xdm: { identityMap, eventType, timestamp: new Date(at).toISOString() } } });

  async function nothingStored(ids: Array<{ namespace: string; id: string }>): Promise<void> {
    await h.rt.flush();
    for (const loc of h.rt.locations.all()) for (const i of ids) assert.equal(await loc.lookup(`${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`, i), undefined, `location ${loc.location} holds ${i.id}`);
    for (const i of ids) assert.equal(await h.f.hub.findProfileId(scope, i), null, `hub holds ${i.id}`);
  }

  describe("exactly one primary identity", () => {
    it("zero primaries is a 400 and nothing is stored", async () => {
      const r = await interact(xdm({ ECID: [{ id: "e-zero" }], CRMID: [{ id: "c-zero", primary: false }] }, "web.pageview", T0 - LAG));
      assert.equal(r.status, 400);
      const body = r.json as { status: number; errors: Record<string, Array<{ code: string; message: string }>> };
      assert.equal(body.status, 400);
      assert.deepEqual(body.errors["400"], [{ code: "SEGMENTD-EDGE-PRIMARY-IDENTITY-400", message: "The request must carry exactly one identity marked primary in event.xdm.identityMap; found none" }]);
      await nothingStored([{ namespace: "ecid", id: "e-zero" }, { namespace: "crmid", id: "c-zero" }]);
    });

    it("two primaries is a 400 and nothing is stored", async () => {
      const r = await interact(xdm({ ECID: [{ id: "e-two", primary: true }], CRMID: [{ id: "c-two", primary: true }] }, "web.pageview", T0 - LAG), "irl1");
      assert.equal(r.status, 400);
      const body = r.json as { errors: Record<string, Array<{ code: string; message: string }>> };
      assert.deepEqual(body.errors["400"], [{ code: "SEGMENTD-EDGE-PRIMARY-IDENTITY-400", message: "The request must carry exactly one identity marked primary in event.xdm.identityMap; found 2 (ecid, crmid)" }]);
      await nothingStored([{ namespace: "ecid", id: "e-two" }, { namespace: "crmid", id: "c-two" }]);
    });

    it("a missing identityMap is a 400 and nothing is stored", async () => {
      const r = await interact({ event: { xdm: { eventType: "web.pageview", timestamp: new Date(T0).toISOString() } } });
      assert.equal(r.status, 400);
      assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["400"], [
        { code: "SEGMENTD-EDGE-PRIMARY-IDENTITY-400", message: "event.xdm.identityMap is required and must hold exactly one identity marked primary" },
      ]);
      await h.rt.flush();
      assert.equal(h.rt.forwarder.pending, 0);
    });
  });

  describe("request validation", () => {
    const one = { ECID: [{ id: "e-valid", primary: true }] };
    it("a missing dataStreamId is a 400", async () => {
      const r = await interact(xdm(one, "x", T0), undefined, null);
      assert.equal(r.status, 400);
      assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["400"], [{ code: "SEGMENTD-EDGE-BAD-REQUEST-400", message: "The dataStreamId query parameter is required" }]);
    });
    it("an unknown dataStreamId is a 400", async () => {
      const r = await interact(xdm(one, "x", T0), undefined, "nope");
      assert.equal(r.status, 400);
      assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["400"], [{ code: "SEGMENTD-EDGE-DATASTREAM-400", message: "Unknown dataStreamId 'nope'" }]);
    });
    it("an unknown location is a 404", async () => {
      const r = await interact(xdm(one, "x", T0), "mars");
      assert.equal(r.status, 404);
      assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["404"], [{ code: "SEGMENTD-EDGE-LOCATION-404", message: "Unknown edge location 'mars'; configured: va6, irl1" }]);
    });
    it("a body without event.xdm is a 400", async () => {
      const r = await interact({ events: [] });
      assert.equal(r.status, 400);
      assert.deepEqual((r.json as { errors: Record<string, unknown> }).errors["400"], [{ code: "SEGMENTD-EDGE-BAD-REQUEST-400", message: "The body must be {event: {xdm: {identityMap, eventType, timestamp, ...}}}" }]);
    });
    it("an invalid timestamp is a 400 naming the field, and nothing is stored", async () => {
      const r = await interact({ event: { xdm: { identityMap: one, eventType: "x", timestamp: "yesterday" } } });
      assert.equal(r.status, 400);
      const items = (r.json as { errors: Record<string, Array<{ code: string; field?: string }>> }).errors["400"]!;
      assert.equal(items[0]!.code, "TIMESTAMP_INVALID");
      assert.equal(items[0]!.field, "timestamp");
      await nothingStored([{ namespace: "ecid", id: "e-valid" }]);
    });
  });

  describe("qualified audiences", () => {
    const defs: Record<string, string> = {};
    let notOnEdgePolicy: string;
    let streamingOnly: string;
    let batchGold: string;

    before(async () => {
      const other = await h.f.mergePolicies.create(h.f.tenant, {
        name: "not on edge",
        schema: { name: PROFILE_SCHEMA_CLASS },
        identityGraph: { type: "none" },
        attributeMerge: { type: "timestampOrdered" },
        isActiveOnEdge: false,
      });
      batchGold = await h.f.define("gold (batch)", 'loyalty.tier = "gold"', {});
      const edge = {
        singleEvent: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.checkouts") WHEN(<= 30 minutes before now)])',
        profileOnly: 'homeAddress.country = "US"',
        eventWithProfile: 'homeAddress.country = "US" and chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 1 hours before now)])',
        multipleEvents: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 2 hours before now), C1: WHAT(eventType = "commerce.checkouts") WHEN(< 2 hours before now)])',
        segmentOfSegments: `inSegment("${batchGold}")`,
      };
      for (const [k, pql] of Object.entries(edge)) defs[k] = await h.f.define(k, pql, { synchronous: true });
      notOnEdgePolicy = await h.f.define("not on the edge policy", 'homeAddress.country = "US"', { synchronous: false, continuous: true }, other.id);
      streamingOnly = await h.f.define("streaming only", 'homeAddress.country = "US"', { continuous: true });
      // Hub data: attributes for two profiles, a batch membership for one.
      await h.f.store(PROFILES_DS, [profile("u1", { homeAddress: { country: "US" }, loyalty: { tier: "gold" } }), profile("u2", { homeAddress: { country: "FR" } })]);
      const u1 = await h.f.hub.findProfileId(scope, { namespace: "crmid", id: "u1" });
      await h.f.hub.applyMembershipChanges(scope, [{ profileId: u1!, definitionId: batchGold, status: "realized", source: "batch", at: T0 - 3_600_000 }]);
    });

    it("lists exactly what evaluate says for the profile the location holds plus the event", async () => {
      const pqlOf = new Map<string, string>();
      for (const id of Object.values(defs)) pqlOf.set(id, (await h.f.definitions.get(h.f.tenant, id)).expression.value);
      // What the test expects the location to know, built independently of the service.
      const hubAttrs: Record<string, Record<string, unknown>> = {
        u1: { homeAddress: { country: "US" }, loyalty: { tier: "gold" } },
        u2: { homeAddress: { country: "FR" } },
        u3: {},
      };
      const batch: Record<string, Record<string, { status: string }>> = { u1: { [batchGold]: { status: "realized" } }, u2: {}, u3: {} };
      const seen: Record<string, Array<Record<string, unknown>>> = { u1: [], u2: [], u3: [] };
      const projected: Record<string, boolean> = { u1: false, u2: false, u3: false };
      const edgeIn: Record<string, Set<string>> = { u1: new Set(), u2: new Set(), u3: new Set() };
      let s = 7;
      const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
      const types = ["web.pageview", "commerce.checkouts", "other"];
      let sawSome = 0;
      for (let i = 0; i < 36; i++) {
        h.f.clock.set(T0 + i * 9 * MIN);
        const who = `u${1 + Math.floor(rnd() * 3)}`;
        const type = types[Math.floor(rnd() * 3)]!;
        const at = h.f.clock.now() - LAG;
        const r = await interact(xdm({ CRMID: [{ id: who, primary: true }], ECID: [{ id: `ecid-${who}` }] }, type, at));
        assert.equal(r.status, 200, JSON.stringify(r.json));
        const event = { identityMap: { CRMID: [{ id: who, primary: true }], ECID: [{ id: `ecid-${who}` }] }, eventType: type, timestamp: new Date(at).toISOString() };
        const ups: Record<string, unknown> = {};
        if (projected[who]) Object.assign(ups, batch[who]);
        for (const id of edgeIn[who]!) ups[id] = { status: "realized" };
        const prof = { ...(projected[who] ? hubAttrs[who] : {}), segmentMembership: { ups } };
        const events = [...seen[who]!, event];
        const expected = Object.values(defs)
          .filter((id) => (id === defs["segmentOfSegments"] && edgeIn[who]!.has(id)) || evaluate(pqlOf.get(id)!, { profile: prof, events, now: h.f.clock.now() }) === true)
          .sort();
        assert.deepEqual(segmentsOf(r.json), expected, `request ${i} for ${who} (${type})`);
        sawSome += expected.length;
        edgeIn[who] = new Set(expected);
        seen[who]!.push(event);
        projected[who] = true;
        await h.rt.flush();
      }
      assert.ok(sawSome > 10, "the random requests qualified for some audiences");
      // Never: edge-disabled definitions or definitions on a policy not active on edge.
      const all = new Set<string>();
      for (const [id, set] of Object.entries(edgeIn)) for (const x of set) all.add(`${id}:${x}`);
      assert.ok(![...all].some((x) => x.endsWith(notOnEdgePolicy) || x.endsWith(streamingOnly) || x.endsWith(batchGold)));
    });

    it("writes edge transitions to the hub", async () => {
      const transitions = await h.f.hub.listTransitions(scope, { sources: ["edge"] });
      assert.ok(transitions.length > 0);
      assert.ok(transitions.every((t) => Object.values(defs).includes(t.definitionId)));
    });

    it("an event sent without a timestamp is stamped 1 ms before the server time, and counts at its own request", async () => {
      h.f.clock.set(T0 + 5 * 3_600_000);
      const r = await interact({ event: { xdm: { identityMap: { CRMID: [{ id: "u7", primary: true }] }, eventType: "commerce.checkouts" } } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const pull = (r.json as { handle: Array<{ type: string; payload: Array<{ segments: Array<{ id: string }> }> }> }).handle[0]!;
      assert.deepEqual(pull.payload[0]?.segments.map((x) => x.id), [defs["singleEvent"]]);
      await h.rt.flush();
      const stored = await h.f.hub.getEvents(scope, { namespace: "crmid", id: "u7" }, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
      assert.deepEqual(stored.events.map((e) => e.timestamp), [T0 + 5 * 3_600_000 - 1]);
    });

    it("the response has the location hint and the request id", async () => {
      h.f.clock.set(T0 + 10 * 3_600_000);
      const r = await interact(xdm({ CRMID: [{ id: "u9", primary: true }] }, "other", h.f.clock.now() - LAG), "irl1");
      assert.equal(r.status, 200);
      const body = r.json as { requestId: string; handle: Array<{ type: string; payload: unknown[] }> };
      assert.equal(typeof body.requestId, "string");
      assert.deepEqual(body.handle, [
        { type: "activation:pull", eventIndex: 0, payload: [] },
        { type: "locationHint:result", payload: [{ scope: "EdgeNetwork", hint: "irl1", ttlSeconds: 1800 }] },
      ]);
    });
  });
});
