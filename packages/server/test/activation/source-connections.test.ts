/**
 * The source side of a destination dataflow as AEP's activation tutorials call it, over real
 * HTTP: the flow spec looked up by name, a source connection to the Profile store, a flow that
 * names it; exact 400s with nothing stored, another organization's ids 404, in-use deletes 409.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { arr, client, DEFS, definitionBody, obj, ORG_B, startHarness, TOKEN_B, type Client, type Harness, type Res } from "../helpers/server-harness.js";
import { CONNECTION_SPEC_IDS, PROFILE_FLOW_SPEC_ID } from "../../src/activation/connection-specs.js";
import { PROFILE_SOURCE_SPEC_ID } from "../../src/activation/source-connections.js";

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };
const PROFILE_STORE = { id: PROFILE_SOURCE_SPEC_ID, version: "1.0" };

function errorOf(r: Res): { status: number; code: unknown; message: unknown } {
  const items = arr(obj(obj(r.json).errors)[String(r.status)]);
  return { status: r.status, code: obj(items[0]).code, message: obj(items[0]).message };
}

describe("flow specs and source connections", () => {
  let h: Harness;
  let a: Client;
  let b: Client;
  let audience = "";
  let targetId = "";

  before(async () => {
    h = await startHarness("act-src");
    a = client(h.url);
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
    audience = String(obj((await a.post(DEFS, definitionBody("US customers"))).json).id);
    const conn = await a.post(`${F}/connections`, { name: "none", connectionSpec: WEBHOOK });
    const tgt = await a.post(`${F}/targetConnections`, { name: "crm", baseConnectionId: obj(conn.json).id, connectionSpec: WEBHOOK, params: { httpEndpoint: "https://93.184.215.14/hook" } });
    assert.equal(tgt.status, 201, tgt.text);
    targetId = String(obj(tgt.json).id);
  });
  after(async () => h.close());

  const flow = (sources: string[]) => ({
    name: "with a source", flowSpec: { id: PROFILE_FLOW_SPEC_ID, version: "1.0" }, sourceConnectionIds: sources, targetConnectionIds: [targetId],
    transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: [{ type: "PLATFORM_SEGMENT", value: { id: audience } }] } } }],
  });

  test("the tutorial's sequence: flow spec by name, source connection, flow naming both", async () => {
    const specs = await a.get(`${F}/flowSpecs?property=name=="Profile-based destinations"`);
    assert.equal(specs.status, 200, specs.text);
    const spec = obj(arr(obj(specs.json).items)[0]);
    assert.equal(spec.id, PROFILE_FLOW_SPEC_ID);
    assert.deepEqual(spec.sourceConnectionSpecIds, [PROFILE_SOURCE_SPEC_ID]);
    assert.deepEqual(spec.targetConnectionSpecIds, Object.values(CONNECTION_SPEC_IDS));
    assert.deepEqual(obj((await a.get(`${F}/flowSpecs?property=name==Other`)).json).items, []);
    assert.equal(obj(arr(obj((await a.get(`${F}/flowSpecs/${PROFILE_FLOW_SPEC_ID}`)).json).items)[0]).id, PROFILE_FLOW_SPEC_ID);
    assert.deepEqual(errorOf(await a.get(`${F}/flowSpecs/nope`)), { status: 404, code: "SEGMENTD-DESTINATION-404", message: "Flow spec with id 'nope' was not found" });

    const src = await a.post(`${F}/sourceConnections`, { name: "Connecting to Profile Store", description: "the profiles", connectionSpec: PROFILE_STORE });
    assert.equal(src.status, 201, src.text);
    const srcId = String(obj(src.json).id);
    const got = obj(arr(obj((await a.get(`${F}/sourceConnections/${srcId}`)).json).items)[0]);
    assert.deepEqual([got.name, got.description, got.connectionSpec], ["Connecting to Profile Store", "the profiles", PROFILE_STORE]);
    assert.ok(arr(obj((await a.get(`${F}/sourceConnections`)).json).items).some((s) => obj(s).id === srcId));

    const f = await a.post(`${F}/flows`, flow([srcId]));
    assert.equal(f.status, 201, f.text);
    const flowId = String(obj(f.json).id);
    assert.deepEqual(obj(arr(obj((await a.get(`${F}/flows/${flowId}`)).json).items)[0]).sourceConnectionIds, [srcId]);

    assert.deepEqual(errorOf(await a.delete(`${F}/sourceConnections/${srcId}`)),
      { status: 409, code: "SEGMENTD-DESTINATION-IN-USE-409", message: `Source connection '${srcId}' is used by flow '${flowId}'; delete that first` });
    assert.equal((await a.delete(`${F}/flows/${flowId}`)).status, 204);
    assert.equal((await a.delete(`${F}/sourceConnections/${srcId}`)).status, 204);
    assert.equal((await a.get(`${F}/sourceConnections/${srcId}`)).status, 404);
  });

  test("bad input: exact 400s, nothing stored; another organization's ids are 404 and unusable", async () => {
    const before = arr(obj((await a.get(`${F}/sourceConnections`)).json).items).length;
    assert.deepEqual(errorOf(await a.post(`${F}/sourceConnections`, { name: "x", connectionSpec: WEBHOOK })),
      { status: 400, code: "SEGMENTD-DESTINATION-400", message: `connectionSpec.id must be the Profile store's, "${PROFILE_SOURCE_SPEC_ID}": a destination's source is the sandbox's profiles` });
    assert.deepEqual(errorOf(await a.post(`${F}/sourceConnections`, { connectionSpec: PROFILE_STORE })), { status: 400, code: "SEGMENTD-DESTINATION-400", message: "name is required" });
    assert.equal(arr(obj((await a.get(`${F}/sourceConnections`)).json).items).length, before);

    const flowsBefore = arr(obj((await a.get(`${F}/flows`)).json).items).length;
    assert.deepEqual(errorOf(await a.post(`${F}/flows`, flow(["no-such-source"]))),
      { status: 400, code: "SEGMENTD-DESTINATION-400", message: "sourceConnectionIds[0] 'no-such-source' does not name a source connection of this sandbox" });
    const srcB = String(obj((await b.post(`${F}/sourceConnections`, { name: "B's", connectionSpec: PROFILE_STORE })).json).id);
    assert.equal((await a.get(`${F}/sourceConnections/${srcB}`)).status, 404);
    assert.equal((await a.delete(`${F}/sourceConnections/${srcB}`)).status, 404);
    assert.equal(errorOf(await a.post(`${F}/flows`, flow([srcB]))).message, `sourceConnectionIds[0] '${srcB}' does not name a source connection of this sandbox`);
    assert.equal(arr(obj((await a.get(`${F}/flows`)).json).items).length, flowsBefore);
    assert.equal((await b.get(`${F}/sourceConnections/${srcB}`)).status, 200, "B's own is untouched");
  });
});
