/**
 * A PQL binding may use only its own variable and those of the bindings to its left (pql.md §5):
 * a variable used left of its declaration is refused over HTTP with PQL's position, and nothing
 * is stored (#39, item 15).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

let h: Harness;
let a: Client;
before(async () => {
  h = await startHarness("pql-binding-order");
  a = client(h.url);
});
after(async () => h.close());

const FORWARD = 'exists A from xEvent where A.timestamp < B.timestamp,\n  B from xEvent where B.eventType = "buy"';
const MESSAGE = "The variable 'B' is used before its declaration at 2:3: a binding can use only its own variable and those of the bindings to its left";

test("a definition using a binding left of its declaration is 400 with the position; nothing is stored", async () => {
  const r = await a.post(DEFS, definitionBody("forward binding", FORWARD));
  assert.equal(r.status, 400);
  const body = obj(r.json);
  assert.equal(body.type, "https://ns.adobe.com/aep/errors/SEGMENTD-PQL-400");
  assert.equal(body.status, 400);
  const items = arr(obj(body.errors)["400"]).map(obj);
  assert.equal(items.length, 1);
  assert.deepEqual(items[0], {
    code: "PQL_VARIABLE_BEFORE_DECLARATION", message: `line 1, column 42: ${MESSAGE}`, line: 1, column: 42, endLine: 1, endColumn: 43,
  });
  const list = obj((await a.get(`${DEFS}?limit=100`)).json);
  assert.deepEqual(arr(list.segments).map((s) => obj(s).name).filter((n) => n === "forward binding"), []);
});

test("the same bindings in their order are accepted", async () => {
  const ok = await a.post(DEFS, definitionBody("ordered bindings", 'exists B from xEvent where B.eventType = "buy",\n  A from xEvent where A.timestamp < B.timestamp'));
  assert.equal(ok.status, 200, ok.text);
});
