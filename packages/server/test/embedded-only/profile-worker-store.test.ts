// The worker-thread profile store (WorkerProfileStore, the default embedded
// store): what the thread boundary could break and the conformance suites do
// not show — errors keep their class and code, an abandoned scan frees the
// worker's cursor, close() drains, a dead worker fails its calls and is restarted, writes of one
// turn still share a group commit, and the mirrored change feed answers exactly
// what the direct store's feed answers.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { FeedMirror, WorkerProfileStore, unwireRecords, wireRecords } from "../../src/profiles/embedded/worker-store.js";
import { ingestRecords, stageRecords } from "../../src/profiles/ingest.js";
import { openProfileStore } from "../../src/profiles/open.js";
import { StoreError, StoreUnavailableError, type MembershipChange, type ProfileStore } from "../../src/profiles/store.js";
import type { MergePolicySpec, TenantScope, ValidRecord } from "../../src/profiles/types.js";

const S: TenantScope = { orgId: "orgW", sandboxName: "prod" };
const O: TenantScope = { orgId: "orgW", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 1);
const pdg: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };
const ecid = (id: string) => ({ namespace: "ecid", id });

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

let dir: string;
before(() => { dir = mkdtempSync(path.join(tmpdir(), "segmentd-worker-store-")); });
after(() => { rmSync(dir, { recursive: true, force: true }); });
let n = 0;
const file = () => path.join(dir, `p${++n}.db`);

async function seed(store: ProfileStore, profiles: number): Promise<string> {
  const ds = (await store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  await ingestRecords(store, S, ds, rec(...Array.from({ length: profiles }, (_, i) => ({ identityMap: { ECID: [{ id: `p${i}`, primary: true }] }, n: i }))), { now: T0 });
  return ds;
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof Error);
    return e;
  }
  assert.fail("expected a rejection");
}

describe("WorkerProfileStore", () => {
  it("is what openProfileStore opens by default; worker: false opens the direct store", async () => {
    const a = openProfileStore({ dataDir: path.join(dir, "open-a") });
    const b = openProfileStore({ dataDir: path.join(dir, "open-b"), worker: false });
    try {
      assert.ok(a instanceof WorkerProfileStore);
      assert.ok(b instanceof EmbeddedProfileStore);
      assert.equal(a.kind, "embedded");
      await (a as WorkerProfileStore).whenReady();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("errors cross the thread with their class, code, name and message", async () => {
    const w = new WorkerProfileStore({ path: file() });
    const d = new EmbeddedProfileStore({ path: file() });
    try {
      for (const store of [w, d]) await store.createDataset(S, { id: "ds", name: "x", schemaClass: "profile", profileEnabled: true }, T0);
      const cases: Array<(s: ProfileStore) => Promise<unknown>> = [
        (s) => s.createDataset(S, { id: "ds", name: "again", schemaClass: "profile" }, T0),
        (s) => s.getEvents(S, ecid("nobody"), pdg, { cursor: "not-a-cursor" }).then(async () => s.getBatch(S, "x")).then(() => s.setBatchStatus(S, "missing", "success", T0)),
        (s) => s.updateFields(S, { datasetId: "missing", identities: [ecid("a")], set: { x: 1 } }),
        (s) => s.applyMembershipChanges(S, [{ profileId: "not-a-number", definitionId: "d", status: "realized", source: "batch", at: T0, from: null }]),
      ];
      for (const [i, c] of cases.entries()) {
        const [ew, ed] = [await failure(c(w)), await failure(c(d))];
        assert.equal(ew.constructor, ed.constructor, `case ${i}: class`);
        assert.equal(ew.name, ed.name, `case ${i}: name`);
        assert.equal(ew.message, ed.message, `case ${i}: message`);
        assert.equal((ew as { code?: unknown }).code, (ed as { code?: unknown }).code, `case ${i}: code`);
        assert.ok(ew.stack !== undefined && ew.stack.length > 0);
      }
      const e = await failure(w.createDataset(S, { id: "ds", name: "again", schemaClass: "profile" }, T0));
      assert.ok(e instanceof StoreError && e.code === "DATASET_EXISTS" && e.name === "StoreError");
      // Arguments that cannot be cloned fail that call alone.
      await assert.rejects(w.getDataset(S, (() => "x") as unknown as string));
      assert.equal((await w.getDataset(S, "ds"))?.id, "ds");
    } finally {
      await w.close();
      await d.close();
    }
  });

  it("streams a scan chunk by chunk, and an abandoned scan frees the worker's cursor", async () => {
    const w = new WorkerProfileStore({ path: file() });
    try {
      await seed(w, 50);
      const all: string[] = [];
      for await (const chunk of w.scanProfiles(S, pdg, { chunkSize: 7, events: false })) {
        assert.ok(chunk.length <= 7);
        all.push(...chunk.map((p) => p.profileId));
      }
      assert.equal(all.length, 50);
      assert.deepEqual((await w.workerStats()).openCursors, 0, "a finished scan holds no cursor");
      let seen = 0;
      for await (const chunk of w.scanProfiles(S, pdg, { chunkSize: 5 })) {
        seen += chunk.length;
        if (seen >= 10) break;
      }
      assert.equal(seen, 10);
      assert.equal((await w.workerStats()).openCursors, 0, "break closed the cursor");
      const it = w.scanProfiles(S, pdg, { chunkSize: 5 })[Symbol.asyncIterator]();
      assert.equal((await it.next()).value?.length, 5);
      assert.equal((await w.workerStats()).openCursors, 1);
      await it.return?.();
      assert.equal((await w.workerStats()).openCursors, 0, "return() closed the cursor");
      // Two scans at once keep their own cursors.
      const a = w.scanProfiles(S, pdg, { chunkSize: 20, events: false })[Symbol.asyncIterator]();
      const b = w.scanProfiles(S, pdg, { chunkSize: 30, events: false })[Symbol.asyncIterator]();
      assert.equal((await a.next()).value?.length, 20);
      assert.equal((await b.next()).value?.length, 30);
      assert.equal((await a.next()).value?.length, 20);
      assert.equal((await b.next()).value?.length, 20);
      assert.equal((await b.next()).done, true);
      await a.return?.();
      assert.equal((await w.workerStats()).openCursors, 0);
      // A scan of a tenant without data ends at once.
      for await (const _ of w.scanProfiles(O, pdg)) assert.fail("no chunk expected");
    } finally {
      await w.close();
    }
  });

  it("a scan through the worker equals the direct store's, profile for profile and event for event (events cross as their stored text)", async () => {
    const location = file();
    const none: MergePolicySpec = { identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } };
    const scans = [
      { policy: pdg, opts: { chunkSize: 7 } },
      { policy: none, opts: { chunkSize: 9 } },
      { policy: pdg, opts: { chunkSize: 4, eventsSince: T0 - 30 * 60_000 } },
      { policy: pdg, opts: { profileIds: ["3", "1", "999", "2"] } },
      { policy: pdg, opts: { chunkSize: 5, events: false } },
    ];
    const read = async (store: ProfileStore) => {
      const out: unknown[] = [];
      for (const { policy, opts } of scans) {
        const chunks: unknown[] = [];
        for await (const chunk of store.scanProfiles(S, policy, opts)) chunks.push(chunk);
        out.push(chunks);
      }
      return out;
    };
    const w = new WorkerProfileStore({ path: location });
    try {
      await seed(w, 20);
      const web = (await w.createDataset(S, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      // Bodies a clone and a JSON round trip could tell apart: nesting, arrays, unicode, large and negative numbers, nulls.
      await ingestRecords(w, S, web, rec(...Array.from({ length: 90 }, (_, k) => ({
        _id: `ev-${k}`,
        timestamp: new Date(T0 - ((k * 7919) % 60) * 60_000).toISOString(),
        eventType: k % 3 === 0 ? "commerce.purchases" : "web.webpagedetails.pageViews",
        identityMap: { ECID: [{ id: k % 10 === 9 ? `events-only-${k % 4}` : `p${k % 20}`, primary: true }] },
        commerce: { order: { priceTotal: k * 1.25 - 40, lines: [k, null, { sku: `sku-${k}`, name: "crème brûlée 😀" }] } },
        ...(k % 7 === 0 ? { big: 2 ** 60, tiny: 5e-324, e21: 1e21, empty: {}, none: null } : {}),
      }))), { now: T0 });
    } finally {
      await w.close();
    }
    // Two stored bodies no read may serve: one that looks whole but does not parse (the worker
    // sends it, the caller's parse fails, the worker quarantines it) and one nested past the limit.
    const raw = new Database(location);
    raw.prepare("UPDATE events SET body = ? WHERE eid = 'ev-1'").run('{"a": 1,}');
    raw.prepare("UPDATE events SET body = ? WHERE eid = 'ev-2'").run(`${"{\"n\":".repeat(300)}1${"}".repeat(300)}`);
    raw.close();
    const w2 = new WorkerProfileStore({ path: location });
    let viaWorker: unknown[];
    try {
      viaWorker = await read(w2);
      assert.equal((await w2.status()).quarantined, 2, "both are quarantined by the worker's scan");
    } finally {
      await w2.close();
    }
    const d = new EmbeddedProfileStore({ path: location });
    try {
      const direct = await read(d);
      const events = (direct[0] as Array<Array<{ events: unknown[] }>>).flat().reduce((n, p) => n + p.events.length, 0);
      assert.equal(events, 88, "every event but the two is scanned");
      assert.deepStrictEqual(viaWorker, direct);
    } finally {
      await d.close();
    }
  });

  it("close() drains the calls in flight (all acknowledged and durable), then refuses new ones", async () => {
    const location = file();
    const w = new WorkerProfileStore({ path: location });
    const ds = (await w.createDataset(S, { name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
    // The read is posted first: the worker answers it as its message arrives, before the writes
    // behind it commit (posted after it, they could land in the worker in a later batch and
    // commit before a read posted last).
    const read = w.countMembers(S, "d");
    const writes = Array.from({ length: 40 }, (_, i) =>
      w.applyMembershipChanges(S, [{ profileId: String(i + 1), definitionId: "d", status: "realized", source: "streaming", at: T0 }]));
    const closing = w.close();
    const results = await Promise.all(writes);
    assert.deepEqual(await read, { realized: 0, exited: 0 }, "a read in flight is answered too");
    await closing;
    assert.ok(results.every((r) => r.length === 1), "every write in flight completed");
    await assert.rejects(w.getDataset(S, ds), /profile store is closed/);
    await w.close(); // twice is fine
    const again = new WorkerProfileStore({ path: location });
    try {
      assert.deepEqual(await again.countMembers(S, "d"), { realized: 40, exited: 0 });
    } finally {
      await again.close();
    }
  });

  it("a dead worker fails every pending call and the calls until its restart with a 503 error, then serves again", async () => {
    const crashes: Error[] = [];
    const w = new WorkerProfileStore({ path: file(), onCrash: (e) => crashes.push(e), restartDelayMs: 300 });
    await seed(w, 3);
    // Kill the thread under the store, as a native crash would, with calls in flight: posted once
    // the termination is under way, so that none can be answered first (posted before it, a fast
    // worker sometimes answered one: the test then failed on a race, not on the store).
    const terminated = w.currentWorker().terminate();
    const pending = [w.countProfiles(S), w.findProfileId(S, ecid("p1")), w.applyMembershipChanges(S, [{ profileId: "1", definitionId: "d", status: "realized", source: "batch", at: T0 }])];
    await terminated;
    const unavailable = (e: unknown) => e instanceof StoreUnavailableError && e.status === 503 && /profile store worker restarting: the worker thread exited/.test(e.message);
    for (const p of pending) await assert.rejects(p, unavailable);
    await assert.rejects(w.countProfiles(S), unavailable);
    await assert.rejects(w.append(S, "x", [], { ingestedAt: T0, maxIdentitiesPerGraph: 50 }), unavailable);
    assert.deepEqual(await w.status(), { up: false, error: "profile store worker restarting: the worker thread exited (code 1)", restarts: 0, quarantined: 0 });
    assert.equal(crashes.length, 1);
    assert.match(crashes[0]!.message, /profile store worker failed .*exited/);
    // Restarted after the delay: the data committed before the crash is there.
    const deadline = Date.now() + 10_000;
    while (!(await w.status()).up) {
      assert.ok(Date.now() < deadline, "the worker was not restarted");
      await new Promise((res) => setTimeout(res, 20));
    }
    assert.equal(await w.countProfiles(S), 3);
    assert.equal((await w.status()).restarts, 1);
    // The new worker read its feed back from the change log: a version from before the log still answers null.
    assert.equal(w.changesSince(S, 0).profileIds, null);
    await w.close(); // closes cleanly
  });

  it("a store that cannot open fails its calls with the open error", async () => {
    const w = new WorkerProfileStore({ path: path.join(dir, "no-such-dir", "x", "p.db") });
    await assert.rejects(w.whenReady(), /directory does not exist|unable to open/i);
    await assert.rejects(w.countProfiles(S), /profile store worker failed/);
    await w.close();
  });

  it("writes made in one turn share one group commit in the worker", async () => {
    // Every commit appends at least one page and a commit frame to the WAL: 200 commits would grow it by 800 KiB+.
    const sizes: number[] = [];
    for (const store of [new WorkerProfileStore({ path: file() }), new EmbeddedProfileStore({ path: file() })]) {
      const location = path.join(dir, `p${n}.db`);
      try {
        await store.createDataset(S, { id: "warm", name: "w", schemaClass: "profile" }, T0);
        const before = statSync(`${location}-wal`).size;
        const changes = (i: number): MembershipChange[] => [{ profileId: String(i + 1), definitionId: "d", status: "realized", source: "streaming", at: T0 }];
        await Promise.all(Array.from({ length: 200 }, (_, i) => store.applyMembershipChanges(S, changes(i))));
        sizes.push(statSync(`${location}-wal`).size - before);
        assert.equal((await store.listMemberIds(S, "d", "realized")).length, 200);
      } finally {
        await store.close();
      }
    }
    const [worker, direct] = sizes as [number, number];
    assert.ok(worker <= direct * 3 + 64 * 1024, `worker WAL growth ${worker} B vs direct ${direct} B`);
    assert.ok(worker < 200 * 4096, `worker WAL growth ${worker} B: not one commit per write`);
  });

  it("mirrors the change feed: after a mixed sequence it answers what the direct store answers", async () => {
    const w = new WorkerProfileStore({ path: file() });
    const d = new EmbeddedProfileStore({ path: file() });
    try {
      const checkpoints: Array<[number, number]> = [];
      const mark = () => checkpoints.push([w.changesSince(S, null).version, d.changesSince(S, null).version]);
      const both = async (f: (s: ProfileStore) => Promise<unknown>) => {
        const [a, b] = await Promise.allSettled([f(w), f(d)]);
        assert.equal(a.status, b.status);
        mark();
      };
      mark();
      await both(async (s) => {
        await s.createDataset(S, { id: "prof", name: "p", schemaClass: "profile", profileEnabled: true }, T0);
        await s.createDataset(S, { id: "ev", name: "e", schemaClass: "experienceevent", profileEnabled: true }, T0);
        await s.createDataset(O, { id: "prof", name: "p", schemaClass: "profile", profileEnabled: true }, T0);
      });
      await both((s) => ingestRecords(s, S, "prof", rec(...["A", "B", "C", "D", "E", "F"].map((x) => ({ identityMap: { ECID: [{ id: x, primary: true }] }, v: 1 }))), { now: T0 }));
      // Concurrent writes of two tenants (one group commit), a merge, and events.
      await both((s) => Promise.all([
        ingestRecords(s, S, "prof", rec({ identityMap: { ECID: [{ id: "C", primary: true }, { id: "D" }] } }), { now: T0 + 1 }),
        ingestRecords(s, O, "prof", rec({ identityMap: { ECID: [{ id: "Z", primary: true }] } }), { now: T0 + 1 }),
        ingestRecords(s, S, "ev", rec({ _id: "e1", timestamp: T0, eventType: "x", identityMap: { ECID: [{ id: "A", primary: true }] } }), { now: T0 + 1 }),
      ]));
      await both((s) => s.applyMembershipChanges(S, [{ profileId: "1", definitionId: "d", status: "realized", source: "batch", at: T0 }]));
      await both((s) => s.updateFields(S, { datasetId: "missing", identities: [ecid("A")], set: { x: 1 } }));
      await both((s) => s.updateFields(S, { datasetId: "prof", identities: [ecid("E")], set: { "a.b": 2 } }));
      await both((s) => s.deleteByIdentities(S, [ecid("B")], "ALL"));
      await both(async (s) => {
        const b = await s.createBatch(S, "prof", T0);
        await stageRecords(s, S, "prof", { id: b.id, file: "f.json" }, rec({ identityMap: { ECID: [{ id: "G", primary: true }] } }, { identityMap: { ECID: [{ id: "A", primary: true }] }, v: 3 }), { now: T0 });
        await s.completeBatch(S, b.id, { ingestedAt: T0, maxIdentitiesPerGraph: 50 });
      });
      await both((s) => s.deleteDatasetRecords(S, "ev"));
      await both((s) => s.deleteDataset(S, "prof"));
      for (const scope of [S, O]) {
        for (let i = 0; i < checkpoints.length; i++) {
          const [vw, vd] = checkpoints[i]!;
          const a = w.changesSince(scope, vw).profileIds, b = d.changesSince(scope, vd).profileIds;
          assert.ok(a !== null && b !== null);
          assert.deepEqual([...a].sort(), [...b].sort(), `${scope.sandboxName} since checkpoint ${i}`);
        }
      }
      for (const st of [w, d] as ProfileStore[]) {
        const v = st.changesSince(S, null);
        assert.equal(v.profileIds, null);
        assert.equal(st.changesSince(S, 0).profileIds, null);
        assert.equal(st.changesSince(S, v.version + 1000).profileIds, null);
        assert.deepEqual([...st.changesSince(S, v.version).profileIds!], []);
      }
    } finally {
      await w.close();
      await d.close();
    }
  });

  it("FeedMirror: answers under the worker's versions, from the history it was reset to and the deltas after", () => {
    const m = new FeedMirror(3);
    const t = "o\u0000s";
    // The worker's feed as read back from its change log: a floor for t (history trimmed below 105).
    m.reset({ base: 100, current: 107, floors: [[t, 105]], entries: [[106, t, ["1", "2"]], [107, "other", ["9"]]] });
    assert.equal(m.changesSince(t, null).version, 107);
    assert.equal(m.changesSince(t, 104).profileIds, null, "below the floor");
    assert.deepEqual([...m.changesSince(t, 105).profileIds!].sort(), ["1", "2"]);
    assert.deepEqual([...m.changesSince("other", 100).profileIds!], ["9"]);
    assert.deepEqual([...m.changesSince("new", 100).profileIds!], [], "a tenant without changes since the base");
    assert.equal(m.changesSince("new", 99).profileIds, null, "below the base");
    // One delta, two versions, the second touching two tenants; a version already held is skipped.
    m.apply([[107, t, ["x"]], [110, t, ["3"]], [112, t, ["4"]], [112, "other", ["8"]]]);
    assert.equal(m.changesSince(t, null).version, 112);
    assert.deepEqual([...m.changesSince(t, 107).profileIds!].sort(), ["3", "4"]);
    assert.deepEqual([...m.changesSince(t, 110).profileIds!], ["4"]);
    // Capacity 3: t's oldest entry (106: two ids) was evicted, so 105 can no longer be answered.
    assert.equal(m.changesSince(t, 105).profileIds, null);
    assert.deepEqual([...m.changesSince(t, 106).profileIds!].sort(), ["3", "4"]);
  });

  it("records cross as two strings and come back equal (bodies parsed on use)", () => {
    const body = { _id: "e1", timestamp: "2026-11-01T00:00:00.000Z", eventType: "x", note: "a\nb", n: [1, { x: null }] };
    const records: ValidRecord[] = [
      { index: 3, kind: "experienceevent", body, primary: ecid("A"), identities: [ecid("A"), { namespace: "email", id: "a@b" }], timestamp: T0, eventId: "e1", size: 99, json: JSON.stringify(body) },
      { index: 4, kind: "profile", body: { identityMap: {} }, primary: ecid("B"), identities: [ecid("B")], timestamp: null, eventId: null, size: 20, json: JSON.stringify({ identityMap: {} }) },
    ];
    const wire = wireRecords(records);
    assert.equal(typeof wire.json, "string");
    const back = unwireRecords(structuredClone(wire));
    assert.deepEqual(back.map((r) => ({ ...r })), records);
    // A JSON text with a raw newline (not JSON.stringify's output) travels as an array.
    const odd = [{ ...records[1]!, json: "{\n}" , body: {} }];
    const w2 = wireRecords(odd);
    assert.ok(Array.isArray(w2.json));
    assert.deepEqual(unwireRecords(structuredClone(w2)).map((r) => ({ ...r })), odd);
    assert.deepEqual(unwireRecords(wireRecords([])), []);
  });
});
