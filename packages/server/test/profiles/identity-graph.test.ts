import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { GraphWorkspace, finalIdResolver } from "../../src/profiles/identity-graph.js";
import type { Identity } from "../../src/profiles/types.js";
import { identityKey } from "../../src/profiles/validate.js";

const I = (ns: string, id: string): Identity => ({ namespace: ns, id });

/** Runs a workspace over records and returns the final graph id of each identity. */
function stitchAll(records: Identity[][], cap = 50, existing = new Map<string, number>(), sizes = new Map<number, number>()) {
  const ws = new GraphWorkspace(existing, sizes, cap);
  const results = records.map((r) => ws.stitch(r));
  const outcome = ws.outcome();
  const allocated = outcome.created.map((_, i) => 1000 + i);
  const fin = finalIdResolver(ws, outcome, allocated);
  const graphOf = new Map<string, number>();
  for (const [k, g] of existing) graphOf.set(k, fin(g));
  for (const a of outcome.assigned) graphOf.set(identityKey(a.identity), fin(a.graph));
  return { ws, outcome, fin, results, graphOf };
}

describe("identity stitching", () => {
  it("joins identities that appear together, transitively", () => {
    const { graphOf, outcome } = stitchAll([[I("ecid", "a"), I("email", "x")], [I("crmid", "c"), I("email", "x")], [I("ecid", "z")]]);
    assert.equal(graphOf.get(identityKey(I("ecid", "a"))), graphOf.get(identityKey(I("crmid", "c"))));
    assert.notEqual(graphOf.get(identityKey(I("ecid", "a"))), graphOf.get(identityKey(I("ecid", "z"))));
    assert.deepEqual(outcome.created.length, 2);
  });

  it("keeps the older (smaller) stored id when two stored graphs merge", () => {
    const existing = new Map([[identityKey(I("ecid", "a")), 7], [identityKey(I("email", "x")), 3]]);
    const sizes = new Map([[7, 1], [3, 1]]);
    const { outcome, fin, results } = stitchAll([[I("ecid", "a"), I("email", "x")]], 50, existing, sizes);
    assert.deepEqual(outcome.merges, [{ from: 7, into: 3 }]);
    assert.equal(fin(results[0]!.graph), 3);
    assert.equal(outcome.created.length, 0);
    assert.equal(outcome.sizes.get(3), 2);
  });

  it("prefers a stored graph over one created in the batch", () => {
    const existing = new Map([[identityKey(I("email", "x")), 42]]);
    const { fin, results, outcome } = stitchAll([[I("ecid", "new")], [I("ecid", "new"), I("email", "x")]], 50, existing, new Map([[42, 1]]));
    assert.equal(fin(results[1]!.graph), 42);
    assert.equal(fin(results[0]!.graph), 42, "the first record's graph was absorbed into the stored one");
    assert.equal(outcome.created.length, 0);
  });

  it("refuses a link beyond the cap and keeps both graphs intact", () => {
    const records = [[I("ecid", "1"), I("ecid", "2")], [I("ecid", "3"), I("ecid", "4")], [I("ecid", "1"), I("ecid", "3")], [I("ecid", "1"), I("ecid", "5")]];
    const { results, graphOf, outcome } = stitchAll(records, 3);
    assert.equal(results[2]!.refused.length, 1);
    const refusal = results[2]!.refused[0]!;
    assert.equal(refusal.code, "IDENTITY_GRAPH_LIMIT");
    assert.equal(refusal.message, "identity ecid:3 was not linked: the identity graph would have 4 identities, more than the limit of 3");
    assert.notEqual(graphOf.get(identityKey(I("ecid", "1"))), graphOf.get(identityKey(I("ecid", "3"))));
    // ecid:5 fits (graph of 1 has 2 identities) and joins.
    assert.equal(results[3]!.refused.length, 0);
    assert.equal(graphOf.get(identityKey(I("ecid", "5"))), graphOf.get(identityKey(I("ecid", "1"))));
    // A further new identity does not fit and stays unlinked.
    const ws = new GraphWorkspace(new Map(), new Map(), 3);
    ws.stitch([I("a", "1"), I("a", "2"), I("a", "3")]);
    const r = ws.stitch([I("a", "1"), I("a", "4")]);
    assert.equal(r.refused[0]!.message, "identity a:4 was not linked: the identity graph would have 4 identities, more than the limit of 3");
    assert.equal(ws.graphOfIdentity(I("a", "4")), undefined);
    assert.ok([...outcome.sizes.values()].every((s) => s <= 3));
  });

  it("without a cap, graphs are exactly the connected components (property)", () => {
    const ident = fc.record({ namespace: fc.constantFrom("ecid", "email", "crmid"), id: fc.integer({ min: 0, max: 12 }).map(String) });
    fc.assert(fc.property(fc.array(fc.uniqueArray(ident, { minLength: 1, maxLength: 4, selector: identityKey }), { minLength: 1, maxLength: 25 }), (records) => {
      const { graphOf } = stitchAll(records, Number.MAX_SAFE_INTEGER);
      // Reference: naive component labelling by repeated relaxation.
      const label = new Map<string, string>();
      for (const r of records) for (const i of r) label.set(identityKey(i), identityKey(i));
      let changed = true;
      while (changed) {
        changed = false;
        for (const r of records) {
          const min = r.map((i) => label.get(identityKey(i))!).sort()[0]!;
          for (const i of r) if (label.get(identityKey(i)) !== min) { label.set(identityKey(i), min); changed = true; }
        }
      }
      const keys = [...label.keys()];
      for (const a of keys) for (const b of keys) {
        assert.equal(label.get(a) === label.get(b), graphOf.get(a) === graphOf.get(b), `${a} vs ${b}`);
      }
    }));
  });

  it("never builds a graph larger than the cap (property)", () => {
    const ident = fc.record({ namespace: fc.constant("ecid"), id: fc.integer({ min: 0, max: 30 }).map(String) });
    fc.assert(fc.property(fc.integer({ min: 2, max: 6 }), fc.array(fc.uniqueArray(ident, { minLength: 1, maxLength: 3, selector: identityKey }), { maxLength: 40 }), (cap, records) => {
      const { graphOf, outcome } = stitchAll(records, cap);
      const counts = new Map<number, number>();
      for (const g of graphOf.values()) counts.set(g, (counts.get(g) ?? 0) + 1);
      for (const [g, n] of counts) {
        assert.ok(n <= cap, `graph ${g} has ${n} identities`);
      }
      for (const s of outcome.sizes.values()) assert.ok(s <= cap);
      // Every record's primary identity is always placed in a graph.
      for (const r of records) assert.ok(graphOf.has(identityKey(r[0]!)));
    }));
  });
});
