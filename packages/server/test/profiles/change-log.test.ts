// Both profile stores (SEGMENTD_TEST_STORE): the change feed survives a restart through the
// change log written with the data (embedded/change-log.ts, postgres/pg-change-log.ts):
// versions handed out before a reopen are answered after it, exactly; versions keep
// increasing; history trimmed to the feed's capacity answers null, on disk too; a write that
// rolls back leaves no row.
import assert from "node:assert/strict";
import { userInfo } from "node:os";
import { describe, it } from "node:test";
import pg from "pg";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { StoreError, type ProfileStore } from "../../src/profiles/store.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { readOnlyDb } from "../helpers/read-only-db.js";
import { DATABASE_URL, openTestStore, TEST_STORE, type TestStore, type TestStoreKind } from "./test-store.js";

const S: TenantScope = { orgId: "orgLog", sandboxName: "prod" };
const O: TenantScope = { orgId: "orgLog", sandboxName: "dev" };
const T0 = Date.UTC(2026, 10, 1);

function rec(...values: unknown[]) {
  return values.map((value, index) => ({ index, value }));
}

const profile = (id: string, extra: Record<string, unknown> = {}) => ({ identityMap: { ECID: [{ id, primary: true }] }, ...extra });

async function opened(store: ProfileStore): Promise<ProfileStore> {
  await store.changesReady?.();
  return store;
}

const version = (store: ProfileStore, scope: TenantScope = S): number => store.changesSince(scope, null).version;

function changed(store: ProfileStore, since: number, scope: TenantScope = S): string[] | null {
  const ids = store.changesSince(scope, since).profileIds;
  return ids === null ? null : [...ids].sort((a, b) => Number(a) - Number(b));
}

async function pidsOf(store: ProfileStore, ...ids: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const id of ids) out.push((await store.findProfileId(S, { namespace: "ecid", id }))!);
  return out.sort((a, b) => Number(a) - Number(b));
}

/** The change log's rows, read straight from the store's file or schema. */
async function logRows(ts: TestStore): Promise<Array<{ version: number; pids: number[] }>> {
  if (!ts.location.startsWith("t_profiles_")) {
    return readOnlyDb(ts.location, (db) => (db.prepare("SELECT version, pids FROM change_log ORDER BY version, tid").all() as Array<{ version: number; pids: string }>)
      .map((r) => ({ version: r.version, pids: JSON.parse(r.pids) as number[] })));
  }
  const url = new URL(DATABASE_URL);
  if (url.username === "") url.username = process.env["PGUSER"] || process.env["USER"] || userInfo().username;
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  try {
    const rows = (await c.query<{ version: string; pids: string }>(`SELECT version, pids FROM "${ts.location}".change_log ORDER BY version, tid`)).rows;
    return rows.map((r) => ({ version: Number(r.version), pids: JSON.parse(r.pids) as number[] }));
  } finally {
    await c.end();
  }
}

/** The store, with its appends failing after their writes (an unknown batch to account): the write job rolls back. */
function failingAppends(store: ProfileStore): ProfileStore {
  return new Proxy(store, {
    get(target, p) {
      if (p === "append") {
        return (scope: TenantScope, ds: string, records: Parameters<ProfileStore["append"]>[2], o: Parameters<ProfileStore["append"]>[3]) =>
          target.append(scope, ds, records, { ...o, batch: { id: "no-such-batch", read: records.length, failed: [] } });
      }
      const v: unknown = Reflect.get(target, p, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The run's store; on an embedded run the direct store (on the calling thread) as well. */
const KINDS: TestStoreKind[] = TEST_STORE === "postgres" ? ["postgres"] : ["embedded", "embedded-direct"];

for (const kind of KINDS) describe(`change log: the change feed across a restart (${kind})`, () => {
  it("changes made before a reopen are answered after it, exactly, per tenant", async () => {
    const ts = openTestStore(kind);
    let again: ProfileStore | null = null;
    try {
      const store = ts.store;
      const crm = (await store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const web = (await store.createDataset(S, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
      const other = (await store.createDataset(O, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const v0 = version(store);
      await ingestRecords(store, S, crm, rec(profile("A", { n: 1 }), profile("B", { n: 2 })), { now: T0 });
      const v1 = version(store);
      await ingestRecords(store, S, crm, rec(profile("C")), { now: T0 + 1 });
      await ingestRecords(store, S, web, rec({ _id: "e1", timestamp: new Date(T0).toISOString(), eventType: "x", identityMap: { ECID: [{ id: "A", primary: true }] } }), { now: T0 + 1 });
      await ingestRecords(store, O, other, rec(profile("Z")), { now: T0 + 1 });
      const v2 = version(store);
      const [a, b, c] = await pidsOf(store, "A", "B", "C");
      // A merge (C and D linked into one graph) and a delete, the lifecycle paths.
      await ingestRecords(store, S, crm, rec({ identityMap: { ECID: [{ id: "C", primary: true }, { id: "D" }] } }), { now: T0 + 2 });
      await store.deleteByIdentities(S, [{ namespace: "ecid", id: "B" }], "ALL");
      const v3 = version(store);
      const expected = [v0, v1, v2, v3].map((v) => [changed(store, v), changed(store, v, O)]);
      assert.deepEqual(expected[0]![0], [a, b, c]);
      assert.deepEqual(expected[1]![0], [a, b, c], "B deleted, C linked, A's event");
      assert.deepEqual(expected[2]![0], [b, c]);
      assert.deepEqual(expected[3], [[], []]);
      assert.equal(expected[0]![1]!.length, 1);
      await store.close();
      again = await opened(ts.reopen());
      for (const [i, v] of [v0, v1, v2, v3].entries()) {
        assert.deepEqual([changed(again, v), changed(again, v, O)], expected[i], `since v${i}, after the reopen`);
      }
      assert.ok(version(again) >= v3);
    } finally {
      await again?.close();
      await ts.cleanup();
    }
  });

  it("versions keep increasing across reopens, and writes after a reopen add to what was answered before it", async () => {
    const ts = openTestStore(kind);
    const stores: ProfileStore[] = [ts.store];
    try {
      const crm = (await ts.store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const seen: number[] = [version(ts.store)];
      for (let round = 0; round < 3; round++) {
        const store = stores[stores.length - 1]!;
        await ingestRecords(store, S, crm, rec(profile(`R${round}`)), { now: T0 + round });
        seen.push(version(store));
        await store.close();
        const next = await opened(ts.reopen());
        stores.push(next);
        assert.ok(version(next) >= seen[seen.length - 1]!, `round ${round}: ${version(next)} after ${seen.join(", ")}`);
      }
      const last = stores[stores.length - 1]!;
      await ingestRecords(last, S, crm, rec(profile("R3")), { now: T0 + 3 });
      seen.push(version(last));
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! > seen[i - 1]!, `strictly increasing: ${seen.join(", ")}`);
      assert.deepEqual(changed(last, seen[0]!), await pidsOf(last, "R0", "R1", "R2", "R3"));
      assert.deepEqual(changed(last, seen[2]!), await pidsOf(last, "R2", "R3"));
      const rows = await logRows(ts);
      assert.deepEqual(rows.map((r) => r.version), seen.slice(1), "one row per write, under the version answered");
    } finally {
      for (const s of stores) await s.close();
      await ts.cleanup();
    }
  });

  it("a since below the trimmed floor answers null, before and after a reopen; the log keeps what the capacity keeps", async () => {
    const ts = openTestStore(kind, { changeFeedCapacity: 3 });
    let again: ProfileStore | null = null;
    try {
      const store = ts.store;
      const crm = (await store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      const v: number[] = [version(store)];
      for (let i = 0; i < 8; i++) {
        await ingestRecords(store, S, crm, rec(profile(`P${i}`)), { now: T0 + i });
        v.push(version(store));
      }
      const answers = () => v.map((x) => changed(store, x));
      const before = answers();
      // Capacity 3 (profile ids): the changes after v5 are kept, the floor is v5.
      assert.deepEqual(before.map((a) => (a === null ? null : a.length)), [null, null, null, null, null, 3, 2, 1, 0]);
      assert.deepEqual(before[5], await pidsOf(store, "P5", "P6", "P7"));
      await store.close();
      const rows = await logRows(ts);
      assert.deepEqual(rows.map((r) => r.version), v.slice(6), "trimmed to the capacity at close");
      again = await opened(ts.reopen());
      assert.deepEqual(v.map((x) => changed(again!, x)), before);
    } finally {
      await again?.close();
      await ts.cleanup();
    }
  });

  it("a write that rolls back leaves no log row; in a group, only the writes that held are logged", async () => {
    const ts = openTestStore(kind);
    let again: ProfileStore | null = null;
    try {
      const store = ts.store;
      const crm = (await store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      await ingestRecords(store, S, crm, rec(profile("KEEP")), { now: T0 });
      const v0 = version(store);
      const rows0 = await logRows(ts);
      assert.equal(rows0.length, 1);
      const failing = failingAppends(store);
      await assert.rejects(ingestRecords(failing, S, crm, rec(profile("LOST1"), profile("KEEP", { x: 1 })), { now: T0 + 1 }), (e) => e instanceof StoreError && e.code === "BATCH_NOT_FOUND");
      assert.equal(version(store), v0);
      assert.deepEqual(await logRows(ts), rows0);
      // Both in the same turn (one group commit where the store groups them).
      const [bad, good] = await Promise.allSettled([
        ingestRecords(failing, S, crm, rec(profile("LOST2")), { now: T0 + 2 }),
        ingestRecords(store, S, crm, rec(profile("NEW")), { now: T0 + 2 }),
      ]);
      assert.deepEqual([bad.status, good.status], ["rejected", "fulfilled"]);
      assert.equal(await store.findProfileId(S, { namespace: "ecid", id: "LOST2" }), null);
      const fresh = await pidsOf(store, "NEW");
      assert.deepEqual(changed(store, v0), fresh);
      const rows = await logRows(ts);
      assert.equal(rows.length, 2);
      assert.deepEqual(rows[1]!.pids.map(String), fresh);
      await store.close();
      again = await opened(ts.reopen());
      assert.deepEqual(changed(again, v0), fresh);
    } finally {
      await again?.close();
      await ts.cleanup();
    }
  });
});

if (TEST_STORE === "postgres") describe("change log: several processes on one database (postgres, issue #43)", () => {
  it("a store learns what another committed: on changesReady, with its own next write, and by itself within a second", async () => {
    const ts = openTestStore("postgres");
    // A second store on the same schema: another hub.
    const other = await opened(ts.reopen());
    try {
      const store = ts.store;
      const crm = (await store.createDataset(S, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
      await store.changesReady?.();
      const v0 = version(store);
      await ingestRecords(other, S, crm, rec(profile("X")), { now: T0 });
      // Asked after changesReady (what a batch snapshot's refresh does): the other hub's write is there.
      await store.changesReady?.();
      const [x] = await pidsOf(store, "X");
      assert.deepEqual(changed(store, v0), [x]);
      const v1 = version(store);
      assert.ok(v1 > v0);
      assert.deepEqual(changed(store, v1), []);
      // The other hub writes, then this one: once this one's write is acknowledged, both are answered, exactly.
      await ingestRecords(other, S, crm, rec(profile("Y")), { now: T0 + 1 });
      await ingestRecords(store, S, crm, rec(profile("Z")), { now: T0 + 2 });
      assert.deepEqual(changed(store, v1), await pidsOf(store, "Y", "Z"));
      const v2 = version(store);
      assert.deepEqual(changed(store, v2), []);
      // Nothing asked: the other hub learns this one's writes from the log by itself (every 500 ms).
      const w0 = version(other);
      await ingestRecords(store, S, crm, rec(profile("W")), { now: T0 + 3 });
      const [w] = await pidsOf(store, "W");
      const start = Date.now();
      while (!(changed(other, w0) ?? []).includes(w!) && Date.now() - start < 3000) await new Promise((r) => setTimeout(r, 20));
      assert.ok((changed(other, w0) ?? []).includes(w!), `learnt within ${Date.now() - start} ms`);
      assert.ok(Date.now() - start < 1500, `learnt within ${Date.now() - start} ms`);
      // A version answered never claims what the log had not been read through: the other hub's
      // answer from before W still sees W, and nothing twice after its last version.
      assert.deepEqual(changed(other, version(other)), []);
    } finally {
      await other.close();
      await ts.cleanup();
    }
  });
});
