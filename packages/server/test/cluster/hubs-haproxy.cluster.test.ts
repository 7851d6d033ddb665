/**
 * Issue #43, acceptance 1, as a user runs it: `segmentd cluster up --hubs 3` — three hubs behind
 * HAProxy on one PostgreSQL schema and one nats-server, with an edge site — under a bounded mixed
 * load sent through HAProxy (streaming ingestion, definition creates, reads, segment jobs), while
 * one hub is killed with -9 every 20 s for 2 minutes (cluster up starts it again, as a service
 * manager would). Afterwards every write answered 2xx is stored, exactly once: each acknowledged
 * event once in the profile store, each acknowledged definition and job readable. The error rate
 * of each kind of request is printed; reads (which HAProxy may retry on another hub) stay near zero.
 * SEGMENTD_HUB_FAULTS_MS shortens the faulty period (default 120 000).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { REPO_ROOT, killAll, spawnTs, waitFor, type Spawned } from "../helpers/spawn.js";
import { freshSchema, withUser } from "../helpers/test-store.js";
import { freePortRun } from "../helpers/free-ports.js";
import { EVENT_CLASS, arr, client, definitionBody, obj, profileDataset, type Client } from "../helpers/server-harness.js";

const CLI = path.join(REPO_ROOT, "packages/server/src/cli/main.ts");
const FAULTS_MS = Number(process.env.SEGMENTD_HUB_FAULTS_MS ?? 120_000);
const KILL_EVERY_MS = 20_000;
const HUBS = 3;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

interface Tally { sent: number; ok: number; failed: number; errors: Map<string, number> }
const tally = (): Tally => ({ sent: 0, ok: 0, failed: 0, errors: new Map() });
function count(t: Tally, outcome: number | string): boolean {
  t.sent++;
  const ok = typeof outcome === "number" && outcome >= 200 && outcome < 300;
  if (ok) t.ok++;
  else {
    t.failed++;
    t.errors.set(String(outcome), (t.errors.get(String(outcome)) ?? 0) + 1);
  }
  return ok;
}
const rate = (t: Tally) => `${t.failed}/${t.sent} failed (${((100 * t.failed) / Math.max(1, t.sent)).toFixed(2)} %${t.errors.size > 0 ? `: ${[...t.errors].map(([k, v]) => `${k}×${v}`).join(", ")}` : ""})`;

describe("three hubs behind HAProxy (cluster up --hubs 3): kill -9 of a hub every 20 s under load loses no acknowledged write", { timeout: FAULTS_MS + 480_000 }, () => {
  let dir: string;
  let fresh: Awaited<ReturnType<typeof freshSchema>>;
  let cluster: Spawned;
  let port: number;
  let c: Client;
  const figures: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-hubs-"));
    fresh = await freshSchema("t_hubs");
    port = await freePortRun(HUBS + 2);
    cluster = spawnTs(CLI, ["cluster", "up", "--hubs", String(HUBS), "--sites", "edge-1", "-p", String(port), "-d", dir, "--database-url", fresh.databaseUrl, "--no-demo"], { SEGMENTD_LOG_LEVEL: "warn" });
    await waitFor(cluster, /Ctrl-C stops every process\./, 300_000);
    const m = /Development tenant \(as `npm start`'s\): org ([^,]+), sandbox ([^,]+), token ([^,]+), API key (\S+)/.exec(cluster.stdout());
    assert.ok(m, cluster.stdout());
    assert.match(cluster.stdout(), new RegExp(`HAProxy +http://127\\.0\\.0\\.1:${port} +\\(→ 3 hubs`));
    assert.match(cluster.stdout(), /^worker-1 +streaming worker worker-1 \(pid \d+\)$/m);
    c = client(`http://127.0.0.1:${port}`, { org: m[1]!, sandbox: m[2]!, token: m[3]!, apiKey: m[4]! });
  });

  after(async () => {
    console.log(figures.join("\n"));
    if (cluster !== undefined && cluster.child.exitCode === null) {
      cluster.child.kill("SIGINT");
      await Promise.race([cluster.exited, sleep(30_000)]);
    }
    killAll();
    await fresh?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Each hub's latest pid as cluster up printed it. */
  const pids = (): Map<string, number> => {
    const out = new Map<string, number>();
    for (const x of cluster.stdout().matchAll(/^(hub-\d) +http:\/\/\S+ +\(PostgreSQL; pid (\d+)\)$/gm)) out.set(x[1]!, Number(x[2]));
    return out;
  };

  it("every write answered 2xx is stored exactly once; reads stay near error-free", async () => {
    const events = await profileDataset(c, "web", EVENT_CLASS);
    assert.deepEqual([...pids().keys()].sort(), ["hub-1", "hub-2", "hub-3"]);
    const acked = { events: [] as string[], definitions: [] as string[], jobs: [] as string[] };
    const t = { ingest: tally(), define: tally(), read: tally(), job: tally() };
    const bodies = new Map<string, string>();
    const attempt = async (f: () => Promise<{ status: number; text: string }>): Promise<number | string> => {
      try {
        const r = await f();
        // What answered an error: HAProxy's own pages are HTML, the hubs' are JSON with a type.
        if (r.status >= 300) bodies.set(`${r.status}`, r.text.slice(0, 300));
        return r.status;
      } catch (err) {
        return (err as Error).name === "TimeoutError" ? "timeout" : "connection";
      }
    };
    const t0 = Date.now();
    const until = t0 + FAULTS_MS + 5_000;
    /** Runs `step` every `ms` until the load ends (each awaited: a bounded, open-loop-ish offered load). */
    const every = async (ms: number, step: (i: number) => Promise<void>) => {
      for (let i = 0; Date.now() < until; i++) {
        const due = t0 + i * ms;
        await sleep(due - Date.now());
        await step(i);
      }
    };
    const kills: string[] = [];
    await Promise.all([
      every(100, async (i) => {
        const ids = Array.from({ length: 10 }, (_, k) => `hf-${i}-${k}`);
        const messages = ids.map((id, k) => ({ header: { datasetId: events }, body: { xdmEntity: { _id: id, identityMap: { ECID: [{ id: `p${(i * 10 + k) % 500}`, primary: true }] }, eventType: "web.webpagedetails.pageViews", timestamp: new Date().toISOString() } } }));
        let accepted: string[] = [];
        const outcome = await attempt(async () => {
          const r = await c.post("/collection/batch/hub-faults", { messages });
          if (r.status === 200 || r.status === 207) {
            const responses = arr(obj(r.json).responses ?? []);
            accepted = ids.filter((_, k) => obj(responses[k] ?? {}).status === undefined);
          }
          return r;
        });
        if (count(t.ingest, outcome)) acked.events.push(...accepted);
      }),
      every(500, async (i) => {
        let id = "";
        const outcome = await attempt(async () => {
          const r = await c.post("/data/core/ups/segment/definitions", definitionBody(`hub fault ${i}`, `person.name.firstName = "n${i}"`));
          id = String(obj(r.json ?? {}).id ?? "");
          return r;
        });
        if (count(t.define, outcome)) acked.definitions.push(id);
      }),
      every(100, async () => {
        count(t.read, await attempt(() => c.get("/data/core/ups/segment/definitions?limit=5")));
      }),
      every(5_000, async () => {
        let id = "";
        const outcome = await attempt(async () => {
          const r = await c.post("/data/core/ups/segment/jobs", { segments: [{ segmentId: "*" }] });
          id = String(obj(r.json ?? {}).id ?? "");
          return r;
        });
        if (count(t.job, outcome)) acked.jobs.push(id);
      }),
      (async () => {
        for (let k = 1; t0 + k * KILL_EVERY_MS <= t0 + FAULTS_MS; k++) {
          await sleep(t0 + k * KILL_EVERY_MS - Date.now());
          const name = `hub-${((k - 1) % HUBS) + 1}`;
          const pid = pids().get(name)!;
          process.kill(pid, "SIGKILL");
          kills.push(`${name} (pid ${pid}) at +${Math.round((Date.now() - t0) / 1000)} s`);
        }
      })(),
    ]);
    figures.push(`kill -9: ${kills.join(", ")}`);
    assert.equal(kills.length, Math.floor(FAULTS_MS / KILL_EVERY_MS));
    figures.push(`error bodies: ${JSON.stringify([...bodies])}`);
    figures.push(`ingestion: ${rate(t.ingest)}; definition creates: ${rate(t.define)}; reads: ${rate(t.read)}; segment jobs: ${rate(t.job)}`);

    // Every hub is back (started again by cluster up after each kill).
    const restarts = [...cluster.stdout().matchAll(/^hub-\d exited \(SIGKILL\); starting it again$/gm)].length;
    assert.equal(restarts, kills.length, cluster.stdout().slice(-3000));
    for (let i = 1; i <= HUBS; i++) {
      const t1 = Date.now();
      for (;;) {
        const ok = await fetch(`http://127.0.0.1:${port + i}/readyz`).then((r) => r.status === 200, () => false);
        if (ok) break;
        assert.ok(Date.now() - t1 < 120_000, `hub-${i} not ready again`);
        await sleep(500);
      }
    }

    // The writes answered 2xx: each event stored once (the URL's search_path holds the profile store's tables).
    assert.ok(acked.events.length > 0 && acked.definitions.length > 0 && acked.jobs.length > 0, JSON.stringify({ events: acked.events.length, definitions: acked.definitions.length, jobs: acked.jobs.length }));
    const db = new pg.Client({ connectionString: withUser(fresh.databaseUrl) });
    await db.connect();
    try {
      let stored = new Map<string, number>();
      const t2 = Date.now();
      for (;;) {
        const r = await db.query<{ eid: string; n: string }>(`SELECT eid, count(*) AS n FROM events WHERE eid = ANY($1) GROUP BY eid`, [acked.events]);
        stored = new Map(r.rows.map((x) => [x.eid, Number(x.n)]));
        if (stored.size === acked.events.length || Date.now() - t2 > 120_000) break;
        await sleep(500);
      }
      const missing = acked.events.filter((id) => !stored.has(id));
      assert.deepEqual(missing.slice(0, 20), [], `${missing.length} of ${acked.events.length} acknowledged events missing`);
      assert.deepEqual([...stored].filter(([, n]) => n !== 1), [], "an event stored more than once");
      figures.push(`${acked.events.length} acknowledged events stored once each (${Date.now() - t2} ms after the load)`);
    } finally {
      await db.end();
    }
    for (const id of acked.definitions) assert.equal((await c.get(`/data/core/ups/segment/definitions/${id}`)).status, 200, `definition ${id}`);
    for (const id of acked.jobs) assert.equal((await c.get(`/data/core/ups/segment/jobs/${id}`)).status, 200, `job ${id}`);
    figures.push(`${acked.definitions.length} acknowledged definitions and ${acked.jobs.length} jobs readable`);
    // Reads may be retried by HAProxy on another hub: near zero errors.
    assert.ok(t.read.failed <= Math.max(3, t.read.sent * 0.01), `reads: ${rate(t.read)}`);
  });
});
