// findProfileIds and writeMembershipChanges (the edge forwarder's calls) on every store: the
// worker-thread and direct embedded stores in the unit run, PostgreSQL in test:pg. Each must
// answer what its one-at-a-time / transition-returning counterpart answers, and leave the same
// stored state. Also the embedded membership writes' two statement shapes (multi-row for dense
// chunks of profile ids, single-row for spread ones) and the worker's wire format for changes.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { unwireChanges, unwireIdentities, wireChanges, wireIdentities } from "../../src/profiles/embedded/worker-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { MembershipChange, ProfileStore } from "../../src/profiles/store.js";
import type { Identity, MembershipStatus, TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore, type TestStoreKind } from "./test-store.js";

const A: TenantScope = { orgId: "batched@AdobeOrg", sandboxName: "prod" };
const OTHER: TenantScope = { orgId: "batched@AdobeOrg", sandboxName: "never-written" };
const T0 = Date.UTC(2026, 10, 1);
const crm = (id: string): Identity => ({ namespace: "crmid", id });

/** Every stored trace of the given definitions: members by status, counts, transitions, per-profile rows. */
async function state(store: ProfileStore, scope: TenantScope, defs: readonly string[], pids: readonly string[]): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const def of defs) {
    for (const status of ["realized", "exited"] as const) out[`ids ${def} ${status}`] = await store.listMemberIds(scope, def, status);
    out[`count ${def}`] = await store.countMembers(scope, def);
    out[`transitions ${def}`] = await store.listTransitions(scope, { definitionId: def, limit: 100_000 });
  }
  for (const pid of pids) out[`profile ${pid}`] = await store.getMemberships(scope, pid);
  return out;
}

const kinds: TestStoreKind[] = STORE_KIND === "postgres" ? ["postgres"] : ["embedded", "embedded-direct"];

for (const kind of kinds) {
  describe(`batched profile-id reads and membership writes (${kind})`, () => {
    let ts: TestStore;
    let store: ProfileStore;
    before(async () => {
      ts = openTestStore(kind);
      store = ts.store;
      await store.createDataset(A, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, T0);
      const records = [];
      // 1,200 profiles (several chunks of the callers' reads), one linked to a second identity.
      for (let i = 0; i < 1200; i++) records.push({ index: i, value: { identityMap: { CRMID: [{ id: `p${i}`, primary: true }] } } });
      records.push({ index: 1200, value: { identityMap: { CRMID: [{ id: "p7", primary: true }], EMAIL: [{ id: "seven@example.com" }] } } });
      await ingestRecords(store, A, "crm", records, { now: T0 });
    });
    after(async () => { await ts.cleanup(); });

    it("findProfileIds answers in order what findProfileId answers for each identity, null for the unknown", async () => {
      const identities: Identity[] = [crm("p3"), crm("nobody"), { namespace: "email", id: "seven@example.com" }, crm("p7"), crm("p3"), crm("p1199"), { namespace: "ecid", id: "p3" }];
      const ids = await store.findProfileIds(A, identities);
      const one = await Promise.all(identities.map((i) => store.findProfileId(A, i)));
      assert.deepEqual(ids, one);
      assert.equal(ids.length, identities.length);
      assert.equal(ids[1], null, "unknown identity");
      assert.equal(ids[6], null, "same id, other namespace");
      assert.equal(typeof ids[0], "string");
      assert.equal(ids[0], ids[4], "a repeated identity answers twice");
      assert.equal(ids[2], ids[3], "two identities of one graph: one profile");
      assert.notEqual(ids[0], ids[3]);
    });

    it("findProfileIds reads many identities in one call, and nothing of a tenant that never wrote", async () => {
      const identities: Identity[] = [];
      for (let i = 1250; i >= 0; i--) identities.push(crm(`p${i}`));
      const ids = await store.findProfileIds(A, identities);
      assert.equal(ids.length, 1251);
      assert.deepEqual(ids.slice(0, 51), new Array(51).fill(null), "p1250…p1200 do not exist");
      const expected = await Promise.all(identities.map((i) => store.findProfileId(A, i)));
      assert.deepEqual(ids, expected);
      assert.equal(new Set(ids.slice(51)).size, 1200, "1,200 distinct profiles");
      assert.deepEqual(await store.findProfileIds(A, []), []);
      assert.deepEqual(await store.findProfileIds(OTHER, [crm("p1"), crm("p2")]), [null, null]);
    });

    it("writeMembershipChanges leaves what applyMembershipChanges leaves, and counts its transitions", async () => {
      const pids = (await store.findProfileIds(A, [crm("p10"), crm("p11"), crm("p12")])).map((p) => p!);
      const [p10, p11, p12] = pids as [string, string, string];
      const calls = (def: string): MembershipChange[][] => [
        [
          { profileId: p10, definitionId: def, status: "realized", source: "edge", at: T0 },
          // Twice in one call: the second starts from the status the first set.
          { profileId: p11, definitionId: def, status: "realized", source: "edge", at: T0 },
          { profileId: p11, definitionId: def, status: "exited", source: "edge", at: T0 + 1 },
          // An exit without a membership records nothing.
          { profileId: p12, definitionId: def, status: "exited", source: "edge", at: T0 },
          // The caller's `from`, taken as given.
          { profileId: p12, definitionId: `${def}-from`, status: "realized", source: "streaming", at: T0 + 2, from: null },
        ],
        [
          { profileId: p10, definitionId: def, status: "realized", source: "edge", at: T0 + 10 },
          { profileId: p10, definitionId: def, status: "exited", source: "edge", at: T0 + 11 },
          { profileId: p11, definitionId: def, status: "realized", source: "edge", at: T0 + 12 },
          { profileId: p12, definitionId: `${def}-from`, status: "exited", source: "streaming", at: T0 + 13, from: "realized" },
        ],
        [],
      ];
      const applied: number[] = [];
      for (const changes of calls("bw-apply")) applied.push((await store.applyMembershipChanges(A, changes)).length);
      const written: number[] = [];
      for (const changes of calls("bw-write")) written.push(await store.writeMembershipChanges(A, changes));
      assert.deepEqual(applied, [4, 3, 0]);
      assert.deepEqual(written, applied);
      const rename = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll("bw-apply", "bw-write")) as unknown;
      const a = await state(store, A, ["bw-apply", "bw-apply-from"], pids);
      const w = await state(store, A, ["bw-write", "bw-write-from"], pids);
      assert.deepEqual(rename(a), rename(w));
      assert.deepEqual(w["ids bw-write exited"], [p10], "p10 exited");
      assert.deepEqual(w["ids bw-write realized"], [p11], "p11 exited and re-entered");
      assert.deepEqual((w["transitions bw-write"] as Array<{ profileId: string; from: string | null; to: string }>).map((t) => `${t.profileId}:${t.from}->${t.to}`),
        [`${p10}:null->realized`, `${p11}:null->realized`, `${p11}:realized->exited`, `${p10}:realized->exited`, `${p11}:exited->realized`]);
      assert.deepEqual(w["count bw-write-from"], { realized: 0, exited: 1 });
      assert.equal(await store.writeMembershipChanges(OTHER, []), 0);
    });

    it("writes dense and spread profile ids alike (the embedded store's multi-row and single-row statements)", async () => {
      // 600 consecutive ids (two full dense chunks and a remainder), then 600 spread over a wide range.
      const dense: MembershipChange[] = [];
      for (let i = 0; i < 600; i++) dense.push({ profileId: String(100_000 + i), definitionId: "bw-dense", status: "realized", source: "batch", at: T0 });
      const spread: MembershipChange[] = [];
      for (let i = 0; i < 600; i++) spread.push({ profileId: String(200_000 + ((i * 7919) % 600) * 1000), definitionId: "bw-dense", status: "realized", source: "batch", at: T0 });
      assert.equal(await store.writeMembershipChanges(A, dense), 600);
      assert.equal(await store.writeMembershipChanges(A, spread), 600);
      // Again: no transition; then every other one exits (dense ids two apart, within a chunk's span).
      assert.equal(await store.writeMembershipChanges(A, [...dense, ...spread]), 0);
      const exits = [...dense, ...spread].filter((_, i) => i % 2 === 0).map((c) => ({ ...c, status: "exited" as MembershipStatus, at: T0 + 1 }));
      assert.equal(await store.writeMembershipChanges(A, exits), 600);
      const realized = await store.listMemberIds(A, "bw-dense", "realized");
      const exited = await store.listMemberIds(A, "bw-dense", "exited");
      const want = (pred: (i: number) => boolean) => [...dense, ...spread].filter((_, i) => pred(i)).map((c) => c.profileId).sort((x, y) => Number(x) - Number(y));
      assert.deepEqual(realized, want((i) => i % 2 === 1));
      assert.deepEqual(exited, want((i) => i % 2 === 0));
      const transitions = await store.listTransitions(A, { definitionId: "bw-dense", limit: 10_000 });
      assert.equal(transitions.length, 1800);
      assert.deepEqual(transitions.slice(0, 600).map((t) => t.profileId), dense.map((c) => c.profileId), "in the order of the changes");
      assert.deepEqual(transitions.slice(600, 1200).map((t) => t.profileId), spread.map((c) => c.profileId));
      assert.ok(transitions.slice(1200).every((t) => t.from === "realized" && t.to === "exited" && t.at === new Date(T0 + 1).toISOString()));
    });
  });
}

describe("worker store wire formats", () => {
  it("carries identities and membership changes exactly", () => {
    const identities: Identity[] = [crm("a"), { namespace: "email", id: "x\u0000y\n" }, crm("")];
    assert.deepEqual(unwireIdentities(wireIdentities(identities)), identities);
    assert.deepEqual(unwireIdentities(wireIdentities([])), []);
    const changes: MembershipChange[] = [
      { profileId: "12", definitionId: "d1", status: "realized", source: "edge", at: T0 },
      { profileId: "13", definitionId: "d2", status: "exited", source: "batch", at: T0 + 0.5, from: "realized" },
      { profileId: "12", definitionId: "d1", status: "exited", source: "edge", at: -1, from: null },
      { profileId: "x", definitionId: "realized", status: "realized", source: "streaming", at: Number.MAX_SAFE_INTEGER },
    ];
    const wire = wireChanges(changes);
    assert.ok(wire !== null);
    assert.deepEqual(unwireChanges(structuredClone(wire)), changes);
    assert.equal("from" in unwireChanges(wire)[0]!, false, "an absent from stays absent");
    assert.deepEqual(unwireChanges(wireChanges([])!), []);
  });

  it("leaves changes that do not have the documented types to the structured clone", () => {
    const bad = [{ profileId: 12, definitionId: "d", status: "realized", source: "edge", at: T0 }] as unknown as MembershipChange[];
    assert.equal(wireChanges(bad), null);
    const badAt = [{ profileId: "12", definitionId: "d", status: "realized", source: "edge", at: String(T0) }] as unknown as MembershipChange[];
    assert.equal(wireChanges(badAt), null);
    const badFrom = [{ profileId: "12", definitionId: "d", status: "realized", source: "edge", at: T0, from: 3 }] as unknown as MembershipChange[];
    assert.equal(wireChanges(badFrom), null);
  });
});
