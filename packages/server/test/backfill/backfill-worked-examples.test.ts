/**
 * Backfill, acceptance 1 (issue #40), over real HTTP on the test run's store: a definition of each
 * streaming and edge query type of the worked examples (the types explain-engines.test.ts
 * enumerates), created over data already stored, has right after its backfill the members a batch
 * job gives the same expression, every one written with source `backfill`. An edit that adds and
 * removes members writes only the net change; profiles that stay keep their qualification time.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { API_KEY, DEFS, ORG_A, TOKEN_A, client, definitionBody, obj, profileDataset, startHarness, type Client, type Harness } from "../helpers/server-harness.js";
import { EVENT_SCHEMA, METHODS, PROFILE_SCHEMA, load, members, message, runJob, sameKeys, waitBackfill, type BackfillJson, type Member } from "./backfill-helpers.js";
import { LIVE_QUERY_TYPES } from "../helpers/live-query-types.js";

const HOUR = 3_600_000;
const PROFILES = 120;

const QUERIES = LIVE_QUERY_TYPES;

let h: Harness;
let a: Client;

interface Def {
  kind: string;
  method: "streaming" | "edge";
  id: string;
  twin: string;
  backfill: BackfillJson;
}

/** Ages, purchases (hours ago, price) and page views of profile i: every query type has members and non-members. */
function person(i: number): { age: number; purchases: Array<[number, number]>; views: number[]; optOut: boolean } {
  const purchases: Array<Array<[number, number]>> = [[[2, 80], [10, 30]], [[19, 60]], [[1, 40], [5, 70], [8, 20]], []];
  const views: number[][] = [[5], [1, 4], [], [15]];
  return { age: 18 + ((i * 7) % 50), purchases: purchases[i % 4]!, views: views[(i >> 2) % 4]!, optOut: i % 11 === 0 };
}

describe("backfill of each streaming and edge query type", () => {
  const defs: Def[] = [];

  async function create(kind: string, pql: string, method: "streaming" | "edge"): Promise<void> {
    const d = await a.post(DEFS, definitionBody(`bf ${method} ${kind}`, pql, { evaluationInfo: METHODS[method] }));
    assert.equal(d.status, 200, d.text);
    const id = obj(d.json).id as string;
    const t = await a.post(DEFS, definitionBody(`bf twin ${method} ${kind}`, pql, { evaluationInfo: METHODS.batch }));
    assert.equal(t.status, 200, t.text);
    defs.push({ kind, method, id, twin: obj(t.json).id as string, backfill: undefined as unknown as BackfillJson });
  }

  before(async () => {
    h = await startHarness("backfill-examples");
    a = client(h.url);
    const profiles = await profileDataset(a, "crm", PROFILE_SCHEMA);
    const events = await profileDataset(a, "web", EVENT_SCHEMA);
    const now = Date.now();
    const msgs: Record<string, unknown>[] = [];
    for (let i = 0; i < PROFILES; i++) {
      const p = person(i);
      const identityMap = { Email: [{ id: `p${i}@example.com`, primary: true }] };
      msgs.push(message(profiles, PROFILE_SCHEMA, { identityMap, person: { age: p.age }, ...(p.optOut ? { consents: { marketing: { preferred: "n" } } } : {}) }));
      p.purchases.forEach(([hours, price], k) => msgs.push(message(events, EVENT_SCHEMA, { _id: `p${i}-buy${k}`, identityMap, eventType: "commerce.purchases", commerce: { order: { priceTotal: price } }, timestamp: new Date(now - hours * HOUR).toISOString() })));
      p.views.forEach((hours, k) => msgs.push(message(events, EVENT_SCHEMA, { _id: `p${i}-view${k}`, identityMap, eventType: "web.pageViews", timestamp: new Date(now - hours * HOUR).toISOString() })));
    }
    await load(h.url, { "content-type": "application/json", authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": "prod" }, msgs);

    // The definitions come after the data: only a backfill gives them members now.
    for (const method of ["streaming", "edge"] as const) {
      for (const [kind, pql] of Object.entries(QUERIES)) await create(kind, pql, method);
    }
    const ref = (kind: string) => defs.find((d) => d.method === "edge" && d.kind === kind)!.id;
    await create("segment of segments", `inSegment("${ref("profile-only")}") and inSegment("${ref("single event")}")`, "edge");
    for (const d of defs) d.backfill = await waitBackfill(a, d.id);
    await runJob(a, defs.map((d) => d.twin));
  });
  after(async () => h.close());

  test("right after its backfill, each definition's members are a batch job's, written with source backfill", async () => {
    for (const d of defs) {
      const where = `${d.method} ${d.kind}`;
      assert.equal(d.backfill.state, "succeeded", `${where}: ${JSON.stringify(d.backfill)}`);
      const live = await members(a, d.id);
      const batch = await members(a, d.twin);
      assert.ok(batch.size > 0 && batch.size < PROFILES, `${where}: the batch job gives ${batch.size} of ${PROFILES} members (a meaningful audience)`);
      assert.deepEqual(sameKeys(live, batch), { onlyA: [], onlyB: [] }, `${where}: backfill members vs the batch job's`);
      for (const m of live.values()) assert.equal(m.since?.source, "backfill", `${where}: profile ${m.profileId}`);
      assert.equal(d.backfill.entered, batch.size, `${where}: entered`);
      assert.equal(d.backfill.exited, 0, `${where}: exited`);
      assert.equal(d.backfill.total, batch.size, `${where}: total (the net change)`);
      assert.equal(d.backfill.processed, d.backfill.total, `${where}: processed`);
      assert.equal(d.backfill.reason, "created", where);
      assert.equal(d.backfill.attempts, 1, where);
      assert.equal(typeof d.backfill.fence, "number", where);
      assert.ok(d.backfill.startedAt !== null && d.backfill.evaluatedAt !== null && d.backfill.finishedAt !== null, where);
      assert.ok(d.backfill.startedAt <= d.backfill.evaluatedAt && d.backfill.evaluatedAt <= d.backfill.finishedAt, where);
    }
  });

  test("/metrics counts the backfills and the transitions they wrote", async () => {
    const text = await (await fetch(`${h.url}/metrics`)).text();
    const value = (name: string) => Number(text.split("\n").find((l) => l.startsWith(name))?.split(" ").pop());
    const entered = defs.reduce((n, d) => n + d.backfill.entered, 0);
    assert.ok(value('segmentd_backfill_transitions_total{to="realized"}') >= entered, text.slice(0, 2000));
    assert.ok(value('segmentd_backfills_finished_total{state="succeeded"}') >= defs.length);
    assert.equal(value("segmentd_backfills_running"), 0);
    assert.equal(value("segmentd_backfills_queued"), 0);
  });

  test("an edit that adds and removes members writes only the net change; stayers keep their qualification time", async () => {
    for (const method of ["streaming", "edge"] as const) {
      const d = defs.find((x) => x.method === method && x.kind === "profile-only")!;
      const before = await members(a, d.id);
      const beforeTransitions = await transitionsOf(d.id, before);
      // person.age > 30 becomes age > 45 or age < 28: 31..45 leave, under 28 enter, over 45 stay.
      const pql = "person.age > 45 or person.age < 28";
      const edit = await a.patch(`${DEFS}/${d.id}`, definitionBody(`bf ${method} profile-only`, pql, { evaluationInfo: METHODS[method] }));
      assert.equal(edit.status, 200, edit.text);
      const b = await waitBackfill(a, d.id, d.backfill.queuedAt);
      assert.equal(b.state, "succeeded", JSON.stringify(b));
      assert.equal(b.reason, "updated");

      const t = await a.patch(`${DEFS}/${d.twin}`, definitionBody(`bf twin ${method} profile-only`, pql, { evaluationInfo: METHODS.batch }));
      assert.equal(t.status, 200, t.text);
      await runJob(a, [d.twin]);
      const after = await members(a, d.id);
      assert.deepEqual(sameKeys(after, await members(a, d.twin)), { onlyA: [], onlyB: [] }, `${method}: members after the edit vs the batch job's`);

      const stayers = [...after.keys()].filter((p) => before.has(p));
      const entered = [...after.keys()].filter((p) => !before.has(p));
      const left = [...before.keys()].filter((p) => !after.has(p));
      assert.ok(stayers.length > 0 && entered.length > 0 && left.length > 0, `${method}: the edit adds ${entered.length}, removes ${left.length}, keeps ${stayers.length}`);
      assert.equal(b.entered, entered.length, `${method}: entered`);
      assert.equal(b.exited, left.length, `${method}: exited`);
      assert.equal(b.total, entered.length + left.length, `${method}: only the net change is decided`);
      for (const p of stayers) {
        assert.equal(after.get(p)!.lastQualificationTime, before.get(p)!.lastQualificationTime, `${method}: stayer ${p} keeps its qualification time`);
        assert.deepEqual(after.get(p)!.since, before.get(p)!.since, `${method}: stayer ${p} got no transition`);
      }
      const exited = await members(a, d.id, "exited");
      assert.deepEqual([...exited.keys()].sort(), [...left].sort(), `${method}: the profiles that left are exited`);
      for (const p of left) assert.equal(exited.get(p)!.since?.source, "backfill", `${method}: ${p} exited by the backfill`);
      // Every stayer's and leaver's history: exactly one more transition for a leaver, none for a stayer.
      const afterTransitions = await transitionsOf(d.id, before);
      for (const p of stayers) assert.equal(afterTransitions.get(p), beforeTransitions.get(p), `${method}: ${p} transitions`);
      for (const p of left) assert.equal(afterTransitions.get(p), beforeTransitions.get(p)! + 1, `${method}: ${p} transitions`);
      d.backfill = b;
    }
  });

  test("an edit that changes nothing evaluated (a rename) runs no backfill", async () => {
    const d = defs.find((x) => x.method === "streaming" && x.kind === "single event")!;
    const r = await a.patch(`${DEFS}/${d.id}`, definitionBody("bf streaming single event, renamed", QUERIES["single event"], { evaluationInfo: METHODS.streaming }));
    assert.equal(r.status, 200, r.text);
    // The GET waits for the decision the write started: no backfill was queued.
    const b = await a.get(`${DEFS}/${d.id}/backfill`);
    assert.equal(b.status, 200, b.text);
    assert.equal((b.json as BackfillJson).queuedAt, d.backfill.queuedAt);
  });

  /** How many transitions of the definition each member has (explain's history: the last 100), by profile id. */
  async function transitionsOf(id: string, who: ReadonlyMap<string, Member>): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const [pid, m] of who) {
      const email = m.identities.find((x) => x.namespace.toLowerCase() === "email")?.id;
      assert.ok(email !== undefined, JSON.stringify(m));
      const r = await a.get(`${DEFS}/${id}/explain?entityId=${encodeURIComponent(email)}&entityIdNS=Email`);
      assert.equal(r.status, 200, r.text);
      out.set(pid, (obj(obj(r.json).membership).history as unknown[]).length);
    }
    return out;
  }
});
