/**
 * Requests exactly as Adobe's Postman collection for the Segmentation Service sends them (#27):
 * the collection omits Content-Type on four operations and Postman's runtime labels their JSON
 * bodies `text/plain`. Those four parse the body as JSON whatever its label; every other
 * operation still answers a body of another type with Adobe's 400 and stores nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { API_KEY, DEFS, ORG_A, TOKEN_A, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

const JOBS = "/data/core/ups/segment/jobs";
const SCHEDULES = "/data/core/ups/config/schedules";

/** The headers the collection's requests carry, with the label Postman fills in for a raw body. */
const POSTMAN = {
  Accept: "application/json",
  Authorization: `Bearer ${TOKEN_A}`,
  "x-api-key": API_KEY,
  "x-gw-ims-org-id": ORG_A,
  "x-sandbox-name": "prod",
  "Content-Type": "text/plain",
};

let h: Harness;
let a: Client;

async function postman(method: string, path: string, body: string): Promise<{ status: number; json: unknown }> {
  const r = await fetch(h.url + path, { method, headers: POSTMAN, body });
  const text = await r.text();
  return { status: r.status, json: text === "" ? null : (JSON.parse(text) as unknown) };
}

async function definitionCount(): Promise<number> {
  return obj(obj((await a.get(`${DEFS}?limit=1`)).json).page).totalCount as number;
}

before(async () => {
  h = await startHarness("postman");
  a = client(h.url);
});
after(async () => h.close());

describe("the collection's requests labelled text/plain", () => {
  test("POST /segment/definitions/bulk-get", async () => {
    const d = obj((await a.post(DEFS, definitionBody("postman-bulk", 'homeAddress.countryCode = "US"'))).json);
    const r = await postman("POST", `${DEFS}/bulk-get`, JSON.stringify({ ids: [{ id: d.id }] }));
    assert.equal(r.status, 207);
    const results = obj(obj(r.json).results);
    assert.deepEqual(Object.keys(results), [d.id]);
    assert.equal(obj(results[d.id as string]).name, "postman-bulk");
  });

  test("POST /segment/conversion", async () => {
    const r = await postman("POST", "/data/core/ups/segment/conversion", JSON.stringify({
      name: "conv", profileInstanceId: "ups", imsOrgId: ORG_A, sandbox: { sandboxName: "prod" },
      expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' }, targetFormat: "pql/json",
    }));
    assert.equal(r.status, 200);
    assert.equal(obj(obj(r.json).expression).format, "pql/json");
  });

  test("POST /segment/jobs/bulk-get", async () => {
    const d = obj((await a.post(DEFS, definitionBody("postman-job", 'homeAddress.countryCode = "FR"'))).json);
    const job = obj((await a.post(JOBS, [{ segmentId: d.id }])).json);
    const r = await postman("POST", `${JOBS}/bulk-get`, JSON.stringify({ ids: [{ id: job.id }] }));
    assert.equal(r.status, 207);
    assert.deepEqual(Object.keys(obj(obj(r.json).results)), [job.id]);
  });

  test("PATCH /config/schedules/{id}", async () => {
    const s = obj((await a.post(SCHEDULES, { name: "nightly", type: "batch_segmentation", properties: { segments: ["*"] }, schedule: "0 0 1 * * ?" })).json);
    const r = await postman("PATCH", `${SCHEDULES}/${s.id}`, JSON.stringify([{ op: "add", path: "/schedule", value: "0 30 2 ? * MON" }]));
    assert.equal(r.status, 204);
    assert.equal(obj((await a.get(`${SCHEDULES}/${s.id}`)).json).schedule, "0 30 2 ? * MON");
  });

  test("malformed JSON labelled text/plain is the usual 400 for malformed JSON", async () => {
    const r = await postman("POST", `${DEFS}/bulk-get`, "{ids: [");
    assert.equal(r.status, 400);
    const body = obj(r.json);
    assert.equal(body.type, "https://ns.adobe.com/aep/errors/UPLIB-101206-500");
    assert.match(body.title as string, /^Malformed JSON in request body: /);
  });
});

describe("other operations keep Adobe's content-type check", () => {
  test("POST /segment/definitions labelled text/plain: 400 and nothing stored", async () => {
    const before = await definitionCount();
    const r = await postman("POST", DEFS, JSON.stringify(definitionBody("postman-refused", 'homeAddress.countryCode = "US"')));
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { type: "/placeholder/type/uri", status: 400, title: "BadRequestError", detail: "A valid content-type must be specified" });
    assert.equal(await definitionCount(), before);
  });

  test("POST /segment/jobs labelled text/plain: 400 and no job", async () => {
    const before = obj(obj((await a.get(`${JOBS}?limit=1`)).json)._page).totalCount;
    const r = await postman("POST", JOBS, JSON.stringify([{ segmentId: "*" }]));
    assert.equal(r.status, 400);
    assert.equal(obj(r.json).detail, "A valid content-type must be specified");
    assert.equal(obj(obj((await a.get(`${JOBS}?limit=1`)).json)._page).totalCount, before);
  });
});
