// Dataset expirations (/ttl) over real HTTP: create (≥ 24 h ahead), list, get
// by expiration or dataset id, update and cancel while pending, one active per
// dataset, the hard concurrency limit, and execution at expiry under a
// ManualClock (the dataset's data is gone and memberships exit).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { ORG_A, ORG_B, TOKEN_B, ingest, person, quotaMap, startTestServer, type TestServer } from "./helpers.js";

const TTL = "/data/core/hygiene/ttl";
const T0 = Date.UTC(2026, 10, 2, 10);
const H = 3_600_000;
const A: TenantScope = { orgId: ORG_A, sandboxName: "prod" };
const PDG: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const iso = (ms: number) => new Date(ms).toISOString();

describe("dataset expirations over HTTP", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({
      clockStart: T0,
      hygieneConfig: { defaults: { datasetExpirationQuota: 3, dailyConsumerDeleteIdentitiesQuota: 100, monthlyConsumerDeleteIdentitiesQuota: 100, monthlyUpdatedFieldIdentitiesQuota: 100 } },
    });
    for (let i = 1; i <= 6; i++) await s.profiles.createDataset(A, { id: `ds${i}`, name: `Dataset ${i}`, schemaClass: "profile", profileEnabled: true }, T0);
    await s.profiles.createDataset({ orgId: ORG_B, sandboxName: "prod" }, { id: "b1", name: "B one", schemaClass: "profile", profileEnabled: true }, T0);
  });
  after(async () => {
    await s.close();
  });

  const activeCount = async () => (await quotaMap(s)).datasetExpirationQuota!.consumed;

  it("creates a pending expiration (201) at least 24 hours ahead; less is a 400 and nothing is stored", async () => {
    const tooSoon = await s.call("POST", TTL, { datasetId: "ds1", displayName: "soon", expiry: iso(T0 + 24 * H - 1) });
    assert.equal(tooSoon.status, 400);
    assert.equal(tooSoon.body.type, "http://ns.adobe.com/aep/errors/HYGN-3100-400");
    assert.equal(tooSoon.body.title, `'expiry' must be at least 24 hours in the future: ${iso(T0 + 24 * H - 1)} is before ${iso(T0 + 24 * H)}.`);
    assert.equal(await activeCount(), 0);

    const r = await s.call("POST", TTL, { datasetId: "ds1", displayName: "exactly a day", description: "d", expiry: iso(T0 + 24 * H) });
    assert.equal(r.status, 201);
    assert.match(String(r.body.ttlId), /^SD-[0-9a-f-]{36}$/);
    assert.deepEqual({ ...r.body, ttlId: undefined }, {
      ttlId: undefined, datasetId: "ds1", datasetName: "Dataset 1", sandboxName: "prod", displayName: "exactly a day", description: "d",
      imsOrg: ORG_A, status: "pending", expiry: iso(T0 + 24 * H), updatedAt: iso(T0), updatedBy: "static-token",
    });
    assert.equal(await activeCount(), 1);
  });

  it("validates the body: required fields, date formats, known dataset", async () => {
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ datasetId: "ds2", expiry: "2030-01-01" }, 400, "'displayName' is required."],
      [{ displayName: "x", expiry: "2030-01-01" }, 400, "'datasetId' is required."],
      [{ datasetId: "ds2", displayName: "x" }, 400, "'expiry' is required: an ISO-8601 date (YYYY-MM-DD) or date-time."],
      [{ datasetId: "ds2", displayName: "x", expiry: "next week" }, 400, `'expiry' "next week" is not an ISO-8601 date (YYYY-MM-DD) or date-time.`],
      [{ datasetId: "ds2", displayName: "x", expiry: "2027-02-29" }, 400, `'expiry' "2027-02-29" is not a valid date.`],
    ];
    for (const [body, status, title] of cases) {
      const r = await s.call("POST", TTL, body);
      assert.equal(r.status, status, title);
      assert.equal(r.body.title, title);
    }
    const unknown = await s.call("POST", TTL, { datasetId: "nope", displayName: "x", expiry: "2030-01-01" });
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.body, { error_code: "404003", message: "Dataset nope not found in sandbox prod." });
    // A date alone is 00:00:00Z; an offset is converted to UTC.
    const dated = await s.call("POST", TTL, { datasetId: "ds2", displayName: "dated", expiry: "2028-02-29" });
    assert.equal(dated.body.expiry, "2028-02-29T00:00:00.000Z");
    const cancel = await s.call("DELETE", `${TTL}/${dated.body.ttlId as string}`);
    assert.equal(cancel.status, 200);
    const offset = await s.call("POST", TTL, { datasetId: "ds2", displayName: "offset", expiry: "2028-03-01T01:30:00+02:00" });
    assert.equal(offset.body.expiry, "2028-02-29T23:30:00.000Z");
    await s.call("DELETE", `${TTL}/${offset.body.ttlId as string}`);
    assert.equal(await activeCount(), 1);
  });

  it("allows one active expiration per dataset", async () => {
    const r = await s.call("POST", TTL, { datasetId: "ds1", displayName: "again", expiry: "2031-01-01" });
    assert.equal(r.status, 400);
    assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3102-400");
    assert.equal(r.body.title, "The requested dataset already has an existing expiration. Additional detail: A TTL already exists for datasetId=ds1");
    assert.equal(await activeCount(), 1);
  });

  it("refuses the (allowance + 1)-th active expiration whatever its expiry; cancelling one frees a slot", async () => {
    const a2 = await s.call("POST", TTL, { datasetId: "ds2", displayName: "two", expiry: "2040-01-01" });
    const a3 = await s.call("POST", TTL, { datasetId: "ds3", displayName: "three", expiry: iso(T0 + 100 * H) });
    assert.equal(a2.status, 201);
    assert.equal(a3.status, 201);
    assert.equal(await activeCount(), 3);
    for (const expiry of [iso(T0 + 24 * H), "2099-12-31"]) {
      const r = await s.call("POST", TTL, { datasetId: "ds4", displayName: "four", expiry });
      assert.equal(r.status, 400);
      assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3201-400");
      assert.equal(r.body.title, "Quota datasetExpirationQuota exceeded: the allowance is 3 active dataset expirations at one time, 0 remaining, and this request needs 1. Nothing was accepted.");
    }
    assert.equal(await activeCount(), 3);
    const cancelled = await s.call("DELETE", `${TTL}/ds2`);
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, "cancelled");
    assert.equal((await s.call("GET", `${TTL}/${a2.body.ttlId as string}`)).body.status, "cancelled");
    assert.equal(await activeCount(), 2);
    const four = await s.call("POST", TTL, { datasetId: "ds4", displayName: "four", expiry: "2099-12-31" });
    assert.equal(four.status, 201);
    assert.equal(await activeCount(), 3);
  });

  it("gets by expiration id or dataset id, with history on request; unknown ids are 404", async () => {
    const byDataset = await s.call("GET", `${TTL}/ds2`);
    assert.equal(byDataset.body.status, "cancelled");
    const history = await s.call("GET", `${TTL}/${byDataset.body.ttlId as string}?include=history`);
    assert.deepEqual((history.body.history as Array<{ status: string }>).map((h) => h.status), ["created", "cancelled"]);
    const missing = await s.call("GET", `${TTL}/SD-nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { error_code: "404003", message: "Dataset expiration configuration SD-nope not found." });
  });

  it("updates a pending expiration by its id only; the new expiry must also be ≥ 24 h ahead", async () => {
    const current = await s.call("GET", `${TTL}/ds3`);
    const id = current.body.ttlId as string;
    s.clock.set(T0 + H);
    const r = await s.call("PUT", `${TTL}/${id}`, { displayName: "three, renamed", expiry: iso(T0 + 48 * H) });
    assert.equal(r.status, 200);
    assert.equal(r.body.displayName, "three, renamed");
    assert.equal(r.body.expiry, iso(T0 + 48 * H));
    assert.equal(r.body.updatedAt, iso(T0 + H));
    const soon = await s.call("PUT", `${TTL}/${id}`, { expiry: iso(T0 + 2 * H) });
    assert.equal(soon.status, 400);
    assert.equal((await s.call("GET", `${TTL}/${id}`)).body.expiry, iso(T0 + 48 * H));
    const byDataset = await s.call("PUT", `${TTL}/ds3`, { displayName: "x" });
    assert.equal(byDataset.status, 404);
    const empty = await s.call("PUT", `${TTL}/${id}`, {});
    assert.equal(empty.body.title, "Give at least one of 'displayName', 'description', 'expiry'.");
    const cancelledOne = (await s.call("GET", `${TTL}/ds2`)).body.ttlId as string;
    const wrong = await s.call("PUT", `${TTL}/${cancelledOne}`, { displayName: "x" });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.title, `Dataset expiration ${cancelledOne} is cancelled; only a pending expiration can be updated.`);
  });

  it("lists with 0-based pages and never 0 total_pages; filters by status", async () => {
    const all = await s.call("GET", `${TTL}?limit=2&orderBy=%2BdisplayName`);
    assert.equal(all.status, 200);
    assert.equal(all.body.total_count, 6);
    assert.equal(all.body.total_pages, 3);
    assert.equal(all.body.current_page, 0);
    assert.equal((all.body.results as unknown[]).length, 2);
    const pending = await s.call("GET", `${TTL}?status=pending`);
    assert.deepEqual((pending.body.results as Array<{ datasetId: string }>).map((e) => e.datasetId).sort(), ["ds1", "ds3", "ds4"]);
    const none = await s.call("GET", `${TTL}?status=completed`);
    assert.deepEqual({ ...none.body }, { results: [], current_page: 0, total_pages: 1, total_count: 0 });
    const bad = await s.call("GET", `${TTL}?status=done`);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.title, "Unknown status 'done'. Allowed: pending, executing, cancelled, completed.");
  });

  it("refuses record deletes on a dataset with an active expiration", async () => {
    const r = await s.call("POST", "/data/core/hygiene/workorder", { action: "delete_identity", datasetId: "ds1", identities: [{ namespace: { code: "email" }, id: "a@x.com" }] });
    assert.equal(r.status, 400);
    const ttlId = (await s.call("GET", `${TTL}/ds1`)).body.ttlId as string;
    assert.deepEqual(r.body, { error_code: "400001", message: `Dataset 'ds1' has an active dataset expiration (${ttlId}); work orders are not accepted for it.` });
    assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed, 0);
  });

  it("executes at expiry: the dataset and its data are gone, emptied profiles' memberships exit, the slot is freed", async () => {
    s.clock.set(T0 + 2 * H);
    await ingest(s.profiles, A, "ds1", [person("gone@x.com"), person("stays@x.com")], T0 + 2 * H);
    await ingest(s.profiles, A, "ds5", [person("stays@x.com", { loyalty: { tier: "gold" } })], T0 + 2 * H);
    const gonePid = (await s.profiles.findProfileId(A, { namespace: "email", id: "gone@x.com" }))!;
    const staysPid = (await s.profiles.findProfileId(A, { namespace: "email", id: "stays@x.com" }))!;
    await s.profiles.applyMembershipChanges(A, [gonePid, staysPid].map((profileId) => ({ profileId, definitionId: "seg-x", status: "realized" as const, source: "batch" as const, at: T0 + 2 * H })));

    // One millisecond early: nothing happens.
    s.clock.set(T0 + 24 * H - 1);
    await s.hygiene.tick();
    assert.equal((await s.call("GET", `${TTL}/ds1`)).body.status, "pending");
    assert.notEqual(await s.profiles.getDataset(A, "ds1"), null);

    s.clock.set(T0 + 24 * H);
    await s.hygiene.tick();
    const done = await s.call("GET", `${TTL}/ds1?include=history`);
    assert.equal(done.body.status, "completed");
    assert.deepEqual((done.body.history as Array<{ status: string }>).map((h) => h.status), ["created", "executing", "completed"]);
    assert.equal(await s.profiles.getDataset(A, "ds1"), null);
    const gone = await s.profiles.getProfile(A, { namespace: "email", id: "gone@x.com" }, PDG);
    assert.ok(gone === null || gone.sources.length === 0, `gone@x.com still has data in ${JSON.stringify(gone?.sources)}`);
    assert.deepEqual((await s.profiles.getProfile(A, { namespace: "email", id: "stays@x.com" }, PDG))?.sources, ["ds5"]);
    assert.deepEqual((await s.profiles.getMemberships(A, gonePid)).map((m) => m.status), ["exited"]);
    assert.deepEqual((await s.profiles.getMemberships(A, staysPid)).map((m) => m.status), ["realized"]);
    assert.equal(await activeCount(), 2);
    // Completed: not cancellable, and a new expiration of another dataset fits again.
    assert.equal((await s.call("DELETE", `${TTL}/${done.body.ttlId as string}`)).status, 404);
    assert.equal((await s.call("POST", TTL, { datasetId: "ds5", displayName: "five", expiry: "2035-01-01" })).status, 201);
  });

  it("an executing expiration cannot be cancelled or updated (400)", async () => {
    const rec = (await s.store.expirationForDataset(ORG_A, "prod", "ds3"))!;
    assert.equal(await s.store.replaceExpiration({ ...rec, status: "executing" }, ["pending"]), true);
    const r = await s.call("DELETE", `${TTL}/${rec.ttlId}`);
    assert.equal(r.status, 400);
    assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3103-400");
    assert.equal(r.body.title, `Dataset expiration ${rec.ttlId} is executing; only a pending expiration can be cancelled.`);
    const put = await s.call("PUT", `${TTL}/${rec.ttlId}`, { displayName: "late" });
    assert.equal(put.status, 400);
    assert.equal(put.body.title, `Dataset expiration ${rec.ttlId} is executing; only a pending expiration can be updated.`);
    assert.equal((await s.call("GET", `${TTL}/${rec.ttlId}`)).body.status, "executing");
  });

  it("another organization sees none of it and has its own slots", async () => {
    const b = { org: ORG_B, token: TOKEN_B };
    const list = await s.call("GET", TTL, undefined, b);
    assert.equal(list.body.total_count, 0);
    const ds4 = (await s.call("GET", `${TTL}/ds4`)).body.ttlId as string;
    assert.equal((await s.call("GET", `${TTL}/${ds4}`, undefined, b)).status, 404);
    assert.equal((await s.call("DELETE", `${TTL}/${ds4}`, undefined, b)).status, 404);
    assert.equal((await s.call("GET", `${TTL}/${ds4}`)).body.status, "pending");
    assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).datasetExpirationQuota!.consumed, 0);
    assert.equal((await s.call("POST", TTL, { datasetId: "ds4", displayName: "not B's", expiry: "2035-01-01" }, b)).status, 404);
    assert.equal((await s.call("POST", TTL, { datasetId: "b1", displayName: "B's", expiry: "2035-01-01" }, b)).status, 201);
    assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).datasetExpirationQuota!.consumed, 1);
    assert.equal(await activeCount(), 3);
  });

  it("concurrent creations racing for the last slots: exactly the allowance ends up active", async () => {
    const b = { org: ORG_B, token: TOKEN_B };
    const scopeB = { orgId: ORG_B, sandboxName: "prod" };
    for (let i = 2; i <= 9; i++) await s.profiles.createDataset(scopeB, { id: `b${i}`, name: `B ${i}`, schemaClass: "profile", profileEnabled: true }, T0);
    // B has 1 active of 3: eight simultaneous creations leave room for exactly two.
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => s.call("POST", TTL, { datasetId: `b${i + 2}`, displayName: "race", expiry: "2036-01-01" }, b)));
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 201, 400, 400, 400, 400, 400, 400]);
    for (const r of results) if (r.status === 400) assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3201-400");
    assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).datasetExpirationQuota!.consumed, 3);
    assert.equal((await s.call("GET", `${TTL}?status=pending`, undefined, b)).body.total_count, 3);
  });
});
