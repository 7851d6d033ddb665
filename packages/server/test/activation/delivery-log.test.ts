// The transition log as the outbox: what the log horizon lets a deliverer read. On PostgreSQL two
// transactions commit out of sequence order and a rolled-back one leaves a gap; the horizon never
// passes a sequence that may still commit, and passes a gap once it cannot.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import pg from "pg";
import { LogHorizon } from "../../src/activation/delivery/log-horizon.js";
import { openTestStore, STORE_KIND, DATABASE_URL, type TestStore } from "../profiles/test-store.js";

const scope = { orgId: "org-log", sandboxName: "prod" };
const other = { orgId: "org-other", sandboxName: "prod" };

/**
 * Advances until the horizon reaches `expected` (at most 5 s). On PostgreSQL the horizon also waits
 * for every transaction of the cluster that was writing when it looked — other test files' ones
 * too, when they run beside this one — so a move is awaited; a hold is asserted with one advance.
 */
async function advancesTo(h: LogHorizon, expected: number | null, what = "the horizon moves"): Promise<void> {
  const until = Date.now() + 5000;
  let v = await h.advance();
  while (v !== expected && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    v = await h.advance();
  }
  assert.equal(v, expected, what);
}

describe("transition log reads", () => {
  let ts: TestStore;
  before(() => {
    ts = openTestStore();
  });
  after(async () => {
    await ts.cleanup();
  });

  test("readTransitionLog: one tenant, the named definitions, within (afterSeq, throughSeq], in order, at most limit", async () => {
    const now = Date.now();
    await ts.store.applyMembershipChanges(scope, [
      { profileId: "1", definitionId: "a", status: "realized", source: "streaming", at: now },
      { profileId: "2", definitionId: "b", status: "realized", source: "edge", at: now + 1 },
    ]);
    await ts.store.applyMembershipChanges(other, [{ profileId: "3", definitionId: "a", status: "realized", source: "batch", at: now + 2 }]);
    await ts.store.applyMembershipChanges(scope, [{ profileId: "1", definitionId: "a", status: "exited", source: "batch", at: now + 3 }]);
    const { seqs, max } = await ts.store.transitionLogSeqs(0, 100);
    assert.equal(seqs.length, 4);
    assert.equal(max, seqs[3]);
    const all = await ts.store.readTransitionLog(scope, { afterSeq: 0, throughSeq: max, definitionIds: ["a", "b"], limit: 100 });
    assert.deepEqual(all.map((t) => [t.profileId, t.definitionId, t.from, t.to, t.at]), [["1", "a", null, "realized", now], ["2", "b", null, "realized", now + 1], ["1", "a", "realized", "exited", now + 3]]);
    assert.deepEqual((await ts.store.readTransitionLog(scope, { afterSeq: 0, throughSeq: max, definitionIds: ["a"], limit: 100 })).map((t) => t.seq), [seqs[0], seqs[3]]);
    assert.deepEqual((await ts.store.readTransitionLog(scope, { afterSeq: seqs[0]!, throughSeq: seqs[2]!, definitionIds: ["a", "b"], limit: 100 })).map((t) => t.seq), [seqs[1]]);
    assert.deepEqual((await ts.store.readTransitionLog(scope, { afterSeq: 0, throughSeq: max, definitionIds: ["a", "b"], limit: 1 })).map((t) => t.seq), [seqs[0]]);
    assert.deepEqual(await ts.store.readTransitionLog(scope, { afterSeq: 0, throughSeq: max, definitionIds: ["unknown"], limit: 100 }), []);
    assert.deepEqual(await ts.store.readTransitionLog({ orgId: "nobody", sandboxName: "prod" }, { afterSeq: 0, throughSeq: max, definitionIds: ["a"], limit: 100 }), []);
    const h = new LogHorizon(ts.store);
    await h.init(null);
    // PostgreSQL: the log's end is taken once the transactions running at the start have ended (and a short grace).
    if (STORE_KIND === "postgres") await new Promise((r) => setTimeout(r, 300));
    await advancesTo(h, max);
  });
});

describe("log horizon on PostgreSQL: out-of-order commits and rollbacks", { skip: STORE_KIND !== "postgres" }, () => {
  let ts: TestStore;
  const clients: pg.Client[] = [];
  before(async () => {
    ts = openTestStore();
    await ts.store.applyMembershipChanges(scope, [{ profileId: "1", definitionId: "a", status: "realized", source: "streaming", at: 1 }]);
    const u = new URL(DATABASE_URL);
    if (u.username === "") u.username = process.env["PGUSER"] || process.env["USER"] || os.userInfo().username;
    for (let i = 0; i < 3; i++) {
      const c = new pg.Client({ connectionString: u.toString(), options: `-c search_path=${ts.location}` });
      await c.connect();
      clients.push(c);
    }
  });
  after(async () => {
    for (const c of clients) await c.end();
    await ts.cleanup();
  });

  /** A horizon started at the log's end and past its start's grace: where it is settled. */
  const settledHorizon = async (): Promise<{ h: LogHorizon; s0: number | null }> => {
    const h = new LogHorizon(ts.store);
    await h.init(null);
    await new Promise((r) => setTimeout(r, 300));
    const s0 = (await ts.store.transitionLogSeqs(0, 1)).max;
    await advancesTo(h, s0, "the start settles at the log's end");
    return { h, s0 };
  };

  const insert = async (c: pg.Client, pid: number): Promise<number> => {
    const r = await c.query<{ seq: string }>("INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at) SELECT tid, $1, 'a', NULL, 'realized', 'streaming', 2 FROM tenants WHERE org = $2 RETURNING seq", [pid, scope.orgId]);
    return Number(r.rows[0]!.seq);
  };

  test("a later sequence committed first is not read until the earlier one commits; a rolled-back gap is passed once no transaction can fill it", async () => {
    const [c1, c2, c3] = clients as [pg.Client, pg.Client, pg.Client];
    const h = new LogHorizon(ts.store);
    await h.init(null);
    const s0 = (await ts.store.transitionLogSeqs(0, 10)).max;
    assert.equal(await h.advance(), null, "not before the start's grace");
    await new Promise((r) => setTimeout(r, 300));
    await advancesTo(h, s0);

    await c1.query("BEGIN");
    const a = await insert(c1, 10);
    await c2.query("BEGIN");
    const b = await insert(c2, 11);
    assert.ok(b > a);
    await c2.query("COMMIT");
    // b is visible, a is not yet: the horizon stays before a.
    assert.deepEqual((await ts.store.transitionLogSeqs(s0, 10)).seqs, [b]);
    assert.equal(await h.advance(), s0);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await h.advance(), s0, "still held while the earlier transaction is open, however long");
    await c1.query("COMMIT");
    await advancesTo(h, b);
    const read = await ts.store.readTransitionLog(scope, { afterSeq: s0, throughSeq: b, definitionIds: ["a"], limit: 10 });
    assert.deepEqual(read.map((t) => [t.seq, t.profileId]), [[a, "10"], [b, "11"]]);

    // A rolled-back sequence never appears: the gap is passed after every transaction that could hold it ended.
    await c3.query("BEGIN");
    const c = await insert(c3, 12);
    await c3.query("ROLLBACK");
    const d = await insert(c1, 13);
    assert.ok(d > c);
    assert.equal(await h.advance(), b, "the gap is first waited out");
    await new Promise((r) => setTimeout(r, 300));
    await advancesTo(h, d);
  });

  test("the newest writer (its xid at or above every snapshot's xmax: no later xid has completed) holds the horizon", async () => {
    const [c1, c2] = clients as [pg.Client, pg.Client];
    const { h, s0 } = await settledHorizon();
    // c2 takes its xid first, c1 after it (the higher one); c1 writes the lower sequence and stays open.
    await c2.query("BEGIN");
    await c2.query("SELECT pg_current_xact_id()");
    await c1.query("BEGIN");
    await c1.query("SELECT pg_current_xact_id()");
    const a = await insert(c1, 30);
    const b = await insert(c2, 31);
    assert.ok(b > a);
    await c2.query("COMMIT");
    // The newest completed xid is c2's, below c1's: c1 is in no snapshot's xip list.
    const xip = (await c2.query<{ x: string[] | null }>("SELECT (SELECT array_agg(x::text) FROM pg_snapshot_xip(pg_current_snapshot()) x) AS x")).rows[0]!.x ?? [];
    const mine = (await c1.query<{ x: string }>("SELECT pg_current_xact_id()::text AS x")).rows[0]!.x;
    assert.ok(!xip.includes(mine), `c1's xid ${mine} is not in ${JSON.stringify(xip)}`);
    assert.equal(await h.advance(), s0, "the gap is seen");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await h.advance(), s0, "held while the newest writer is open");
    await c1.query("COMMIT");
    await advancesTo(h, b);
  });

  test("a sequence taken before its transaction's first write (no xid when the gap is seen) holds the horizon until that transaction ends", async () => {
    const [c1, c2] = clients as [pg.Client, pg.Client];
    const { h, s0 } = await settledHorizon();
    // nextval assigns no transaction id: c1's transaction is in no snapshot's list yet.
    await c1.query("BEGIN");
    const a = Number((await c1.query<{ s: string }>("SELECT nextval(pg_get_serial_sequence('transitions', 'seq'))::text AS s")).rows[0]!.s);
    const b = await insert(c2, 21);
    assert.ok(b > a);
    assert.equal(await h.advance(), s0, "the gap is seen");
    // The row is written (the transaction gets its id) after the gap was first seen, and stays uncommitted past the grace.
    await c1.query("INSERT INTO transitions (seq, tid, pid, def, from_status, to_status, source, at) SELECT $1, tid, 20, 'a', NULL, 'realized', 'streaming', 2 FROM tenants WHERE org = $2", [a, scope.orgId]);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await h.advance(), s0, "held: the transaction holding the gap is in the snapshot taken after the grace");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await h.advance(), s0, "held while it is open");
    await c1.query("COMMIT");
    await advancesTo(h, b);
    const read = await ts.store.readTransitionLog(scope, { afterSeq: s0!, throughSeq: b, definitionIds: ["a"], limit: 10 });
    assert.deepEqual(read.map((t) => [t.seq, t.profileId]), [[a, "20"], [b, "21"]]);
  });
});
