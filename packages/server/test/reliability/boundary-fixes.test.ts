/**
 * Issue #37, item 3: an id read from a collection message's header reaches the store's dataset
 * lookup. A NUL or a lone surrogate in `header.datasetId` is refused at the boundary with the
 * per-record rule of the collection routes (400 `UNSTORABLE_STRING`, the message's alone), the
 * same on both stores: PostgreSQL answered 500 `SEGMENTD-INTERNAL-500` ("invalid byte sequence
 * for encoding UTF8: 0x00") and the embedded store 404. Nothing of the refused message is stored.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ORG_B, PROFILE_CLASS, TOKEN_B, arr, client, obj, profileDataset, startHarness, xdmMessage, type Client, type Harness } from "../helpers/server-harness.js";

let h: Harness;
let a: Client;
let b: Client;
let dsA: string;
let dsB: string;

const NUL_REASON = "contains NUL (\\u0000)";
const LONE_REASON = "contains a lone UTF-16 surrogate (not valid Unicode)";

function profile(id: string): Record<string, unknown> {
  return { identityMap: { ECID: [{ id, primary: true }] }, person: { name: { firstName: id } } };
}

/** The status of reading an ECID's merged profile (200 when it exists). */
async function profileStatus(c: Client, id: string): Promise<number> {
  return (await c.get(`/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=${id}&entityIdNS=ECID`)).status;
}

before(async () => {
  h = await startHarness("boundary-fixes");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
  dsA = await profileDataset(a, "profiles-a", PROFILE_CLASS);
  dsB = await profileDataset(b, "profiles-b", PROFILE_CLASS);
});
after(async () => h.close());

for (const [label, suffix, reason] of [["NUL", "\u0000", NUL_REASON], ["a lone surrogate", "\ud800", LONE_REASON]] as const) {
  test(`POST /collection/{id}: ${label} in header.datasetId is 400 UNSTORABLE_STRING with and without syncValidation; nothing stored`, async () => {
    // The id of a real dataset with the character appended: a store that compared only up to the NUL would find it.
    const datasetId = `${dsA}${suffix}`;
    const message = `message 0: The string at header.datasetId ${reason} and cannot be stored`;
    for (const query of ["?syncValidation=true", "", "?syncValidation=false"]) {
      const id = `single-${label.length}-${query.length}`;
      const r = await a.post(`/collection/conn-a${query}`, xdmMessage(datasetId, PROFILE_CLASS, profile(id)));
      assert.equal(r.status, 400, `${query}: ${r.text}`);
      assert.deepEqual(r.json, {
        type: "http://ns.adobe.com/aep/errors/XDM-1000-400", status: 400, title: message,
        report: { message, errors: [{ index: 0, code: "UNSTORABLE_STRING", path: "header.datasetId", message }] },
      });
      assert.equal(await profileStatus(a, id), 404, `${id} must not be stored`);
    }
    // The same record with the real dataset id is stored: only the header was refused.
    const ok = await a.post("/collection/conn-a?syncValidation=true", xdmMessage(dsA, PROFILE_CLASS, profile(`single-ok-${label.length}`)));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(await profileStatus(a, `single-ok-${label.length}`), 200);
  });
}

test("POST /collection/batch/{id}: the messages whose header.datasetId holds NUL or a lone surrogate are refused one by one, the others stored", async () => {
  const body = { messages: [
    xdmMessage(dsA, PROFILE_CLASS, profile("batch-good-1")),
    xdmMessage(`${dsA}\u0000`, PROFILE_CLASS, profile("batch-nul")),
    xdmMessage(`\u0000`, PROFILE_CLASS, profile("batch-only-nul")),
    xdmMessage(`x\udc00${dsA}`, PROFILE_CLASS, profile("batch-lone")),
    xdmMessage(dsA, PROFILE_CLASS, profile("batch-good-2")),
  ] };
  const r = await a.post("/collection/batch/conn-a", body);
  assert.equal(r.status, 207, r.text);
  const responses = arr(obj(r.json).responses).map((x) => obj(x));
  assert.equal(responses.length, 5);
  for (const i of [0, 4]) assert.deepEqual(Object.keys(responses[i]!), ["xactionId"], `message ${i} is acknowledged`);
  const expected: Array<[number, string]> = [[1, NUL_REASON], [2, NUL_REASON], [3, LONE_REASON]];
  for (const [i, reason] of expected) {
    const message = `message ${i}: The string at header.datasetId ${reason} and cannot be stored`;
    const { xactionId, ...rest } = responses[i]!;
    assert.equal(typeof xactionId, "string");
    assert.deepEqual(rest, { status: 400, message, errors: [{ index: i, code: "UNSTORABLE_STRING", path: "header.datasetId", message }] });
  }
  assert.equal(await profileStatus(a, "batch-good-1"), 200);
  assert.equal(await profileStatus(a, "batch-good-2"), 200);
  for (const id of ["batch-nul", "batch-only-nul", "batch-lone"]) assert.equal(await profileStatus(a, id), 404, `${id} must not be stored`);
  // The store serves on, for this tenant and another one.
  assert.equal((await a.get("/readyz")).status, 200);
  const other = await b.post("/collection/conn-b?syncValidation=true", xdmMessage(dsB, PROFILE_CLASS, profile("b-after")));
  assert.equal(other.status, 200, other.text);
  assert.equal(await profileStatus(b, "b-after"), 200);
});

test("an unknown dataset id without NUL is still 404 on both stores (the check refuses only what no store can hold)", async () => {
  const r = await a.post("/collection/conn-a?syncValidation=true", xdmMessage("no-such-dataset", PROFILE_CLASS, profile("unknown-ds")));
  assert.equal(r.status, 404, r.text);
  assert.equal(obj(r.json).title, "dataset no-such-dataset does not exist in sandbox prod");
  assert.equal(await profileStatus(a, "unknown-ds"), 404);
});
