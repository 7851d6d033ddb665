/**
 * Explain's attribute provenance, without a server: the profile attributes an expression reads
 * (services/pql-paths.ts) for each way PQL reaches profile data, and which fragment supplied a
 * merged value (profiles/merge.ts attributeSource) — checked against the merge itself on
 * generated fragments and policies, so that the two cannot disagree.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { attributeSource, attributeSources, datasetRank, mergeAttributes, precedenceOrder } from "../src/profiles/merge.js";
import type { JsonObject, JsonValue, MergePolicySpec, ProfileFragment } from "../src/profiles/types.js";
import { isPlainObject } from "../src/profiles/xdm-object.js";
import { parsePql } from "../src/services/pql.js";
import { profileAttributePaths } from "../src/services/pql-paths.js";

const paths = (pql: string) => profileAttributePaths(parsePql(pql)).map((p) => p.join("."));

describe("the profile attributes an expression reads", () => {
  const cases: [string, string[]][] = [
    ["person.age > 30", ["person.age"]],
    ['xEvent.exists(e => e.eventType = "commerce.purchases" and e.timestamp occurs <= 7 days before now)', []],
    ['xEvent[eventType = "x"].count() > 1 and homeAddress.countryCode = "US"', ["homeAddress.countryCode"]],
    ["xEvent.exists(e => e.x = $1.person.age) and xEvent[^loyalty.tier = \"gold\"]", ["person.age", "loyalty.tier"]],
    ['(p) => p.loyalty.tier = "gold"', ["loyalty.tier"]],
    ["select X from xEvent where X.a = person.b", ["person.b"]],
    ['let a = person.address in a.city = "x"', ["person.address.city"]],
    ['person.phones.exists(p => p.primary = true) and person.phones[number = "1"].count() > 0', ["person.phones.primary", "person.phones.number"]],
    ['person.isNotNull() and person.name.firstName = "a"', ["person.name.firstName"]],
    ['chain(xEvent, timestamp, [A: WHAT(eventType = "a") WHEN(<= 3 days before person.birthDate)])', ["person.birthDate"]],
    ["person.birthDate occurs between person.start and now", ["person.birthDate", "person.start"]],
    ['inSegment("abc") and identityMap.Email.id = "x"', ["identityMap.Email.id"]],
  ];
  for (const [pql, want] of cases) test(pql, () => assert.deepEqual(paths(pql), want));

  test("a 20,000-term or costs no stack and lists each path once", () => {
    const pql = Array.from({ length: 20_000 }, (_, i) => `a${i % 500}.b = ${i}`).join(" or ");
    assert.deepEqual(paths(pql), Array.from({ length: 500 }, (_, i) => `a${i}.b`));
  });
});

const ecid = { namespace: "ECID", id: "e1" };
const email = { namespace: "Email", id: "ann@x.com" };
const frag = (datasetId: string, timestamp: number, body: JsonObject, primary = ecid): ProfileFragment => ({ datasetId, primary, timestamp, body });
const ts: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const dsp = (order: string[]): MergePolicySpec => ({ identityGraph: { type: "pdg" }, attributeMerge: { type: "dataSetPrecedence", order } });

/** The value at a path as deepMerge leaves it (own keys of plain objects only). */
function at(v: JsonValue | undefined, path: readonly string[]): JsonValue | undefined {
  let cur = v;
  for (const k of path) {
    if (!isPlainObject(cur) || !Object.hasOwn(cur, k)) return undefined;
    cur = cur[k];
  }
  return cur;
}

describe("which fragment supplied a merged value", () => {
  const crm = frag("crm", 100, { person: { age: 41, name: { first: "Ann" } }, tags: ["a", "b"] }, email);
  const web = frag("web", 200, { person: { age: 41 }, tags: ["c"] });
  const late = frag("late", 300, { person: "gone" });

  test("timestampOrdered: the newest fragment with a value, even when an older one has the same value", () => {
    assert.equal(attributeSource([crm, web], ts, ["person", "age"]), web);
    assert.equal(attributeSource([crm, web], ts, ["person", "name", "first"]), crm, "the newer fragment has no name: merged key by key");
    assert.equal(attributeSource([crm, web], ts, ["tags"]), web, "arrays are replaced whole");
    assert.equal(attributeSource([crm, web], ts, ["person", "phone"]), null);
    assert.equal(attributeSource([crm, web, late], ts, ["person", "age"]), late, "a scalar above the path replaces it");
  });

  test("dataSetPrecedence: the first listed dataset with a value, unlisted ones below; its rank", () => {
    const p = dsp(["crm", "web"]);
    assert.equal(attributeSource([crm, web, late], p, ["person", "age"]), crm);
    assert.equal(attributeSource([crm, web, late], p, ["tags"]), crm);
    assert.equal(attributeSource([web, late], p, ["person", "age"]), web);
    assert.deepEqual([datasetRank(p, "crm"), datasetRank(p, "web"), datasetRank(p, "late"), datasetRank(ts, "crm")], [1, 2, null, null]);
    assert.equal(datasetRank(dsp(["web", "crm", "web"]), "web"), 1, "a dataset listed twice keeps its first place");
  });

  test("on generated fragments and policies, the source's value is the merged value", () => {
    const key = fc.constantFrom("x", "y", "z");
    const leaf = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("s", "t"), fc.constant(null), fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 2 }));
    const { body } = fc.letrec<{ body: JsonObject; value: JsonValue }>((tie) => ({
      body: fc.dictionary(key, tie("value"), { maxKeys: 3 }) as fc.Arbitrary<JsonObject>,
      value: fc.oneof({ depthSize: "small" }, leaf, tie("body")) as fc.Arbitrary<JsonValue>,
    }));
    const fragment: fc.Arbitrary<ProfileFragment> = fc.record({ datasetId: fc.constantFrom("a", "b", "c"), timestamp: fc.integer({ min: 0, max: 3 }), body, primary: fc.constantFrom(ecid, email) });
    const policy = fc.oneof(fc.constant(ts), fc.subarray(["a", "b", "c"]).chain((o) => fc.shuffledSubarray(o, { minLength: o.length }).map(dsp)));
    fc.assert(fc.property(fc.array(fragment, { maxLength: 5 }), policy, fc.array(key, { minLength: 1, maxLength: 3 }), (fragments, p, path) => {
      const merged = at(mergeAttributes(fragments, p), path);
      const source = attributeSource(fragments, p, path);
      assert.equal(attributeSources(fragments, p, [["y"], path])[1], source, "one fold for several paths");
      if (source === null) {
        assert.equal(merged, undefined);
        return;
      }
      assert.ok(fragments.includes(source));
      // No fragment applied after the source has a value there.
      const order = precedenceOrder(fragments, p);
      for (const f of order.slice(order.indexOf(source) + 1)) assert.equal(at(f.body, path), undefined);
      const own = at(source.body, path);
      if (!isPlainObject(own)) assert.deepEqual(merged, own);
    }), { numRuns: 2_000 });
  });
});
