/**
 * Datastreams over real HTTP: CRUD, validation (exact status, code, message,
 * nothing stored) and tenant isolation (read, replace and delete of another
 * organization's id: 404, nothing changed). Persistence in the metadata store:
 * datastreams-store.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EVENTS_DS, PROFILES_DS } from "../streaming/fixtures.js";
import { OTHER_ORG, startEdgeHarness, type EdgeHarness } from "./harness.js";

describe("datastreams", () => {
  let h: EdgeHarness;

  before(async () => {
    h = await startEdgeHarness(Date.parse("2026-08-01T00:00:00Z"));
  });
  after(async () => {
    await h.close();
  });

  const list = async (org?: string) => ((await h.get("/data/core/edge/datastreams", h.headers(org))).json as { datastreams: Array<{ id: string }> }).datastreams;

  it("creates, reads, replaces and deletes", async () => {
    const c = await h.post("/data/core/edge/datastreams", { name: " web ", eventDatasetId: EVENTS_DS }, h.headers());
    assert.equal(c.status, 201);
    const d = c.json as { id: string; name: string; imsOrgId: string; sandboxName: string; edgeSegmentation: boolean; creationTime: number };
    assert.deepEqual([d.name, d.imsOrgId, d.sandboxName, d.edgeSegmentation, d.creationTime], ["web", h.f.tenant.orgId, "prod", true, Date.parse("2026-08-01T00:00:00Z")]);
    assert.deepEqual((await list()).map((x) => x.id), [d.id]);
    const r = await fetch(`${h.url}/data/core/edge/datastreams/${d.id}`, { method: "PUT", headers: { ...h.headers(), "content-type": "application/json" }, body: JSON.stringify({ name: "web 2", eventDatasetId: EVENTS_DS, edgeSegmentation: false }) });
    assert.equal(r.status, 200);
    assert.deepEqual(((await r.json()) as { name: string; edgeSegmentation: boolean }).edgeSegmentation, false);
    // With edge segmentation off, interact answers without audiences.
    const i = await h.post(`/ee/v2/interact?dataStreamId=${d.id}`, { event: { xdm: { identityMap: { ECID: [{ id: "x", primary: true }] }, eventType: "a" } } });
    assert.equal(i.status, 200);
    const del = await fetch(`${h.url}/data/core/edge/datastreams/${d.id}`, { method: "DELETE", headers: h.headers() });
    assert.equal(del.status, 204);
    assert.deepEqual(await list(), []);
    const gone = await h.get(`/data/core/edge/datastreams/${d.id}`, h.headers());
    assert.equal(gone.status, 404);
    assert.deepEqual((gone.json as { errors: Record<string, unknown> }).errors["404"], [{ code: "SEGMENTD-DATASTREAM-404", message: `Datastream with id '${d.id}' was not found` }]);
  });

  it("refuses a dataset that does not exist or is not an event dataset, and stores nothing", async () => {
    const missing = await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: "nope" }, h.headers());
    assert.equal(missing.status, 400);
    assert.deepEqual((missing.json as { errors: Record<string, unknown> }).errors["400"], [{ code: "SEGMENTD-DATASTREAM-400", message: "eventDatasetId 'nope' is not a dataset of sandbox 'prod'" }]);
    const profiles = await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: PROFILES_DS }, h.headers());
    assert.equal(profiles.status, 400);
    assert.deepEqual((profiles.json as { errors: Record<string, unknown> }).errors["400"], [
      { code: "SEGMENTD-DATASTREAM-400", message: `eventDatasetId '${PROFILES_DS}' must be an experience event dataset (it is a profile dataset)` },
    ]);
    const noName = await h.post("/data/core/edge/datastreams", { eventDatasetId: EVENTS_DS }, h.headers());
    assert.equal(noName.status, 400);
    assert.equal((noName.json as { errors: Record<string, Array<{ message: string }>> }).errors["400"]![0]!.message, "name is required");
    assert.deepEqual(await list(), []);
  });

  it("is invisible to another organization", async () => {
    const c = await h.post("/data/core/edge/datastreams", { name: "mine", eventDatasetId: EVENTS_DS }, h.headers());
    const id = (c.json as { id: string }).id;
    assert.deepEqual(await list(OTHER_ORG), []);
    assert.equal((await h.get(`/data/core/edge/datastreams/${id}`, h.headers(OTHER_ORG))).status, 404);
    const del = await fetch(`${h.url}/data/core/edge/datastreams/${id}`, { method: "DELETE", headers: h.headers(OTHER_ORG) });
    assert.equal(del.status, 404);
    const put = await h.put(`/data/core/edge/datastreams/${id}`, { name: "theirs", eventDatasetId: EVENTS_DS, edgeSegmentation: false }, h.headers(OTHER_ORG));
    assert.equal(put.status, 404);
    assert.deepEqual((put.json as { errors: Record<string, unknown> }).errors["404"], [{ code: "SEGMENTD-DATASTREAM-404", message: `Datastream with id '${id}' was not found` }]);
    assert.deepEqual((await list()).map((x) => x.id), [id]);
    // Nothing changed, in the store or in the interact path's memory.
    assert.deepEqual((await h.get(`/data/core/edge/datastreams/${id}`, h.headers())).json, c.json);
    assert.deepEqual(h.rt.datastreams.byId(id), c.json);
  });

  it("projectAll gives a location every profile of the sandbox", async () => {
    await h.f.store(PROFILES_DS, [{ identityMap: { CRMID: [{ id: "w1", primary: true }] }, a: 1 }, { identityMap: { CRMID: [{ id: "w2", primary: true }] }, a: 2 }]);
    await h.rt.flush();
    const n = await h.rt.projector.projectAll(h.f.tenant, "edge");
    assert.equal(n, 3, "w1, w2 and the visitor of the first test's interact request");
    const tk = `${h.f.tenant.orgId}\u0000${h.f.tenant.sandbox.sandboxId}`;
    const w2 = await h.rt.locations.get("edge")!.lookup(tk, { namespace: "crmid", id: "w2" });
    assert.equal(w2?.attributes["a"], 2);
  });
});
