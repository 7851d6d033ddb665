/**
 * A completed record delete reaches the edge (issue #6, acceptance 5): the edge
 * location had projected the profile's attributes from the hub; after a
 * delete_identity work order over ALL datasets completes, an edge request for the
 * same identity no longer sees the deleted attributes, so the profile-only edge
 * audience it qualified for is not returned. Whole server, real HTTP, the way a
 * user drives it: catalog, streaming ingestion, definitions, datastream,
 * interact, work order.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startWholeServer, type WholeServer } from "../helpers/whole-server.js";

const ORG = "LIFECYCLEEDGE00000000000@AdobeOrg";
const ZOE = { Email: [{ id: "zoe@example.com", primary: true }] };

describe("a completed record delete reaches the edge", () => {
  let w: WholeServer;
  const call = (method: string, url: string, body?: unknown) => w.call(method, url, body);

  /** The edge audiences an interact request for zoe returns. */
  async function interact(dataStreamId: string): Promise<string[]> {
    const r = await call("POST", `/ee/v2/interact?dataStreamId=${dataStreamId}`, {
      event: { xdm: { identityMap: ZOE, eventType: "web.webpagedetails.pageViews", timestamp: new Date(Date.now() - 1000).toISOString() } },
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    // Wait for the hub forward and the projection back to the location.
    await w.server.app.edge!.flush();
    const handles = (r.json as { handle: Array<{ type: string; payload: Array<{ segments?: Array<{ id: string }> }> }> }).handle;
    return handles.find((h) => h.type === "activation:pull")!.payload.flatMap((p) => p.segments ?? []).map((s) => s.id);
  }

  before(async () => {
    w = await startWholeServer(ORG, "lifecycle-edge");
  });
  after(async () => {
    await w.close();
  });

  it("the edge stops returning the audience of a deleted profile", async () => {
    const crm = await w.dataset("CRM", "profile");
    const web = await w.dataset("Web", "experienceevent");
    const ingested = await call("POST", "/collection/crm-inlet?syncValidation=true", {
      header: { datasetId: crm, schemaRef: { id: "https://ns.adobe.com/xdm/context/profile" } },
      body: { xdmEntity: { identityMap: ZOE, homeAddress: { countryCode: "US" } } },
    });
    assert.equal(ingested.status, 200, JSON.stringify(ingested.json));
    const def = await call("POST", "/data/core/ups/segment/definitions", {
      name: "US customers on the edge",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
    });
    assert.equal(def.status, 200, JSON.stringify(def.json));
    const defId = (def.json as { id: string }).id;
    const ds = await call("POST", "/data/core/edge/datastreams", { name: "site", eventDatasetId: web });
    assert.equal(ds.status, 201, JSON.stringify(ds.json));
    const dataStreamId = (ds.json as { id: string }).id;

    // The first request makes the location hold zoe; the hub's attributes are projected to it.
    await interact(dataStreamId);
    assert.deepEqual(await interact(dataStreamId), [defId], "qualifies on the projected attributes");

    const wo = await call("POST", "/data/core/hygiene/workorder", {
      action: "delete_identity",
      datasetId: "ALL",
      displayName: "erase zoe",
      namespacesIdentities: [{ namespace: { code: "Email" }, ids: ["zoe@example.com"] }],
    });
    assert.equal(wo.status, 200, JSON.stringify(wo.json));
    await w.server.hygiene.runner.idle();
    const done = await call("GET", `/data/core/hygiene/workorder/${(wo.json as { workorderId: string }).workorderId}`);
    assert.equal((done.json as { status: string }).status, "completed");
    await w.server.app.edge!.flush();

    assert.deepEqual(await interact(dataStreamId), [], "the deleted attributes are gone from the edge");
  });
});
