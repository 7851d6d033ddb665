/**
 * Segment jobs on the worker fleet (#44), on real processes: a hub (`serve --workers`, whose
 * default `batch.onWorkers` sends jobs to the workers) and three `segmentd worker`s over PostgreSQL and nats-server. Over stored
 * profiles and purchases, a job of three batch definitions (one a segment of the other two) is
 * evaluated by the workers, each over its shard: an in-process evaluation of the same data at the
 * job's instant afterwards (the all-in-one's engine, run by the test over the same database) finds
 * nothing left to change and counts the same members; no membership is written twice. Then one worker is killed with -9 and a
 * second job (after data changes) runs at once: the dead worker's partitions are written by the
 * workers that take them over, every partition once, and again the result is the in-process one.
 * Then the hub is killed with -9 mid-job and started again: the job ends FAILED, withdrawn from the
 * workers and its unwritten partitions closed (nothing more of it written), and the next job's
 * result is again the in-process one.
 * After the first job, previews, builder estimates and edit impact through the hub (answered by
 * the workers' shards) equal the in-process ones. SEGMENTD_FLEET_PROFILES sets the size (default 4,000).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import pg from "pg";
import { parse } from "@segmentd/pql";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { evaluateJob, type JobDefinition } from "../../src/batch/engine/evaluate-job.js";
import { evaluatedPolicy } from "../../src/batch/jobs/job-runner.js";
import { compareEdit, type ImpactSide } from "../../src/batch/previews/impact-service.js";
import { inSegmentMemberPids, sampleOnSnapshot, type SampleCount } from "../../src/batch/previews/preview-service.js";
import { defaultConfig } from "../../src/platform/config.js";
import { EvaluationBudget } from "../../src/services/evaluation-budget.js";
import { moduleSchema } from "../../src/platform/pg-url.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import { NO_MERGE_POLICY, type MergePolicySpec } from "../../src/profiles/types.js";
import { buyersIn, COUNTRIES, ecidMap, EVENT_SCHEMA, message, METHODS, population, PROFILE_SCHEMA } from "../backfill/backfill-helpers.js";
import { client, DEFS, definitionBody, MPS, obj, profileDataset, type Client } from "../helpers/server-harness.js";
import { killAll } from "../helpers/spawn.js";
import { withUser } from "../helpers/test-store.js";
import { deploy, KEY, ORG, postInlet, TOKEN, waitApplied, type Deployment } from "../helpers/workers-run.js";

const PROFILES = Number(process.env.SEGMENTD_FLEET_PROFILES ?? 4_000);
const PARTITIONS = 16;
const SCOPE = { orgId: ORG, sandboxName: "prod" };
const log = (line: string) => process.stdout.write(`# ${line}\n`);

/** Posts messages 1,000 a request. */
async function load(url: string, messages: readonly Record<string, unknown>[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 1000) await postInlet(url, messages.slice(i, i + 1000));
}

/** Starts a job and waits for it; its JSON. */
async function job(a: Client, ids: readonly string[]): Promise<Record<string, unknown>> {
  const created = await a.post("/data/core/ups/segment/jobs", { segments: ids.map((segmentId) => ({ segmentId })) });
  assert.equal(created.status, 200, created.text);
  for (let i = 0; ; i++) {
    const j = obj((await a.get(`/data/core/ups/segment/jobs/${obj(created.json).id as string}`)).json);
    if (j.status === "SUCCEEDED" || j.status === "FAILED") return j;
    if (i >= 12_000) throw new Error(`segment job: ${JSON.stringify(j)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Previews, builder estimates and edit impact through the hub (answered by the workers' shards)
 * equal the all-in-one's over the same data: the in-process snapshot of the whole store, the
 * stored memberships for inSegment.
 */
async function readsEqual(a: Client, store: PostgresProfileStore, ids: Record<string, string>, texts: Record<string, string>, policy: MergePolicySpec): Promise<void> {
  const now = Date.now();
  const budget = new EvaluationBudget(defaultConfig().limits, { deadline: false });
  const snap = await new SnapshotCache().get(store, SCOPE, NO_MERGE_POLICY, { events: true });
  const reference = async (text: string): Promise<SampleCount> => {
    const q = parse(text);
    return sampleOnSnapshot(snap, q, 1, now, await inSegmentMemberPids(store, SCOPE, q), 10_000, budget, null);
  };
  for (const text of [texts.us!, `inSegment("${ids.either}") and not inSegment("${ids.fr}")`]) {
    const created = await a.post("/data/core/ups/preview", { predicateExpression: text, predicateType: "pql/text", graphType: "none" });
    assert.equal(created.status, 201, created.text);
    const id = obj(created.json).previewId as string;
    let est: Record<string, unknown> = {};
    for (let i = 0; i < 3_000; i++) {
      est = obj((await a.get(`/data/core/ups/estimate/${id}`)).json);
      if (est.state === "RESULT_READY" || est.state === "FAILED") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(est.state, "RESULT_READY", JSON.stringify(est));
    const ref = await reference(text);
    assert.ok(ref.matched > 0, `${text} has members`);
    assert.deepEqual(
      [est.profilesReadSoFar, est.profilesMatchedSoFar, est.estimatedSize, est.estimatedNamespaceDistribution],
      [ref.read, ref.matched, ref.matched, Object.entries(ref.byNamespace).sort((x, y) => x[0].localeCompare(y[0])).map(([namespaceId, n]) => ({ namespaceId, profilesMatchedSoFar: n }))],
      `estimate of ${text}`,
    );
    const members: string[] = [];
    for (let next: string | undefined = `/data/core/ups/preview/${id}`; next !== undefined;) {
      const page = obj((await a.get(next)).json);
      for (const r of page.results as Record<string, unknown>[]) members.push(...Object.keys(r));
      next = obj(page.links).next as string | undefined;
    }
    assert.deepEqual(members.sort(), ref.members.map((m) => m.profileId).sort(), `preview of ${text}`);
  }
  const exprs = [texts.us!, texts.fr!, `(${texts.us}) or (${texts.fr})`];
  const built = await a.post("/data/core/ups/segment/builder/estimate", { expressions: exprs });
  assert.equal(built.status, 200, built.text);
  const estimates = obj(built.json).estimates as Record<string, unknown>[];
  for (const [i, t] of exprs.entries()) assert.equal(estimates[i]!.profilesMatchedSoFar, (await reference(t)).matched, `builder estimate of ${t}`);

  const impact = await a.post(`${DEFS}/${ids.us}/impact`, { expression: { type: "PQL", format: "pql/text", value: texts.fr }, sampleSize: 100 });
  assert.equal(impact.status, 200, impact.text);
  const got = obj(impact.json);
  const side = (text: string): ImpactSide => ({ query: parse(text), text, policy, mergePolicyId: (policy as { id?: string }).id ?? "", excludeOptOut: true });
  const ref = await compareEdit(store, new SnapshotCache(), SCOPE, side(texts.us!), side(texts.fr!), now, 100);
  const group = (g: unknown) => obj(g).count;
  assert.deepEqual(
    [got.profiles, obj(got.before).qualified, obj(got.after).qualified, group(got.enter), group(got.leave), group(got.stay)],
    [ref.profiles, ref.before, ref.after, ref.enter.count, ref.leave.count, ref.stay.count],
    "edit impact",
  );
  assert.ok(ref.enter.count > 0 && ref.leave.count > 0, "the edit moves profiles both ways");
  log(`previews, builder estimates and edit impact over the fleet equal the in-process ones (${ref.profiles} profiles)`);
}

describe("segment jobs on the worker fleet (hub, three workers, PostgreSQL, nats-server)", { timeout: 20 * 60_000 }, () => {
  let d: Deployment | undefined;
  let store: PostgresProfileStore | undefined;
  after(async () => {
    killAll();
    await store?.close().catch(() => {});
    await d?.close().catch(() => {});
  });

  it(`a job's transitions and counters equal the in-process evaluation's; with a worker killed with -9, its partitions are written by the others, once (${PROFILES} profiles)`, async () => {
    // batch.onWorkers is the default of a hub with --workers.
    d = await deploy("workers", "fleet", PARTITIONS, { testClock: false });
    for (const id of ["w1", "w2", "w3"]) await d.startWorker(id);
    let a = client(d.hub.url, { token: TOKEN, apiKey: KEY, org: ORG });
    const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
    const events = await profileDataset(a, "web", EVENT_SCHEMA);
    await load(d.hub.url, population(profiles, events, PROFILES, Date.now()));
    await waitApplied(d, PARTITIONS);

    const texts: Record<string, string> = { us: buyersIn("US"), fr: buyersIn("FR") };
    const ids: Record<string, string> = {};
    for (const k of ["us", "fr"]) {
      const r = await a.post(DEFS, definitionBody(`fleet ${k}`, texts[k]!, { evaluationInfo: METHODS.batch }));
      assert.equal(r.status, 200, r.text);
      ids[k] = obj(r.json).id as string;
    }
    texts.either = `inSegment("${ids.us}") or inSegment("${ids.fr}")`;
    const either = await a.post(DEFS, definitionBody("fleet either", texts.either, { evaluationInfo: METHODS.batch }));
    assert.equal(either.status, 200, either.text);
    ids.either = obj(either.json).id as string;

    // The reference is the all-in-one's engine over the same database, in this process, at the
    // job's instant, once the job is done: it must find nothing left to change (the fleet wrote
    // exactly the in-process result) and count the same members.
    const mpId = obj((await a.get(`${DEFS}/${ids.us}`)).json).mergePolicyId as string;
    const mp = obj((await a.get(`${MPS}/${mpId}`)).json) as unknown as MergePolicySpec & { id: string };
    const policy = { id: mp.id, ...evaluatedPolicy(mp) };
    const defs: JobDefinition[] = ["us", "fr", "either"].map((k) => ({ id: ids[k]!, query: parse(texts[k]!), references: k === "either" ? [ids.us!, ids.fr!] : [], excludeOptOut: true, policy }));
    // As the hub and the workers open it; the raw reads below go through the URL's search_path.
    store = new PostgresProfileStore({ connectionString: withUser(d.databaseUrl), schema: moduleSchema(d.databaseUrl, "profiles") });
    const c = new pg.Client({ connectionString: withUser(d.databaseUrl) });
    await c.connect();
    try {
      const run = async (label: string, expectWorkers: readonly string[]) => {
        const last = Number((await c.query<{ m: string | null }>(`SELECT max(seq) AS m FROM transitions`)).rows[0]!.m ?? 0);
        const t0 = Date.now();
        const j = await job(a, Object.values(ids));
        assert.equal(j.status, "SUCCEEDED", JSON.stringify(j));
        const ms = Date.now() - t0;
        const written = (await c.query<{ pid: string; def: string; to_status: string; source: string; at: string }>(
          `SELECT pid, def, to_status, source, at FROM transitions WHERE seq > $1 ORDER BY seq`, [last])).rows;
        assert.ok(written.length > 0, `${label}: the job moves memberships`);
        assert.deepEqual([...new Set(written.map((t) => t.source))], ["batch"]);
        const at = Number(written[0]!.at);
        assert.ok(written.every((t) => Number(t.at) === at), `${label}: one instant for the whole job`);
        const keys = written.map((t) => `${t.def} ${t.pid}`);
        assert.equal(new Set(keys).size, keys.length, `${label}: no membership written twice`);
        const ref = await evaluateJob(store!, SCOPE, defs, { now: at, snapshots: new SnapshotCache() });
        assert.deepEqual(ref.memberships.map((m) => [m.definitionId, m.entered.length, m.reentered.length, m.exited.length]), [], `${label}: nothing left to change`);
        const metrics = obj(j.metrics);
        assert.deepEqual(metrics.totalProfilesByMergePolicy, ref.profilesByPolicy, `${label}: entries per merge policy`);
        for (const def of defs) {
          const r = ref.counters.get(def.id)!;
          assert.equal(obj(metrics.segmentedProfileCounter)[def.id], r.qualified, `${label}: ${def.id}'s members`);
          const moved = obj(obj(metrics.segmentedProfileByStatusCounter)[def.id]);
          assert.equal(Number(moved.realized) + Number(moved.exited), written.filter((t) => t.def === def.id).length, `${label}: ${def.id}'s transitions`);
        }
        const parts = (await c.query<{ part: number; worker: string }>(`SELECT part, worker FROM job_partitions WHERE job = $1 ORDER BY part`, [j.id])).rows;
        assert.deepEqual(parts.map((p) => p.part), Array.from({ length: PARTITIONS }, (_, p) => p), `${label}: every partition once`);
        const writers = [...new Set(parts.map((p) => p.worker))].sort();
        assert.ok(writers.length > 0 && writers.every((w) => expectWorkers.includes(w)), `${label}: written by ${writers.join(", ")}`);
        log(`${label}: ${ms} ms, ${written.length} transitions, members ${defs.map((x) => ref.counters.get(x.id)!.qualified).join(" / ")}`);
        return ref;
      };
      const first = await run("job 1", ["w1", "w2", "w3"]);
      assert.ok(first.counters.get(ids.either!)!.qualified > 0 && first.counters.get(ids.us!)!.qualified > 0);
      await readsEqual(a, store!, ids, texts, policy);

      // w3 killed with -9; profiles move from the US to France; the next job at once: w3's
      // partitions wait for its leases to expire and are written by w1 and w2.
      await d.workers.get("w3")!.kill();
      const moved: Record<string, unknown>[] = [];
      for (let i = 0; i < PROFILES; i += 8) moved.push(message(profiles, PROFILE_SCHEMA, { identityMap: ecidMap(i), homeAddress: { countryCode: COUNTRIES[(i + 1) % 4] } }));
      await load(d.hub.url, moved);
      const second = await run("job 2, w3 killed", ["w1", "w2"]);
      assert.notDeepEqual(second.counters.get(ids.us!)!.qualified, first.counters.get(ids.us!)!.qualified, "the data change moved members");

      // The hub killed with -9 mid-job (once a first partition is written) and started again:
      // recovery withdraws the job from the workers and fails it; no partition of it is written
      // afterwards, and the next job brings every partition to the in-process result.
      const changed: Record<string, unknown>[] = [];
      for (let i = 0; i < PROFILES; i += 6) changed.push(message(profiles, PROFILE_SCHEMA, { identityMap: ecidMap(i), homeAddress: { countryCode: COUNTRIES[(i + 2) % 4] } }));
      await load(d.hub.url, changed);
      await waitApplied(d, PARTITIONS);
      const created = await a.post("/data/core/ups/segment/jobs", { segments: Object.values(ids).map((segmentId) => ({ segmentId })) });
      assert.equal(created.status, 200, created.text);
      const interrupted = obj(created.json).id as string;
      // Written by a worker (a closed partition has worker '').
      const partsOf = async () => Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM job_partitions WHERE job = $1 AND worker <> ''`, [interrupted])).rows[0]!.n);
      const rowsOf = async () => Number((await c.query<{ n: string }>(`SELECT count(*) AS n FROM job_partitions WHERE job = $1`, [interrupted])).rows[0]!.n);
      for (let i = 0; (await partsOf()) === 0; i++) {
        if (i >= 6_000) throw new Error("no partition of the job was written in 60 s");
        await new Promise((r) => setTimeout(r, 10));
      }
      await d.hub.kill();
      await d.hub.start();
      a = client(d.hub.url, { token: TOKEN, apiKey: KEY, org: ORG });
      let failed: Record<string, unknown> = {};
      for (let i = 0; i < 3_000; i++) {
        failed = obj((await a.get(`/data/core/ups/segment/jobs/${interrupted}`)).json);
        if (failed.status !== "PROCESSING") break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(failed.status, "FAILED", JSON.stringify(failed));
      assert.equal(obj((failed.errors as unknown[])[0]).code, "SEGMENTD-JOB-INTERRUPTED");
      const parts = await partsOf();
      assert.equal(await rowsOf(), PARTITIONS, "the partitions not written are closed before the job is failed");
      // Four passes of the workers' bucket reads later, nothing more of it was written.
      await new Promise((r) => setTimeout(r, 2_000));
      assert.equal(await partsOf(), parts, "no partition of the withdrawn job written after its failure");
      log(`job 3, hub killed with -9: ${parts} of ${PARTITIONS} partitions written, then withdrawn`);
      await load(d.hub.url, moved);
      await run("job 4, after the hub's restart", ["w1", "w2"]);
    } finally {
      await c.end();
    }
  });
});
