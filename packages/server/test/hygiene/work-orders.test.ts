// Record delete and record update work orders over real HTTP: statuses,
// execution against the profile store (records gone, emptied profiles gone,
// memberships exited with transitions), list/get/rename, validation, and
// organization isolation.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { ORG_A, ORG_B, TOKEN_B, ingest, person, quotaMap, startTestServer, type TestServer } from "./helpers.js";

const WO = "/data/core/hygiene/workorder";
const T0 = Date.UTC(2026, 9, 5, 8);
const A: TenantScope = { orgId: ORG_A, sandboxName: "prod" };
const PDG: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const email = (id: string) => ({ namespace: "email", id });

function ids(...values: string[]) {
  return values.map((id) => ({ namespace: { code: "email" }, id }));
}

/** What the batch engine's scan sees: email → datasets with data for that profile. */
async function scanned(s: TestServer): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for await (const chunk of s.profiles.scanProfiles(A, PDG)) {
    for (const p of chunk) for (const i of p.identities) if (i.namespace === "email") out.set(i.id, p.sources);
  }
  return out;
}

describe("work orders over HTTP", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ clockStart: T0 });
    for (const [id, name] of [["crm", "CRM"], ["web", "Web"]] as const) {
      await s.profiles.createDataset(A, { id, name, schemaClass: "profile", profileEnabled: true }, T0);
    }
    await s.profiles.createDataset({ orgId: ORG_A, sandboxName: "dev" }, { id: "dev-crm", name: "Dev CRM", schemaClass: "profile", profileEnabled: true }, T0);
    await ingest(s.profiles, A, "crm", [person("ann@x.com", { loyalty: { tier: "gold" } }), person("bob@x.com"), person("cy@x.com"), person("dee@x.com", { loyalty: { tier: "silver", points: 5 } })], T0);
    await ingest(s.profiles, A, "web", [person("bob@x.com", { homeAddress: { city: "Lyon" } })], T0);
    const pid = async (e: string) => (await s.profiles.findProfileId(A, email(e)))!;
    await s.profiles.applyMembershipChanges(A, await Promise.all(["ann@x.com", "bob@x.com", "cy@x.com"].map(async (e) => ({ profileId: await pid(e), definitionId: "seg-1", status: "realized" as const, source: "batch" as const, at: T0 }))));
  });
  after(async () => {
    await s.close();
  });

  it("a record delete in one dataset: received, then completed; the emptied profile disappears and its membership exits", async () => {
    const annPid = (await s.profiles.findProfileId(A, email("ann@x.com")))!;
    const bobPid = (await s.profiles.findProfileId(A, email("bob@x.com")))!;
    s.clock.set(T0 + 1000);
    const r = await s.call("POST", WO, { action: "delete_identity", datasetId: "crm", displayName: "GDPR-ish", description: "ann and bob", identities: ids("ann@x.com", "bob@x.com") });
    assert.equal(r.status, 200);
    assert.match(String(r.body.workorderId), /^DI-[0-9a-f-]{36}$/);
    assert.match(String(r.body.bundleId), /^BN-[0-9a-f-]{36}$/);
    assert.deepEqual({ ...r.body, workorderId: undefined, bundleId: undefined }, {
      workorderId: undefined, bundleId: undefined, orgId: ORG_A, action: "identity-delete", createdAt: new Date(T0 + 1000).toISOString(), updatedAt: new Date(T0 + 1000).toISOString(),
      operationCount: 2, targetServices: ["datalake", "identity", "profile", "ajo"], status: "received", createdBy: "static-token",
      datasetId: "crm", datasetName: "CRM", displayName: "GDPR-ish", description: "ann and bob",
    });
    // The runner may start before the response arrives, so the clock stays put until it is idle.
    await s.hygiene.runner.idle();
    const got = await s.call("GET", `${WO}/${r.body.workorderId as string}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.status, "completed");
    assert.deepEqual(got.body.productStatusDetails, ["Data Management", "Identity Service", "Profile Service", "Journey Orchestrator"].map((productName) => ({ productName, productStatus: "success", createdAt: new Date(T0 + 1000).toISOString() })));

    // Profile access and the batch engine's scan no longer see Ann; Bob keeps his web fragment only.
    const ann = await s.profiles.getProfile(A, email("ann@x.com"), PDG);
    assert.ok(ann === null || ann.sources.length === 0, `ann still has data in ${JSON.stringify(ann?.sources)}`);
    const bob = await s.profiles.getProfile(A, email("bob@x.com"), PDG);
    assert.deepEqual(bob?.sources, ["web"]);
    assert.deepEqual(bob?.entity["homeAddress"], { city: "Lyon" });
    const seen = await scanned(s);
    assert.deepEqual(seen.get("ann@x.com") ?? [], []);
    assert.deepEqual(seen.get("bob@x.com"), ["web"]);

    // Ann's membership exited, with a recorded transition; Bob's did not.
    assert.deepEqual((await s.profiles.getMemberships(A, annPid)).map((m) => [m.definitionId, m.status]), [["seg-1", "exited"]]);
    assert.deepEqual((await s.profiles.getMemberships(A, bobPid)).map((m) => [m.definitionId, m.status]), [["seg-1", "realized"]]);
    const transitions = await s.profiles.listTransitions(A, { definitionId: "seg-1", since: T0 + 1 });
    assert.deepEqual(transitions.map((t) => [t.profileId, t.from, t.to, t.source, t.at]), [[annPid, "realized", "exited", "batch", new Date(T0 + 1000).toISOString()]]);
    // Another identity in the same dataset is untouched.
    assert.deepEqual((await s.profiles.getProfile(A, email("cy@x.com"), PDG))?.sources, ["crm"]);
  });

  it("a delete with datasetId ALL removes the identity from every dataset and from the identity graph", async () => {
    const cyPid = (await s.profiles.findProfileId(A, email("cy@x.com")))!;
    const r = await s.call("POST", WO, { action: "delete_identity", datasetId: "ALL", displayName: "all", namespacesIdentities: [{ namespace: { code: "Email" }, ids: ["cy@x.com"] }] });
    assert.equal(r.status, 200);
    assert.equal(r.body.datasetName, "");
    await s.hygiene.runner.idle();
    assert.equal((await s.call("GET", `${WO}/${r.body.workorderId as string}/`)).body.status, "completed");
    assert.equal(await s.profiles.findProfileId(A, email("cy@x.com")), null);
    assert.equal(await s.profiles.getProfile(A, email("cy@x.com"), PDG), null);
    assert.equal((await scanned(s)).has("cy@x.com"), false);
    assert.deepEqual((await s.profiles.getMemberships(A, cyPid)).map((m) => m.status), ["exited"]);
  });

  it("a record update sets and removes fields of the given identities in one dataset and consumes the update quota", async () => {
    const before = (await quotaMap(s)).monthlyUpdatedFieldIdentitiesQuota!.consumed;
    const r = await s.call("POST", WO, {
      action: "update_identity", datasetId: "crm", displayName: "fix tiers", identities: ids("dee@x.com"),
      fieldUpdates: { set: { "loyalty.tier": "bronze" }, remove: ["loyalty.points"] },
    });
    assert.equal(r.status, 200);
    assert.equal(r.body.action, "identity-update");
    assert.deepEqual(r.body.fieldUpdates, { set: { "loyalty.tier": "bronze" }, remove: ["loyalty.points"] });
    await s.hygiene.runner.idle();
    assert.equal((await s.call("GET", `${WO}/${r.body.workorderId as string}`)).body.status, "completed");
    assert.deepEqual((await s.profiles.getProfile(A, email("dee@x.com"), PDG))?.entity["loyalty"], { tier: "bronze" });
    const q = await quotaMap(s);
    assert.equal(q.monthlyUpdatedFieldIdentitiesQuota!.consumed, before + 1);
  });

  it("refuses malformed record updates with exact messages, consuming nothing", async () => {
    const before = await quotaMap(s);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ action: "update_identity", datasetId: "ALL", identities: ids("dee@x.com"), fieldUpdates: { set: { a: 1 } } }, "A record update work order applies to exactly one dataset; 'ALL' is not allowed."],
      [{ action: "update_identity", datasetId: "crm,web", identities: ids("dee@x.com"), fieldUpdates: { set: { a: 1 } } }, "A record update work order applies to exactly one dataset."],
      [{ action: "update_identity", datasetId: "crm", identities: ids("dee@x.com") }, "'fieldUpdates' is required for update_identity: an object with 'set' and/or 'remove'."],
      [{ action: "update_identity", datasetId: "crm", identities: ids("dee@x.com"), fieldUpdates: { set: {} } }, "'fieldUpdates' must set or remove at least one field."],
      [{ action: "update_identity", datasetId: "crm", identities: ids("dee@x.com"), fieldUpdates: { remove: ["identityMap.Email"] } }, "fieldUpdates.remove: 'identityMap.Email' cannot be changed by a record update."],
      [{ action: "purge", datasetId: "crm", identities: ids("dee@x.com") }, 'Unsupported action "purge". Allowed: delete_identity, update_identity.'],
      [{ action: "delete_identity", datasetId: "crm,ALL", identities: ids("dee@x.com") }, "'ALL' cannot be combined with dataset ids."],
      [{ action: "delete_identity", identities: ids("dee@x.com") }, "'datasetId' is required: a dataset id, a comma-separated list of dataset ids, or ALL."],
      [{ action: "delete_identity", datasetId: "dev-crm", identities: ids("dee@x.com") }, "Dataset 'dev-crm' was not found in sandbox 'prod'."],
    ];
    for (const [body, message] of cases) {
      const r = await s.call("POST", WO, body);
      assert.equal(r.status, 400, message);
      assert.deepEqual(r.body, { error_code: "400001", message });
    }
    assert.deepEqual(await quotaMap(s), before);
  });

  it("acts in the sandbox of the x-sandbox-name header, and lists per sandbox (or all with sandboxName=*)", async () => {
    const r = await s.call("POST", WO, { action: "delete_identity", datasetId: "dev-crm", displayName: "dev one", identities: ids("x@x.com") }, { sandbox: "dev" });
    assert.equal(r.status, 200);
    const inProd = await s.call("GET", `${WO}?search=dev%20one`);
    assert.equal(inProd.body.total, 0);
    const inDev = await s.call("GET", `${WO}?search=dev%20one`, undefined, { sandbox: "dev" });
    assert.equal(inDev.body.total, 1);
    const all = await s.call("GET", `${WO}?search=dev%20one&sandboxName=*`);
    assert.equal(all.body.total, 1);
    const noHeader = await s.call("GET", `${WO}?search=dev%20one`, undefined, { sandbox: null });
    assert.equal(noHeader.body.total, 1);
  });

  it("lists with paging links that stop on the last page, filters, and refuses bad parameters", async () => {
    const first = await s.call("GET", `${WO}?limit=2&page=0&orderBy=%2BcreatedAt&sandboxName=*`);
    assert.equal(first.status, 200);
    const total = first.body.total as number;
    // Orders of the tests above: two deletes, one update, one in the dev sandbox.
    assert.equal(total, 4);
    assert.equal(first.body.count, 2);
    const next = (first.body._links as { next: { href: string } }).next.href;
    assert.match(next, /\/data\/core\/hygiene\/workorder\?.*page=1/);
    const lastPage = Math.ceil(total / 2) - 1;
    const last = await s.call("GET", `${WO}?limit=2&page=${lastPage}&sandboxName=*`);
    assert.equal((last.body._links as { next?: unknown }).next, undefined);
    assert.equal(last.body.count, total - 2 * lastPage);
    const updates = await s.call("GET", `${WO}?type=identity-update`);
    assert.deepEqual((updates.body.results as Array<{ action: string }>).map((o) => o.action), ["identity-update"]);
    const bad = await s.call("GET", `${WO}?status=done`);
    assert.deepEqual(bad.body, { error_code: "400001", message: "Unknown status 'done'. Allowed: received, validated, submitted, ingested, completed, failed." });
    assert.deepEqual((await s.call("GET", `${WO}?limit=101`)).body, { error_code: "400001", message: "'limit' must be an integer from 1 to 100." });
    assert.deepEqual((await s.call("GET", `${WO}?fromDate=2026-01-01`)).body, { error_code: "400001", message: "'fromDate' and 'toDate' must be given together." });
    // Unknown parameters (real clients send `start`) are ignored.
    assert.equal((await s.call("GET", `${WO}?start=0`)).status, 200);
  });

  it("renames with `name` (or legacy `displayName`); only labels change; unknown ids are 404", async () => {
    const created = await s.call("POST", WO, { action: "delete_identity", datasetId: "ALL", displayName: "old", identities: ids("nobody@x.com") });
    await s.hygiene.runner.idle();
    s.clock.set(T0 + 50_000);
    const id = created.body.workorderId as string;
    const r = await s.call("PUT", `${WO}/${id}`, { name: "new name", description: "why", datasetId: "crm" });
    assert.equal(r.status, 200);
    assert.equal(r.body.displayName, "new name");
    assert.equal(r.body.description, "why");
    assert.equal(r.body.datasetId, "ALL");
    assert.equal(r.body.status, "completed");
    assert.equal(r.body.updatedAt, new Date(T0 + 50_000).toISOString());
    const legacy = await s.call("PUT", `${WO}/${id}/`, { displayName: "legacy" });
    assert.equal(legacy.body.displayName, "legacy");
    assert.equal((await s.call("GET", `${WO}/${id}`)).body.displayName, "legacy");
    assert.deepEqual((await s.call("PUT", `${WO}/${id}`, {})).body, { error_code: "400001", message: "Give 'name' (or 'displayName') and/or 'description'." });
    const missing = await s.call("PUT", `${WO}/DI-nope`, { name: "x" });
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { error_code: "404003", message: "Work order DI-nope not found." });
  });

  it("another organization sees none of these orders and cannot act on A's datasets", async () => {
    const list = await s.call("GET", `${WO}?sandboxName=*`, undefined, { org: ORG_B, token: TOKEN_B });
    assert.equal(list.status, 200);
    assert.equal(list.body.total, 0);
    const r = await s.call("POST", WO, { action: "delete_identity", datasetId: "crm", identities: ids("bob@x.com") }, { org: ORG_B, token: TOKEN_B });
    assert.equal(r.status, 400);
    assert.deepEqual(r.body, { error_code: "400001", message: "Dataset 'crm' was not found in sandbox 'prod'." });
    assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).dailyConsumerDeleteIdentitiesQuota!.consumed, 0);
    assert.deepEqual((await s.profiles.getProfile(A, email("bob@x.com"), PDG))?.sources, ["web"]);
  });
});
