// What explain and a profile's memberships read of the profile store, on the store of this run
// (SEGMENTD_TEST_STORE): a profile with the fragments it was merged from, and a profile's
// transitions across definitions through the per-profile index, the most recent of each.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { attributeSource } from "../../src/profiles/merge.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { getPath } from "../../src/profiles/xdm-object.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const A: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "prod" };
const B: TenantScope = { orgId: "org1@AdobeOrg", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 1);
const pdgTs: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const noneTs: MergePolicySpec = { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
const ecid = (id: string) => ({ namespace: "ecid", id });
const email = (id: string) => ({ namespace: "email", id });
const rec = (...values: unknown[]) => values.map((value, index) => ({ index, value }));

describe(`profile sources (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  let crm: string, web: string;
  before(async () => {
    ts = openTestStore();
    store = ts.store;
    crm = (await store.createDataset(A, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
    web = (await store.createDataset(A, { name: "web", schemaClass: "profile", profileEnabled: true }, T0)).id;
    // CRM stitches the email to the ECID and is older; web knows the ECID only.
    await ingestRecords(store, A, crm, rec({
      identityMap: { Email: [{ id: "ann@x.com", primary: true }], ECID: [{ id: "E-ann" }] }, person: { name: { firstName: "Ann", lastName: "Lee" } },
      _repo: { modifyDate: new Date(T0 + 1000).toISOString() },
    }), { now: T0 + 5000 });
    await ingestRecords(store, A, web, rec({
      identityMap: { ECID: [{ id: "E-ann", primary: true }] }, person: { name: { firstName: "Annie" } }, _repo: { modifyDate: new Date(T0 + 2000).toISOString() },
    }), { now: T0 + 5000 });
  });
  after(async () => { await ts.cleanup(); });

  it("reads a profile with the fragments it was merged from: the same profile as getProfile, under each policy", async () => {
    const dsp: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order: [crm, web] } };
    const cases: [MergePolicySpec, ReturnType<typeof ecid>, string[], string][] = [
      [pdgTs, email("ann@x.com"), [crm, web], "Annie"],
      [dsp, email("ann@x.com"), [crm, web], "Ann"],
      [noneTs, email("ann@x.com"), [crm], "Ann"],
      [noneTs, ecid("E-ann"), [web], "Annie"],
    ];
    for (const [policy, identity, datasets, first] of cases) {
      const read = await store.getProfileWithFragments(A, identity, policy);
      assert.ok(read);
      assert.deepEqual(read.profile, await store.getProfile(A, identity, policy));
      assert.deepEqual(read.fragments.map((f) => f.datasetId).sort(), [...datasets].sort());
      const path = ["person", "name", "firstName"];
      const source = attributeSource(read.fragments, policy, path);
      assert.equal(getPath(read.profile.entity, path.join(".")), first);
      assert.equal(source && getPath(source.body, path.join(".")), first, `${JSON.stringify(policy)} ${identity.id}`);
    }
    const crmFragment = (await store.getProfileWithFragments(A, email("ann@x.com"), pdgTs))!.fragments.find((f) => f.datasetId === crm);
    assert.deepEqual([crmFragment?.primary, crmFragment?.timestamp], [email("ann@x.com"), T0 + 1000]);
    assert.equal(await store.getProfileWithFragments(A, email("nobody@x.com"), pdgTs), null);
    assert.equal(await store.getProfileWithFragments(B, email("ann@x.com"), pdgTs), null, "another sandbox sees nothing");
  });

  it("lists a profile's transitions across definitions, and the most recent of each", async () => {
    const p1 = (await store.findProfileId(A, ecid("E-ann")))!;
    await ingestRecords(store, A, crm, rec({ identityMap: { Email: [{ id: "bob@x.com", primary: true }] }, person: { name: { firstName: "Bob" } } }), { now: T0 });
    const p2 = (await store.findProfileId(A, email("bob@x.com")))!;
    const flips = [0, 1, 2, 3].map((i) => ({ profileId: p1, definitionId: "d1", status: i % 2 === 0 ? "realized" as const : "exited" as const, source: "streaming" as const, at: T0 + 10 * i }));
    for (const c of flips) await store.applyMembershipChanges(A, [c]);
    await store.applyMembershipChanges(A, [
      { profileId: p1, definitionId: "d2", status: "realized", source: "batch", at: T0 + 15 },
      { profileId: p2, definitionId: "d1", status: "realized", source: "edge", at: T0 + 5 },
    ]);
    const all = await store.listTransitions(A, { profileIds: [p1] });
    assert.deepEqual(all.map((t) => [t.profileId, t.definitionId, t.to, Date.parse(t.at) - T0]),
      [[p1, "d1", "realized", 0], [p1, "d1", "exited", 10], [p1, "d2", "realized", 15], [p1, "d1", "realized", 20], [p1, "d1", "exited", 30]]);
    const latest = await store.listTransitions(A, { profileIds: [p1], latestPerMembership: 2 });
    assert.deepEqual(latest.map((t) => [t.definitionId, t.from, t.to, Date.parse(t.at) - T0]),
      [["d2", null, "realized", 15], ["d1", "exited", "realized", 20], ["d1", "realized", "exited", 30]], "oldest first, the last 2 of each definition");
    const one = await store.listTransitions(A, { definitionId: "d1", profileIds: [p1, p2], latestPerMembership: 1 });
    assert.deepEqual(one.map((t) => [t.profileId, t.to, Date.parse(t.at) - T0]), [[p2, "realized", 5], [p1, "exited", 30]]);
    assert.deepEqual(await store.listTransitions(B, { profileIds: [p1] }), [], "another sandbox sees nothing");
  });
});
