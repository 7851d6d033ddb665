import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DEMO_DATASETS, demoEcid, demoEvents, demoProfiles } from "../../src/profiles/demo.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { JsonObject, MergePolicySpec, TenantScope } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { openTestStore, type TestStore } from "./test-store.js";

const NOW = Date.UTC(2026, 10, 21, 12);
const opts = { profiles: 200, events: 2000, now: NOW, seed: 42 };
const get = (o: JsonObject, path: string): unknown => path.split(".").reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], o);

describe("demo retail dataset", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    assert.deepEqual([...demoProfiles({ ...opts, profiles: 5 })], [...demoProfiles({ ...opts, profiles: 5 })]);
    assert.deepEqual([...demoEvents({ ...opts, events: 50 })], [...demoEvents({ ...opts, events: 50 })]);
    assert.notDeepEqual([...demoProfiles({ ...opts, profiles: 5, seed: 43 })], [...demoProfiles({ ...opts, profiles: 5 })]);
    // Profile i does not depend on how many profiles are generated.
    assert.deepEqual([...demoProfiles({ ...opts, profiles: 3 })][2], [...demoProfiles({ ...opts, profiles: 10 })][2]);
  });

  it("produces valid profile records with the retail attributes", () => {
    const profiles = [...demoProfiles(opts)];
    for (const [i, p] of profiles.entries()) {
      const v = validateRecord(p, i, { id: "p", schemaClass: "profile", identityFields: [] });
      assert.ok(v.ok, `profile ${i}: ${JSON.stringify(v.ok ? null : v.errors)}`);
      assert.equal(v.record.primary.namespace, "crmid");
      for (const path of ["person.name.firstName", "person.birthDate", "homeAddress.countryCode", "homeAddress.city", "personalEmail.address", "loyalty.tier", "loyalty.points", "consents.marketing.preferred"]) {
        assert.notEqual(get(p, path), undefined, `profile ${i} lacks ${path}`);
      }
    }
    const optedOut = profiles.filter((p) => get(p, "consents.marketing.preferred") === "n" || get(p, "consents.collect.val") === "n").length;
    assert.ok(optedOut > 0 && optedOut < profiles.length / 4, `opted out: ${optedOut}`);
    assert.ok(new Set(profiles.map((p) => get(p, "homeAddress.countryCode"))).size >= 4);
  });

  it("produces valid events of every type inside the 90-day window", () => {
    const events = [...demoEvents(opts)];
    const types = new Map<string, number>();
    for (const [k, e] of events.entries()) {
      const v = validateRecord(e, k, { id: "e", schemaClass: "experienceevent", identityFields: [] });
      assert.ok(v.ok, `event ${k}: ${JSON.stringify(v.ok ? null : v.errors)}`);
      assert.ok(v.record.timestamp! < NOW && v.record.timestamp! >= NOW - 90 * 86_400_000);
      types.set(e["eventType"] as string, (types.get(e["eventType"] as string) ?? 0) + 1);
      if (e["eventType"] === "commerce.purchases") {
        const items = e["productListItems"] as Array<{ priceTotal: number }>;
        const total = Math.round(items.reduce((s, x) => s + x.priceTotal, 0) * 100) / 100;
        assert.equal(get(e, "commerce.order.priceTotal"), total);
        assert.match(get(e, "commerce.order.currencyCode") as string, /^(USD|GBP|EUR|CAD|AUD)$/);
      }
    }
    assert.deepEqual([...types.keys()].sort(), ["commerce.productListAdds", "commerce.productViews", "commerce.purchases", "directMarketing.emailOpened", "web.webpagedetails.pageViews"]);
    assert.equal(new Set(events.map((e) => e["_id"])).size, events.length);
  });

  describe("ingested into a store", () => {
    const S: TenantScope = { orgId: "demo-org", sandboxName: "dev" };
    const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
    let ts: TestStore;
    before(() => { ts = openTestStore(); });
    after(async () => { await ts.cleanup(); });

    it("stitches each customer's CRM record, web events and email opens into one profile", async () => {
      const p = await ts.store.createDataset(S, DEMO_DATASETS.profiles, NOW);
      const e = await ts.store.createDataset(S, DEMO_DATASETS.events, NOW);
      const pr = await ingestRecords(ts.store, S, p.id, [...demoProfiles(opts)].map((value, index) => ({ index, value })), { now: NOW });
      const er = await ingestRecords(ts.store, S, e.id, [...demoEvents(opts)].map((value, index) => ({ index, value })), { now: NOW });
      assert.deepEqual([pr.failed, er.failed], [[], []]);
      assert.equal(er.accepted, 2000);
      const customer = await ts.store.getProfile(S, { namespace: "ecid", id: demoEcid(42, 0) }, pdg);
      assert.ok(customer);
      assert.equal(customer.identities.length, 3);
      const events = await ts.store.getEvents(S, { namespace: "ecid", id: demoEcid(42, 0) }, pdg);
      const kinds = new Set(events.events.map((x) => x.body["eventType"]));
      assert.ok(kinds.has("directMarketing.emailOpened") && kinds.has("web.webpagedetails.pageViews"), [...kinds].join());
      const count = await ts.store.countProfiles(S);
      assert.ok(count > 200, "anonymous visitors add profiles of their own");
    });
  });
});
