/**
 * Backfill, acceptance 2 with streaming workers (issue #40), on real processes: a hub
 * (`serve --workers`) and three `segmentd worker`s over PostgreSQL and nats-server. Profiles and
 * their purchases are stored first; then, while writers stream records that move those profiles
 * between countries and new purchases for them, a continuous definition is created and later
 * edited, and during each backfill one worker is killed with -9 and started again. Once the stream
 * stopped and every partition applied its last message:
 *   - the definition's members equal a batch job's over all the data (a from-scratch evaluation);
 *   - each profile's transitions form one chain (every `from` is the previous `to`, never its own
 *     `to`): no transition doubled or lost;
 *   - the transitions with source `backfill` are exactly those the two backfills report;
 *   - POST …/backfill answers 202 (no 503 with workers) and, nothing having changed, writes nothing.
 * 8,000 profiles; SEGMENTD_BACKFILL_WORKERS_PROFILES=200000 runs the size.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import pg from "pg";
import { client, DEFS, definitionBody, obj, profileDataset, type Client } from "../helpers/server-harness.js";
import { killAll } from "../helpers/spawn.js";
import { deploy, KEY, ORG, postInlet, TOKEN, waitApplied, type Deployment } from "../helpers/workers-run.js";
import { buyersIn, checkChains, COUNTRIES, ecidMap, EVENT_SCHEMA, message, METHODS, population, PROFILE_SCHEMA, runJob, waitBackfill, type BackfillJson } from "../backfill/backfill-helpers.js";

const PROFILES = Number(process.env.SEGMENTD_BACKFILL_WORKERS_PROFILES ?? 8_000);
const PARTITIONS = 64;
const log = (line: string) => process.stdout.write(`# ${line}\n`);

function rand(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

function pgClient(d: Deployment): pg.Client {
  const u = new URL(d.databaseUrl);
  if (u.username === "") u.username = process.env.PGUSER || "postgres";
  return new pg.Client({ connectionString: u.toString() });
}

/**
 * Posts messages 1,000 a request, two requests at once; a request with records the workers' feed
 * did not take (503: stored, not published) is sent again — events are stored once by their id,
 * profile records rewrite the same values.
 */
async function loadAll(url: string, messages: readonly Record<string, unknown>[]): Promise<void> {
  let next = 0;
  const writer = async () => {
    while (next < messages.length) {
      const part = messages.slice(next, next + 1000);
      next += 1000;
      await postInlet(url, part);
    }
  };
  await Promise.all([writer(), writer()]);
}

/**
 * Polls the backfill until the workers are applying its chunks (some applied, or — not seen before
 * the last — its chunks on the partitions' streams for a while), then kills the worker with -9 and
 * starts it again.
 */
async function killDuringBackfill(d: Deployment, a: Client, id: string, worker: string, after?: string): Promise<string> {
  const t0 = Date.now();
  let writingSince = 0;
  for (;;) {
    const r = await a.get(`${DEFS}/${id}/backfill`);
    const b = r.status === 200 ? (r.json as BackfillJson) : null;
    const writing = b !== null && (after === undefined || b.queuedAt > after) && b.state === "running" && b.phase === "writing";
    if (writing && writingSince === 0) writingSince = Date.now();
    if (writing && (b.processed > 0 || Date.now() - writingSince > 3_000)) {
      const w = d.workers.get(worker)!;
      await w.kill();
      const at = `killed ${worker} with ${b.processed} of ${b.total} applied`;
      // Its partitions wait for the lease to expire, or for it to come back.
      await new Promise((res) => setTimeout(res, 1_500));
      await w.start();
      return at;
    }
    if (b !== null && (after === undefined || b.queuedAt > after) && (b.state === "succeeded" || b.state === "failed")) return `the backfill ended before the kill (${b.state})`;
    if (Date.now() - t0 > 600_000) throw new Error("the backfill never started writing");
    await new Promise((res) => setTimeout(res, 10));
  }
}

describe("backfill with streaming workers (hub, three workers, PostgreSQL, nats-server)", { timeout: 60 * 60_000 }, () => {
  let d: Deployment | undefined;
  after(async () => {
    killAll();
    await d?.close().catch(() => {});
  });

  it(`a backfill racing a live stream, a worker killed with -9 during it, ends with a from-scratch evaluation's members and no transition doubled (${PROFILES} profiles)`, async () => {
    d = await deploy("workers", "backfill", PARTITIONS, { testClock: false });
    for (const id of ["w1", "w2", "w3"]) await d.startWorker(id);
    const a = client(d.hub.url, { token: TOKEN, apiKey: KEY, org: ORG });
    const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
    const events = await profileDataset(a, "web", EVENT_SCHEMA);
    let t0 = Date.now();
    await loadAll(d.hub.url, population(profiles, events, PROFILES, Date.now()));
    log(`loaded ${PROFILES} profiles in ${Date.now() - t0} ms; applied ${await waitApplied(d, PARTITIONS)} ms later`);

    // The stream: records that move profiles between countries and new purchases, for the same profiles.
    const r = rand(7);
    let stop = false;
    let streamed = 0;
    let seq = 0;
    const writer = async () => {
      while (!stop) {
        const batch: Record<string, unknown>[] = [];
        for (let k = 0; k < 100; k++) {
          const i = Math.floor(r() * PROFILES);
          if (r() < 0.5) batch.push(message(profiles, PROFILE_SCHEMA, { identityMap: ecidMap(i), homeAddress: { countryCode: COUNTRIES[Math.floor(r() * 4)] } }));
          else batch.push(message(events, EVENT_SCHEMA, { _id: `bfw-s${seq++}`, identityMap: ecidMap(i), eventType: "commerce.purchases", timestamp: new Date(Date.now() - 1000).toISOString() }));
        }
        await postInlet(d!.hub.url, batch);
        streamed += batch.length;
        // An offered load the workers keep up with on a shared machine (~1,000 records a second).
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    const writers = Promise.all([writer(), writer()]);
    await new Promise((res) => setTimeout(res, 500));

    // Created while the stream runs; w2 killed during its backfill.
    t0 = Date.now();
    const created = await a.post(DEFS, definitionBody("bfw buyers", buyersIn("US"), { evaluationInfo: METHODS.streaming }));
    assert.equal(created.status, 200, created.text);
    const id = obj(created.json).id as string;
    const kill1 = await killDuringBackfill(d, a, id, "w2");
    const first = await waitBackfill(a, id, undefined, 1_200_000);
    const createMs = Date.now() - t0;
    assert.equal(first.state, "succeeded", JSON.stringify(first));
    log(`create: ${createMs} ms, ${kill1}; ${JSON.stringify({ total: first.total, entered: first.entered, exited: first.exited, fenced: first.fenced })}`);

    // An edit while the stream goes on (US buyers leave, FR buyers enter); w3 killed during its backfill.
    t0 = Date.now();
    const edited = await a.patch(`${DEFS}/${id}`, definitionBody("bfw buyers", buyersIn("FR"), { evaluationInfo: METHODS.streaming }));
    assert.equal(edited.status, 200, edited.text);
    const kill2 = await killDuringBackfill(d, a, id, "w3", first.queuedAt);
    const second = await waitBackfill(a, id, first.queuedAt, 1_200_000);
    const editMs = Date.now() - t0;
    assert.equal(second.state, "succeeded", JSON.stringify(second));
    assert.equal(second.reason, "updated");
    log(`edit: ${editMs} ms, ${kill2}; ${JSON.stringify({ total: second.total, entered: second.entered, exited: second.exited, fenced: second.fenced })}`);
    assert.ok(second.exited > 0 && second.entered > 0, `the edit moved profiles both ways: ${JSON.stringify(second)}`);
    assert.ok(first.fenced + second.fenced > 0, "the stream changed profiles after the fences");

    await new Promise((res) => setTimeout(res, 500));
    stop = true;
    await writers;
    const applied = await waitApplied(d, PARTITIONS);
    log(`streamed ${streamed} records; every partition applied ${applied} ms after the stream stopped`);

    // The from-scratch evaluation: a batch job of the same expression over all the data.
    const twin = await a.post(DEFS, definitionBody("bfw twin", buyersIn("FR"), { evaluationInfo: METHODS.batch }));
    assert.equal(twin.status, 200, twin.text);
    const twinId = obj(twin.json).id as string;
    await runJob(a, [twinId]);
    const c = pgClient(d);
    await c.connect();
    try {
      const ids = async (def: string) => (await c.query<{ pid: string }>("SELECT pid FROM memberships WHERE def = $1 AND status = 'realized'", [def])).rows.map((x) => String(x.pid));
      const live = await ids(id);
      const batch = await ids(twinId);
      const liveSet = new Set(live);
      const batchSet = new Set(batch);
      assert.deepEqual({ onlyLive: live.filter((p) => !batchSet.has(p)).slice(0, 20), onlyBatch: batch.filter((p) => !liveSet.has(p)).slice(0, 20) }, { onlyLive: [], onlyBatch: [] }, "workers' streamed + backfilled members vs a from-scratch batch job");
      assert.ok(batch.length > PROFILES / 20, `a meaningful audience: ${batch.length} of ${PROFILES}`);

      // One chain per profile, in log order; the backfill's transitions are exactly those the runs report.
      const log2 = (await c.query<{ seq: string; pid: string; from_status: string | null; to_status: string; source: string }>("SELECT seq, pid, from_status, to_status, source FROM transitions WHERE def = $1 ORDER BY seq", [id])).rows;
      const last = checkChains(log2.map((t) => ({ seq: Number(t.seq), profileId: String(t.pid), from: t.from_status, to: t.to_status })));
      for (const p of live) assert.equal(last.get(p), "realized", `member ${p}: its last transition`);
      const bySource: Record<string, number> = {};
      for (const t of log2) bySource[t.source] = (bySource[t.source] ?? 0) + 1;
      log(`${live.length} members; transitions by source ${JSON.stringify(bySource)}`);
      assert.equal(bySource["backfill"] ?? 0, first.entered + first.exited + second.entered + second.exited, JSON.stringify({ bySource, first, second }));
      assert.ok((bySource["streaming"] ?? 0) > 0, JSON.stringify(bySource));
      assert.deepEqual(Object.keys(bySource).filter((s) => s !== "backfill" && s !== "streaming"), []);

      // POST …/backfill with workers: 202, and with nothing changed since, nothing written.
      const again = await a.post(`${DEFS}/${id}/backfill`);
      assert.equal(again.status, 202, again.text);
      assert.equal((again.json as BackfillJson).reason, "requested");
      const third = await waitBackfill(a, id, second.queuedAt, 600_000);
      assert.deepEqual({ state: third.state, reason: third.reason, entered: third.entered, exited: third.exited }, { state: "succeeded", reason: "requested", entered: 0, exited: 0 });
      const after3 = (await c.query<{ n: string }>("SELECT count(*) AS n FROM transitions WHERE def = $1", [id])).rows[0]!.n;
      assert.equal(Number(after3), log2.length, "the requested backfill wrote nothing");
    } finally {
      await c.end();
    }
  });
});
