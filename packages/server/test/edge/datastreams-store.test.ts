/**
 * Datastreams in the metadata store (the store SEGMENTD_TEST_STORE selects),
 * over real HTTP: they survive a restart on the same data directory or
 * database; a datastreams.json of an earlier version is imported once; two
 * server instances on one database (as two processes would be: each its own
 * store connection and in-memory map) see each other's datastreams, and the
 * tenant APIs stay scoped to org and sandbox across them.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import type { Datastream } from "../../src/edge/datastreams.js";
import { derivedSandboxId } from "../../src/services/tenancy.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { EVENTS_DS, ORG, openFixture, type Fixture } from "../streaming/fixtures.js";
import { OTHER_ORG, startEdgeApp, type EdgeApp } from "./harness.js";

const T0 = Date.parse("2026-08-01T00:00:00Z");
const DS = "/data/core/edge/datastreams";

const interactBody = (who: string) => ({ event: { xdm: { identityMap: { CRMID: [{ id: who, primary: true }] }, eventType: "page.view", timestamp: new Date(T0 - 1000).toISOString() } } });
const listOf = (json: unknown) => (json as { datastreams: Datastream[] }).datastreams;
const errorsOf = (json: unknown, status: string) => (json as { errors: Record<string, Array<{ code: string; message: string }>> }).errors[status];

describe("datastreams in the metadata store", () => {
  let f: Fixture;
  const open: EdgeApp[] = [];
  const start = async (meta: MetadataStore, opts: { dataDir?: string; datastreamRefreshMs?: number } = {}) => {
    const a = await startEdgeApp(f, { meta, ...opts });
    open.push(a);
    return a;
  };
  const stop = async (a: EdgeApp) => {
    open.splice(open.indexOf(a), 1);
    await a.close();
  };

  before(async () => {
    f = await openFixture(T0);
  });
  afterEach(async () => {
    for (const a of open.splice(0)) await a.close();
    // Every test starts from a store without datastreams.
    for (const d of await f.meta.datastreams.all()) {
      const sandboxId = derivedSandboxId(d.imsOrgId, d.sandboxName);
      assert.equal(await f.meta.datastreams.delete({ orgId: d.imsOrgId, sandboxId }, d.id), true);
    }
  });
  after(async () => {
    await f.close();
  });

  it("survive a restart on the same data directory / database, loaded into memory at start-up", async () => {
    const meta1 = await f.openMeta();
    const a = await start(meta1, { dataDir: f.dataDir });
    const c = await a.post(DS, { name: "web", eventDatasetId: EVENTS_DS }, a.headers());
    assert.equal(c.status, 201);
    const d = c.json as Datastream;
    assert.equal((await a.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("r1"))).status, 200);
    // Stop the server and its store connection, then start again on the same data directory / database.
    await stop(a);
    await meta1.close();
    const meta2 = await f.openMeta();
    const b = await start(meta2, { dataDir: f.dataDir });
    assert.deepEqual(b.rt.datastreams.byId(d.id), d, "in memory before any request");
    assert.deepEqual(listOf((await b.get(DS, b.headers())).json), [d]);
    assert.deepEqual((await b.get(`${DS}/${d.id}`, b.headers())).json, d);
    assert.equal((await b.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("r2"))).status, 200);
    // A replace and a delete after the restart are stored too.
    const r = await b.put(`${DS}/${d.id}`, { name: "web 2", eventDatasetId: EVENTS_DS }, b.headers());
    assert.equal(r.status, 200);
    assert.deepEqual(await meta2.datastreams.findById(d.id), r.json);
    assert.equal((await b.del(`${DS}/${d.id}`, b.headers())).status, 204);
    assert.equal(await meta2.datastreams.findById(d.id), undefined);
  });

  it("imports a datastreams.json of an earlier version into an empty store once, and renames the file", async () => {
    const file = path.join(f.dataDir, "datastreams.json");
    const mine: Datastream = { id: "0b7c4a54-1111-4e0e-9d4b-000000000001", name: "web", imsOrgId: ORG, sandboxName: "prod", eventDatasetId: EVENTS_DS, edgeSegmentation: true, creationTime: T0 - 2000, updateTime: T0 - 1000 };
    const theirs: Datastream = { id: "0b7c4a54-1111-4e0e-9d4b-000000000002", name: "app", imsOrgId: OTHER_ORG, sandboxName: "prod", eventDatasetId: "their-events", edgeSegmentation: false, creationTime: T0 - 3000, updateTime: T0 - 3000 };
    // As FileDatastreams wrote it.
    const text = JSON.stringify([mine, theirs], null, 2);
    writeFileSync(file, text);
    const a = await start(f.meta, { dataDir: f.dataDir });
    assert.equal(existsSync(file), false, "the file is renamed");
    assert.equal(readFileSync(`${file}.imported`, "utf8"), text);
    assert.deepEqual(listOf((await a.get(DS, a.headers())).json), [mine]);
    assert.deepEqual(listOf((await a.get(DS, a.headers(OTHER_ORG))).json), [theirs]);
    // Stored under each datastream's own tenant scope.
    assert.deepEqual(await f.meta.datastreams.get({ orgId: ORG, sandboxId: f.tenant.sandbox.sandboxId }, mine.id), mine);
    assert.deepEqual(await f.meta.datastreams.get({ orgId: OTHER_ORG, sandboxId: derivedSandboxId(OTHER_ORG, "prod") }, theirs.id), theirs);
    assert.equal(await f.meta.datastreams.get({ orgId: OTHER_ORG, sandboxId: derivedSandboxId(OTHER_ORG, "prod") }, mine.id), undefined);
    assert.equal((await a.post(`/ee/v2/interact?dataStreamId=${mine.id}`, interactBody("imp"))).status, 200);
    await stop(a);

    // The rename did not happen (a crash right after the import's commit): the same file again is
    // recognized as imported (every id in the store), renamed, and nothing is written twice.
    writeFileSync(file, text);
    const b = await start(f.meta, { dataDir: f.dataDir });
    assert.equal(existsSync(file), false);
    assert.deepEqual(await f.meta.datastreams.all(), [theirs, mine]);
    await stop(b);

    // A file with other datastreams while the store holds some: nothing imported, the file stays.
    const stray: Datastream = { ...mine, id: "0b7c4a54-1111-4e0e-9d4b-000000000003", name: "stray" };
    writeFileSync(file, JSON.stringify([stray]));
    const c = await start(f.meta, { dataDir: f.dataDir });
    assert.equal(readFileSync(file, "utf8"), JSON.stringify([stray]));
    assert.equal(await f.meta.datastreams.findById(stray.id), undefined);
    assert.equal(c.rt.datastreams.byId(stray.id), undefined);
    assert.deepEqual(listOf((await c.get(DS, c.headers())).json), [mine]);
  });

  it("a datastream created through one instance is used by a second instance on the same database", async () => {
    const a = await start(await f.openMeta());
    const b = await start(await f.openMeta(), { datastreamRefreshMs: 0 });
    const c = await a.post(DS, { name: "web", eventDatasetId: EVENTS_DS }, a.headers());
    assert.equal(c.status, 201);
    const d = c.json as Datastream;
    assert.equal(b.rt.datastreams.byId(d.id), undefined, "not in the second instance's memory yet");
    // Its first requests there read it from the store (concurrent ones share the read).
    const first = await Promise.all([b.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("m1")), b.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("m2"))]);
    assert.deepEqual(first.map((r) => r.status), [200, 200]);
    assert.deepEqual(b.rt.datastreams.byId(d.id), d, "then in memory");
    assert.equal((await b.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("m3"))).status, 200);
    // The tenant APIs of the second instance read the store.
    assert.deepEqual(listOf((await b.get(DS, b.headers())).json), [d]);
    assert.deepEqual((await b.get(`${DS}/${d.id}`, b.headers())).json, d);

    // Another organization, through either instance: 404 for read, replace and delete; nothing changed.
    for (const x of [a, b]) {
      assert.deepEqual(listOf((await x.get(DS, x.headers(OTHER_ORG))).json), []);
      const get = await x.get(`${DS}/${d.id}`, x.headers(OTHER_ORG));
      assert.equal(get.status, 404);
      assert.deepEqual(errorsOf(get.json, "404"), [{ code: "SEGMENTD-DATASTREAM-404", message: `Datastream with id '${d.id}' was not found` }]);
      assert.equal((await x.put(`${DS}/${d.id}`, { name: "hijacked", eventDatasetId: EVENTS_DS, edgeSegmentation: false }, x.headers(OTHER_ORG))).status, 404);
      assert.equal((await x.del(`${DS}/${d.id}`, x.headers(OTHER_ORG))).status, 404);
    }
    assert.deepEqual((await a.get(`${DS}/${d.id}`, a.headers())).json, d);
    assert.deepEqual(a.rt.datastreams.byId(d.id), d);
    assert.deepEqual(b.rt.datastreams.byId(d.id), d);

    // A replace through the first instance reaches the second one's memory on its reload.
    f.clock.advance(1000);
    const r = await a.put(`${DS}/${d.id}`, { name: "web 2", eventDatasetId: EVENTS_DS, edgeSegmentation: false }, a.headers());
    assert.equal(r.status, 200);
    assert.deepEqual((await b.get(`${DS}/${d.id}`, b.headers())).json, r.json, "the store answers the tenant API at once");
    assert.deepEqual(b.rt.datastreams.byId(d.id), d, "the interact path keeps the version it knows until the reload");
    await b.rt.datastreams.reload();
    assert.deepEqual(b.rt.datastreams.byId(d.id), r.json);

    // And a delete: gone from the second instance's interact path after its reload.
    assert.equal((await a.del(`${DS}/${d.id}`, a.headers())).status, 204);
    assert.equal((await b.get(`${DS}/${d.id}`, b.headers())).status, 404);
    await b.rt.datastreams.reload();
    const gone = await b.post(`/ee/v2/interact?dataStreamId=${d.id}`, interactBody("m4"));
    assert.equal(gone.status, 400);
    assert.deepEqual(errorsOf(gone.json, "400"), [{ code: "SEGMENTD-EDGE-DATASTREAM-400", message: `Unknown dataStreamId '${d.id}'` }]);
  });

  it("the periodic reload brings another instance's replace and delete without a request", async () => {
    const a = await start(await f.openMeta());
    const b = await start(await f.openMeta(), { datastreamRefreshMs: 20 });
    const d = (await a.post(DS, { name: "web", eventDatasetId: EVENTS_DS }, a.headers())).json as Datastream;
    const until = async (what: string, cond: () => boolean) => {
      const deadline = Date.now() + 5000;
      while (!cond()) {
        if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    await until("the second instance to load the new datastream", () => b.rt.datastreams.byId(d.id) !== undefined);
    assert.deepEqual(b.rt.datastreams.byId(d.id), d);
    const known = b.rt.datastreams.byId(d.id);
    // An unchanged datastream keeps its object across reloads (what interact derived from it stays valid).
    await b.rt.datastreams.reload();
    assert.equal(b.rt.datastreams.byId(d.id), known);
    f.clock.advance(1000);
    await a.put(`${DS}/${d.id}`, { name: "web 2", eventDatasetId: EVENTS_DS }, a.headers());
    await until("the replace", () => b.rt.datastreams.byId(d.id)?.name === "web 2");
    await a.del(`${DS}/${d.id}`, a.headers());
    await until("the delete", () => b.rt.datastreams.byId(d.id) === undefined);
  });
});
