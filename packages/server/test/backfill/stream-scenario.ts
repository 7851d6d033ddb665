/**
 * Backfill, acceptance 2 (in process): `n` profiles and their purchases stored first; then, while
 * writers stream records that move profiles between countries and new purchases for those same
 * profiles, a streaming definition is created and later edited, each with its backfill. Once the
 * stream stopped and the engine is idle, the definition's members must equal a batch job's over all
 * the data (a from-scratch evaluation), and each profile's transitions must form one chain (every
 * `from` is the previous `to`, never equal to its own `to`): no transition doubled or lost.
 */
import assert from "node:assert/strict";
import { API_KEY, DEFS, ORG_A, TOKEN_A, client, definitionBody, obj, profileDataset, type Client, type Harness } from "../helpers/server-harness.js";
import { COUNTRIES, EVENT_SCHEMA, METHODS, PROFILE_SCHEMA, buyersIn, checkChains, ecidMap, headersOf, load, message, population, runJob, waitBackfill, type BackfillJson } from "./backfill-helpers.js";

const SCOPE = { orgId: ORG_A, sandboxName: "prod" };
const headers = headersOf(TOKEN_A, API_KEY, ORG_A);

export interface StreamFigures {
  profiles: number;
  loadMs: number;
  created: BackfillJson;
  createMs: number;
  edited: BackfillJson;
  editMs: number;
  streamed: number;
  members: number;
  transitions: number;
  bySource: Record<string, number>;
}

function rand(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

export async function streamScenario(h: Harness, n: number): Promise<StreamFigures> {
  const a: Client = client(h.url);
  const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
  const events = await profileDataset(a, "web", EVENT_SCHEMA);
  const r = rand(11);
  const ecid = ecidMap;
  let t0 = performance.now();
  await load(h.url, headers, population(profiles, events, n, Date.now()), 2);
  const loadMs = performance.now() - t0;

  // The stream: records that move profiles between countries and new purchases, for the same profiles.
  let stop = false;
  let streamed = 0;
  let seq = 0;
  const writer = async () => {
    while (!stop) {
      const batch: Record<string, unknown>[] = [];
      for (let k = 0; k < 100; k++) {
        const i = Math.floor(r() * n);
        if (r() < 0.5) batch.push(message(profiles, PROFILE_SCHEMA, { identityMap: ecid(i), homeAddress: { countryCode: COUNTRIES[Math.floor(r() * 4)] } }));
        else batch.push(message(events, EVENT_SCHEMA, { _id: `bf-s${seq++}`, identityMap: ecid(i), eventType: "commerce.purchases", timestamp: new Date(Date.now() - 1000).toISOString() }));
      }
      const res = await fetch(`${h.url}/collection/batch/inlet`, { method: "POST", headers, body: JSON.stringify({ messages: batch }) });
      const text = await res.text();
      assert.equal(res.status, 207, text.slice(0, 300));
      streamed += batch.length;
    }
  };
  const writers = Promise.all([writer(), writer()]);
  // Let the stream run before the definition exists, as it would.
  await new Promise((res) => setTimeout(res, 300));

  t0 = performance.now();
  const d = await a.post(DEFS, definitionBody("bf stream buyers", buyersIn("US"), { evaluationInfo: METHODS.streaming }));
  assert.equal(d.status, 200, d.text);
  const id = obj(d.json).id as string;
  const created = await waitBackfill(a, id, undefined, 600_000);
  const createMs = performance.now() - t0;
  assert.equal(created.state, "succeeded", JSON.stringify(created));

  // An edit while the stream goes on: US buyers leave, FR buyers enter.
  t0 = performance.now();
  const e = await a.patch(`${DEFS}/${id}`, definitionBody("bf stream buyers", buyersIn("FR"), { evaluationInfo: METHODS.streaming }));
  assert.equal(e.status, 200, e.text);
  const edited = await waitBackfill(a, id, created.queuedAt, 600_000);
  const editMs = performance.now() - t0;
  assert.equal(edited.state, "succeeded", JSON.stringify(edited));
  await new Promise((res) => setTimeout(res, 300));
  stop = true;
  await writers;
  await h.server.app.streaming!.idle();

  // The from-scratch evaluation: a batch job of the same expression over all the data.
  const twin = await a.post(DEFS, definitionBody("bf stream twin", buyersIn("FR"), { evaluationInfo: METHODS.batch }));
  assert.equal(twin.status, 200, twin.text);
  const twinId = obj(twin.json).id as string;
  await runJob(a, [twinId]);
  const store = h.server.profiles;
  const live = await store.listMemberIds(SCOPE, id, "realized");
  const batch = await store.listMemberIds(SCOPE, twinId, "realized");
  const liveSet = new Set(live);
  const batchSet = new Set(batch);
  assert.deepEqual({ onlyLive: live.filter((p) => !batchSet.has(p)).slice(0, 20), onlyBatch: batch.filter((p) => !liveSet.has(p)).slice(0, 20) }, { onlyLive: [], onlyBatch: [] }, "streamed + backfilled members vs a from-scratch batch job");
  assert.ok(batch.length > n / 20, `a meaningful audience: ${batch.length} of ${n}`);

  // One chain per profile, in log order.
  const log = [];
  for (let after = 0; ;) {
    const page = await store.readTransitionLog(SCOPE, { afterSeq: after, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: [id], limit: 10_000 });
    log.push(...page);
    if (page.length < 10_000) break;
    after = page[page.length - 1]!.seq;
  }
  const last = checkChains(log);
  for (const p of live) assert.equal(last.get(p), "realized", `member ${p}: its last transition`);
  const bySource: Record<string, number> = {};
  for (const t of await store.listTransitions(SCOPE, { definitionId: id, limit: 10_000_000 })) bySource[t.source] = (bySource[t.source] ?? 0) + 1;
  assert.ok((bySource["backfill"] ?? 0) > 0 && (bySource["streaming"] ?? 0) > 0, JSON.stringify(bySource));
  return { profiles: n, loadMs, created, createMs, edited, editMs, streamed, members: live.length, transitions: log.length, bySource };
}
