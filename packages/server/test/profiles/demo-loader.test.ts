import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { demoCrmId } from "../../src/profiles/demo.js";
import { loadDemoIfEmpty, loadDemoOverHttp } from "../../src/profiles/demo-loader.js";
import { API_KEY, call, ORG, startProfileServer, TOKEN, type HttpHarness } from "./http-harness.js";

describe("demo loader over the public ingestion API", () => {
  let h: HttpHarness;
  before(async () => { h = await startProfileServer(); });
  after(async () => { await h.close(); });

  it("creates the datasets, loads every record in batches and makes profiles readable", async () => {
    h.policies.set("default", { id: "default", identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    const target = { baseUrl: h.url, headers: { authorization: `Bearer ${TOKEN}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG, "x-sandbox-name": "dev" } };
    const r = await loadDemoOverHttp(target, { profiles: 300, events: 6000, seed: 3 });
    assert.deepEqual([r.recordsWritten, r.recordsFailed], [6300, 0]);
    const status = await call(h.url, "GET", `/data/foundation/catalog/batches/${r.batches[1]}`, undefined, { sandbox: "dev" });
    const b = (status.json as Record<string, { status: string; files: string[] }>)[r.batches[1]!]!;
    assert.equal(b.status, "success");
    assert.deepEqual(b.files, ["part-0.ndjson", "part-1.ndjson"]);
    const p = await call(h.url, "GET", `/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${demoCrmId(3, 7)}&entityIdNS=CRMID`, undefined, { sandbox: "dev" });
    assert.equal(p.status, 200, p.text);
    const entity = (Object.values(p.json as Record<string, { entity: Record<string, unknown> }>)[0]!).entity;
    assert.equal(((entity["identityMap"] as Record<string, unknown[]>)["ecid"] ?? []).length, 1);
    assert.equal((await call(h.url, "GET", "/data/foundation/catalog/dataSets", undefined, { sandbox: "prod" })).text, "{}");
    // The dev sandbox now has datasets: the start-up loader leaves it alone; prod is empty and gets one.
    const small = { profiles: 20, events: 100, seed: 4 };
    assert.equal(await loadDemoIfEmpty(h.ts.store, { orgId: ORG, sandboxName: "dev" }, target, small), null);
    const prod = await loadDemoIfEmpty(h.ts.store, { orgId: ORG, sandboxName: "prod" }, { ...target, headers: { ...target.headers, "x-sandbox-name": "prod" } }, small);
    assert.equal(prod?.recordsWritten, 120);
  });
});
