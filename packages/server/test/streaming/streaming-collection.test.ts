/**
 * Streaming collection → continuous evaluation, whole server over real HTTP: one
 * `POST /collection/batch/{inlet}` carrying events of several profiles (known and new, a
 * record that fails validation, and one event that links two profiles) puts exactly the
 * profiles whose events qualify into a continuous audience of "two cart adds in the last
 * hour". The route hands the engine the profile each stored record went to (the append's
 * answer, `storedPids`); the engine holds every profile's state by then, so a record
 * counted for the wrong profile would qualify the wrong one here.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startWholeServer, type WholeServer } from "../helpers/whole-server.js";

const ORG = "STREAMCOLLECT00000000000@AdobeOrg";
const SCOPE = { orgId: ORG, sandboxName: "prod" };
const EVENT_SCHEMA = { id: "https://ns.adobe.com/xdm/context/experienceevent" };
const PROFILE_SCHEMA = { id: "https://ns.adobe.com/xdm/context/profile" };

describe("streaming collection evaluates each record for its own profile", () => {
  let w: WholeServer;
  const call = (method: string, url: string, body?: unknown) => w.call(method, url, body);

  const ecid = (id: string, primary: boolean) => ({ id, primary });
  let seq = 0;
  const event = (datasetId: string, eventType: string, identityMap: unknown) => ({
    header: { datasetId, schemaRef: EVENT_SCHEMA },
    body: { xdmEntity: { _id: `sc-${++seq}`, eventType, timestamp: new Date(Date.now() - 1000).toISOString(), identityMap } },
  });

  /** Definitions the profile of `id` is realized in. */
  async function audiencesOf(id: string): Promise<string[]> {
    const pid = await w.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id });
    if (pid === null) return [];
    return (await w.server.profiles.getMemberships(SCOPE, pid)).filter((m) => m.status === "realized").map((m) => m.definitionId).sort();
  }

  before(async () => {
    w = await startWholeServer(ORG, "stream-collect");
  });
  after(async () => {
    await w.close();
  });

  it("qualifies exactly the profiles whose events match, in batches of many profiles", async () => {
    const crm = await w.dataset("CRM", "profile");
    const web = await w.dataset("Web", "experienceevent");
    // Five known profiles, each from its own profile record.
    const profiles = await call("POST", "/collection/batch/inlet", {
      messages: ["a", "b", "c", "d", "e"].map((id) => ({ header: { datasetId: crm, schemaRef: PROFILE_SCHEMA }, body: { xdmEntity: { identityMap: { ECID: [ecid(id, true)] }, person: { name: { firstName: id } } } } })),
    });
    assert.equal(profiles.status, 207, JSON.stringify(profiles.json));
    const def = await call("POST", "/data/core/ups/segment/definitions", {
      name: "two cart adds in the last hour",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "commerce.productListAdds" and timestamp occurs < 1 hours before now].count() >= 2' },
      evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
    });
    assert.equal(def.status, 200, JSON.stringify(def.json));
    const id = (def.json as { id: string }).id;
    const cart = (...ids: string[]) => event(web, "commerce.productListAdds", { ECID: ids.map((x, k) => ecid(x, k === 0)) });
    const view = (x: string) => event(web, "web.webpagedetails.pageViews", { ECID: [ecid(x, true)] });
    const statuses = (json: unknown) => (json as { responses: Array<{ status?: number }> }).responses.map((r) => r.status ?? 200);
    const members = async () => Object.fromEntries(await Promise.all(["a", "b", "c", "d", "e", "f"].map(async (p) => [p, (await audiencesOf(p)).length] as const)));

    // One cart add each: nobody qualifies yet, and the engine now holds every profile's state.
    const first = await call("POST", "/collection/batch/inlet", { messages: [cart("a"), cart("b"), cart("c"), cart("d"), cart("e")] });
    assert.equal(first.status, 207, JSON.stringify(first.json));
    assert.deepEqual(statuses(first.json), [200, 200, 200, 200, 200]);
    await w.server.app.edge!.flush();
    assert.deepEqual(await members(), { a: 0, b: 0, c: 0, d: 0, e: 0, f: 0 });

    // A second cart add for b only, among page views and a record that fails validation (no
    // identity): the stored records are the valid ones, in order, and only b qualifies.
    const second = await call("POST", "/collection/batch/inlet", {
      messages: [
        view("a"),
        { header: { datasetId: web, schemaRef: EVENT_SCHEMA }, body: { xdmEntity: { _id: "sc-no-identity", eventType: "commerce.productListAdds", timestamp: new Date().toISOString() } } },
        cart("b"), view("c"), view("d"),
      ],
    });
    assert.equal(second.status, 207, JSON.stringify(second.json));
    assert.deepEqual(statuses(second.json), [200, 400, 200, 200, 200]);
    await w.server.app.edge!.flush();
    assert.deepEqual(await members(), { a: 0, b: 1, c: 0, d: 0, e: 0, f: 0 });
    assert.deepEqual(await audiencesOf("b"), [id]);

    // A new visitor f (one cart add: not yet), a second cart add for d, and a cart add that links
    // c and e into one profile (c's, e's and this one: three).
    const third = await call("POST", "/collection/batch/inlet", { messages: [cart("f"), view("a"), cart("d"), cart("e", "c")] });
    assert.equal(third.status, 207, JSON.stringify(third.json));
    await w.server.app.edge!.flush();
    assert.equal(await w.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id: "c" }), await w.server.profiles.findProfileId(SCOPE, { namespace: "ecid", id: "e" }), "c and e are one profile now");
    assert.deepEqual(await members(), { a: 0, b: 1, c: 1, d: 1, e: 1, f: 0 });
  });
});
