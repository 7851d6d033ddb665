/**
 * Issue #41, acceptance 1 on streaming workers: computed/equivalence.test.ts's scripted stream and
 * checks (helpers/computed-script.ts) on real processes — a hub (`serve --workers`) and
 * `segmentd worker`s over PostgreSQL and nats-server, the hub's test clock moved by the script
 * (`POST /admin/clock`, whose sweep is a tick to every partition). At every checkpoint, once every
 * partition applied its last message: the values the hub's profile access API reports, the
 * members of the continuous definitions (kept by the workers) and of their batch twins (a segment
 * job on the hub) equal a from-scratch recomputation over the events sent.
 *   1. one worker;
 *   2. three workers, one killed with -9 in the middle of the stream's third part (its partitions
 *      taken over by the others before the checkpoint) and started again at the fourth (it takes
 *      its share back mid-stream).
 * Scale: SEGMENTD_CA_WORKERS_EVENTS (default 10,000) and SEGMENTD_CA_WORKERS_PROFILES (default
 * 1,000); the run is SEGMENTD_CA_WORKERS_EVENTS=50000 SEGMENTD_CA_WORKERS_PROFILES=5000.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import pg from "pg";
import { ComputedScript, T0, createAttributesAndDefinitions, profileRequests, runScript, type Driver } from "../helpers/computed-script.js";
import { EVENT_CLASS, PROFILE_CLASS, arr, client, obj, profileDataset, type Client } from "../helpers/server-harness.js";
import { killAll } from "../helpers/spawn.js";
import { deploy, KEY, ORG, TOKEN, waitApplied, waitBackfills, withUser, type Deployment } from "../helpers/workers-run.js";

const EVENTS = Number(process.env.SEGMENTD_CA_WORKERS_EVENTS ?? 10_000);
const PROFILES = Number(process.env.SEGMENTD_CA_WORKERS_PROFILES ?? 1_000);
const PARTITIONS = 64;
const TENANT = "_workers000000000000000000";
const log = (line: string) => process.stdout.write(`# ${line}\n`);

/** One request; sent again while some records answer 503 (stored, not yet on the workers' stream: an event is stored once by its id). */
async function send(c: Client, datasetId: string, records: Array<Record<string, unknown>>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const r = await c.post("/collection/batch/ca-eq", { messages: records.map((xdmEntity) => ({ header: { datasetId }, body: { xdmEntity } })) });
    assert.equal(r.status, 207, r.text.slice(0, 500));
    const refused = arr(obj(r.json).responses).filter((x) => obj(x).status !== undefined);
    if (refused.length === 0) return;
    assert.ok(refused.every((x) => obj(x).status === 503) && attempt < 10, `records refused: ${r.text.slice(0, 500)}`);
    await new Promise((res) => setTimeout(res, 500));
  }
}

/**
 * Runs the script on a workers hub: the workers started first (a continuous definition's backfill
 * needs them), the definitions' backfills waited for, then the stream with its checks.
 * `beforeRequest` is called before each request of events (faults).
 */
async function run(label: string, workers: string[], beforeRequest?: (d: Deployment, at: Parameters<Driver["send"]>[1]) => Promise<void>): Promise<Deployment> {
  const d = await deploy("workers", label, PARTITIONS, { clockStart: T0 });
  deployments.push(d);
  for (const id of workers) await d.startWorker(id);
  const c = client(d.hub.url, { token: TOKEN, apiKey: KEY, org: ORG });
  const profilesDs = await profileDataset(c, "crm", PROFILE_CLASS);
  const eventsDs = await profileDataset(c, "web", EVENT_CLASS);
  let t0 = Date.now();
  for (const request of profileRequests(PROFILES)) await send(c, profilesDs, request);
  const defs = await createAttributesAndDefinitions(c, TENANT);
  const backfills = await waitBackfills(d, defs.flatMap((x) => (x.continuous === null ? [] : [x.continuous])));
  log(`${label}: ${PROFILES} profiles, 25 attributes and ${defs.length + defs.filter((x) => x.continuous !== null).length} definitions in ${Date.now() - t0} ms (backfills ${backfills} ms)`);

  const db = new pg.Client({ connectionString: withUser(d.databaseUrl) });
  await db.connect();
  try {
    const ids = await db.query<{ pid: string; idv: string }>("SELECT pid, idv FROM identities WHERE lower(ns) = 'email'");
    const pidToEmail = new Map(ids.rows.map((r) => [String(r.pid), r.idv]));
    assert.equal(pidToEmail.size, PROFILES, "every profile stored");
    const advance = async (ms: number) => {
      const r = await d.call("POST", "/admin/clock", { advanceMs: ms }, true);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      d.now += ms;
    };
    const appliedMs: number[] = [];
    const driver: Driver = {
      client: c,
      tenant: TENANT,
      pidToEmail,
      async send(records, at) {
        await beforeRequest?.(d, at);
        await send(c, eventsDs, records);
      },
      // The stream keeps each partition's order: the clock's tick comes after the part's events.
      partSent: () => Promise.resolve(),
      advance,
      async caughtUp() {
        // Ticks at one time count once (this one closes nothing new): wait for each partition's last message.
        await advance(0);
        appliedMs.push(await waitApplied(d, PARTITIONS));
      },
      now: () => d.now,
      async members(definitionId) {
        const r = await db.query<{ idv: string }>("SELECT i.idv FROM memberships m JOIN identities i ON i.tid = m.tid AND i.pid = m.pid AND lower(i.ns) = 'email' WHERE m.def = $1 AND m.status = 'realized'", [definitionId]);
        return r.rows.map((x) => x.idv).sort();
      },
    };
    t0 = Date.now();
    const f = await runScript(new ComputedScript(EVENTS, PROFILES), driver, defs);
    log(`${label}: ${EVENTS} events, 5 checkpoints in ${Date.now() - t0} ms; every partition applied ${appliedMs.join(", ")} ms after each part; ${f.checked} values (${f.nonEmpty} non-empty), members per checkpoint ${f.memberCounts.join(", ")}, ${f.streamingExits} streaming exits; ms ${JSON.stringify(f.ms)}`);
    return d;
  } finally {
    await db.end();
  }
}

const deployments: Deployment[] = [];

describe(`computed attributes on streaming workers: ${EVENTS} events, ${PROFILES} profiles, 25 attributes (PostgreSQL, nats-server, hub, workers)`, { timeout: 60 * 60_000 }, () => {
  after(async () => {
    killAll();
    for (const d of deployments) await d.close().catch(() => {});
  });

  it("one worker: at every checkpoint the reported values and the members equal a recomputation from scratch", async () => {
    const d = await run("ca1", ["w1"]);
    await d.close();
  });

  it("three workers, one killed with -9 during the stream and started again: the same", async () => {
    let killed = "";
    const d = await run("ca3", ["w1", "w2", "w3"], async (dep, at) => {
      if (at.part === 2 && !at.recent && at.index === Math.floor(at.of / 2)) {
        await dep.workers.get("w2")!.kill();
        killed = `request ${at.index + 1} of ${at.of} of part 3`;
      }
      if (at.part === 3 && !at.recent && at.index === 0) await dep.workers.get("w2")!.start();
    });
    log(`w2 killed with -9 before ${killed}, started again at part 4`);
    assert.notEqual(killed, "", "the kill happened");
    await d.close();
  });
});
