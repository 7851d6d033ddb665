/**
 * The backfill over HTTP (issue #40): enabling streaming on a batch definition backfills it,
 * POST …/backfill runs one again, and bad input gets its exact status, code and message (unknown
 * id, another organization's or sandbox's definition, a definition that is not evaluated live).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { API_KEY, DEFS, ORG_A, ORG_B, TOKEN_A, TOKEN_B, client, definitionBody, obj, profileDataset, startHarness, type Client, type Harness, type Res } from "../helpers/server-harness.js";
import { METHODS, PROFILE_SCHEMA, load, members, message, runJob, sameKeys, waitBackfill, type BackfillJson } from "./backfill-helpers.js";

let h: Harness;
let a: Client;
let batchOnly: string;
let twin: string;

function error(r: Res, status: number): { code: string; message: string } {
  assert.equal(r.status, status, r.text);
  const items = obj(obj(r.json).errors)[String(status)] as Array<{ code: string; message: string }>;
  return { code: items[0]!.code, message: items[0]!.message };
}

describe("backfill over HTTP", () => {
  before(async () => {
    h = await startHarness("backfill-api");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
    const msgs = Array.from({ length: 50 }, (_, i) => message(profiles, PROFILE_SCHEMA, { identityMap: { Email: [{ id: `api${i}@example.com`, primary: true }] }, person: { age: 20 + i } }));
    await load(h.url, { "content-type": "application/json", authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod" }, msgs);
    const d = await a.post(DEFS, definitionBody("api batch only", "person.age > 50", { evaluationInfo: METHODS.batch }));
    assert.equal(d.status, 200, d.text);
    batchOnly = obj(d.json).id as string;
    const t = await a.post(DEFS, definitionBody("api twin", "person.age > 50", { evaluationInfo: METHODS.batch }));
    twin = obj(t.json).id as string;
  });
  after(async () => h.close());

  test("a batch-only definition has no backfill: GET 404, POST 400", async () => {
    assert.deepEqual(error(await a.get(`${DEFS}/${batchOnly}/backfill`), 404), {
      code: "SEGMENTD-NOT-FOUND-404", message: `Segment definition '${batchOnly}' has had no backfill: only continuous and edge definitions have one`,
    });
    assert.deepEqual(error(await a.post(`${DEFS}/${batchOnly}/backfill`), 400), {
      code: "SEGMENTD-BAD-REQUEST-400", message: `Segment definition '${batchOnly}' is not evaluated live (continuous or edge, published): a batch job computes its memberships`,
    });
  });

  test("enabling streaming on it backfills its memberships (the batch job's members)", async () => {
    const r = await a.patch(`${DEFS}/${batchOnly}`, definitionBody("api batch only", "person.age > 50", { evaluationInfo: { batch: { enabled: true }, continuous: { enabled: true } } }));
    assert.equal(r.status, 200, r.text);
    const b = await waitBackfill(a, batchOnly);
    assert.equal(b.state, "succeeded", JSON.stringify(b));
    assert.equal(b.reason, "updated");
    assert.equal(b.entered, 19);
    await runJob(a, [twin]);
    assert.deepEqual(sameKeys(await members(a, batchOnly), await members(a, twin)), { onlyA: [], onlyB: [] });
  });

  test("POST …/backfill runs it again: 202, and it writes nothing when nothing changed", async () => {
    const before = (await a.get(`${DEFS}/${batchOnly}/backfill`)).json as BackfillJson;
    const r = await a.post(`${DEFS}/${batchOnly}/backfill`);
    assert.equal(r.status, 202, r.text);
    const queued = r.json as BackfillJson;
    assert.equal(queued.reason, "requested");
    const b = await waitBackfill(a, batchOnly, before.queuedAt);
    assert.deepEqual({ state: b.state, reason: b.reason, total: b.total, entered: b.entered, exited: b.exited }, { state: "succeeded", reason: "requested", total: 0, entered: 0, exited: 0 });
  });

  test("unknown ids, another organization's and another sandbox's definitions are not found", async () => {
    const missing = "00000000-0000-0000-0000-000000000000";
    const notFound = { code: "SEGMENTD-NOT-FOUND-404", message: `Segment definition with id '${missing}' was not found` };
    assert.deepEqual(error(await a.get(`${DEFS}/${missing}/backfill`), 404), notFound);
    assert.deepEqual(error(await a.post(`${DEFS}/${missing}/backfill`), 404), notFound);
    // Enabling streaming on an unknown id.
    assert.deepEqual(error(await a.patch(`${DEFS}/${missing}`, definitionBody("x", "person.age > 1", { evaluationInfo: METHODS.streaming })), 404), notFound);
    const mine = { code: "SEGMENTD-NOT-FOUND-404", message: `Segment definition with id '${batchOnly}' was not found` };
    const b = client(h.url, { token: TOKEN_B, org: ORG_B });
    assert.deepEqual(error(await b.get(`${DEFS}/${batchOnly}/backfill`), 404), mine);
    assert.deepEqual(error(await b.post(`${DEFS}/${batchOnly}/backfill`), 404), mine);
    const dev = client(h.url, { sandbox: "dev" });
    assert.deepEqual(error(await dev.get(`${DEFS}/${batchOnly}/backfill`), 404), mine);
    // Without credentials: refused before anything is looked up.
    const anonymous = await client(h.url, { token: null }).get(`${DEFS}/${batchOnly}/backfill`);
    assert.equal(anonymous.status, 403, anonymous.text);
    assert.deepEqual(anonymous.json, { error_code: "403010", message: "Oauth token is missing" });
  });

  test("a deleted definition's backfill is gone with it", async () => {
    const d = await a.post(DEFS, definitionBody("api to delete", "person.age > 60", { evaluationInfo: METHODS.streaming }));
    const id = obj(d.json).id as string;
    assert.equal((await waitBackfill(a, id)).state, "succeeded");
    assert.equal((await a.delete(`${DEFS}/${id}`)).status, 200);
    assert.deepEqual(error(await a.get(`${DEFS}/${id}/backfill`), 404), { code: "SEGMENTD-NOT-FOUND-404", message: `Segment definition with id '${id}' was not found` });
  });
});
