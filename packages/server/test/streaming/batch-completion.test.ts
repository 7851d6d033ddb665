/**
 * A completed batch feeds streaming evaluation as streamed records do, whole server over real
 * HTTP: the profiles its records were written to are evaluated again when the batch completes
 * (before the answer), so a continuous audience holds them at once; an aborted batch changes
 * nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startWholeServer, type WholeServer } from "../helpers/whole-server.js";

const ORG = "BATCHSTREAM0000000000000@AdobeOrg";
const SCOPE = { orgId: ORG, sandboxName: "prod" };

describe("a completed batch is evaluated by streaming", () => {
  let w: WholeServer;
  before(async () => {
    w = await startWholeServer(ORG, "batch-stream");
  });
  after(async () => {
    await w.close();
  });

  const realized = async (id: string, def: string) => {
    const pid = await w.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id });
    if (pid === null) return false;
    return (await w.server.profiles.getMemberships(SCOPE, pid)).some((m) => m.definitionId === def && m.status === "realized");
  };
  const batchOf = async (datasetId: string, records: unknown[], action: "COMPLETE" | "ABORT") => {
    const b = await w.call("POST", "/data/foundation/import/batches", { datasetId, inputFormat: { format: "json" } });
    assert.equal(b.status, 201, JSON.stringify(b.json));
    const id = (b.json as { id: string }).id;
    const up = await w.call("PUT", `/data/foundation/import/batches/${id}/datasets/${datasetId}/files/part-0.json`, records);
    assert.equal(up.status, 200, JSON.stringify(up.json));
    const done = await w.call("POST", `/data/foundation/import/batches/${id}?action=${action}`);
    assert.equal(done.status, 200, JSON.stringify(done.json));
    return done.json as { status: string };
  };

  it("qualifies the batch's profiles when it completes; an aborted batch qualifies nobody", async () => {
    const web = await w.dataset("Web", "experienceevent");
    const def = await w.call("POST", "/data/core/ups/segment/definitions", {
      name: "bought in the last hour",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "commerce.purchases" and timestamp occurs < 1 hours before now].count() >= 1' },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
    });
    assert.equal(def.status, 200, JSON.stringify(def.json));
    const id = (def.json as { id: string }).id;
    const ev = (n: string, who: string, eventType: string) => ({ _id: n, eventType, timestamp: new Date(Date.now() - 60_000).toISOString(), identityMap: { ECID: [{ id: who, primary: true }] } });

    const aborted = await batchOf(web, [ev("b0", "ab", "commerce.purchases")], "ABORT");
    assert.equal(aborted.status, "aborted");
    assert.equal(await realized("ab", id), false);

    const done = await batchOf(web, [ev("b1", "bx", "commerce.purchases"), ev("b2", "by", "web.webpagedetails.pageViews"), ev("b3", "bz", "commerce.purchases")], "COMPLETE");
    assert.equal(done.status, "success");
    assert.deepEqual([await realized("bx", id), await realized("by", id), await realized("bz", id)], [true, false, true]);
    const pid = (await w.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id: "bx" }))!;
    const t = await w.server.profiles.listTransitions(SCOPE, { definitionId: id });
    assert.deepEqual(t.filter((x) => x.profileId === pid).map((x) => [x.from, x.to, x.source]), [[null, "realized", "streaming"]]);
  });
});
