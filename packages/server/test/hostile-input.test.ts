/**
 * Hostile bodies (deep nesting, huge arrays, wrong JSON roots) get a 4xx and
 * the service keeps serving; nothing is stored.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, MPS, arr, client, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

let h: Harness;
let a: Client;
before(async () => {
  h = await startHarness("hostile");
  a = client(h.url);
});
after(async () => h.close());

test("deeply nested and oversized JSON bodies are 4xx; the server keeps serving", async () => {
  const deep = "[".repeat(400_000) + "]".repeat(400_000);
  const mpId = obj(arr(obj((await a.get(MPS)).json).children)[0]).id as string;
  const cases: [string, string, string, number][] = [
    ["POST", DEFS, `{"name":"x","schema":{"name":"s"},"expression":{"type":"PQL","format":"pql/text","value":"a=1"},"classification":${deep}}`, 400],
    ["PATCH", `${MPS}/${mpId}`, `[{"op":"add","path":"/name","value":${deep}}]`, 400],
    ["POST", DEFS, deep, 400],
    ["POST", DEFS, "null", 400],
    ["POST", `${DEFS}/bulk-get`, JSON.stringify({ ids: Array.from({ length: 20_000 }, (_, i) => ({ id: `x${i}` })) }), 400],
    ["POST", DEFS, JSON.stringify({ name: "x".repeat(2_000_000) }), 413],
  ];
  for (const [method, path, body, status] of cases) {
    const r = await a.call(method, path, body);
    assert.equal(r.status, status, `${method} ${path} ${body.slice(0, 40)}: ${r.text.slice(0, 200)}`);
    assert.equal(typeof obj(r.json).requestId, "string");
  }
  assert.equal((await a.get("/healthz")).status, 200);
  assert.equal(obj(obj((await a.get(DEFS)).json).page).totalCount, 0);
  assert.equal(obj(arr(obj((await a.get(MPS)).json).children)[0]).name, "Default Timebased");
});

test("readyz is 503 when the store is unreachable, while healthz stays 200 (runs last: it closes the store)", async () => {
  assert.equal((await fetch(`${h.url}/readyz`)).status, 200);
  await h.server.store.close();
  const r = await fetch(`${h.url}/readyz`);
  assert.equal(r.status, 503);
  assert.deepEqual(await r.json(), { status: "unavailable", store: h.server.store.kind, error: "metadata store unreachable" });
  assert.equal((await fetch(`${h.url}/healthz`)).status, 200);
});
