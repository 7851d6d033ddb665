/**
 * Streaming over real HTTP: events collected through the edge interact
 * endpoint reach the hub, the streaming engine puts the profile into the
 * continuous audience at once, the sweep takes it out when the window closes
 * (ManualClock, no new event), and the audience metrics show both.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EVENTS_DS } from "./fixtures.js";
import { startEdgeHarness, type EdgeHarness } from "../edge/harness.js";

const T0 = Date.parse("2026-07-01T08:00:00Z");

describe("streaming over HTTP", () => {
  let h: EdgeHarness;
  let ds: string;
  let def: string;
  const scope = { orgId: "", sandboxName: "prod" };

  before(async () => {
    h = await startEdgeHarness(T0);
    scope.orgId = h.f.tenant.orgId;
    ds = ((await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
    def = await h.f.define("cart in the last 15 minutes", 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.productListAdds") WHEN(< 15 minutes before now)])', { continuous: true });
  });
  after(async () => {
    await h.close();
  });

  it("a streamed event qualifies the profile; the sweep exits it when the window closes", async () => {
    const sentAt = T0 - 1000;
    const r = await h.post(`/ee/v2/interact?dataStreamId=${ds}`, {
      event: { xdm: { identityMap: { ECID: [{ id: "visitor-1", primary: true }] }, eventType: "commerce.productListAdds", timestamp: new Date(sentAt).toISOString() } },
    });
    assert.equal(r.status, 200);
    await h.rt.flush();
    const pid = (await h.f.hub.findProfileId(scope, { namespace: "ecid", id: "visitor-1" }))!;
    assert.deepEqual((await h.f.hub.getMemberships(scope, pid)).map((m) => [m.definitionId, m.status]), [[def, "realized"]]);

    h.f.clock.set(sentAt + 15 * 60_000 - 1);
    assert.deepEqual(await h.rt.streaming.sweep(), []);
    h.f.clock.set(sentAt + 15 * 60_000 + 45_000);
    const exits = await h.rt.streaming.sweep();
    assert.deepEqual(exits.map((t) => [t.definitionId, t.from, t.to, t.source]), [[def, "realized", "exited", "streaming"]]);

    const m = await h.get(`/data/core/ups/segment/definitions/${def}/metrics?window=24h`, h.headers());
    const body = m.json as { totalQualified: number; qualified: number; disqualified: number; newAudienceUpdated: number };
    assert.deepEqual([body.totalQualified, body.qualified, body.disqualified, body.newAudienceUpdated], [0, 1, 1, 0]);
  });
});
