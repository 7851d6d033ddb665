/**
 * A backfill interrupted by kill -9 runs again when the server is back (issue #40): the server in
 * its own process on the test run's store, 20,000 profiles, a streaming definition created and the
 * server killed while its backfill runs. After the restart the backfill is resumed from the start
 * (reason `restarted`, a second attempt), ends with a batch job's members, and no profile's
 * transitions doubled (what the first attempt wrote is not written again). Then two definitions
 * saved back to back: the second one's backfill queues behind the first's; and a definition edited
 * while its backfill runs ends with the edited version's members.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { openProfileStore } from "../../src/profiles/open.js";
import { childFixture, type ChildFixture } from "../helpers/child-fixture.js";
import { API_KEY, DEFS, ORG_A, TOKEN_A, client, definitionBody, obj, profileDataset } from "../helpers/server-harness.js";
import { EVENT_SCHEMA, METHODS, PROFILE_SCHEMA, buyersIn, checkChains, headersOf, load, population, runJob, waitBackfill, type BackfillJson } from "./backfill-helpers.js";

const N = 20_000;
const SCOPE = { orgId: ORG_A, sandboxName: "prod" };
let fx: ChildFixture | undefined;
after(async () => fx?.dispose());

test("a backfill killed with -9 runs again after the restart and ends with a batch job's members, no transition doubled", async () => {
  // Chunks of 100: the 5,000 changes take 50 writes, so the kill lands between two of them (with
  // the default 2,000 the whole write took ~80 ms and a poll could miss it).
  fx = await childFixture("backfill-restart", { batch: { backfillChunk: 100 } });
  let server = await fx.start();
  let a = client(server.url);
  const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
  const events = await profileDataset(a, "web", EVENT_SCHEMA);
  await load(server.url, headersOf(TOKEN_A, API_KEY, ORG_A), population(profiles, events, N, Date.now()));

  const d = await a.post(DEFS, definitionBody("restart buyers", buyersIn("US"), { evaluationInfo: METHODS.streaming }));
  assert.equal(d.status, 200, d.text);
  const id = obj(d.json).id as string;
  let seen: BackfillJson | null = null;
  for (const t0 = Date.now(); seen === null; ) {
    const r = await a.get(`${DEFS}/${id}/backfill`);
    // Killed once its first chunk is written: the restart must not write that chunk's transitions again.
    const v = r.json as BackfillJson;
    if (r.status === 200 && v.phase === "writing" && v.processed > 0) seen = v;
    else if (r.status === 200) assert.ok(["queued", "evaluating", "writing"].includes(v.phase), `the backfill got past its writes before the kill: ${r.text}`);
    else assert.equal(r.status, 404, r.text);
    assert.ok(Date.now() - t0 < 60_000, "the backfill never ran");
  }
  server.s.child.kill("SIGKILL");
  assert.equal((await server.s.exited).signal, "SIGKILL");

  server = await fx.start();
  a = client(server.url);
  const b = await waitBackfill(a, id);
  assert.deepEqual({ state: b.state, reason: b.reason, attempts: b.attempts }, { state: "succeeded", reason: "restarted", attempts: 2 }, `killed in phase ${seen.phase}: ${JSON.stringify(b)}`);

  const t = await a.post(DEFS, definitionBody("restart twin", buyersIn("US"), { evaluationInfo: METHODS.batch }));
  const twin = obj(t.json).id as string;
  await runJob(a, [twin]);

  // Two definitions saved back to back: one backfill at a time per sandbox, in order.
  const first = obj((await a.post(DEFS, definitionBody("queue first", buyersIn("FR"), { evaluationInfo: METHODS.streaming }))).json).id as string;
  const second = obj((await a.post(DEFS, definitionBody("queue second", `homeAddress.countryCode = "DE"`, { evaluationInfo: METHODS.streaming }))).json).id as string;
  const whileFirst = (await a.get(`${DEFS}/${second}/backfill`)).json as BackfillJson;
  assert.equal(whileFirst.state, "queued", JSON.stringify(whileFirst));
  const [f, s] = [await waitBackfill(a, first), await waitBackfill(a, second)];
  assert.ok(s.startedAt! >= f.finishedAt!, `the second started ${s.startedAt} after the first finished ${f.finishedAt}`);
  assert.ok(f.entered > 1000 && s.entered > 1000, `${f.entered}, ${s.entered}`);

  // An edit while its backfill runs: the run stops at its next chunk and the edited version is backfilled.
  const x = obj((await a.post(DEFS, definitionBody("supersede", buyersIn("US"), { evaluationInfo: METHODS.streaming }))).json).id as string;
  let running: BackfillJson | null = null;
  for (const t0 = Date.now(); running === null && Date.now() - t0 < 60_000; ) {
    const v = (await a.get(`${DEFS}/${x}/backfill`)).json as BackfillJson | undefined;
    if (v?.state === "running" || v?.state === "succeeded") running = v;
  }
  assert.ok(running !== null, "the backfill never ran");
  const edited = await a.patch(`${DEFS}/${x}`, definitionBody("supersede", buyersIn("FR"), { evaluationInfo: METHODS.streaming }));
  assert.equal(edited.status, 200, edited.text);
  const xb = await waitBackfill(a, x, running.queuedAt);
  assert.deepEqual({ state: xb.state, reason: xb.reason, definitionVersion: xb.definitionVersion }, { state: "succeeded", reason: "updated", definitionVersion: obj(edited.json).updateTime });
  const xt = obj((await a.post(DEFS, definitionBody("supersede twin", buyersIn("FR"), { evaluationInfo: METHODS.batch }))).json).id as string;
  await runJob(a, [xt]);

  server.s.child.kill("SIGTERM");
  await server.s.exited;
  const store = openProfileStore({ dataDir: fx.store.dataDir, ...(fx.store.databaseUrl === undefined ? {} : { databaseUrl: fx.store.databaseUrl }), worker: false });
  try {
    const live = await store.listMemberIds(SCOPE, id, "realized");
    const batch = await store.listMemberIds(SCOPE, twin, "realized");
    assert.deepEqual(live, batch, "the resumed backfill's members are the batch job's");
    assert.ok(live.length > 4000, `${live.length} members`);
    const log = await store.readTransitionLog(SCOPE, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: [id], limit: 1_000_000 });
    const last = checkChains(log);
    assert.equal(log.length, live.length, "one transition per member: the second attempt wrote only what the first had not");
    for (const p of live) assert.equal(last.get(p), "realized");
    assert.deepEqual(await store.listMemberIds(SCOPE, x, "realized"), await store.listMemberIds(SCOPE, xt, "realized"), "the edited version's members, after an edit during the backfill");
    checkChains(await store.readTransitionLog(SCOPE, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: [x], limit: 1_000_000 }));
    assert.ok(b.entered < live.length, `the first attempt had written ${seen.processed} changes; the second wrote ${b.entered} of ${live.length}`);
  } finally {
    await store.close();
  }
});
