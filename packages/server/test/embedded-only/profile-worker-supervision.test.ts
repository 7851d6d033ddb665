// Issue #22, "Supervision and truthful health": the embedded profile store's
// worker thread, killed under a running server, is restarted. While it is down
// /readyz answers 503 with the reason, segmentd_profile_store_up is 0, and
// requests that need the store get a 503 with a clear code (not a 500, never a
// hang); once it is back /readyz is 200 and the data stored before is served.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createLogger, startServer, type RunningServer } from "../../src/index.js";
import { WorkerProfileStore } from "../../src/profiles/embedded/worker-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { StoreUnavailableError } from "../../src/profiles/store.js";
import { arr, client, obj, ORG_A, ORG_B, TOKEN_B, testConfig } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";

const T0 = Date.UTC(2026, 10, 1);
const PROFILE = "/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityIdNS=ECID&entityId=";
/** Long enough to look at the outage over HTTP; the default first delay is 200 ms. */
const RESTART_DELAY_MS = 1500;

function metric(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? undefined : Number(m[1]);
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 10));
  }
}

describe("a profile store worker that dies under a running server", () => {
  let handle: TestStoreHandle;
  let server: RunningServer;
  let profiles: WorkerProfileStore;
  const crashes: Error[] = [];

  before(async () => {
    handle = await createTestStore("supervision");
    profiles = new WorkerProfileStore({ path: path.join(handle.dataDir, "profiles.db"), restartDelayMs: RESTART_DELAY_MS, onCrash: (e) => crashes.push(e) });
    server = await startServer(testConfig(handle), { logger: createLogger("silent"), store: await handle.open(), profiles });
    for (const [orgId, id] of [[ORG_A, "a-1"], [ORG_B, "b-1"]] as const) {
      const scope = { orgId, sandboxName: "prod" };
      await profiles.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, T0);
      const r = await ingestRecords(profiles, scope, "crm", [{ index: 0, value: { identityMap: { ECID: [{ id, primary: true }] }, homeAddress: { countryCode: "US" } } }], { now: T0 });
      assert.equal(r.accepted, 1);
    }
  });
  after(async () => {
    await server.close();
    await handle.dispose();
  });

  it("is restarted; readiness, metrics and requests tell the outage truthfully", async () => {
    const a = client(server.url);
    const b = client(server.url, { token: TOKEN_B, org: ORG_B });
    assert.equal((await a.get("/readyz")).status, 200);
    assert.equal(metric((await a.get("/metrics")).text, "segmentd_profile_store_up"), 1);

    // A call in flight when the thread dies fails with the 503 error at once (it does not hang).
    // Sent once the termination has begun, so that the worker can never answer it first.
    const terminated = profiles.currentWorker().terminate();
    const inFlight = profiles.countProfiles({ orgId: ORG_A, sandboxName: "prod" });
    await terminated;
    await assert.rejects(inFlight, (e: unknown) => e instanceof StoreUnavailableError && /profile store worker restarting: the worker thread exited/.test(e.message));

    const ready = await a.get("/readyz");
    assert.equal(ready.status, 503, ready.text);
    assert.deepEqual(obj(ready.json), {
      status: "unavailable",
      store: "embedded",
      profileStore: "embedded",
      error: "profile store worker restarting: the worker thread exited (code 1)",
    });
    assert.equal(metric((await a.get("/metrics")).text, "segmentd_profile_store_up"), 0);
    // Requests that need the store: a 503 naming the cause, for every tenant.
    for (const [c, id] of [[a, "a-1"], [b, "b-1"]] as const) {
      const r = await c.get(`${PROFILE}${id}`);
      assert.equal(r.status, 503, r.text);
      const item = obj(arr(obj(obj(r.json)["errors"])["503"])[0]);
      assert.equal(item["code"], "SEGMENTD-PROFILE-STORE-UNAVAILABLE-503");
      assert.equal(item["message"], "The profile store is unavailable: profile store worker restarting: the worker thread exited (code 1). Retry shortly");
    }
    // Liveness is not readiness: the process itself still serves.
    assert.equal((await a.get("/healthz")).status, 200);

    // Back after the restart delay: ready, and what was stored before is served.
    await until("readiness", async () => ((await a.get("/readyz")).status === 200 ? true : undefined));
    const metrics = (await a.get("/metrics")).text;
    assert.equal(metric(metrics, "segmentd_profile_store_up"), 1);
    assert.equal(metric(metrics, "segmentd_profile_store_worker_restarts_total"), 1);
    for (const [c, id] of [[a, "a-1"], [b, "b-1"]] as const) {
      const r = await c.get(`${PROFILE}${id}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(obj(obj(Object.values(obj(r.json))[0])["entity"])["homeAddress"], { countryCode: "US" });
    }
    assert.equal(crashes.length, 1);
    assert.match(crashes[0]!.message, /profile store worker failed .*exited/);
  });

  it("a scan open across a restart fails with the 503 error, and later scans work", async () => {
    const scope = { orgId: ORG_A, sandboxName: "prod" };
    const policy = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } } as const;
    // More profiles than a scan reads ahead, so that the scan still needs the worker after the kill.
    const more = Array.from({ length: 40 }, (_, i) => ({ index: i, value: { identityMap: { ECID: [{ id: `scan-${i}`, primary: true }] } } }));
    assert.equal((await ingestRecords(profiles, scope, "crm", more, { now: T0 })).accepted, 40);
    const it = profiles.scanProfiles(scope, policy, { chunkSize: 1 })[Symbol.asyncIterator]();
    assert.equal((await it.next()).done, false);
    await profiles.currentWorker().terminate();
    await assert.rejects(async () => {
      for (let r = await it.next(); !r.done; r = await it.next());
    }, StoreUnavailableError);
    await until("the store", async () => ((await profiles.status()).up ? true : undefined));
    let n = 0;
    for await (const chunk of profiles.scanProfiles(scope, policy)) n += chunk.length;
    assert.equal(n, 41);
    assert.equal((await profiles.status()).restarts, 2);
  });

  it("edge events answered 200 while the worker is down reach the hub once it is back (none dropped)", async () => {
    await until("the store", async () => ((await profiles.status()).up ? true : undefined));
    const a = client(server.url);
    const ds = await a.post("/data/foundation/catalog/dataSets", {
      name: "web", schemaRef: { id: "https://ns.adobe.com/xdm/context/experienceevent", contentType: "application/vnd.adobe.xed+json;version=1" },
      tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
    });
    assert.equal(ds.status, 201, ds.text);
    const stream = await a.post("/data/core/edge/datastreams", { name: "web", eventDatasetId: (arr(ds.json)[0] as string).replace("@/dataSets/", "") });
    assert.equal(stream.status, 201, stream.text);
    const interact = (id: string) => a.post(`/ee/v2/interact?dataStreamId=${obj(stream.json)["id"] as string}`,
      { event: { xdm: { _id: `ev-${id}`, identityMap: { ECID: [{ id, primary: true }] }, eventType: "web.pageview", timestamp: new Date(Date.now() - 1000).toISOString() } } });
    assert.equal((await interact("warm")).status, 200);
    await profiles.currentWorker().terminate();
    const acked: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await interact(`down-${i}`);
      if (r.status === 200) acked.push(`down-${i}`);
      else assert.equal(r.status, 503, r.text);
    }
    assert.ok(acked.length > 0, "the edge answers from its location while the hub's store is down");
    await until("the store", async () => ((await profiles.status()).up ? true : undefined));
    await server.app.edge!.flush();
    for (const id of acked) {
      const r = await a.get(`/data/core/ups/access/entities?schema.name=_xdm.context.experienceevent&relatedSchema.name=_xdm.context.profile&relatedEntityIdNS=ECID&relatedEntityId=${id}`);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(arr(obj(r.json)["children"]).map((c) => obj(c)["entityId"]), [`ev-${id}`], id);
    }
  });
});
