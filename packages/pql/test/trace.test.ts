/**
 * traceEvaluation: the tree of the nodes evaluated in the query's own context
 * with their values, iterating nodes' item counts and first matches, and the
 * bounds an occurs tested against.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { traceEvaluation, type TraceNode } from "../src/evaluate.js";
import { TRACE_MAX_ITEMS } from "../src/trace.js";

const NOW = Date.UTC(2026, 10, 20, 12);
const DAY = 86_400_000;
const ev = (id: string, eventType: string, daysAgo: number) => ({ _id: id, eventType, timestamp: new Date(NOW - daysAgo * DAY).toISOString() });

function find(node: TraceNode, kind: string): TraceNode {
  if (node.kind === kind) return node;
  for (const c of node.children) {
    try {
      return find(c, kind);
    } catch { /* not in this branch */ }
  }
  throw new Error(`no ${kind} node`);
}

const profile = { person: { age: 41, name: { firstName: "Ann" } }, homeAddress: { countryCode: "FR" } };
const events = [ev("e1", "web.pageViews", 1), ev("e2", "commerce.purchases", 3), ev("e3", "commerce.purchases", 20), ev("e4", "commerce.purchases", 2)];

test("a profile condition and an event condition: each node's value, the events that matched", () => {
  const q = 'person.age > 30 and homeAddress.countryCode = "US" or xEvent.exists(e => e.eventType = "commerce.purchases" and e.timestamp occurs <= 7 days before now)';
  const { value, trace } = traceEvaluation(q, { profile, events, now: NOW });
  assert.equal(value, true);
  assert.equal(trace.value, true);
  const or = trace.children[0]!;
  assert.equal(or.kind, "Binary:or");
  const [and, exists] = or.children;
  assert.equal(and!.kind, "Binary:and");
  assert.equal(and!.value, false);
  assert.deepEqual(and!.children.map((c) => [c.text, c.value]), [["person.age > 30", true], ['homeAddress.countryCode = "US"', false]]);
  assert.deepEqual(find(and!, "Member").value, 41, "the attribute's value");
  assert.equal(exists!.kind, "Method:exists");
  assert.equal(exists!.value, true);
  // exists stops at the first match: e1 tested (no), e2 tested (yes).
  assert.deepEqual(exists!.items, { tested: 2, held: 1, first: [events[1]] });
  assert.deepEqual(exists!.children.map((c) => c.kind), ["XEvent"], "the lambda's nodes are not traced per event");
});

test("filter and count: how many events were tested and held; occurs records its bounds", () => {
  const { value, trace } = traceEvaluation('xEvent[eventType = "commerce.purchases"].count() >= 3', { profile, events, now: NOW });
  assert.equal(value, true);
  const filter = find(trace, "Filter");
  assert.deepEqual(filter.items, { tested: 4, held: 3, first: [events[1], events[2], events[3]] });
  assert.equal(find(trace, "Method:count").value, 3);

  const occ = traceEvaluation('person.name.firstName = "Ann" and xEvent[timestamp occurs < 5 days before now].count() > 0', { profile, events, now: NOW });
  assert.equal(find(occ.trace, "Filter").items!.held, 3);

  const top = traceEvaluation("person.birthDate occurs before today", { profile: { person: { birthDate: "1985-04-02" } }, now: NOW });
  const o = find(top.trace, "Occurs");
  assert.equal(o.value, true);
  assert.equal(o.bounds!.upper, Date.UTC(2026, 10, 20));
  assert.equal(o.bounds!.upperInclusive, false);
});

test("chain, select and forall record the items they tested", () => {
  const chained = traceEvaluation('chain(xEvent, timestamp, [A: WHAT(eventType = "web.pageViews"), B: WHAT(eventType = "commerce.purchases")])', {
    profile, events: [ev("a", "web.pageViews", 5), ev("b", "commerce.purchases", 4), ev("c", "web.pageViews", 1)], now: NOW,
  });
  assert.equal(chained.value, true);
  const chain = find(chained.trace, "Chain");
  assert.equal(chain.items!.held, 2);
  assert.deepEqual(chain.items!.first.map((e) => (e as { _id: string })._id), ["a", "b"]);

  const all = traceEvaluation("forall x from person.scores : x > 2", { profile: { person: { scores: [5, 1, 9] } }, now: NOW });
  assert.equal(all.value, false);
  assert.deepEqual(find(all.trace, "Quantifier:forall").items, { tested: 2, held: 1, first: [5] });
});

test("items kept per node are bounded", () => {
  const many = Array.from({ length: 100 }, (_, i) => ev(`m${i}`, "commerce.purchases", 1));
  const { trace } = traceEvaluation('xEvent[eventType = "commerce.purchases"].count() > 0', { profile, events: many, now: NOW });
  const f = find(trace, "Filter");
  assert.equal(f.items!.held, 100);
  assert.equal(f.items!.first.length, TRACE_MAX_ITEMS);
});
