/**
 * The request body of edge interact, as every route reads it (http/body-parsing.ts):
 * JSON whatever the JSON-ish content type (its parser is found through Fastify's
 * cache for application/json and through the catch-all otherwise, with the same
 * result), a missing content type read as JSON, any other content type refused,
 * NUL characters refused raw or escaped (either case of the `\u`), malformed JSON
 * a 400 naming the parser's message.
 */
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, it } from "node:test";
import { EVENTS_DS } from "../streaming/fixtures.js";
import { gatedHub } from "./gated-hub.js";
import { startEdgeHarness, type EdgeHarness } from "./harness.js";

const T0 = Date.parse("2026-04-01T09:00:00Z");

describe("edge interact: request bodies", () => {
  let h: EdgeHarness;
  let path: string;

  before(async () => {
    h = await startEdgeHarness(T0);
    const r = await h.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: EVENTS_DS }, h.headers());
    assert.equal(r.status, 201, JSON.stringify(r.json));
    path = `/ee/v2/interact?dataStreamId=${(r.json as { id: string }).id}`;
  });
  after(async () => {
    await h.close();
  });

  /** A POST with exactly these headers (fetch would add a content type of its own). */
  function send(body: string, contentType: string | null): Promise<{ status: number; json: Record<string, unknown> }> {
    const url = new URL(h.url + path);
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { "content-length": Buffer.byteLength(body) };
      if (contentType !== null) headers["content-type"] = contentType;
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: "POST", headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }));
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  const event = (who: string, extra: string = "") =>
    `{"event":{"xdm":{"identityMap":{"CRMID":[{"id":"${who}","primary":true}]},"eventType":"web.pageview","timestamp":"${new Date(T0 - 1000).toISOString()}"${extra}}}}`;

  it("reads JSON under every JSON-ish content type, and without one", async () => {
    for (const ct of ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.adobe+json", "text/json", "*/*", null]) {
      const r = await send(event(`b-${ct ?? "none"}`), ct);
      assert.equal(r.status, 200, `${ct}: ${JSON.stringify(r.json)}`);
      assert.equal((r.json["handle"] as unknown[]).length, 2);
    }
  });

  it("refuses another content type", async () => {
    for (const ct of ["text/plain", "application/x-www-form-urlencoded", "application/jsonl"]) {
      const r = await send(event("b-refused"), ct);
      assert.equal(r.status, 400, ct);
      assert.equal(r.json["detail"], "A valid content-type must be specified", ct);
    }
  });

  it("refuses NUL characters, raw or escaped, and reads other escapes", async () => {
    const nul = "Request body must not contain NUL (\\u0000) characters";
    for (const extra of [',"note":"a\u0000b"', ',"note":"a\\u0000b"', ',"note":"a\\U0000b"']) {
      for (const ct of ["application/json", null]) {
        const r = await send(event("b-nul", extra), ct);
        assert.equal(r.status, 400, extra);
        assert.equal(r.json["title"], nul, extra);
      }
    }
    const ok = await send(event("b-escapes", ',"note":"tab\\t quote\\" backslash\\\\ u\\u0041"'), "application/json");
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
  });

  it("a malformed body is a 400 with the parser's message", async () => {
    for (const ct of ["application/json", null]) {
      const r = await send('{"event": ', ct);
      assert.equal(r.status, 400);
      assert.match(String(r.json["title"]), /^Malformed JSON in request body: /);
    }
  });
});

describe("edge interact: 503 with Retry-After on the synchronous and the asynchronous path", () => {
  let h: EdgeHarness;
  let g: ReturnType<typeof gatedHub>;

  before(async () => {
    // One waiting item fills the queue; a held hub append keeps it there.
    h = await startEdgeHarness(T0, undefined, { forwarder: { maxQueue: 1 }, hub: (f) => (g = gatedHub(f.hub)).store });
  });
  after(async () => {
    g.release();
    await h.close();
  });

  const datastream = async (name: string) => ((await h.post("/data/core/edge/datastreams", { name, eventDatasetId: EVENTS_DS }, h.headers())).json as { id: string }).id;
  const send = (ds: string, id: string) =>
    h.post(`/ee/v2/interact?dataStreamId=${ds}`, { event: { xdm: { identityMap: { CRMID: [{ id, primary: true }] }, eventType: "page.view", timestamp: new Date(T0 - 1000).toISOString() } } });

  it("refuses alike a datastream's first request (its dataset is read first) and a later one", async () => {
    const a = await datastream("a");
    g.hold();
    // Answered once its append is committed; until then it fills the queue.
    const filling = send(a, "q-first");
    while (g.state.appendsWaiting === 0) await new Promise((r) => setTimeout(r, 5));
    // A later request of a known datastream: answered without waiting for anything.
    const later = await send(a, "q-later");
    // The first request of another datastream: waits for its event dataset.
    const first = await send(await datastream("b"), "q-new");
    for (const r of [later, first]) {
      assert.equal(r.status, 503);
      assert.equal(r.headers.get("retry-after"), "1");
      assert.equal((r.json as { errors: Record<string, Array<{ code: string }>> }).errors["503"]![0]!.code, "SEGMENTD-EDGE-BUSY-503");
    }
    g.release();
    assert.equal((await filling).status, 200);
  });
});
