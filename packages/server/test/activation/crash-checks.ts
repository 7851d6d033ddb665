// Shared by the kill -9 suites that run the real server (server-crash.test.ts) or the hub and
// streaming workers (cluster/delivery-workers.cluster.test.ts): a webhook flow created over the
// Flow Service API, and what a receiver got compared with the transition log.
import assert from "node:assert/strict";
import { CONNECTION_SPEC_IDS } from "../../src/activation/connection-specs.js";
import type { DeliveryPolicy } from "../../src/activation/types.js";
import type { LoggedTransition } from "../../src/profiles/store.js";
import { seqsOf, type Received } from "./delivery-harness.js";

/** An API call with the tenant's headers (server-harness `client().call`, cluster `call`). */
export type Call = (method: string, url: string, body?: unknown) => Promise<{ status: number; json: unknown }>;

const F = "/data/foundation/flowservice";
const WEBHOOK = { id: CONNECTION_SPEC_IDS.webhook, version: "1.0" };

/** Connection, target connection and flow over HTTP; the flow's id and its signing secret (shown once). */
export async function createWebhookFlow(call: Call, name: string, url: string, audienceIds: readonly string[], delivery: Partial<DeliveryPolicy>): Promise<{ flowId: string; secret: string }> {
  const conn = await call("POST", `${F}/connections`, { name: `${name} auth`, connectionSpec: WEBHOOK });
  assert.equal(conn.status, 201, JSON.stringify(conn.json));
  const tgt = await call("POST", `${F}/targetConnections`, { name, baseConnectionId: (conn.json as { id: string }).id, connectionSpec: WEBHOOK, params: { httpEndpoint: url } });
  assert.equal(tgt.status, 201, JSON.stringify(tgt.json));
  const flow = await call("POST", `${F}/flows`, {
    name, targetConnectionIds: [(tgt.json as { id: string }).id],
    transformations: [{ name: "GeneralTransform", params: { segmentSelectors: { selectors: audienceIds.map((id) => ({ type: "PLATFORM_SEGMENT", value: { id } })) } } }],
    delivery,
  });
  assert.equal(flow.status, 201, JSON.stringify(flow.json));
  const f = flow.json as { id: string; signingSecret: string };
  return { flowId: f.id, secret: f.signingSecret };
}

/**
 * Waits until the deliverer holds the flow: its first run (the audiences' snapshot) is listed.
 * Only then is the flow's start position in the log fixed; transitions written between the
 * creation's 201 and that moment reach the receiver as the snapshot's `existing` members, not as
 * transitions (docs/activation.md "Adding an audience").
 */
export async function flowLive(call: Call, flowId: string, ms = 30_000): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const r = await call("GET", `${F}/runs?property=flowId==${flowId}`);
    if (r.status === 200 && (r.json as { items: unknown[] }).items.length > 0) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`flow ${flowId}: no run within ${ms} ms (${r.status} ${JSON.stringify(r.json)})`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** The flow's delivery stats as the API reports them. */
export async function deliveryStats(call: Call, flowId: string): Promise<{ sent: number; failed: number; retrying: number; dead: number; lagSeconds: number }> {
  const r = await call("GET", `${F}/flows/${flowId}`);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return (r.json as { items: Array<{ deliveryStats: { sent: number; failed: number; retrying: number; dead: number; lagSeconds: number } }> }).items[0]!.deliveryStats;
}

/** The flow's stats once nothing waits for a retry (the receiver answers before the server records it). */
export async function settledStats(call: Call, flowId: string, ms = 15_000): ReturnType<typeof deliveryStats> {
  const t0 = Date.now();
  for (;;) {
    const s = await deliveryStats(call, flowId);
    if ((s.retrying === 0 && s.lagSeconds === 0) || Date.now() - t0 > ms) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Log positions the receiver has not acknowledged (answered 200) yet. */
export function missingSeqs(log: readonly LoggedTransition[], rs: Received[]): number[] {
  const all = seqsOf(rs.filter((r) => r.outcome === 200)).all;
  return log.filter((t) => !all.has(t.seq)).map((t) => t.seq);
}

/**
 * What a receiver got equals the log: every request signed; the positions it acknowledged are
 * exactly the log's; a profile object carries, per audience, the status of its last position of that audience;
 * per profile the positions were first acknowledged in log order; a position always travelled
 * under one webhook-id (every attempt counted). Returns figures for the report.
 */
export function assertEqualsLog(name: string, log: readonly LoggedTransition[], rs: Received[]): { requests: number; positions: number; duplicates: number } {
  assert.ok(rs.every((r) => r.signed), `${name}: every signature verifies`);
  const bySeq = new Map(log.map((t) => [t.seq, t]));
  // What the receiver acknowledged; a request it answered 500 does not count as delivered.
  const { all, firstOrder } = seqsOf(rs.filter((r) => r.outcome === 200));
  const extra = [...seqsOf(rs).all].filter((q) => !bySeq.has(q));
  assert.deepEqual(extra, [], `${name}: positions that are not in the log`);
  assert.deepEqual(missingSeqs(log, rs), [], `${name}: log positions never delivered`);
  for (const [pid, seqs] of firstOrder) assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), `${name}: profile ${pid} in log order`);
  const ids = new Map<number, Set<string>>();
  let carried = 0;
  for (const r of rs) {
    for (const p of r.profiles) {
      // A profile object carries one status per audience: that of its last position of that audience.
      const last = new Map<string, LoggedTransition>();
      for (const q of p.seqs) {
        carried++;
        const t = bySeq.get(q)!;
        assert.equal(p.profileId, t.profileId, `${name}: seq ${q} under its profile`);
        if ((last.get(t.definitionId)?.seq ?? -1) < q) last.set(t.definitionId, t);
        (ids.get(q) ?? ids.set(q, new Set()).get(q)!).add(r.webhookId);
      }
      for (const [def, t] of last) assert.equal(p.ups[def]?.status, t.to, `${name}: profile ${p.profileId}, ${def} carries the status of seq ${t.seq}`);
    }
  }
  for (const [q, set] of ids) assert.equal(set.size, 1, `${name}: seq ${q} always under one webhook-id (${[...set].join(", ")})`);
  return { requests: rs.length, positions: all.size, duplicates: carried - all.size };
}
