// Planning writes only what changed: a batch that merely reads a stored graph (an
// event for a known identity) needs no graph sizes and rewrites none; sizes are
// loaded (and must be) only for graphs that a multi-identity record can grow.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { graphsToSize, planAppend, type LoadedState } from "../../src/profiles/append-plan.js";
import { GraphWorkspace } from "../../src/profiles/identity-graph.js";
import type { Identity, ValidRecord } from "../../src/profiles/types.js";
import { identityKey } from "../../src/profiles/validate.js";

const I = (ns: string, id: string): Identity => ({ namespace: ns, id });
const T0 = Date.UTC(2026, 10, 1);

function event(index: number, ...identities: Identity[]): ValidRecord {
  const body = { _id: `e${index}`, timestamp: new Date(T0).toISOString() };
  return { index, kind: "experienceevent", body, primary: identities[0]!, identities, timestamp: T0, eventId: `e${index}`, size: 10, json: JSON.stringify(body) };
}

function loaded(graphs: Array<[Identity, number]>, sizes: Array<[number, number]>): LoadedState {
  return { graphs: new Map(graphs.map(([i, g]) => [identityKey(i), g])), sizes: new Map(sizes), fragments: new Map() };
}

describe("graph sizes in append planning", () => {
  it("needs no sizes for records with one identity, and rewrites none", () => {
    const records = [event(0, I("ecid", "a")), event(1, I("ecid", "b")), event(2, I("ecid", "a"))];
    const state = loaded([[I("ecid", "a"), 7], [I("ecid", "b"), 9]], []);
    assert.deepEqual(graphsToSize(records, state.graphs), []);
    const w = planAppend(records, state, 50, T0).finalize([]);
    assert.deepEqual([...w.sizes], [], "no size changed");
    assert.deepEqual(w.events.map((e) => e.graph), [7, 9, 7]);
    assert.deepEqual(w.touchedGraphs, [7, 9]);
  });

  it("asks for the sizes of the stored graphs a multi-identity record mentions, and writes the changed ones", () => {
    const records = [event(0, I("ecid", "a")), event(1, I("ecid", "b"), I("email", "x")), event(2, I("ecid", "c"), I("email", "y"))];
    const graphs: Array<[Identity, number]> = [[I("ecid", "a"), 7], [I("ecid", "b"), 9], [I("email", "x"), 4]];
    assert.deepEqual(graphsToSize(records, loaded(graphs, []).graphs).sort((x, y) => x - y), [4, 9]);
    // Graph 4 absorbs graph 9 (older id survives); ecid:c and email:y form a new graph; 7 is only read.
    const w = planAppend(records, loaded(graphs, [[9, 2], [4, 3]]), 50, T0).finalize([100]);
    assert.deepEqual([...w.sizes].sort((x, y) => x[0] - y[0]), [[4, 5], [100, 2]]);
    assert.deepEqual(w.merges, [{ from: 9, into: 4 }]);
    assert.deepEqual(w.touchedGraphs, [4, 7, 100], "every graph the batch mentions, created or changed");
  });

  it("throws rather than guess when stitching needs a size that was not loaded", () => {
    const ws = new GraphWorkspace(new Map([[identityKey(I("ecid", "a")), 7]]), new Map(), 50);
    assert.deepEqual(ws.stitch([I("ecid", "a")]).refused, [], "a lone identity needs no size");
    assert.throws(() => ws.stitch([I("ecid", "a"), I("email", "x")]), { message: "the size of graph 7 was not loaded" });
  });
});
