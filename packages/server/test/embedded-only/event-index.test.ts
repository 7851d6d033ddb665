// The events' (tid, pid, ts) index in two generations (src/profiles/embedded/event-index.ts):
// entries move from the small table to the large one in steps, reads see both, every write path
// (append, graph merge, deletes) keeps both in step with the events, and a file written with the
// older single index (events_pid_ts) is converted when opened.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import Database from "better-sqlite3";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { EVENT_INDEX_SCHEMA } from "../../src/profiles/embedded/event-index.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { eventIndexCounts } from "./event-index-audit.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "EVIDX@AdobeOrg", sandboxName: "prod" };
const NOW = Date.UTC(2026, 10, 22);
const PDG = { identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const NONE = { identityGraph: { type: "none" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const PROFILES = 12;

function event(k: number): { index: number; value: Record<string, unknown> } {
  return {
    index: k,
    value: {
      _id: `ev-${k}`,
      // Out of arrival order within a profile, so the index order (ts) is not the insert order.
      timestamp: new Date(NOW - ((k * 7919) % 1000) * 60_000).toISOString(),
      eventType: k % 2 === 0 ? "web.webpagedetails.pageViews" : "commerce.purchases",
      identityMap: { ECID: [{ id: `ecid-${k % PROFILES}`, primary: true }] },
    },
  };
}

/** The counts the assertions compare: both tables, the rows, whether the old index is there. */
function counts(file: string): { large: number; small: number; events: number; oldIndex: boolean } {
  const c = eventIndexCounts(file);
  assert.deepEqual([c.orphans, c.unindexed], [0, 0], "every row has exactly its own entry");
  return { large: c.large, small: c.small, events: c.events, oldIndex: c.oldIndex };
}

/** Every profile's events as the store reads them: [ids in (ts, seq) order] per ECID. */
async function allEvents(store: EmbeddedProfileStore): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (let p = 0; p < PROFILES; p++) {
    const page = await store.getEvents(SCOPE, { namespace: "ecid", id: `ecid-${p}` }, PDG, { limit: 1000 });
    out[`ecid-${p}`] = page.events.map((e) => String(e.body["_id"]));
  }
  return out;
}

/** The same, computed from the records themselves (ts ascending; the insert order breaks ties). */
function expectedEvents(n: number): Record<string, string[]> {
  const out: Record<string, Array<{ id: string; ts: number; k: number }>> = {};
  for (let p = 0; p < PROFILES; p++) out[`ecid-${p}`] = [];
  for (let k = 0; k < n; k++) {
    const v = event(k).value;
    const key = `ecid-${k % PROFILES}`;
    (out[key] ??= []).push({ id: String(v["_id"]), ts: Date.parse(String(v["timestamp"])), k });
  }
  return Object.fromEntries(Object.entries(out).map(([key, list]) => [key, list.sort((a, b) => a.ts - b.ts || a.k - b.k).map((e) => e.id)]));
}

describe("two-generation event index", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-event-index-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("moves entries to the large index in steps once the small one holds mergeAt; reads see both throughout", async () => {
    const file = path.join(dir, "steps.db");
    const store = new EmbeddedProfileStore({ path: file, checkpoints: "inline", eventIndexMergeAt: 40, eventIndexMergeStep: 16 });
    try {
      const ds = (await store.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
      let n = 0;
      const seen: Array<{ large: number; small: number }> = [];
      for (let batch = 0; batch < 10; batch++) {
        const records = Array.from({ length: 10 }, (_, j) => event(n + j));
        const r = await ingestRecords(store, SCOPE, ds, records, { now: NOW });
        assert.equal(r.accepted, 10);
        n += 10;
        const c = counts(file);
        assert.equal(c.large + c.small, n, "every event has exactly one index entry");
        seen.push({ large: c.large, small: c.small });
        assert.deepEqual(await allEvents(store), expectedEvents(n));
      }
      // The 40th entry starts a round in the turn after its commit (once the write's caller has its
      // answer, so a counting right after the write still sees 40 small): a step of 16 after each
      // write, before the next one commits, until fewer than 16 are left; the next round waits for
      // 40 again.
      assert.deepEqual(seen, [
        { large: 0, small: 10 }, { large: 0, small: 20 }, { large: 0, small: 30 }, { large: 0, small: 40 },
        { large: 16, small: 34 }, { large: 32, small: 28 }, { large: 48, small: 22 }, { large: 48, small: 32 },
        { large: 48, small: 42 }, { large: 64, small: 36 },
      ]);
      // A re-sent event is a duplicate: no second index entry.
      const again = await ingestRecords(store, SCOPE, ds, [event(3)], { now: NOW });
      assert.equal(again.accepted, 1);
      assert.equal(counts(file).large + counts(file).small, n);
      await store.mergeEventIndex();
      assert.deepEqual({ ...counts(file), oldIndex: false }, { large: n, small: 0, events: n, oldIndex: false });
      assert.deepEqual(await allEvents(store), expectedEvents(n));
    } finally {
      await store.close();
    }
  });

  it("sizes a step by the appends it follows: small appends move the smallest step, large ones up to the largest", async () => {
    const file = path.join(dir, "paced.db");
    // A step moves 4 × the largest append since the step before, within [8, 64].
    const store = new EmbeddedProfileStore({ path: file, checkpoints: "inline", eventIndexMergeAt: 40, eventIndexMergeStep: 64, eventIndexMergeStepMin: 8 });
    try {
      const ds = (await store.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
      let n = 0;
      const append = async (k: number) => {
        await ingestRecords(store, SCOPE, ds, Array.from({ length: k }, (_, j) => event(n + j)), { now: NOW });
        n += k;
        return counts(file);
      };
      // One-event appends (streaming's kind): once 40 wait, 8 move before each later append.
      for (let i = 0; i < 40; i++) await append(1);
      assert.deepEqual(await append(1), { large: 8, small: 33, events: 41, oldIndex: false });
      assert.deepEqual(await append(1), { large: 16, small: 26, events: 42, oldIndex: false });
      // A ten-event append: the step after it moves 40.
      assert.deepEqual(await append(10), { large: 24, small: 28, events: 52, oldIndex: false });
      assert.deepEqual(await append(1), { large: 52, small: 1, events: 53, oldIndex: false });
      assert.deepEqual(await allEvents(store), expectedEvents(n));
    } finally {
      await store.close();
    }
  });

  it("a graph merge re-points, and deletes remove, entries in both generations", async () => {
    const file = path.join(dir, "writes.db");
    const store = new EmbeddedProfileStore({ path: file, checkpoints: "inline", eventIndexMergeAt: 1_000_000 });
    try {
      const web = (await store.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
      const crm = (await store.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
      await ingestRecords(store, SCOPE, web, Array.from({ length: 24 }, (_, k) => event(k)), { now: NOW });
      await store.mergeEventIndex(); // ecid-0's and ecid-1's first events now in the large table
      await ingestRecords(store, SCOPE, web, Array.from({ length: 24 }, (_, k) => event(24 + k)), { now: NOW });
      assert.deepEqual([counts(file).large, counts(file).small], [24, 24]);
      // A profile record that joins ecid-0 and ecid-1: one graph, its events all under it.
      const link = await ingestRecords(store, SCOPE, crm, [{ index: 0, value: { identityMap: { ECID: [{ id: "ecid-0", primary: true }, { id: "ecid-1" }] } } }], { now: NOW });
      assert.equal(link.accepted, 1);
      const expected = expectedEvents(48);
      const joined = (await store.getEvents(SCOPE, { namespace: "ecid", id: "ecid-1" }, PDG, { limit: 1000 })).events;
      assert.equal(joined.length, expected["ecid-0"]!.length + expected["ecid-1"]!.length);
      // Under "none" an identity still sees only its own events.
      const own = (await store.getEvents(SCOPE, { namespace: "ecid", id: "ecid-1" }, NONE, { limit: 1000 })).events.map((e) => String(e.body["_id"]));
      assert.deepEqual(own, expected["ecid-1"]);
      let c = counts(file);
      assert.equal(c.large + c.small, 48);
      // Deleting ecid-1's records removes its events' entries from both tables.
      const del = await store.deleteByIdentities(SCOPE, [{ namespace: "ecid", id: "ecid-1" }], "ALL");
      assert.equal(del.events, expected["ecid-1"]!.length);
      c = counts(file);
      assert.equal(c.events, 48 - expected["ecid-1"]!.length);
      assert.equal(c.large + c.small, c.events);
      // A dataset's deletion takes every remaining entry.
      await store.deleteDatasetRecords(SCOPE, web);
      assert.deepEqual(counts(file), { large: 0, small: 0, events: 0, oldIndex: false });
    } finally {
      await store.close();
    }
  });

  it("converts a file written with the single events_pid_ts index when it is opened", async () => {
    const file = path.join(dir, "old.db");
    const first = new EmbeddedProfileStore({ path: file, checkpoints: "inline" });
    const ds = (await first.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
    await ingestRecords(first, SCOPE, ds, Array.from({ length: 60 }, (_, k) => event(k)), { now: NOW });
    await first.close();
    // Back to the older layout: no index tables, view or triggers; the one index on events.
    const db = new Database(file);
    const names = [...EVENT_INDEX_SCHEMA.matchAll(/CREATE (TABLE|VIEW|TRIGGER) IF NOT EXISTS (\w+)/g)].map((m) => [m[1]!, m[2]!] as const);
    for (const [kind, name] of names.reverse()) db.exec(`DROP ${kind} ${name}`);
    db.exec("CREATE INDEX events_pid_ts ON events (tid, pid, ts)");
    assert.deepEqual(db.prepare("SELECT name FROM sqlite_master WHERE name LIKE 'event%' ORDER BY name").pluck().all(), ["events", "events_eid", "events_pid_ts"]);
    db.close();

    const reopened = new EmbeddedProfileStore({ path: file, checkpoints: "inline" });
    try {
      assert.deepEqual(counts(file), { large: 60, small: 0, events: 60, oldIndex: false });
      assert.deepEqual(await allEvents(reopened), expectedEvents(60));
      // And it keeps working: appends go to the small table.
      await ingestRecords(reopened, SCOPE, ds, Array.from({ length: 12 }, (_, k) => event(60 + k)), { now: NOW });
      assert.deepEqual(counts(file), { large: 60, small: 12, events: 72, oldIndex: false });
      assert.deepEqual(await allEvents(reopened), expectedEvents(72));
    } finally {
      await reopened.close();
    }
  });
});
