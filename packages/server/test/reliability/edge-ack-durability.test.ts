/**
 * Issue #37, item 4: the all-in-one answers an edge interact 200 only once the event is durable
 * at the hub. The server runs in a child process on the store SEGMENTD_TEST_STORE selects; 16
 * connections send interact events (each with its own `_id`, over 200 profiles, an edge audience
 * qualifying them) and the server is killed with kill -9 in the middle of the load, five times,
 * restarted each time on the same data. Each round first re-sends the events the previous kill
 * left unanswered, as a client retries. At the end every event answered 200 must be in the hub's
 * store exactly once (read from the store's events table as the last kill left it).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { DEFS, EVENT_CLASS, client, obj, profileDataset } from "../helpers/server-harness.js";
import { childFixture, type ChildFixture } from "../helpers/child-fixture.js";

const KILLS = 5;
const CONNECTIONS = 16;
const PROFILES = 200;
/** Events answered 200 in a round before its kill: many batches (a shared CI host may be slow, so a count, not a time). */
const ACKS_PER_ROUND = 300;

let fx: ChildFixture;

before(async () => {
  fx = await childFixture("edgeack");
});
after(async () => fx.dispose());

function startChild(): ReturnType<ChildFixture["start"]> {
  return fx.start();
}

function interactBody(eventId: string, n: number): string {
  return JSON.stringify({
    event: { xdm: { _id: eventId, identityMap: { CRMID: [{ id: `ack-${n % PROFILES}`, primary: true }] }, eventType: "web.pageview", timestamp: new Date(Date.now() - 1000).toISOString() } },
  });
}

interface Round {
  acked: string[];
  /** Sent, never answered (the connection was cut by the kill). */
  unanswered: string[];
  /** Status codes other than 200, counted. */
  refused: Map<number, number>;
}

/**
 * CONNECTIONS clients send events (first `retries`, then new ids `r<round>-<n>`) until `stop()`
 * says so or their connection fails; `onAck` after each 200.
 */
async function load(url: string, path: string, round: number, retries: string[], stop: () => boolean, onAck: (acked: number) => void): Promise<Round> {
  const result: Round = { acked: [], unanswered: [], refused: new Map() };
  const pending = [...retries];
  let next = 0;
  const one = async (): Promise<void> => {
    while (!stop()) {
      const id = pending.pop() ?? `r${round}-${next++}`;
      let status: number;
      try {
        const r = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: interactBody(id, next) });
        await r.arrayBuffer();
        status = r.status;
      } catch {
        result.unanswered.push(id);
        return;
      }
      if (status === 200) {
        result.acked.push(id);
        onAck(result.acked.length);
      } else {
        result.refused.set(status, (result.refused.get(status) ?? 0) + 1);
        result.unanswered.push(id);
      }
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, () => one()));
  return result;
}

/** Each stored event id with its number of rows in the hub's events table. */
async function storedEventCounts(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  const sql = "SELECT eid, COUNT(*) AS n FROM events GROUP BY eid";
  if (fx.store.kind === "embedded") {
    const db = new Database(path.join(fx.store.dataDir, "profiles.db"));
    try {
      for (const row of db.prepare(sql).all() as Array<{ eid: string; n: number }>) counts.set(row.eid, Number(row.n));
    } finally {
      db.close();
    }
  } else {
    const c = new pg.Client({ connectionString: fx.store.databaseUrl });
    await c.connect();
    try {
      for (const row of (await c.query<{ eid: string; n: string }>(sql)).rows) counts.set(row.eid, Number(row.n));
    } finally {
      await c.end();
    }
  }
  return counts;
}

test(`kill -9 under interact load, ${KILLS} times: every event answered 200 is at the hub exactly once`, async () => {
  let { s, url } = await startChild();
  const a = client(url);
  const dataset = await profileDataset(a, "web events", EVENT_CLASS);
  const def = await a.post(DEFS, {
    name: "visited on the edge", schema: { name: "_xdm.context.profile" },
    expression: { type: "PQL", format: "pql/text", value: 'chain(xEvent, timestamp, [C0: WHAT(eventType = "web.pageview") WHEN(< 1 hours before now)])' },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } },
  });
  assert.equal(def.status, 200, def.text);
  const dsr = await a.post("/data/core/edge/datastreams", { name: "site", eventDatasetId: dataset });
  assert.equal(dsr.status, 201, dsr.text);
  const interact = `/ee/v2/interact?dataStreamId=${obj(dsr.json).id as string}`;

  const acked: string[] = [];
  let retries: string[] = [];
  for (let round = 0; round < KILLS; round++) {
    if (round > 0) ({ s, url } = await startChild());
    let killed = false;
    const child = s.child;
    const r = await load(url, interact, round, retries, () => killed, (n) => {
      if (n < ACKS_PER_ROUND || killed) return;
      killed = true;
      child.kill("SIGKILL");
    });
    assert.equal((await s.exited).signal, "SIGKILL");
    assert.deepEqual([...r.refused], [], `round ${round}: no request refused under this load`);
    // The requests in flight at the kill were cut (not one answered after it).
    assert.ok(r.acked.length >= ACKS_PER_ROUND && r.acked.length < ACKS_PER_ROUND + CONNECTIONS, `round ${round}: ${r.acked.length} events acknowledged`);
    acked.push(...r.acked);
    retries = r.unanswered;
  }

  // The store as the last kill left it (SQLite recovers its write-ahead log on opening).
  const stored = await storedEventCounts();
  const missing = acked.filter((id) => !stored.has(id));
  const doubled = acked.filter((id) => (stored.get(id) ?? 0) > 1);
  assert.equal(new Set(acked).size, acked.length, "every event id was acknowledged once");
  assert.deepEqual({ missing: missing.length, doubled: doubled.length, firstMissing: missing.slice(0, 5) }, { missing: 0, doubled: 0, firstMissing: [] },
    `of ${acked.length} events answered 200, ${missing.length} are not at the hub and ${doubled.length} are there more than once`);
});
