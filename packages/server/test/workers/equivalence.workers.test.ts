/**
 * #25's acceptance, on real processes (PostgreSQL, nats-server, the hub, workers): one scripted
 * stream — 200,000 events over 20,000 profiles (streamed, but one request's worth in a batch), 100
 * continuous definitions whose windows open and close under the hub's test clock — gives exactly
 * the same memberships and transitions
 *   1. evaluated in process by the all-in-one, by one worker, and by three workers;
 *   2. while one of the three workers is killed (kill -9) twice and the hub once (kill -9, restart);
 *   3. while a fourth worker joins mid-stream and takes its share; every partition's lag is back
 *      under 1 s after the stream ends.
 * SEGMENTD_WORKERS_SCALE=small runs a tenth of it (a quick check while developing), =ci three tenths
 * (.ci/run: the whole stream takes ~15 of CI's minutes; every step of it — kills, the hub's restart,
 * the fourth worker — happens at the same point of a shorter stream).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { LEASE_BUCKET } from "../../src/cluster/partition-leases.js";
import { readPartitionReports } from "../../src/cluster/partition-reports.js";
import { killAll, REPO_ROOT, spawnTs } from "../helpers/spawn.js";
import { compareOutcomes, deploy, difference, drive, outcomeOf, scriptOf, waitCaughtUp, type Deployment, type Outcome } from "../helpers/workers-run.js";
import path from "node:path";

/** Tenths of the acceptance's stream: `small` 1, `ci` 3 (what .ci/run runs, to keep CI under 45 minutes), else 10. */
const TENTHS = process.env.SEGMENTD_WORKERS_SCALE === "small" ? 1 : process.env.SEGMENTD_WORKERS_SCALE === "ci" ? 3 : 10;
const SCALE = { profiles: 2_000 * TENTHS, events: 20_000 * TENTHS, definitions: 100, batch: 500 };
const PARTITIONS = 64;
const script = scriptOf(SCALE);
const STEPS = script.steps.length;

const log = (line: string) => process.stdout.write(`# ${line}\n`);

async function owners(d: Deployment): Promise<Map<string, number[]>> {
  const nc = await connect({ servers: d.nats!.url });
  try {
    const kv = await new Kvm(jetstream(nc)).open(LEASE_BUCKET);
    const view = await readPartitionReports(kv, PARTITIONS);
    const out = new Map<string, number[]>();
    for (const p of view.partitions) {
      const k = p.owner ?? "";
      out.set(k, [...(out.get(k) ?? []), p.partition]);
    }
    return out;
  } finally {
    await nc.close();
  }
}

async function until<T>(what: string, f: () => Promise<T | undefined>, ms: number): Promise<T> {
  const t0 = Date.now();
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The acceptance (#37): every (profile, definition) pair has the all-in-one's transition log — its
 * statuses in the order written — and the totals, the transitions (sources and times) and the
 * memberships are the same. A lost pair (an entry and its exit that a kill swallowed) fails the
 * first assertion, whatever the memberships say.
 */
function assertSameAs(reference: Outcome, got: Outcome, label: string): void {
  const c = compareOutcomes(reference, got);
  log(`${label}: ${c.transitions[1]} transitions (all-in-one ${c.transitions[0]}), ${c.differingPairs} (profile, definition) pairs whose logs differ`);
  const why = `${label}: ${JSON.stringify({ transitions: c.transitions, kinds: c.kinds, differingPairs: c.differingPairs, examples: c.examples }, null, 1)}\n${difference(reference, got)}`;
  assert.equal(c.differingPairs, 0, why);
  assert.deepEqual(c.transitions, [reference.transitions.length, reference.transitions.length], why);
  assert.ok(c.same, why);
}

describe("streaming workers: the same result as the all-in-one (PostgreSQL, nats-server, hub, workers)", { timeout: 40 * 60_000 }, () => {
  const deployments: Deployment[] = [];
  after(async () => {
    killAll();
    for (const d of deployments) await d.close().catch(() => {});
  });
  let reference: Outcome;

  it(`all-in-one: ${SCALE.events} events, ${SCALE.profiles} profiles, ${SCALE.definitions} definitions`, async () => {
    const d = await deploy("all-in-one", "aio");
    deployments.push(d);
    const t0 = Date.now();
    await drive(d, script, { backfillsFirst: true });
    reference = await outcomeOf(d);
    log(`all-in-one: ${Date.now() - t0} ms; ${reference.memberships.length} memberships, ${reference.transitions.length} transitions`);
    // The script must exercise both directions: entries from events, exits from the windows closing.
    assert.ok(reference.transitions.some((t) => t.includes("→realized")) && reference.transitions.some((t) => t.includes("realized→exited")), "entries and exits");
    assert.ok(reference.transitions.length > SCALE.profiles, `transitions: ${reference.transitions.length}`);
    await d.close();
  });

  it("one worker: the same memberships and transitions", async () => {
    const d = await deploy("workers", "one");
    deployments.push(d);
    await d.startWorker("w1");
    const t0 = Date.now();
    await drive(d, script, { backfillsFirst: true });
    const caughtUp = await waitCaughtUp(d, PARTITIONS);
    const got = await outcomeOf(d);
    log(`one worker: ${Date.now() - t0} ms (caught up ${caughtUp} ms after the stream ended)`);
    assertSameAs(reference, got, "one worker");
    await d.close();
  });

  it("three workers, one killed twice, the hub killed and restarted, a fourth joining: the same result; lag back under 1 s", async () => {
    const d = await deploy("workers", "three");
    deployments.push(d);
    for (const id of ["w1", "w2", "w3"]) await d.startWorker(id);
    const takeovers: number[] = [];
    let joined = -1;
    const killWorker = async (id: string) => {
      const w = d.workers.get(id)!;
      await w.kill();
      const t0 = Date.now();
      await until(`${id}'s partitions taken over`, async () => ((await owners(d)).has(id) || (await owners(d)).has("") ? undefined : true), 20_000);
      takeovers.push(Date.now() - t0);
      await w.start();
    };
    await drive(d, script, {
      backfillsFirst: true,
      async beforeStep(i) {
        if (i === Math.floor(STEPS * 0.2)) await killWorker("w2");
        if (i === Math.floor(STEPS * 0.4)) {
          // The hub: kill -9 mid-stream, restarted with the clock where the script had it.
          await d.hub.kill();
          await d.hub.start({ SEGMENTD_TEST_CLOCK: String(d.now) });
        }
        if (i === Math.floor(STEPS * 0.55)) await killWorker("w2");
        if (i === Math.floor(STEPS * 0.7)) {
          await d.startWorker("w4");
          const t0 = Date.now();
          // Fair share: 64 / 4 = 16 each.
          await until("the fourth worker's share", async () => ((await owners(d)).get("w4")?.length === PARTITIONS / 4 ? true : undefined), 30_000);
          joined = Date.now() - t0;
        }
      },
    });
    const caughtUp = await waitCaughtUp(d, PARTITIONS);
    // Everything is applied: the transition logs first (what a kill could lose), then the partitions' state.
    assertSameAs(reference, await outcomeOf(d), "three workers with kills");
    const own = await owners(d);
    log(`takeovers after kill -9: ${takeovers.join(", ")} ms; the fourth worker had its share after ${joined} ms; caught up ${caughtUp} ms after the stream ended; owners ${JSON.stringify([...own].map(([k, v]) => [k, v.length]))}`);
    for (const t of takeovers) assert.ok(t <= 10_000, `a dead worker's partitions were taken over after ${t} ms`);
    assert.deepEqual([...own.keys()].sort(), ["w1", "w2", "w3", "w4"]);
    for (const [, ps] of own) assert.equal(ps.length, PARTITIONS / 4);

    // The owners report with their lease renewals (every 2 s).
    await new Promise((r) => setTimeout(r, 2_500));
    // `segmentd workers`: every partition owned, applied through its last message, lag under 1 s.
    const view = spawnTs(path.join(REPO_ROOT, "packages/server/src/cli/main.ts"), ["workers", "--json", "--nats", d.nats!.url, "--database-url", d.databaseUrl]);
    const exit = await view.exited;
    assert.equal(exit.code, 0, view.stderr());
    const rows = (JSON.parse(view.stdout()) as { workers: string[]; partitions: Array<{ partition: number; owner: string | null; stored: number; report: { seq: number; lagMs: number; pending: number } | null }> }).partitions;
    assert.equal(rows.length, PARTITIONS);
    for (const r of rows) {
      assert.ok(r.owner !== null, `partition ${r.partition} owned`);
      assert.ok(r.report !== null && r.report.lagMs < 1000 && r.report.pending === 0, `partition ${r.partition}: ${JSON.stringify(r)}`);
    }
    // The same in the hub's /metrics.
    const metrics = await (await fetch(`${d.hub.url}/metrics`)).text();
    const lags = [...metrics.matchAll(/^segmentd_stream_partition_lag_seconds\{[^}]*\} (\S+)$/gm)].map((m) => Number(m[1]));
    assert.equal(lags.length, PARTITIONS, metrics.slice(0, 2000));
    assert.ok(lags.every((x) => x < 1), `lag seconds: ${lags.join(",")}`);

    await d.close();
  });
});
