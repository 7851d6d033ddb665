/**
 * Issue #37, item 6: an edge node recovers at once after its site's nats-server restarts.
 * Interact load at 100 requests/s from 20 clients, each sending its next request 200 ms after
 * the last one left, or as soon as its answer came when that took longer: a browser waits for
 * its answer, so a request held by the node holds its client. The site's server is stopped for
 * 1 s and started again. From its return, the node's rate of 200 answers (over the next second)
 * is back to ≥ 90 % of the offered rate within 2 s; every request gets a clear answer (200, or 503
 * SEGMENTD-EDGE-BUSY-503 with Retry-After) within the publish timeout; every event answered 200
 * is at the hub exactly once. Run with the embedded hub and with a PostgreSQL hub.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { startNatsServer } from "../../src/cluster/nats-server.js";
import { connectNats, ensureSiteEventsStream } from "../../src/cluster/nats.js";
import { PublishAcks } from "../../src/cluster/publish-acks.js";
import { siteEventsStream, siteEventsSubject } from "../../src/cluster/subjects.js";
import { killAll } from "../helpers/spawn.js";
import { interact, startCluster, until, type Cluster } from "../helpers/cluster.js";
import { testDatabaseUrl } from "../helpers/test-store.js";
import { ev, hubEvents } from "./scenarios.js";

// 100/s: on a shared two-core host, 200/s was not sustained in every second even without an
// outage (seconds at 45–82 % of it with no request refused), which would fail the test for the host.
const CLIENTS = 20;
const PERIOD_MS = 200;
const RATE = (CLIENTS * 1000) / PERIOD_MS;
// Over a second: this shared host stalls processes for a few hundred ms at times.
const WINDOW_MS = 1_000;
const NEED = RATE * (WINDOW_MS / 1000) * 0.9;
const PROFILES = 20;

interface Answer {
  id: string;
  sentAt: number;
  doneAt: number;
  status: number;
  retryAfter: string | null;
  body: string;
}

/** The clients' loop until `stop`: each request's answer, with when it was sent and answered. */
function startLoad(url: string, stream: string, prefix: string): { answers: Answer[]; stop(): Promise<void> } {
  const answers: Answer[] = [];
  let stopped = false;
  let n = 0;
  const client = async () => {
    while (!stopped) {
      const i = n++;
      const id = `${prefix}-ev-${i}`;
      const sentAt = Date.now();
      const r = await fetch(`${url}/ee/v2/interact?dataStreamId=${stream}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ event: { xdm: ev(`${prefix}-${i % PROFILES}`, id, "page.view") } }),
        signal: AbortSignal.timeout(30_000),
      })
        .then(async (res) => ({ status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.text() }))
        .catch((err: unknown) => ({ status: 0, retryAfter: null, body: String(err) }));
      answers.push({ id, sentAt, doneAt: Date.now(), ...r });
      const rest = sentAt + PERIOD_MS - Date.now();
      if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, k) => new Promise((r) => setTimeout(r, (k * PERIOD_MS) / CLIENTS)).then(client));
  return {
    answers,
    async stop() {
      stopped = true;
      await Promise.all(clients);
    },
  };
}

const oksIn = (answers: readonly Answer[], t: number, ms: number) => answers.filter((a) => a.status === 200 && a.doneAt >= t && a.doneAt < t + ms).length;

/** ms after `from` to the first one-second window with ≥ 90 % of the offered rate answered 200; null if none before `end`. */
function backAfter(answers: readonly Answer[], from: number, end: number): number | null {
  for (let t = from; t + WINDOW_MS <= end; t += 50) if (oksIn(answers, t, WINDOW_MS) >= NEED) return t - from;
  return null;
}

/** 200 answers per 250 ms from `from`, for the messages. */
function timeline(answers: readonly Answer[], from: number, end: number): string {
  const out: number[] = [];
  for (let t = from; t < end; t += 250) out.push(oksIn(answers, t, 250));
  return out.join(" ");
}

/** How many answers of each status, with one body of each. */
function summary(answers: readonly Answer[]): string {
  const by = new Map<number, { n: number; body: string }>();
  for (const a of answers) {
    const e = by.get(a.status) ?? { n: 0, body: a.body.slice(0, 240) };
    e.n++;
    by.set(a.status, e);
  }
  return [...by].map(([status, e]) => `${status}×${e.n} (${e.body})`).join("; ");
}

/** The load; the site's server stopped for 1 s and started again; the checks. The recovery time (ms). */
async function restartUnderLoad(c: Cluster, site: string, stream: string, prefix: string): Promise<number> {
  const load = startLoad(c.edges[site]!.url, stream, prefix);
  let tStop = 0;
  let tBack = 0;
  let tEnd = 0;
  try {
    // Warm (JIT, connections); the node must serve the full rate before the outage.
    await until("the full rate before the outage", async () => (backAfter(load.answers, Date.now() - 1_000, Date.now()) !== null ? true : undefined), 15_000).catch((err: unknown) => {
      throw new Error(`${String(err)}: the host did not sustain ${RATE}/s: ${timeline(load.answers, Date.now() - 3_000, Date.now())}; ${summary(load.answers)}`);
    });
    tStop = Date.now();
    await c.siteNats[site]!.stop();
    await new Promise((r) => setTimeout(r, 1_000));
    await c.siteNats[site]!.restart();
    tBack = Date.now();
    await new Promise((r) => setTimeout(r, 5_000));
    tEnd = Date.now();
  } finally {
    await load.stop();
  }
  const { answers } = load;
  const took = backAfter(answers, tBack, tEnd);
  const log = `${site}: the server was away ${tBack - tStop} ms; 200 answers per 250 ms from its stop: ${timeline(answers, tStop, tEnd)}; ${summary(answers)}`;
  console.log(log);
  const first = Math.min(...answers.filter((a) => a.status === 200 && a.doneAt >= tBack).map((a) => a.doneAt)) - tBack;
  console.log(`${site}: the first 200 ${first} ms after the site's server returned; a second with ≥ 90 % of ${RATE}/s answered 200 from ${took} ms after it`);
  assert.notEqual(took, null, `the rate of 200 answers never came back: ${log}`);
  assert.ok(took! <= 2_000, `back to the full rate ${took} ms after the server returned: ${log}`);
  assert.ok(first <= 2_000, `the first 200 ${first} ms after the server returned: ${log}`);

  // Clear answers: each a 200 or a 503 saying when to retry, none slower than the publish timeout.
  assert.deepEqual(answers.filter((a) => a.status !== 200 && a.status !== 503).map((a) => `${a.status} ${a.body.slice(0, 200)}`), [], "every request is answered 200 or 503");
  for (const a of answers.filter((x) => x.status === 503)) {
    assert.equal(a.retryAfter, "1", `a 503 says when to retry: ${a.body}`);
    assert.match(a.body, /"code":"SEGMENTD-EDGE-BUSY-503","message":"The edge site's event store did not take the event \(.+\); retry shortly"/);
  }
  const slowest = Math.max(...answers.map((a) => a.doneAt - a.sentAt));
  assert.ok(slowest <= 6_000, `no request waits much beyond the 5 s publish timeout: the slowest took ${slowest} ms`);
  const refused = answers.filter((a) => a.status === 503).length;
  console.log(`${site}: ${answers.length} requests, ${answers.length - refused} answered 200, ${refused} answered 503; the slowest took ${slowest} ms`);

  // Every event answered 200 is at the hub, once (a 503's may or may not be: it was retried, or not).
  const acked = new Set(answers.filter((a) => a.status === 200).map((a) => a.id));
  const counts = new Map<string, number>();
  const missing = () => [...acked].filter((id) => !counts.has(id));
  await until("every acknowledged event at the hub", async () => {
    counts.clear();
    for (let p = 0; p < PROFILES; p++) for (const e of await hubEvents(c, `${prefix}-${p}`)) counts.set(e, (counts.get(e) ?? 0) + 1);
    return missing().length === 0 ? true : undefined;
  }, 30_000).catch((err: unknown) => {
    throw new Error(`${String(err)}: ${acked.size} acknowledged, missing ${missing().length} (${missing().slice(0, 10).join(", ")})`);
  });
  assert.deepEqual([...counts].filter(([, n]) => n > 1).map(([id]) => id), [], "events stored twice at the hub");
  return took!;
}

async function warm(c: Cluster, site: string): Promise<string> {
  const stream = await c.datastream();
  await until(`the datastream at ${site}`, async () => ((await interact(c.edges[site]!.url, stream, ev("warm", randomUUID(), "page.view"))).status === 200 ? true : undefined));
  return stream;
}

describe("an edge node after its site's nats-server restarts (embedded hub)", { timeout: 300_000 }, () => {
  let c: Cluster;
  let stream: string;

  before(async () => {
    c = await startCluster(["site-r"]);
    stream = await warm(c, "site-r");
  });
  after(async () => {
    await c?.close();
    killAll();
  });

  it(`is back to ≥ 90 % of ${RATE} requests/s answered 200 within 2 s of a 1-s outage; every answer is clear; nothing acknowledged is lost`, async () => {
    await restartUnderLoad(c, "site-r", stream, "rst");
  });
});

describe("an edge node after its site's nats-server restarts (PostgreSQL hub)", { timeout: 300_000 }, () => {
  const schema = `t_h6_recovery_${process.pid}`;
  const admin = () => {
    const u = new URL(testDatabaseUrl());
    if (u.username === "") u.username = process.env["PGUSER"] || "postgres";
    return new pg.Client({ connectionString: u.toString() });
  };
  let c: Cluster;
  let stream: string;

  before(async () => {
    const a = admin();
    await a.connect();
    await a.query(`CREATE SCHEMA ${schema}`);
    await a.end();
    const u = new URL(testDatabaseUrl());
    u.searchParams.set("options", `-c search_path=${schema}`);
    c = await startCluster(["site-p"], { hubArgs: ["--database-url", u.toString()] });
    stream = await warm(c, "site-p");
  });
  after(async () => {
    await c?.close();
    killAll();
    const a = admin();
    await a.connect();
    for (const s of ["", "_profiles", "_metadata", "_batch", "_hygiene"]) await a.query(`DROP SCHEMA IF EXISTS ${schema}${s} CASCADE`);
    await a.end();
  });

  it(`is back to ≥ 90 % of ${RATE} requests/s answered 200 within 2 s of a 1-s outage; every answer is clear; nothing acknowledged is lost`, async () => {
    await restartUnderLoad(c, "site-p", stream, "pst");
  });
});

describe("the site's publishes across a restart of its nats-server", { timeout: 120_000 }, () => {
  it("publishes waiting when the server stopped are acknowledged as soon as it is back, each stored once; with the server away longer than the timeout they are refused", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-h6-acks-"));
    const hub = await startNatsServer({ dir: path.join(dir, "hub"), domain: "hub" });
    const site = await startNatsServer({ dir: path.join(dir, "site"), domain: "site-q", hubLeafUrl: hub.leafUrl! });
    const link = await connectNats({ url: site.url, name: "h6-acks", localDomain: "site-q", hubDomain: "hub" });
    const acks = new PublishAcks(link.nc, 5_000);
    try {
      await ensureSiteEventsStream(link.local.jsm, "site-q");
      const data = new TextEncoder().encode("{}");
      const send = (id: string) => acks.publish(siteEventsSubject("site-q"), data, id);
      const stored = async () => (await link.local.jsm.streams.info(siteEventsStream("site-q"))).state.messages;
      assert.equal((await send("before")).seq, 1);

      // Sent just before the stop (their acks may be lost) and while the server is away.
      const pending = Array.from({ length: 50 }, (_, i) => send(`away-${i}`));
      await site.stop();
      pending.push(...Array.from({ length: 50 }, (_, i) => send(`away-${50 + i}`)));
      await new Promise((r) => setTimeout(r, 1_000));
      await site.restart();
      const tBack = Date.now();
      const answered = await Promise.all(pending);
      const took = Date.now() - tBack;
      console.log(`100 publishes made around a 1-s stop acknowledged ${took} ms after the server returned (${acks.stats.resent} sent again)`);
      assert.ok(took <= 2_000, `acknowledged ${took} ms after the server returned`);
      assert.ok(acks.stats.resent >= 50, `those still waiting were sent again: ${acks.stats.resent}`);
      assert.equal(new Set(answered.map((a) => a.seq)).size, 100, "each acknowledged with a sequence of its own");
      assert.equal(await stored(), 101, "each stored once, though some were sent twice");
      assert.equal((await send("away-7")).duplicate, true, "the stream still knows the id: a client's retry is stored once");
      assert.equal(await stored(), 101);

      // Away longer than the timeout: refused with the timeout's message, nothing waits longer.
      await site.stop();
      const t0 = Date.now();
      await assert.rejects(send("long-away"), { message: "no acknowledgement within 5000 ms" });
      const waited = Date.now() - t0;
      assert.ok(waited >= 4_900 && waited < 6_000, `refused after ${waited} ms`);
      assert.equal(acks.pending, 0);
    } finally {
      acks.close();
      await link.close();
      await site.kill();
      await hub.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
