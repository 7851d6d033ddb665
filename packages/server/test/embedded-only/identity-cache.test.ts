// The embedded store keeps the profile id of recently seen identities in memory
// (identity-cache.ts). These tests pin that the cache never changes what is stored: after a
// graph merge, a delete, a rolled-back write and another connection's commit, events land
// in the profile they would land in without a cache.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { IdentityPidCache } from "../../src/profiles/embedded/identity-cache.js";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "CACHE@AdobeOrg", sandboxName: "prod" };
const POLICY = { id: "p", identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const NOW = Date.UTC(2026, 10, 21);
let seq = 0;

function profile(ids: Record<string, string>): Record<string, unknown> {
  const identityMap: Record<string, unknown> = {};
  let first = true;
  for (const [ns, id] of Object.entries(ids)) {
    identityMap[ns] = [{ id, primary: first }];
    first = false;
  }
  return { identityMap, _repo: { modifyDate: new Date(NOW).toISOString() } };
}

function event(ecid: string): Record<string, unknown> {
  return { _id: `e-${++seq}`, timestamp: new Date(NOW + seq).toISOString(), eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: ecid, primary: true }] } };
}

interface Fixture { store: EmbeddedProfileStore; file: string; profiles: string; events: string; done: () => Promise<void> }

async function fixture(identityCacheEntries?: number): Promise<Fixture> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-idcache-"));
  const file = path.join(dir, "profiles.sqlite");
  const store = new EmbeddedProfileStore({ path: file, ...(identityCacheEntries === undefined ? {} : { identityCacheEntries }) });
  const profiles = (await store.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
  const events = (await store.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
  return { store, file, profiles, events, done: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
}

async function ingest(f: Fixture, ds: string, values: Array<Record<string, unknown>>): Promise<number> {
  const r = await ingestRecords(f.store, SCOPE, ds, values.map((value, index) => ({ index, value })), { now: NOW });
  return r.accepted;
}

/** Event ids of the profile holding `ecid`, or null when no profile holds it. */
async function eventIdsOf(f: Fixture, ecid: string): Promise<string[] | null> {
  const p = await f.store.getProfile(SCOPE, { namespace: "ecid", id: ecid }, POLICY);
  if (p === null) return null;
  const page = await f.store.getEvents(SCOPE, { namespace: "ecid", id: ecid }, POLICY, {});
  return page.events.map((e) => e.eventId).sort();
}

await describe("IdentityPidCache", async () => {
  await it("keeps entries per tenant, forgets on delete and clear", () => {
    const c = new IdentityPidCache(10);
    c.set(1, "ECID", "a", 7);
    c.set(2, "ECID", "a", 8);
    c.set(1, "ECID", "a", 9);
    c.set(1, "CRMID", "a", 4);
    assert.equal(c.get(1, "ECID", "a"), 9);
    assert.equal(c.get(1, "CRMID", "a"), 4);
    assert.equal(c.get(2, "ECID", "a"), 8);
    assert.equal(c.size, 3);
    c.delete(1, "ECID", "a");
    assert.equal(c.get(1, "ECID", "a"), undefined);
    assert.equal(c.get(1, "CRMID", "a"), 4);
    assert.equal(c.size, 2);
    c.clear();
    assert.equal(c.get(2, "ECID", "a"), undefined);
    assert.equal(c.size, 0);
  });

  await it("starts over when full, and holds nothing with maxEntries 0", () => {
    const c = new IdentityPidCache(2);
    c.set(1, "ECID", "a", 1);
    c.set(1, "ECID", "b", 2);
    c.set(1, "ECID", "c", 3);
    assert.equal(c.size, 1);
    assert.equal(c.get(1, "ECID", "a"), undefined);
    assert.equal(c.get(1, "ECID", "c"), 3);
    const none = new IdentityPidCache(0);
    none.set(1, "ECID", "a", 1);
    assert.equal(none.get(1, "ECID", "a"), undefined);
    assert.throws(() => new IdentityPidCache(-1), /maxEntries must be a non-negative integer, got -1/);
  });
});

await describe("embedded store with the identity cache", async () => {
  for (const entries of [undefined, 0]) {
    const label = entries === 0 ? "without the cache" : "with the cache";
    await it(`an event after a graph merge lands in the merged profile (${label})`, async () => {
      const f = await fixture(entries);
      try {
        assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "x" }), profile({ CRMID: "b", ECID: "y" })]), 2);
        assert.equal(await ingest(f, f.events, [event("y")]), 1); // y's graph is now cached
        assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "y" })]), 1); // links a's and b's graphs
        assert.equal(await ingest(f, f.events, [event("y"), event("x")]), 2);
        const merged = await eventIdsOf(f, "x");
        assert.deepEqual(merged, await eventIdsOf(f, "y"));
        assert.equal(merged?.length, 3);
      } finally {
        await f.done();
      }
    });
  }

  // An event batch whose identities are all cached skips stitching (knownEvents); anything
  // stitching would change must still take the full path.
  for (const entries of [undefined, 0]) {
    const label = entries === 0 ? "without the cache" : "with the cache";
    await it(`events of known identities: one event naming two profiles merges them, a new identity links (${label})`, async () => {
      const f = await fixture(entries);
      try {
        assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "x" }), profile({ CRMID: "b", ECID: "y" })]), 2);
        assert.equal(await ingest(f, f.events, [event("x"), event("y")]), 2); // both cached now
        assert.equal(await f.store.countProfiles(SCOPE), 2);
        const both = { ...event("x"), identityMap: { ECID: [{ id: "x", primary: true }, { id: "y" }] } };
        const linked = { ...event("x"), identityMap: { ECID: [{ id: "x", primary: true }], Email: [{ id: "x@example.com" }] } };
        const r = await ingestRecords(f.store, SCOPE, f.events, [event("x"), both, linked].map((value, index) => ({ index, value })), { now: NOW });
        assert.equal(r.accepted, 3);
        assert.equal(await f.store.countProfiles(SCOPE), 1, "the event naming x and y merged their profiles");
        assert.equal((await eventIdsOf(f, "y"))?.length, 5);
        const byEmail = await f.store.getProfile(SCOPE, { namespace: "email", id: "x@example.com" }, POLICY);
        assert.ok(byEmail !== null, "the event's new identity joined the graph");
        // A replayed batch of known events: all duplicates, nothing stored twice.
        const again = await ingestRecords(f.store, SCOPE, f.events, [{ index: 0, value: event("x") }], { now: NOW });
        assert.equal(again.accepted, 1);
        seq--;
        const dup = await ingestRecords(f.store, SCOPE, f.events, [{ index: 0, value: event("x") }], { now: NOW });
        assert.equal(dup.accepted, 1);
        assert.equal((await eventIdsOf(f, "x"))?.length, 6, "the replayed _id is stored once");
      } finally {
        await f.done();
      }
    });
  }

  await it("an event for a deleted identity starts a new profile", async () => {
    const f = await fixture();
    try {
      assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "x" })]), 1);
      assert.equal(await ingest(f, f.events, [event("x")]), 1);
      await f.store.deleteByIdentities(SCOPE, [{ namespace: "ecid", id: "x" }, { namespace: "crmid", id: "a" }], "ALL");
      assert.equal(await eventIdsOf(f, "x"), null);
      assert.equal(await ingest(f, f.events, [event("x")]), 1);
      assert.deepEqual(await eventIdsOf(f, "x"), [`e-${seq}`]);
    } finally {
      await f.done();
    }
  });

  await it("identities of a write that rolled back are not remembered", async () => {
    const f = await fixture();
    const other = new Database(f.file);
    try {
      // Fails the fragment insert after the record's identities were inserted (and cached).
      other.exec("CREATE TRIGGER refuse_z BEFORE INSERT ON fragments WHEN NEW.idv = 'z' BEGIN SELECT RAISE(ABORT, 'refused'); END");
      await assert.rejects(ingest(f, f.profiles, [profile({ CRMID: "z", ECID: "zz" })]), /refused/);
      assert.equal(await ingest(f, f.events, [event("zz")]), 1);
      assert.deepEqual(await eventIdsOf(f, "zz"), [`e-${seq}`]);
    } finally {
      other.close();
      await f.done();
    }
  });

  await it("another connection's commit is seen", async () => {
    const f = await fixture();
    const other = new Database(f.file);
    try {
      assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "x" })]), 1);
      assert.equal(await ingest(f, f.events, [event("x")]), 1); // x is cached
      // Another process moves x to a new profile behind the store's back.
      other.exec("INSERT INTO profiles (tid, size, created) SELECT tid, 1, 0 FROM profiles LIMIT 1");
      const moved = Number((other.prepare("SELECT max(pid) AS pid FROM profiles").get() as { pid: number }).pid);
      other.prepare("UPDATE identities SET pid = ? WHERE ns = 'ecid' AND idv = 'x'").run(moved);
      other.prepare("UPDATE profiles SET size = 1 WHERE pid <> ?").run(moved);
      assert.equal(await ingest(f, f.events, [event("x")]), 1);
      // Without the data_version check the event would go to the old profile (that of CRMID a).
      const ofCrm = await f.store.getEvents(SCOPE, { namespace: "crmid", id: "a" }, POLICY, {});
      assert.deepEqual(ofCrm.events.map((e) => e.eventId), [`e-${seq - 1}`]);
      assert.deepEqual(await eventIdsOf(f, "x"), [`e-${seq}`]);
    } finally {
      other.close();
      await f.done();
    }
  });

  await it("reads answered from the cache see another connection's commit too", async () => {
    const f = await fixture();
    const other = new Database(f.file);
    try {
      assert.equal(await ingest(f, f.profiles, [profile({ CRMID: "a", ECID: "x" })]), 1);
      const before = await f.store.findProfileId(SCOPE, { namespace: "ecid", id: "x" });
      assert.notEqual(before, null);
      // Read once more: now from the cache (the ingest and the read above remembered x).
      assert.deepEqual(await f.store.findProfileIds(SCOPE, [{ namespace: "ecid", id: "x" }, { namespace: "ecid", id: "nobody" }]), [before, null]);
      other.exec("INSERT INTO profiles (tid, size, created) SELECT tid, 1, 0 FROM profiles LIMIT 1");
      const moved = String((other.prepare("SELECT max(pid) AS pid FROM profiles").get() as { pid: number }).pid);
      other.prepare("UPDATE identities SET pid = ? WHERE ns = 'ecid' AND idv = 'x'").run(moved);
      // No write of this store in between: the reads check data_version themselves.
      assert.equal(await f.store.findProfileId(SCOPE, { namespace: "ecid", id: "x" }), moved);
      assert.deepEqual(await f.store.findProfileIds(SCOPE, [{ namespace: "ecid", id: "x" }]), [moved]);
      other.prepare("DELETE FROM identities WHERE ns = 'ecid' AND idv = 'x'").run();
      assert.equal(await f.store.findProfileId(SCOPE, { namespace: "ecid", id: "x" }), null);
    } finally {
      other.close();
      await f.done();
    }
  });
});
