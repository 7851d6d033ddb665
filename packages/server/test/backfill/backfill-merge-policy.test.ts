/**
 * A change of a merge policy's content backfills the live definitions that use it (issue #40), over
 * HTTP on the test run's store: profiles with a fragment in each of two datasets that disagree on
 * the loyalty tier; a streaming and an edge audience of gold members under a dataSetPrecedence
 * policy. Reversing the policy's order queues their backfills (reason `mergePolicy`), which write
 * only the net change, and the members equal a batch job's under the new order; a rename of the
 * policy queues none, and a definition under another policy is left alone.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { API_KEY, DEFS, MPS, ORG_A, TOKEN_A, client, definitionBody, obj, profileDataset, startHarness, type Client, type Harness } from "../helpers/server-harness.js";
import { METHODS, PROFILE_SCHEMA, load, members, message, runJob, sameKeys, waitBackfill, type BackfillJson } from "./backfill-helpers.js";

const PROFILES = 60;
const tierA = (i: number) => (i % 2 === 0 ? "gold" : "silver");
const tierB = (i: number) => (i % 3 === 0 ? "gold" : "silver");

let h: Harness;
let a: Client;
let crmA: string;
let crmB: string;
let policy: string;
let streaming: string;
let edge: string;
let other: string;
let twin: string;
const first = new Map<string, BackfillJson>();

/** `onEdge`: the sandbox's policy active on edge (its default; edge definitions need it). */
function policyBody(name: string, order: string[], onEdge = false): Record<string, unknown> {
  return { name, schema: { name: "_xdm.context.profile" }, identityGraph: { type: "none" }, attributeMerge: { type: "dataSetPrecedence", order }, isActiveOnEdge: onEdge, default: onEdge };
}

async function define(name: string, method: keyof typeof METHODS, mergePolicyId: string): Promise<string> {
  const r = await a.post(DEFS, definitionBody(name, 'loyalty.tier = "gold"', { evaluationInfo: METHODS[method], mergePolicyId }));
  assert.equal(r.status, 200, r.text);
  return obj(r.json).id as string;
}

describe("a merge policy's content change backfills the live definitions using it", () => {
  before(async () => {
    h = await startHarness("backfill-merge-policy");
    a = client(h.url);
    crmA = await profileDataset(a, "crm a", PROFILE_SCHEMA);
    crmB = await profileDataset(a, "crm b", PROFILE_SCHEMA);
    const msgs: Record<string, unknown>[] = [];
    for (let i = 0; i < PROFILES; i++) {
      const identityMap = { Email: [{ id: `mp${i}@example.com`, primary: true }] };
      msgs.push(message(crmA, PROFILE_SCHEMA, { identityMap, loyalty: { tier: tierA(i) } }));
      msgs.push(message(crmB, PROFILE_SCHEMA, { identityMap, loyalty: { tier: tierB(i) } }));
    }
    await load(h.url, { "content-type": "application/json", authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod" }, msgs);
    // The sandbox's default policy, active on edge, becomes "a first".
    const list = await a.get(`${MPS}?limit=100`);
    assert.equal(list.status, 200, list.text);
    policy = (obj(list.json).children as Array<{ id: string; isActiveOnEdge: boolean }>).find((x) => x.isActiveOnEdge)!.id;
    const p = await a.put(`${MPS}/${policy}`, policyBody("a first", [crmA, crmB], true));
    assert.equal(p.status, 200, p.text);
    const q = await a.post(MPS, policyBody("b first", [crmB, crmA]));
    assert.equal(q.status, 200, q.text);
    streaming = await define("gold (streaming)", "streaming", policy);
    edge = await define("gold (edge)", "edge", policy);
    other = await define("gold under the other policy (streaming)", "streaming", obj(q.json).id as string);
    twin = await define("gold (batch twin)", "batch", policy);
    for (const id of [streaming, edge, other]) first.set(id, await waitBackfill(a, id));
  });
  after(async () => h?.close());

  test("before the change: each audience holds the gold members under its policy", async () => {
    for (const id of [streaming, edge]) assert.equal((await members(a, id)).size, PROFILES / 2);
    assert.equal((await members(a, other)).size, PROFILES / 3);
  });

  test("a rename queues no backfill", async () => {
    const r = await a.patch(`${MPS}/${policy}`, [{ op: "replace", path: "/name", value: "a first (renamed)" }]);
    assert.equal(r.status, 200, r.text);
    await new Promise((res) => setTimeout(res, 500));
    for (const id of [streaming, edge]) assert.equal(((await a.get(`${DEFS}/${id}/backfill`)).json as BackfillJson).queuedAt, first.get(id)!.queuedAt);
  });

  test("reversing the order backfills both live audiences: the batch job's members, only the net change written", async () => {
    const r = await a.put(`${MPS}/${policy}`, policyBody("a first (renamed)", [crmB, crmA], true));
    assert.equal(r.status, 200, r.text);
    // Profiles that were gold under A and are not under B exit; gold under B only enter.
    const exits = Array.from({ length: PROFILES }, (_, i) => i).filter((i) => tierA(i) === "gold" && tierB(i) !== "gold").length;
    const entries = Array.from({ length: PROFILES }, (_, i) => i).filter((i) => tierA(i) !== "gold" && tierB(i) === "gold").length;
    await runJob(a, [twin]);
    const expected = await members(a, twin);
    assert.equal(expected.size, PROFILES / 3);
    for (const id of [streaming, edge]) {
      const b = await waitBackfill(a, id, first.get(id)!.queuedAt);
      assert.deepEqual({ state: b.state, reason: b.reason, entered: b.entered, exited: b.exited }, { state: "succeeded", reason: "mergePolicy", entered: entries, exited: exits }, JSON.stringify(b));
      const live = await members(a, id);
      assert.deepEqual(sameKeys(live, expected), { onlyA: [], onlyB: [] });
      // Profiles gold either way stayed: their qualification is the first backfill's, not this one's.
      const stayed = [...live.values()].filter((m) => m.since?.at !== undefined && m.since.at < b.startedAt!);
      assert.equal(stayed.length, PROFILES / 3 - entries);
      for (const m of live.values()) assert.equal(m.since?.source, "backfill");
    }
    // The definition under the other policy was not backfilled again.
    assert.equal(((await a.get(`${DEFS}/${other}/backfill`)).json as BackfillJson).queuedAt, first.get(other)!.queuedAt);
  });
});
