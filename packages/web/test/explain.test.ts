/** Check a profile, members and impact without a browser: the deciding nodes of a trace, and the words shown. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { traceEvaluation } from "@segmentd/pql";
import { ApiFailure } from "../src/api/errors.js";
import type { Explanation, ImpactAnswer, TraceNode } from "../src/api/types.js";
import {
  boundsText, changeText, checkFailureText, checkIdentity, eventText, identityText, namespaceLabel, ruleText, sourceText, statusText, storedNote, valueText, verdictOf,
} from "../src/explain-words.js";
import { impactSummary } from "../src/pages/impact-panel.js";
import { checkHref } from "../src/pages/members.js";
import { decidingNodes, truthy } from "../src/trace-deciding.js";

const leaf = (text: string, value: unknown): TraceNode => ({ kind: "Binary:=", text, value, children: [] });
const node = (kind: string, value: unknown, ...children: TraceNode[]): TraceNode => ({ kind, text: kind, value, children });
const query = (body: TraceNode): TraceNode => ({ kind: "Query", text: "", value: body.value, children: [body] });
const sorted = (s: Set<string>) => [...s].sort();

describe("deciding nodes", () => {
  it("a false and: its false children, not the true ones", () => {
    const d = decidingNodes(query(node("Binary:and", false, leaf("a", true), leaf("b", false))));
    assert.deepEqual(sorted(d.deciding), ["0.1"]);
    assert.deepEqual(sorted(d.path), ["", "0", "0.1"]);
  });
  it("a false and that stopped at its first child (short-circuit): that child", () => {
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:and", false, leaf("a", false)))).deciding), ["0.0"]);
  });
  it("a false and with both children false: both", () => {
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:and", false, leaf("a", false), leaf("b", false)))).deciding), ["0.0", "0.1"]);
  });
  it("a true and: every child (flipping any one flips it)", () => {
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:and", true, leaf("a", true), leaf("b", true)))).deciding), ["0.0", "0.1"]);
  });
  it("a true or: its true children; a false or: every child", () => {
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:or", true, leaf("a", false), leaf("b", true)))).deciding), ["0.1"]);
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:or", false, leaf("a", false), leaf("b", false)))).deciding), ["0.0", "0.1"]);
  });
  it("not: through to its child, recursively", () => {
    const d = decidingNodes(query(node("Not", true, node("Binary:and", false, leaf("a", true), leaf("b", false)))));
    assert.deepEqual(sorted(d.deciding), ["0.0.1"]);
    assert.deepEqual(sorted(d.path), ["", "0", "0.0", "0.0.1"]);
  });
  it("nested: (a or b) and c, false because of c, leaves the or alone", () => {
    const d = decidingNodes(query(node("Binary:and", false, node("Binary:or", true, leaf("a", true), leaf("b", false)), leaf("c", false))));
    assert.deepEqual(sorted(d.deciding), ["0.1"]);
    assert.equal(d.path.has("0.0"), false);
  });
  it("reads values as PQL's boolean positions: empty arrays false, {count, first} by its count, 0 and strings true", () => {
    assert.deepEqual([truthy([]), truthy([1]), truthy({ count: 12, first: [] }), truthy({ count: 0, first: [] }), truthy(0), truthy(""), truthy(null)], [false, true, true, false, true, true, false]);
    const d = decidingNodes(query(node("Binary:or", true, leaf("empty", []), leaf("many", { count: 12, first: [] }))));
    assert.deepEqual(sorted(d.deciding), ["0.1"]);
  });
  it("a connective without traced children is itself the deciding node", () => {
    assert.deepEqual(sorted(decidingNodes(query(node("Binary:and", false))).deciding), ["0"]);
  });
  it("matches the kinds PQL's tracer really writes", () => {
    const run = (pql: string) => traceEvaluation(pql, { profile: { person: { age: 41 }, homeAddress: { countryCode: "CA" } }, events: [], now: Date.UTC(2026, 0, 1) }).trace as TraceNode;
    const at = (t: TraceNode, path: string) => path.split(".").reduce((n, i) => n.children[Number(i)]!, t);
    const t1 = run('person.age > 30 and homeAddress.countryCode = "US"');
    assert.deepEqual([...decidingNodes(t1).deciding].map((p) => at(t1, p).text), ['homeAddress.countryCode = "US"']);
    const t2 = run('not (person.age < 30) and (homeAddress.countryCode = "US" or person.age >= 40)');
    assert.deepEqual([...decidingNodes(t2).deciding].map((p) => at(t2, p).text).sort(), ["person.age < 30", "person.age >= 40"]);
  });
});

const base: Explanation = {
  segmentId: "s1", entityId: "ann@example.com", entityIdNS: "Email", profileId: "1", evaluatedAt: "2026-01-01T00:00:00.000Z", mergePolicyId: "m",
  result: true, excludedByConsent: false, exitsAt: null,
  membership: { status: "realized", lastQualificationTime: "2026-01-01T00:00:00.000Z", history: [] },
  references: [], events: { read: 0, truncated: false }, trace: query(leaf("a", true)),
};
const iso = (t: number | string) => new Date(t).toISOString();

describe("the words of a check", () => {
  it("says in or out in a sentence, with the exit and consent", () => {
    assert.deepEqual(verdictOf(base, "Buyers", iso), { in: true, headline: "Email ann@example.com is in “Buyers”.", detail: "The expression holds for this profile now." });
    assert.match(verdictOf({ ...base, exitsAt: "2026-02-01T00:00:00.000Z" }, "Buyers", iso).detail, /leaves on 2026-02-01T00:00:00\.000Z/);
    const out = verdictOf({ ...base, result: false, entityIdNS: "email" }, "Buyers", iso);
    assert.equal(out.headline, "Email ann@example.com is out of “Buyers”.");
    assert.equal(out.detail, "The expression does not hold for this profile now.");
    assert.match(verdictOf({ ...base, result: false, excludedByConsent: true }, "Buyers").detail, /opted out/);
  });
  it("notes when the stored status disagrees with the result now", () => {
    assert.equal(storedNote(base), undefined);
    assert.match(storedNote({ ...base, result: false })!, /stored status \(realized\)/);
    assert.match(storedNote({ ...base, membership: { status: null, lastQualificationTime: null, history: [] } })!, /No membership is stored yet/);
    assert.equal(storedNote({ ...base, result: false, membership: { status: "exited", lastQualificationTime: null, history: [] } }), undefined);
  });
  it("names the stored status, the merge rule and the fragment an attribute came from", () => {
    assert.deepEqual([statusText("realized"), statusText("exited"), statusText(null)], ["In (realized)", "Out (exited)", "Not a member (never qualified)"]);
    assert.equal(ruleText({ rule: "timestampOrdered" }), "Newest fragment wins (timestamp ordered)");
    assert.equal(ruleText({ rule: "dataSetPrecedence", rank: 2 }), "Dataset precedence: dataset 2 in the order");
    assert.equal(ruleText({ rule: "dataSetPrecedence", rank: null }), "Dataset precedence: dataset not in the order");
    assert.equal(ruleText({ rule: "somethingNew" }), "somethingNew");
    assert.equal(sourceText({ source: { datasetId: "d1", recordId: "email:a@b", timestamp: "2026-01-01T00:00:00.000Z" } }, iso), "dataset d1 · record email:a@b · written 2026-01-01T00:00:00.000Z");
    assert.equal(sourceText({ source: { datasetId: "d1" } }), "dataset d1");
    assert.equal(sourceText({ source: null }), "—");
  });
  it("turns only an unknown profile into the no-such-profile sentence", () => {
    assert.equal(checkFailureText(new ApiFailure(404, "Profile with id 'Email:x@y' was not found"), "email", "x@y", "prod"), "No profile with Email x@y in sandbox prod.");
    assert.equal(checkFailureText(new ApiFailure(404, "Segment definition with id 's' was not found"), "Email", "x@y", "prod"), undefined);
    assert.equal(checkFailureText(new ApiFailure(500, "Profile store down"), "Email", "x@y", "prod"), undefined);
  });
  it("shows values, events, items and bounds briefly", () => {
    const ev = { _id: "e1", eventType: "commerce.purchases", timestamp: "2026-01-02T03:04:05.000Z" };
    assert.equal(valueText(25), "25");
    assert.equal(valueText("US"), '"US"');
    assert.equal(valueText(null), "no value");
    assert.equal(valueText([ev, ev]), "2 events");
    assert.equal(valueText({ count: 40, first: [ev] }), "40 events");
    assert.equal(valueText([1, "a"]), '[1, "a"]');
    assert.ok(valueText({ long: "x".repeat(500) }).endsWith("…"));
    assert.equal(eventText(ev, iso), "commerce.purchases · 2026-01-02T03:04:05.000Z · e1");
    assert.equal(eventText({ a: 1 }), undefined);
    assert.equal(boundsText({ lower: 0, lowerInclusive: true, upper: 86_400_000, upperInclusive: false }, iso), "from 1970-01-01T00:00:00.000Z (inclusive) to 1970-01-02T00:00:00.000Z (exclusive)");
    assert.equal(boundsText({ lowerInclusive: true, upperInclusive: true }), "any time");
    assert.equal(boundsText({ lowerInclusive: true, upperInclusive: true, empty: true }), "no instant can match");
  });
  it("names identities with Platform's spelling and checks a member by its Email", () => {
    assert.equal(namespaceLabel("email"), "Email");
    assert.equal(namespaceLabel("loyaltyId"), "loyaltyId");
    assert.equal(identityText({ namespace: "ecid", id: "123" }), "ECID 123");
    assert.deepEqual(checkIdentity([{ namespace: "ecid", id: "1" }, { namespace: "email", id: "a@b" }]), { namespace: "email", id: "a@b" });
    assert.deepEqual(checkIdentity([{ namespace: "ecid", id: "1" }]), { namespace: "ecid", id: "1" });
    assert.equal(checkIdentity([]), undefined);
    assert.equal(checkHref({ id: "a/b" }, "email", "ann+1@example.com"), "/audiences/a%2Fb?tab=check&ns=email&id=ann%2B1%40example.com");
  });
  it("sums up an impact", () => {
    assert.deepEqual([changeText(3, 5), changeText(5, 3), changeText(2, 2)], ["+2", "−2", "no change"]);
    const a = { before: { qualified: 23 }, after: { qualified: 14 }, enter: { count: 1 }, leave: { count: 10 }, stay: { count: 13 } } as unknown as ImpactAnswer;
    assert.equal(impactSummary(a), "Saving changes the audience from 23 to 14 profiles: 1 enter, 10 leave, 13 stay.");
  });
});
