/**
 * Merge policies over HTTP: CRUD, JSON Patch, PUT, one default per schema
 * class, at most one active on edge per sandbox, delete rules, bulk-get,
 * paging and tenant isolation.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DEFS, MPS, ORG_A, ORG_B, TOKEN_B, arr, client, definitionBody, obj, startHarness, type Client, type Harness } from "./helpers/server-harness.js";

let h: Harness;
let a: Client;
let b: Client;
let defaultId: string;

const policy = (name: string, extra: Record<string, unknown> = {}) => ({
  name, schema: { name: "_xdm.context.profile" }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" }, ...extra,
});

before(async () => {
  h = await startHarness("mps");
  a = client(h.url);
  b = client(h.url, { token: TOKEN_B, org: ORG_B });
  const list = obj((await a.get(MPS)).json);
  const children = arr(list.children).map(obj);
  assert.equal(children.length, 1, "each configured sandbox starts with one default policy");
  defaultId = children[0]!.id as string;
});
after(async () => h.close());

function errTitle(json: unknown): string {
  return obj(json).title as string;
}

describe("merge policies", () => {
  test("the bootstrap default policy is default and active on edge", async () => {
    const p = obj((await a.get(`${MPS}/${defaultId}`)).json);
    assert.equal(p.default, true);
    assert.equal(p.isActiveOnEdge, true);
    assert.equal(p.imsOrgId, ORG_A);
    assert.equal(obj(p.sandbox).sandboxName, "prod");
    assert.deepEqual(p.identityGraph, { type: "pdg" });
    assert.deepEqual(p.attributeMerge, { type: "timestampOrdered" });
    assert.equal(p.version, 1);
  });

  test("create, get, PUT, JSON Patch; version bumps; immutables kept", async () => {
    const c = await a.post(MPS, policy("mp-1", { attributeMerge: { type: "dataSetPrecedence", order: ["ds1", "ds2"] } }));
    assert.equal(c.status, 200, c.text);
    const p = obj(c.json);
    assert.equal(p.version, 1);
    assert.deepEqual(p.attributeMerge, { type: "dataSetPrecedence", order: ["ds1", "ds2"] });
    assert.deepEqual((await a.get(`${MPS}/${p.id}`)).json, p);
    const put = await a.put(`${MPS}/${p.id}`, policy("mp-1-renamed", { identityGraph: { type: "pdg" } }));
    assert.equal(put.status, 200);
    assert.equal(obj(put.json).version, 2);
    assert.equal(obj(put.json).name, "mp-1-renamed");
    const patch = await a.patch(`${MPS}/${p.id}`, [
      { op: "test", path: "/name", value: "mp-1-renamed" },
      { op: "replace", path: "/name", value: "patched" },
      { op: "add", path: "/identityGraph.type", value: "none" },
      { op: "add", path: "/attributeMerge/order", value: ["z"] },
      { op: "remove", path: "/attributeMerge/order" },
    ]);
    assert.equal(patch.status, 200, patch.text);
    const pp = obj(patch.json);
    assert.deepEqual([pp.name, obj(pp.identityGraph).type, pp.version, pp.attributeMerge], ["patched", "none", 3, { type: "timestampOrdered" }]);
    // Adobe's guide sends a single operation object.
    const single = await a.patch(`${MPS}/${p.id}`, { op: "add", path: "/name", value: "single" });
    assert.equal(obj(single.json).name, "single");
  });

  test("a failing JSON Patch changes nothing", async () => {
    const p = obj((await a.post(MPS, policy("mp-test"))).json);
    for (const ops of [
      [{ op: "replace", path: "/name", value: "x" }, { op: "test", path: "/name", value: "not-x" }],
      [{ op: "replace", path: "/id", value: "other" }],
      [{ op: "remove", path: "/nothing/here" }],
      [{ op: "add", path: "/identityGraph/type", value: "weird" }],
    ]) {
      const r = await a.patch(`${MPS}/${p.id}`, ops);
      assert.equal(r.status, 400, JSON.stringify(ops));
    }
    const t = await a.patch(`${MPS}/${p.id}`, [{ op: "test", path: "/name", value: "nope" }]);
    assert.equal(errTitle(t.json), 'JSON Patch failed: operation 0: test failed: the value at "/name" differs');
    assert.deepEqual((await a.get(`${MPS}/${p.id}`)).json, p);
  });

  test("validation: dataSetPrecedence needs order; wrong enum names the field", async () => {
    const r = await a.post(MPS, policy("bad", { attributeMerge: { type: "dataSetPrecedence" } }));
    assert.equal(r.status, 400);
    assert.equal(errTitle(r.json), "attributeMerge.order (the dataset ids in precedence order) is required when attributeMerge.type is dataSetPrecedence");
    const e = await a.post(MPS, policy("bad", { identityGraph: { type: "graph" } }));
    assert.equal(e.status, 400);
    assert.match(errTitle(e.json), /identityGraph\.type must be equal to one of the allowed values/);
  });

  test("a new default unsets the old one", async () => {
    const n = obj((await a.post(MPS, policy("new-default", { default: true }))).json);
    assert.equal(n.default, true);
    const old = obj((await a.get(`${MPS}/${defaultId}`)).json);
    assert.equal(old.default, false);
    assert.equal(old.version, 2);
    const defaults = arr(obj((await a.get(`${MPS}?default=true`)).json).children).map((c) => obj(c).id);
    assert.deepEqual(defaults, [n.id]);
    // New definitions now use the new default.
    const d = obj((await a.post(DEFS, definitionBody("uses-new-default"))).json);
    assert.equal(d.mergePolicyId, n.id);
    // Restore for later tests.
    await a.patch(`${MPS}/${defaultId}`, [{ op: "replace", path: "/default", value: true }]);
    assert.equal(obj((await a.get(`${MPS}/${n.id}`)).json).default, false);
  });

  test("only one policy per sandbox can be active on edge", async () => {
    const r = await a.post(MPS, policy("second-edge", { isActiveOnEdge: true }));
    assert.equal(r.status, 400);
    assert.equal(errTitle(r.json), `Only one merge policy per sandbox can be active on edge; '${defaultId}' already is in sandbox 'prod'. Set its isActiveOnEdge to false first.`);
    const other = obj((await a.post(MPS, policy("edge-later"))).json);
    const p = await a.patch(`${MPS}/${other.id}`, [{ op: "replace", path: "/isActiveOnEdge", value: true }]);
    assert.equal(p.status, 400);
    assert.equal(obj((await a.get(`${MPS}/${other.id}`)).json).isActiveOnEdge, false);
    // Another sandbox has its own edge policy.
    const dev = client(h.url, { sandbox: "dev" });
    assert.equal(arr(obj((await dev.get(`${MPS}?isActiveOnEdge=true`)).json).children).length, 1);
  });

  test("delete: refused while active on edge or used by definitions; 200 with an empty body otherwise", async () => {
    const edge = await a.delete(`${MPS}/${defaultId}`);
    assert.equal(edge.status, 400);
    assert.equal(errTitle(edge.json), `Merge policy '${defaultId}' is active on edge and cannot be deleted; set isActiveOnEdge to false first`);
    const used = obj((await a.post(MPS, policy("used"))).json);
    const d = obj((await a.post(DEFS, definitionBody("uses-used", 'a = 1', { mergePolicyId: used.id }))).json);
    const r = await a.delete(`${MPS}/${used.id}`);
    assert.equal(r.status, 400);
    assert.equal(errTitle(r.json), `Merge policy '${used.id}' is used by 1 segment definition(s) ('${d.id}') and cannot be deleted`);
    assert.equal((await a.delete(`${DEFS}/${d.id}`)).status, 200);
    const ok = await a.delete(`${MPS}/${used.id}`);
    assert.equal(ok.status, 200);
    assert.equal(ok.text, "");
    assert.equal((await a.get(`${MPS}/${used.id}`)).status, 404);
  });

  test("bulk-get, paging with _links.next, and isolation", async () => {
    for (let i = 0; i < 5; i++) await a.post(MPS, policy(`page-${i}`));
    const all = obj((await a.get(`${MPS}?limit=100`)).json);
    const total = obj(all._page).totalCount as number;
    const names = arr(all.children).map((c) => obj(c).name as string);
    assert.deepEqual(names, [...names].sort());
    const seen: string[] = [];
    let href = `${MPS}?limit=2`;
    for (let i = 0; i < 50 && href; i++) {
      const r = obj((await a.get(href)).json);
      seen.push(...arr(r.children).map((c) => obj(c).name as string));
      const next = obj(obj(r._links).next).href as string;
      href = next ? next.replace(/^@\/mergePolicies/, MPS) : "";
    }
    assert.deepEqual(seen, names);
    assert.equal(seen.length, total);
    const desc = arr(obj((await a.get(`${MPS}?limit=100&orderBy=-name`)).json).children).map((c) => obj(c).name);
    assert.deepEqual(desc, [...names].reverse());
    const ids = arr(all.children).map((c) => obj(c).id as string);
    const bulk = await a.post(`${MPS}/bulk-get`, { ids: [{ id: ids[0] }, { id: "missing" }] });
    assert.equal(bulk.status, 207);
    assert.equal(obj(obj(obj(bulk.json).results)[ids[0]!]).id, ids[0]);
    assert.deepEqual(obj(obj(obj(bulk.json).results).missing).errors, { "404": [{ code: 404, message: "Not found." }] });
    assert.equal((await a.post(`${MPS}/bulk-get`, { ids: [] })).status, 400);
    // Org B sees none of org A's policies.
    assert.equal((await b.get(`${MPS}/${ids[0]}`)).status, 404);
    assert.equal((await b.delete(`${MPS}/${ids[0]}`)).status, 404);
    assert.equal((await b.put(`${MPS}/${ids[0]}`, policy("hijack"))).status, 404);
    assert.equal(obj(obj((await b.get(MPS)).json)._page).totalCount, 1);
    assert.equal(obj((await a.get(`${MPS}/${ids[0]}`)).json).imsOrgId, ORG_A);
  });
});
