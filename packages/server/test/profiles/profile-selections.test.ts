// ProfileStore.profileSelections (what a webhook payload reads: identities and a few attribute
// paths of each merged profile) against the full read on the store of this run
// (SEGMENTD_TEST_STORE): for generated graphs of several identities with fragments in several
// datasets (ties in time, objects replaced by scalars and back, arrays, nulls, a quarantined
// fragment), under each merge policy, every answer equals graphIdentities + getProfile of the
// profile (its first identity under identityGraph none) with the paths picked from its entity.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { Identity, JsonObject, JsonValue, MergePolicySpec, TenantScope, ValidRecord } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const A: TenantScope = { orgId: "org-selections@AdobeOrg", sandboxName: "prod" };
const B: TenantScope = { orgId: "org-selections@AdobeOrg", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 29);
const DATASETS = ["crm", "loyalty", "web"];
const NAMESPACES = ["ECID", "Email", "Phone"];
const PEOPLE = 80;

const PATHS = [
  "person.name.firstName", "person.name", "person", "homeAddress.countryCode", "homeAddress", "interests", "loyalty.points",
  "loyalty.tier", "consents.marketing.email.val", "person.name.firstName.deeper", "no.such.path", "nulled",
];

const POLICIES: Array<[string, MergePolicySpec]> = [
  ["pdg, timestampOrdered", { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } }],
  ["pdg, dataSetPrecedence (web unlisted)", { identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order: ["loyalty", "crm"] } }],
  ["none, timestampOrdered", { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } }],
  ["none, dataSetPrecedence", { identityGraph: { type: "none" }, attributeMerge: { type: "dataSetPrecedence", order: ["web", "crm", "loyalty"] } }],
];

/** A small deterministic generator (mulberry32): the same data on every run and store. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function record(index: number, primary: Identity, others: Identity[], body: JsonObject, ts: number): ValidRecord {
  const identities = [primary, ...others];
  const identityMap: JsonObject = {};
  identities.forEach((i, k) => { ((identityMap[i.namespace] ??= []) as JsonValue[]).push({ id: i.id, ...(k === 0 ? { primary: true } : {}) }); });
  const full = { identityMap, ...body, _repo: { modifyDate: new Date(ts).toISOString() } };
  const json = JSON.stringify(full);
  return { index, kind: "profile", body: full, primary, identities, timestamp: ts, eventId: null, size: Buffer.byteLength(json), json };
}

/** A fragment body with a random part of the attributes, some of them in conflicting shapes. */
function body(r: () => number, who: number, k: number): JsonObject {
  const b: JsonObject = {};
  const pick = (p: number) => r() < p;
  if (pick(0.7)) b["person"] = pick(0.1) ? `person-${k}` : { name: pick(0.15) ? null : { firstName: `F${who}-${k}`, ...(pick(0.5) ? { lastName: `L${who}` } : {}) } };
  if (pick(0.6)) b["homeAddress"] = pick(0.15) ? "unknown" : { countryCode: ["FR", "GB", "US", "DE"][Math.floor(r() * 4)]!, ...(pick(0.4) ? { city: `c${k}` } : {}) };
  if (pick(0.4)) b["interests"] = Array.from({ length: Math.floor(r() * 3) }, (_, i) => `i${who}-${k}-${i}`);
  if (pick(0.4)) b["loyalty"] = pick(0.1) ? [1, 2] : { points: Math.floor(r() * 1000), ...(pick(0.3) ? { tier: pick(0.5) ? "gold" : { name: "silver" } } : {}) };
  if (pick(0.3)) b["consents"] = { marketing: { email: { val: pick(0.5) ? "y" : "n" } } };
  if (pick(0.2)) b["nulled"] = null;
  return b;
}

/** The value at a dotted path as the payload picks it: own keys of plain objects, undefined when absent. */
function picked(entity: JsonObject, path: string): JsonValue | undefined {
  let cur: JsonValue | undefined = entity;
  for (const p of path.split(".")) {
    if (cur === null || cur === undefined || typeof cur !== "object" || Array.isArray(cur) || !Object.hasOwn(cur, p)) return undefined;
    cur = cur[p];
  }
  return cur;
}

/** What profileSelections must answer for a profile id: the full read, picked. */
async function expected(store: ProfileStore, scope: TenantScope, profileId: string, policy: MergePolicySpec): Promise<{ identities: Identity[]; values: Array<JsonValue | undefined> }> {
  const identities = Number.isSafeInteger(Number(profileId)) ? await store.graphIdentities(scope, profileId) : [];
  const first = identities[0];
  const profile = first === undefined ? null : await store.getProfile(scope, first, policy);
  return { identities, values: PATHS.map((p) => profile === null ? undefined : picked(profile.entity, p)) };
}

describe(`profileSelections against getProfile (${STORE_KIND})`, () => {
  let ts: TestStore;
  let store: ProfileStore;
  let ids: string[];
  let deleted: string;
  let poisoned: string;
  before(async () => {
    ts = openTestStore();
    store = ts.store;
    for (const ds of DATASETS) await store.createDataset(A, { id: ds, name: ds, schemaClass: "profile", profileEnabled: true }, T0);
    await store.createDataset(B, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, T0);
    const r = rng(38);
    const byDataset = new Map<string, ValidRecord[]>(DATASETS.map((d) => [d, []]));
    for (let who = 0; who < PEOPLE; who++) {
      // 1–3 identities; fragments keyed by any of them, linking the others (one graph per person).
      const idents = NAMESPACES.filter((_, i) => i === 0 || r() < 0.6).map((namespace) => ({ namespace, id: `${namespace.toLowerCase()}-${who}` }));
      const fragments = 1 + Math.floor(r() * 5);
      for (let k = 0; k < fragments; k++) {
        // Every fifth person has no fragment of its first identity (ECID): empty under none.
        const keyed = who % 5 === 0 && idents.length > 1 ? idents.slice(1) : idents;
        const primary = keyed[Math.floor(r() * keyed.length)]!;
        const ds = DATASETS[Math.floor(r() * DATASETS.length)]!;
        // Times in a few steps: ties between datasets and identities decide by the tie-break.
        const at = T0 + Math.floor(r() * 4) * 1000;
        const list = byDataset.get(ds)!;
        list.push(record(list.length, primary, idents.filter((i) => i !== primary), body(r, who, k), at));
      }
    }
    const opts = { ingestedAt: T0, maxIdentitiesPerGraph: 50 };
    for (const [ds, records] of byDataset) await store.append(A, ds, records, opts);
    // The other sandbox holds the same identities: never read for A.
    await store.append(B, "crm", [record(0, { namespace: "ECID", id: "ecid-1" }, [], { person: { name: { firstName: "other sandbox" } } }, T0 + 9000)], opts);
    const all = await store.findProfileIds(A, Array.from({ length: PEOPLE }, (_, who) => ({ namespace: "ECID", id: `ecid-${who}` })));
    ids = all.map((p) => p!);
    assert.equal(new Set(ids).size, PEOPLE);
    // A quarantined fragment (nested past the depth limit, as written before the limit existed), newest: skipped by every read.
    let deep: JsonObject = { leaf: true };
    for (let i = 1; i < 2200; i++) deep = { n: deep };
    await store.append(A, "loyalty", [record(1000, { namespace: "ECID", id: "ecid-7" }, [], { homeAddress: { countryCode: "XX" }, loyalty: { points: -1 }, poison: deep }, T0 + 60_000)], opts);
    poisoned = ids[7]!;
    // A deleted profile: no identity left, no value.
    await store.deleteByIdentities(A, await store.graphIdentities(A, ids[3]!), "ALL");
    deleted = ids[3]!;
  });
  after(async () => { await ts.cleanup(); });

  for (const [name, policy] of POLICIES) {
    it(`${name}: every profile's identities and paths equal the full read's`, async () => {
      // Unit order, not the store's; an unknown id and a repeated one answered in place.
      const asked = [...ids].reverse();
      asked.splice(10, 0, "999999999", ids[5]!);
      const got = await store.profileSelections(A, asked, policy, PATHS);
      assert.equal(got.length, asked.length);
      let valued = 0;
      for (let k = 0; k < asked.length; k++) {
        const want = await expected(store, A, asked[k]!, policy);
        assert.deepEqual(got[k], want, `profile ${asked[k]} (${name})`);
        valued += want.values.filter((v) => v !== undefined).length;
      }
      // The data exercises the paths: most profiles have values (not a comparison of empties).
      assert.ok(valued > PEOPLE * 2, `${valued} values`);
      assert.deepEqual(got[asked.indexOf(deleted)], { identities: [], values: PATHS.map(() => undefined) });
      // The quarantined fragment is the newest of its profile: read, it would win under timestampOrdered.
      const poison = got[asked.indexOf(poisoned)]!;
      assert.notEqual(poison.values[PATHS.indexOf("homeAddress.countryCode")], "XX");
      assert.notEqual(poison.values[PATHS.indexOf("loyalty.points")], -1);
    });
  }

  it("none and pdg differ where the first identity has no fragment of its own", async () => {
    const pdg = await store.profileSelections(A, ids, POLICIES[0]![1], PATHS);
    const none = await store.profileSelections(A, ids, POLICIES[2]![1], PATHS);
    // Every fifth person's fragments are keyed by its other identities only.
    const linked = ids.filter((_, w) => w % 5 === 0 && pdg[w]!.identities.length > 1 && pdg[w]!.values.some((v) => v !== undefined));
    assert.ok(linked.length >= 5, `${linked.length} such profiles`);
    for (const id of linked) {
      const w = ids.indexOf(id);
      assert.deepEqual(none[w]!.identities, pdg[w]!.identities);
      assert.deepEqual(none[w]!.values, PATHS.map(() => undefined), `profile ${id}`);
    }
  });

  it("no paths: identities only, as graphIdentitiesOf; no ids: nothing", async () => {
    const got = await store.profileSelections(A, ids.slice(0, 10), POLICIES[0]![1], []);
    assert.deepEqual(got, (await store.graphIdentitiesOf(A, ids.slice(0, 10))).map((identities) => ({ identities, values: [] })));
    assert.deepEqual(await store.profileSelections(A, [], POLICIES[0]![1], PATHS), []);
  });

  it("another sandbox's profile ids answer nothing of this one", async () => {
    const [other] = await store.findProfileIds(B, [{ namespace: "ECID", id: "ecid-1" }]);
    const got = await store.profileSelections(B, [other!, ids[1]!], POLICIES[0]![1], ["person.name.firstName"]);
    assert.deepEqual(got, [{ identities: [{ namespace: "ECID", id: "ecid-1" }], values: ["other sandbox"] }, { identities: [], values: [undefined] }]);
  });
});
