/**
 * A batch job's membership changes reach the edge locations (the projection bug of issue #40),
 * over the whole server's HTTP API: edge definitions over a batch audience — one a request
 * re-evaluates (an event with inSegment), one a segment of segments (only the 24-hourly pass
 * disqualifies) — follow the batch job that takes a profile out of the audience and the one that
 * puts another in, with no other write to those profiles. Before the fix the location kept the
 * memberships it was last projected, and both edge audiences kept the profile.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { arr, client, DEFS, EVENT_CLASS, obj, PROFILE_CLASS, profileDataset, runSegmentJob, startHarness, type Client, type Harness } from "../helpers/server-harness.js";
import { waitBackfill } from "../backfill/backfill-helpers.js";

async function until(cond: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("a batch job's changes are projected to the edge locations", { timeout: 120_000 }, () => {
  let h: Harness;
  let c: Client;
  let crm: string;
  let dataStreamId: string;
  let gold: string;
  let withEvent: string;
  let sos: string;

  const upsert = async (records: Array<[string, string]>) => {
    const r = await c.post("/collection/batch/crm-inlet", {
      messages: records.map(([id, tier]) => ({ header: { datasetId: crm, schemaRef: { id: PROFILE_CLASS } }, body: { xdmEntity: { identityMap: { ECID: [{ id, primary: true }] }, loyalty: { tier } } } })),
    });
    assert.equal(r.status, 207, r.text);
    assert.ok(arr(obj(r.json).responses).every((x) => (obj(x).status ?? 200) === 200), r.text);
    await h.server.app.edge!.flush();
  };
  /** The edge audiences of a page view by this visitor, as the edge location answers. */
  const interact = async (id: string): Promise<string[]> => {
    const r = await c.post(`/ee/v2/interact?dataStreamId=${dataStreamId}`, {
      event: { xdm: { identityMap: { ECID: [{ id, primary: true }] }, eventType: "web.webpagedetails.pageViews", timestamp: new Date(Date.now() - 1000).toISOString() } },
    }, { "content-type": "application/json" });
    assert.equal(r.status, 200, r.text);
    await h.server.app.edge!.flush();
    const handles = obj(r.json).handle as Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }>;
    return handles.find((x) => x.type === "activation:pull")!.payload.flatMap((p) => p.segments ?? []).map((s) => s.id).sort();
  };

  before(async () => {
    h = await startHarness("edge-batch-projection");
    c = client(h.url);
    crm = await profileDataset(c, "CRM", PROFILE_CLASS);
    const web = await profileDataset(c, "Web", EVENT_CLASS);
    const ds = await c.post("/data/core/edge/datastreams", { name: "site", eventDatasetId: web });
    assert.equal(ds.status, 201, ds.text);
    dataStreamId = String(obj(ds.json).id);
    const define = async (name: string, pql: string, how: "batch" | "synchronous") => {
      const r = await c.post(DEFS, {
        name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: pql },
        evaluationInfo: { batch: { enabled: how === "batch" }, continuous: { enabled: false }, synchronous: { enabled: how === "synchronous" } },
      });
      assert.equal(r.status, 200, r.text);
      return String(obj(r.json).id);
    };
    gold = await define("gold (batch)", 'loyalty.tier = "gold"', "batch");
    withEvent = await define("gold visitors (edge)", `inSegment("${gold}") and chain(xEvent, timestamp, [C0: WHAT(eventType = "web.webpagedetails.pageViews") WHEN(<= 1 hours before now)])`, "synchronous");
    sos = await define("gold at the edge (segment of segments)", `inSegment("${gold}")`, "synchronous");
    for (const id of [withEvent, sos]) assert.equal((await waitBackfill(c, id)).state, "succeeded");
  });
  after(async () => h?.close());

  test("a profile a batch job takes out leaves both edge audiences; one it puts in joins them", async () => {
    // Background: profiles no location holds, changed by the same jobs (the projection skips them).
    await upsert([["leaves", "gold"], ["stays", "gold"], ["joins", "silver"], ...Array.from({ length: 50 }, (_, i): [string, string] => [`far-${i}`, "gold"])]);
    await runSegmentJob(c);
    // The first request makes the location hold the visitor (the hub projects it there); the next sees the batch membership.
    for (const id of ["leaves", "stays", "joins"]) await interact(id);
    for (const id of ["leaves", "stays"]) await until(async () => (await interact(id)).join() === [withEvent, sos].sort().join(), `${id} in both edge audiences`);
    assert.deepEqual(await interact("joins"), []);

    // Only the batch job changes these memberships: no streaming or edge definition reads loyalty.
    await upsert([["leaves", "silver"], ["joins", "gold"], ...Array.from({ length: 50 }, (_, i): [string, string] => [`far-${i}`, "silver"])]);
    await runSegmentJob(c);
    // A request re-evaluates the event audience over the projected memberships.
    await until(async () => !(await interact("leaves")).includes(withEvent), "the batch exit at the edge location");
    await until(async () => (await interact("joins")).includes(withEvent), "the batch entry at the edge location");
    // A segment of segments is disqualified by the 24-hourly pass, which reads the location's memberships.
    const pass = await h.server.app.edge!.disqualification.run();
    assert.deepEqual(pass.exits.map((e) => e.definitionId), [sos]);
    assert.deepEqual(await interact("leaves"), []);
    assert.deepEqual(await interact("joins"), [withEvent, sos].sort());
    assert.deepEqual(await interact("stays"), [withEvent, sos].sort());
  });
});
