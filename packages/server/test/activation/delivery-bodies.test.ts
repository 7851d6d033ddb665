// Webhook bodies from kept profile parts (selection-cache.ts) against a real store: byte for byte
// the JSON of buildPayload's objects, a profile whose data changes (new fragment, field update,
// delete) is read again, and a kept profile is not (embedded; PostgreSQL reads every unit anew).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { buildPayload } from "../../src/activation/delivery/payload.js";
import { SelectionCache } from "../../src/activation/delivery/selection-cache.js";
import type { UnitItem } from "../../src/activation/delivery/state-store.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { MergePolicySpec, ValidRecord } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "../profiles/test-store.js";

const scope = { orgId: "org-bodies", sandboxName: "prod" };
const PDG: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const NONE: MergePolicySpec = { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
const T = Date.UTC(2026, 10, 29, 8, 0, 0);

function record(index: number, ecid: string, email: string | null, body: Record<string, unknown>, ts: number): ValidRecord {
  const identities = [{ namespace: "ECID", id: ecid }, ...(email === null ? [] : [{ namespace: "Email", id: email }])];
  const full = { identityMap: Object.fromEntries(identities.map((i, k) => [i.namespace, [{ id: i.id, ...(k === 0 ? { primary: true } : {}) }]])), ...body, _repo: { modifyDate: new Date(ts).toISOString() } };
  const json = JSON.stringify(full);
  return { index, kind: "profile", body: full, primary: identities[0]!, identities, timestamp: ts, eventId: null, size: Buffer.byteLength(json), json };
}

/** The store, counting its profile reads. */
function counting(store: ProfileStore): { store: ProfileStore; reads: () => number } {
  let n = 0;
  const proxy = new Proxy(store, {
    get(t, k) {
      if (k === "profileSelections" || k === "graphIdentitiesOf") {
        return (...a: unknown[]) => {
          n++;
          return (t[k] as (...x: unknown[]) => unknown).apply(t, a);
        };
      }
      const v = Reflect.get(t, k) as unknown;
      return typeof v === "function" ? (v as (...x: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { store: proxy, reads: () => n };
}

describe("webhook bodies from kept profile parts", () => {
  let ts: TestStore;
  let ada: string;
  let bob: string;
  before(async () => {
    ts = openTestStore();
    await ts.store.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, T);
    await ts.store.append(scope, "crm", [
      record(0, "ecid-ada", "ada@example.com", { person: { name: { firstName: "Ada", lastName: "Lovelace" } }, homeAddress: { countryCode: "GB" }, segmentMembership: { ups: { forged: { status: "realized" } } } }, T),
      record(1, "ecid-ada-2", "ada@example.com", { homeAddress: { countryCode: "FR" } }, T + 1000),
      record(2, "ecid-bob", null, { person: { name: { firstName: "Bob", lastName: "Ö \"quoted\" \u2028" } } }, T),
    ], { ingestedAt: T, maxIdentitiesPerGraph: 50 });
    [ada, bob] = (await ts.store.findProfileIds(scope, [{ namespace: "ECID", id: "ecid-ada" }, { namespace: "ECID", id: "ecid-bob" }])).map((p) => p!) as [string, string];
  });
  after(async () => {
    await ts.cleanup();
  });

  const items = (): UnitItem[] => [
    { seq: 7, profileId: ada, audienceId: "aud-1", status: "realized", at: T },
    { seq: 8, profileId: "999999", audienceId: "aud-1", status: "exited", at: T + 1 },
    { seq: 9, profileId: bob, audienceId: "aud-2", status: "realized", at: T + 2 },
    { seq: 11, profileId: ada, audienceId: "aud-2", status: "exited", at: T + 3 },
    { seq: 0, profileId: bob, audienceId: "aud-3", status: "existing", at: T + 4 },
  ];

  test("the same bytes as the JSON of buildPayload, for every selection and policy", async () => {
    const cases: Array<[{ attributes: string[]; identityNamespaces: string[] }, MergePolicySpec]> = [
      [{ attributes: ["xdm:person.name.firstName", "homeAddress.countryCode", "segmentMembership.ups", "_segmentd", "no.such.path"], identityNamespaces: ["email"] }, PDG],
      [{ attributes: [], identityNamespaces: [] }, PDG],
      [{ attributes: ["person.name", "person.name.lastName", "homeAddress"], identityNamespaces: ["ECID", "Email"] }, PDG],
      [{ attributes: ["homeAddress.countryCode", "person.name.lastName"], identityNamespaces: ["ECID"] }, NONE],
    ];
    const cache = new SelectionCache(ts.store, scope);
    for (const [sel, policy] of cases) {
      for (const unit of [items(), items().slice(2), [items()[1]!]]) {
        const expected = JSON.stringify(await buildPayload(ts.store, scope, unit, sel, policy));
        // Twice: read, then (embedded) from the kept parts.
        assert.equal((await cache.body(unit, sel, policy)).toString("utf8"), expected);
        assert.equal((await cache.body(unit, sel, policy)).toString("utf8"), expected);
      }
    }
  });

  test("a repeated audience keeps its first place and its last value; non-ASCII audience ids and attributes are UTF-8", async () => {
    const unit: UnitItem[] = [
      { seq: 0, profileId: ada, audienceId: "aud-1", status: "existing", at: T },
      { seq: 0, profileId: ada, audienceId: "aud-ü", status: "existing", at: T + 1 },
      { seq: 12, profileId: bob, audienceId: "aud-2", status: "realized", at: T + 2 },
      { seq: 13, profileId: ada, audienceId: "aud-1", status: "exited", at: T + 3 },
      { seq: 14, profileId: ada, audienceId: "aud-3", status: "realized", at: T + 4 },
      { seq: 15, profileId: ada, audienceId: "aud-ü", status: "exited", at: T + 5 },
    ];
    const sel = { attributes: ["person.name.lastName"], identityNamespaces: [] };
    const expected = JSON.stringify(await buildPayload(ts.store, scope, unit, sel, PDG));
    const body = (await new SelectionCache(ts.store, scope).body(unit, sel, PDG)).toString("utf8");
    assert.equal(body, expected);
    const parsed = JSON.parse(body) as Array<{ segmentMembership: { ups: Record<string, { status: string }> }; _segmentd: { seqs: number[] } }>;
    assert.deepEqual(Object.entries(parsed[0]!.segmentMembership.ups).map(([a, v]) => `${a}=${v.status}`), ["aud-1=exited", "aud-ü=exited", "aud-3=realized"]);
    assert.deepEqual(parsed[0]!._segmentd.seqs, [13, 14, 15]);
    // ASCII only: the same bytes whichever encoding made them.
    const plain = unit.filter((i) => i.profileId === ada && i.audienceId !== "aud-ü");
    assert.equal((await new SelectionCache(ts.store, scope).body(plain, { attributes: [], identityNamespaces: [] }, PDG)).toString("utf8"),
      JSON.stringify(await buildPayload(ts.store, scope, plain, { attributes: [], identityNamespaces: [] }, PDG)));
  });

  test("a kept profile is not read again; one whose data changed is, with its new attributes", async () => {
    const c = counting(ts.store);
    const cache = new SelectionCache(c.store, scope);
    const sel = { attributes: ["person.name.firstName", "homeAddress.countryCode"], identityNamespaces: [] };
    const first = (unit: UnitItem[]) => cache.body(unit, sel, PDG).then((b) => JSON.parse(b.toString("utf8")) as Array<{ _segmentd: { profileId: string }; person?: { name: { firstName: string } }; homeAddress?: { countryCode: string }; identityMap: Record<string, unknown> }>);
    const unit = items().slice(0, 3);
    assert.deepEqual((await first(unit)).map((p) => p.person?.name.firstName ?? null), ["Ada", null, "Bob"]);
    assert.equal(c.reads(), 1);
    await first(unit);
    await first([items()[2]!]);
    assert.equal(c.reads(), STORE_KIND === "embedded" ? 1 : 3);

    // A newer fragment of Ada's graph: her name changes; Bob's part is kept.
    await ts.store.append(scope, "crm", [record(3, "ecid-ada-3", "ada@example.com", { person: { name: { firstName: "Augusta" } } }, T + 5000)], { ingestedAt: T + 5000, maxIdentitiesPerGraph: 50 });
    const reads = c.reads();
    const after1 = await first(unit);
    assert.deepEqual(after1.map((p) => p.person?.name.firstName ?? null), ["Augusta", null, "Bob"]);
    assert.deepEqual(Object.keys(after1[0]!.identityMap).sort(), ["ECID", "Email"]);
    assert.equal((after1[0]!.identityMap["ECID"] as unknown[]).length, 3);
    assert.equal(c.reads(), reads + 1);

    // A field update (data lifecycle) and a delete are changes too.
    await ts.store.updateFields(scope, { datasetId: "crm", identities: [{ namespace: "ECID", id: "ecid-bob" }], set: { "homeAddress.countryCode": "NZ" } });
    assert.equal((await first(unit))[2]!.homeAddress?.countryCode, "NZ");
    await ts.store.deleteByIdentities(scope, [{ namespace: "ECID", id: "ecid-bob" }], "ALL");
    const gone = (await first(unit))[2]!;
    assert.deepEqual([gone._segmentd.profileId, gone.identityMap, gone.person ?? null], [bob, {}, null]);
    assert.equal(JSON.stringify(await buildPayload(ts.store, scope, unit, sel, PDG)), (await cache.body(unit, sel, PDG)).toString("utf8"));
  });

  test("other selectors make other parts; a capacity smaller than a unit still gives every profile", async () => {
    const cache = new SelectionCache(ts.store, scope, 1);
    const unit = items();
    for (const sel of [{ attributes: ["person.name.lastName"], identityNamespaces: ["ECID"] }, { attributes: [], identityNamespaces: ["Email"] }]) {
      const expected = JSON.stringify(await buildPayload(ts.store, scope, unit, sel, PDG));
      assert.equal((await cache.body(unit, sel, PDG)).toString("utf8"), expected);
      assert.equal((await cache.body(unit, sel, PDG)).toString("utf8"), expected);
    }
  });
});
