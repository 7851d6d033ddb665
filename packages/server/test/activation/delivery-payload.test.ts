// The webhook body (payload.ts) against a real store: identities and the selected attributes read
// for all of a unit's profiles at once, the selected namespaces only, the delivery's own fields
// never taken from the profile, a deleted profile still sent (with its id), items in unit order.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { buildPayload } from "../../src/activation/delivery/payload.js";
import type { UnitItem } from "../../src/activation/delivery/state-store.js";
import type { MergePolicySpec, ValidRecord } from "../../src/profiles/types.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";

const scope = { orgId: "org-payload", sandboxName: "prod" };
const PDG: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const NONE: MergePolicySpec = { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
const T = Date.UTC(2026, 10, 29, 8, 0, 0);

function record(index: number, ecid: string, email: string | null, body: Record<string, unknown>, ts: number): ValidRecord {
  const identities = [{ namespace: "ECID", id: ecid }, ...(email === null ? [] : [{ namespace: "Email", id: email }])];
  const full = { identityMap: Object.fromEntries(identities.map((i, k) => [i.namespace, [{ id: i.id, ...(k === 0 ? { primary: true } : {}) }]])), ...body, _repo: { modifyDate: new Date(ts).toISOString() } };
  const json = JSON.stringify(full);
  return { index, kind: "profile", body: full, primary: identities[0]!, identities, timestamp: ts, eventId: null, size: Buffer.byteLength(json), json };
}

describe("webhook payload", () => {
  let ts: TestStore;
  let ada: string;
  let bob: string;
  before(async () => {
    ts = openTestStore();
    await ts.store.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, T);
    await ts.store.append(scope, "crm", [
      record(0, "ecid-ada", "ada@example.com", { person: { name: { firstName: "Ada", lastName: "Lovelace" } }, homeAddress: { countryCode: "GB" }, segmentMembership: { ups: { forged: { status: "realized" } } } }, T),
      // A second fragment of Ada's graph (its Email identity), newer: its country wins under timestampOrdered.
      record(1, "ecid-ada-2", "ada@example.com", { homeAddress: { countryCode: "FR" } }, T + 1000),
      record(2, "ecid-bob", null, { person: { name: { firstName: "Bob" } } }, T),
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
  ];

  test("the identity graph (pdg): merged attributes of every profile, selected namespaces, in unit order", async () => {
    const body = await buildPayload(ts.store, scope, items(), { attributes: ["xdm:person.name.firstName", "homeAddress.countryCode", "segmentMembership.ups", "_segmentd", "no.such.path"], identityNamespaces: ["email"] }, PDG);
    // Key order too: what a receiver sees byte for byte.
    assert.equal(JSON.stringify(body), JSON.stringify([
      { identityMap: { Email: [{ id: "ada@example.com" }] }, segmentMembership: { ups: { "aud-1": { status: "realized", lastQualificationTime: new Date(T).toISOString() }, "aud-2": { status: "exited", lastQualificationTime: new Date(T + 3).toISOString() } } },
        _segmentd: { profileId: ada, seqs: [7, 11] }, person: { name: { firstName: "Ada" } }, homeAddress: { countryCode: "FR" } },
      { identityMap: {}, segmentMembership: { ups: { "aud-1": { status: "exited", lastQualificationTime: new Date(T + 1).toISOString() } } }, _segmentd: { profileId: "999999", seqs: [8] } },
      { identityMap: {}, segmentMembership: { ups: { "aud-2": { status: "realized", lastQualificationTime: new Date(T + 2).toISOString() } } }, _segmentd: { profileId: bob, seqs: [9] }, person: { name: { firstName: "Bob" } } },
    ]));
  });

  test("every namespace when none is selected; no attribute read when none is selected", async () => {
    const body = await buildPayload(ts.store, scope, items().slice(0, 1), { attributes: [], identityNamespaces: [] }, PDG);
    assert.deepEqual(body, [{ identityMap: { ECID: [{ id: "ecid-ada" }, { id: "ecid-ada-2" }], Email: [{ id: "ada@example.com" }] },
      segmentMembership: { ups: { "aud-1": { status: "realized", lastQualificationTime: new Date(T).toISOString() } } }, _segmentd: { profileId: ada, seqs: [7] } }]);
  });

  test("a unit larger than one store read: every profile's attributes, in unit order", async () => {
    const many = Array.from({ length: 60 }, (_, i) => record(10 + i, `ecid-m${i}`, null, { person: { name: { firstName: `M${i}` } } }, T));
    await ts.store.append(scope, "crm", many, { ingestedAt: T, maxIdentitiesPerGraph: 50 });
    const ids = (await ts.store.findProfileIds(scope, many.map((r) => r.primary))).map((p) => p!);
    // Reversed: the body follows the unit's order, not the store's.
    const unit: UnitItem[] = ids.map((profileId, i) => ({ seq: 100 + i, profileId, audienceId: "aud-1", status: "realized" as const, at: T })).reverse();
    const body = await buildPayload(ts.store, scope, unit, { attributes: ["person.name.firstName"], identityNamespaces: [] }, PDG);
    assert.deepEqual(body.map((p) => [p._segmentd.profileId, (p.person as { name: { firstName: string } }).name.firstName, p.identityMap]),
      ids.map((id, i) => [id, `M${i}`, { ECID: [{ id: `ecid-m${i}` }] }]).reverse());
  });

  test("units built at the same time (their reads queued one after the other) each get their own profiles", async () => {
    const sel = { attributes: ["person.name.firstName"], identityNamespaces: [] };
    const units: UnitItem[][] = [[items()[0]!], [items()[2]!], items(), [items()[1]!]];
    const bodies = await Promise.all(units.map((u) => buildPayload(ts.store, scope, u, sel, PDG)));
    const alone: unknown[] = [];
    for (const u of units) alone.push(await buildPayload(ts.store, scope, u, sel, PDG));
    assert.deepEqual(bodies, alone);
    assert.deepEqual(bodies.map((b) => b.map((p) => [p._segmentd.profileId, (p.person as { name: { firstName: string } } | undefined)?.name.firstName ?? null])),
      [[[ada, "Ada"]], [[bob, "Bob"]], [[ada, "Ada"], ["999999", null], [bob, "Bob"]], [["999999", null]]]);
  });

  test("no identity graph (none): the attributes of the profile's first identity alone; snapshot members carry no seqs", async () => {
    const body = await buildPayload(ts.store, scope, [{ seq: 0, profileId: ada, audienceId: "aud-1", status: "existing", at: T }], { attributes: ["homeAddress.countryCode", "person.name.lastName"], identityNamespaces: ["ECID"] }, NONE);
    assert.equal(JSON.stringify(body), JSON.stringify([{ identityMap: { ECID: [{ id: "ecid-ada" }, { id: "ecid-ada-2" }] },
      segmentMembership: { ups: { "aud-1": { status: "existing", lastQualificationTime: new Date(T).toISOString() } } }, _segmentd: { profileId: ada, seqs: [] },
      homeAddress: { countryCode: "GB" }, person: { name: { lastName: "Lovelace" } } }]));
  });
});
