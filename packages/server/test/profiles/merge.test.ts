import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isOptedOut } from "../../src/profiles/consent.js";
import { buildMergedProfile, mergeAttributes } from "../../src/profiles/merge.js";
import type { MergePolicySpec, ProfileFragment } from "../../src/profiles/types.js";

const ecid = { namespace: "ecid", id: "e1" };
const email = { namespace: "email", id: "a@x.com" };
const crm: ProfileFragment = { datasetId: "crm", primary: email, timestamp: 100, body: { person: { name: { firstName: "Ann", lastName: "Lee" } }, loyalty: { tier: "gold" } } };
const web: ProfileFragment = { datasetId: "web", primary: ecid, timestamp: 200, body: { person: { name: { firstName: "Annie" } }, homeAddress: { city: "Lyon" } } };

const ts = (graph: "none" | "pdg"): MergePolicySpec => ({ identityGraph: { type: graph }, attributeMerge: { type: "timestampOrdered" } });
const dsp = (order: string[], graph: "none" | "pdg" = "pdg"): MergePolicySpec => ({ identityGraph: { type: graph }, attributeMerge: { type: "dataSetPrecedence", order } });

describe("attribute merge", () => {
  it("timestampOrdered: newest fragment wins per attribute, objects merge deeply", () => {
    assert.deepEqual(mergeAttributes([web, crm], ts("pdg")), {
      person: { name: { firstName: "Annie", lastName: "Lee" } }, loyalty: { tier: "gold" }, homeAddress: { city: "Lyon" },
    });
  });

  it("dataSetPrecedence: a dataset earlier in the order wins, whatever the time", () => {
    assert.equal((mergeAttributes([web, crm], dsp(["crm", "web"])) as { person: { name: { firstName: string } } }).person.name.firstName, "Ann");
    assert.equal((mergeAttributes([web, crm], dsp(["web", "crm"])) as { person: { name: { firstName: string } } }).person.name.firstName, "Annie");
  });

  it("dataSetPrecedence: unlisted datasets rank below listed ones, newest first among themselves", () => {
    const other: ProfileFragment = { datasetId: "other", primary: ecid, timestamp: 999, body: { person: { name: { firstName: "Zed" } }, extra: 1 } };
    const merged = mergeAttributes([other, web, crm], dsp(["crm"]));
    assert.deepEqual(merged["person"], { name: { firstName: "Ann", lastName: "Lee" } });
    assert.equal(merged["extra"], 1);
  });

  it("replaces arrays instead of concatenating them", () => {
    const a: ProfileFragment = { datasetId: "a", primary: ecid, timestamp: 1, body: { tags: ["x", "y"] } };
    const b: ProfileFragment = { datasetId: "b", primary: ecid, timestamp: 2, body: { tags: ["z"] } };
    assert.deepEqual(mergeAttributes([a, b], ts("pdg")), { tags: ["z"] });
  });
});

describe("merged profile", () => {
  const graph = [ecid, email];

  it("pdg uses every fragment of the graph and lists every identity", () => {
    const p = buildMergedProfile({ profileId: "7", graphIdentities: graph, fragments: [crm, web], memberships: [], policy: ts("pdg"), lookedUp: ecid });
    assert.deepEqual(p.sources, ["crm", "web"]);
    assert.deepEqual(p.entity["identityMap"], { ecid: [{ id: "e1" }], email: [{ id: "a@x.com" }] });
    assert.equal((p.entity["loyalty"] as { tier: string }).tier, "gold");
    assert.equal(p.lastModifiedAt, 200);
  });

  it("none uses only the fragments keyed by the looked-up identity", () => {
    const p = buildMergedProfile({ profileId: "7", graphIdentities: graph, fragments: [crm, web], memberships: [], policy: ts("none"), lookedUp: ecid });
    assert.deepEqual(p.sources, ["web"]);
    assert.equal(p.entity["loyalty"], undefined);
    assert.deepEqual(p.identities, [ecid]);
  });

  it("fills segmentMembership.ups from memberships", () => {
    const p = buildMergedProfile({ profileId: "7", graphIdentities: graph, fragments: [crm], policy: ts("pdg"), lookedUp: null,
      memberships: [{ profileId: "7", definitionId: "d1", status: "realized", lastQualificationTime: "2026-11-20T00:00:00.000Z" }] });
    assert.deepEqual(p.entity["segmentMembership"], { ups: { d1: { status: "realized", lastQualificationTime: "2026-11-20T00:00:00.000Z" } } });
  });

  it("marks opted-out profiles after merging", () => {
    const optOut: ProfileFragment = { datasetId: "consent", primary: email, timestamp: 300, body: { consents: { marketing: { preferred: "n" } } } };
    assert.equal(buildMergedProfile({ profileId: "7", graphIdentities: graph, fragments: [crm, optOut], memberships: [], policy: ts("pdg"), lookedUp: ecid }).optedOut, true);
    assert.equal(buildMergedProfile({ profileId: "7", graphIdentities: graph, fragments: [crm, optOut], memberships: [], policy: ts("none"), lookedUp: ecid }).optedOut, false);
  });
});

describe("consent", () => {
  it("opted out when marketing.preferred or collect.val is n", () => {
    assert.equal(isOptedOut({ consents: { marketing: { preferred: "n" } } }), true);
    assert.equal(isOptedOut({ consents: { collect: { val: "N" } } }), true);
    assert.equal(isOptedOut({ consents: { collect: { val: "y" }, marketing: { preferred: "y" } } }), false);
    assert.equal(isOptedOut({ consents: { marketing: { email: { val: "n" } } } }), false);
    assert.equal(isOptedOut({}), false);
  });
});
