/**
 * Snapshots kept on disk (issue #26): the file format round-trips every kind
 * of column exactly; a SnapshotCache with a directory writes each base it
 * builds in the background, and a new cache (a restart) loads the file and
 * refreshes it through the change feed, giving the same snapshot and the same
 * job results as a fresh build; files that are truncated, of another format or
 * key, or that the feed cannot answer for are ignored with one warning and
 * rewritten; after the store is reopened its change log still answers for the file's version. Runs on the embedded store (unit) and PostgreSQL (pg).
 */
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { crc32 } from "node:zlib";
import type { Column } from "@segmentd/pql";
import { SnapshotCache, type SnapshotCacheOptions } from "../../src/batch/columnar/cache.js";
import { buildSnapshot, PartBuilder, type SnapshotPart } from "../../src/batch/columnar/snapshot.js";
import { openSnapshotFile, readSnapshotPart, writeSnapshotFile } from "../../src/batch/columnar/snapshot-file.js";
import type { StoredTable } from "../../src/batch/columnar/table.js";
import { evaluateJob } from "../../src/batch/engine/evaluate-job.js";
import { membershipChangesOf } from "../../src/batch/engine/membership-output.js";
import { batchSnapshotDir, ConfigError, loadConfig } from "../../src/platform/config.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore, ScannedProfile } from "../../src/profiles/store.js";
import { NO_MERGE_POLICY, type JsonObject, type MergePolicySpec } from "../../src/profiles/types.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";
import { client, startHarness } from "../helpers/server-harness.js";
import { NOW } from "./pql-gen.js";
import { PDG, SCOPE, definition, populate, referenceMembers, type Population } from "./fixtures.js";
import { columnValues, dumpSnapshot } from "../helpers/snapshot-dump.js";

const NONE: MergePolicySpec = NO_MERGE_POLICY;

function tempDir(): string {
  return mkdtempSync(path.join(tmpdir(), "segmentd-snapfiles-"));
}

const dump = dumpSnapshot;

const values = (col: Column | undefined, length: number): unknown[] => columnValues(col, length, (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v))));

/** A table as its columns: stored kind and values by path. */
function columns(t: StoredTable): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const p of t.columnPaths().sort()) {
    const stored = t.stored(p);
    out[p] = [stored === undefined ? "derived" : stored.kind === "sparse" ? `sparse ${stored.of}` : stored.kind, values(t.column(p), t.length)];
  }
  return out;
}

/** Everything a part holds, in comparable form. */
function partDump(p: SnapshotPart): unknown {
  const rows = Array.from({ length: p.rows }, (_, r) => ({ profile: p.data().profile(r), identities: p.identitiesOf(r) }));
  const events = Array.from({ length: p.events.length }, (_, r) => p.data().event(r));
  return {
    rows,
    events,
    profileColumns: columns(p.profiles),
    eventColumns: columns(p.events),
    eventStart: [...p.eventStart],
    eventTime: [...p.eventTime].map((t) => (Number.isNaN(t) ? null : t)),
    rowOrdinal: [...p.rowOrdinal],
    ordinalStart: [...p.ordinalStart],
    profileIds: p.profileIds,
    optedOut: [...p.optedOut],
    nsStart: [...p.nsStart],
    nsCodes: [...p.nsCodes],
    namespaces: p.namespaces,
  };
}

function entry(profileId: string, entity: JsonObject, events: JsonObject[], identities: Array<{ namespace: string; id: string }>, optedOut = false): ScannedProfile {
  return {
    profileId,
    identities,
    entity,
    sources: [],
    lastModifiedAt: null,
    optedOut,
    events: events.map((body, k) => ({ datasetId: "ds", eventId: `${profileId}-${k}`, primary: identities[0]!, timestamp: 0, body })),
    identity: null,
  };
}

const DEFS = ["person.age > 20", 'xEvent[eventType = "purchase"].count() > 0', 'tier = "changed" or person.vip = true', "added = true"];

/** Members per definition of one job over a cache's snapshot. */
async function job(store: ProfileStore, cache: SnapshotCache): Promise<Record<string, string[]>> {
  const defs = DEFS.map((q, i) => definition(`d${i}`, q, { excludeOptOut: false }));
  const o = await evaluateJob(store, SCOPE, defs, { now: NOW, snapshots: cache });
  const out: Record<string, string[]> = {};
  for (const d of defs) out[d.id] = membershipChangesOf(o.memberships, NOW).filter((c) => c.definitionId === d.id && c.status === "realized").map((c) => c.profileId).sort();
  return out;
}

/** A store with 30 generated profiles and events; its directory of snapshot files. */
async function setUp(): Promise<{ ts: TestStore; pop: Population; dir: string; done: () => Promise<void> }> {
  const ts = openTestStore();
  const pop = await populate(ts.store, 30, 26);
  const dir = tempDir();
  return {
    ts,
    pop,
    dir,
    async done() {
      await ts.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function cacheWith(dir: string, extra: SnapshotCacheOptions = {}): { cache: SnapshotCache; warnings: string[] } {
  const warnings: string[] = [];
  return { cache: new SnapshotCache({ dir, onWarning: (m) => warnings.push(m), ...extra }), warnings };
}

describe("snapshot file format", () => {
  it("round-trips parts exactly: every column kind, packed strings, wide characters, odd keys, empty objects, nulls", async () => {
    const dir = tempDir();
    try {
      const seen = new Set<string>();
      for (const raw of [true, false]) {
        // rawStringsAfter 1: string columns become packed ("strings") at once, wide characters kept aside.
        const b = new PartBuilder(raw ? { rawStringsAfter: 1 } : {});
        const ids = [{ namespace: "ecid", id: "E1" }, { namespace: "email", id: "a@x.com" }];
        b.add(entry("1", { person: { age: 30, name: "日本😀", vip: true }, n: null, empty: {}, "dotted.key": 5, "": "blank", mixed: 1, tags: ["a", "é"] }, [
          { eventType: "view", timestamp: "2026-11-20T10:00:00.000Z", value: 2, meta: {} },
          { eventType: "buy", timestamp: "2026-11-19T10:00:00Z", value: "x\ud800y" },
        ], ids));
        b.add(entry("1", { person: { age: 31 } }, [], [ids[1]!]));
        b.add(entry("2", { person: { age: null, name: "bob", vip: false }, mixed: "one", lone: "\udc00", rare: 2.5 }, [{ eventType: "view", timestamp: "not a time" }], [{ namespace: "ecid", id: "E2-日本😀" }], true));
        for (let i = 3; i < 12; i++) {
          b.add(entry(String(i), { person: { age: i }, flag: i % 2 === 0, city: i % 3 === 0 ? "Köln" : "Paris", m: i % 2 === 0 ? [i] : "x" }, [
            { eventType: "click", timestamp: new Date(NOW - i * 60_000).toISOString() },
          ], [{ namespace: "ecid", id: `E${i}` }]));
        }
        // An entry without identities: its identity text is empty.
        b.add(entry("12", { person: { age: 12 } }, [], []));
        const part = b.finish();
        assert.deepEqual([part.identitiesOf(0), part.identitiesOf(2), part.identitiesOf(part.rows - 1)], [["ecid:E1", "email:a@x.com"], ["ecid:E2-日本😀"], []]);
        const file = path.join(dir, `p-${raw}.snapshot`);
        const bytes = await writeSnapshotFile(file, { key: "k", store: null, version: 42, withEvents: true, policy: PDG }, part);
        assert.equal(bytes, statSync(file).size);
        const f = await openSnapshotFile(file);
        assert.deepEqual([f.header.format, f.header.key, f.header.version, f.header.withEvents, f.header.store], [1, "k", 42, true, null]);
        const back = await readSnapshotPart(f);
        assert.deepEqual(partDump(back), partDump(part));
        for (const t of [back.profiles, back.events]) for (const c of Object.values(columns(t))) seen.add((c as [string])[0]);
      }
      assert.deepEqual([...seen].sort(), ["boolean", "json", "number", "sparse boolean", "sparse json", "sparse number", "sparse string", "sparse strings", "string", "strings"]);
      assert.deepEqual(readdirSync(dir).sort(), ["p-false.snapshot", "p-true.snapshot"], "no temporary file left");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("snapshot cache with a directory", () => {
  it("writes the base in the background: get resolves before the file exists, idle() waits for it", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const { cache, warnings } = cacheWith(dir);
      const snap = await cache.get(ts.store, SCOPE, PDG, { events: true });
      const file = cache.fileOf(SCOPE, PDG)!;
      assert.equal(existsSync(file), false, "not written before the caller got its snapshot");
      assert.equal(cache.stats(SCOPE, PDG)!.mode, "built");
      await cache.idle();
      assert.equal(existsSync(file), true);
      assert.equal(cache.lastWrites.size, 1);
      assert.equal([...cache.lastWrites.values()][0]!.bytes, statSync(file).size);
      const f = await openSnapshotFile(file);
      await f.fh.close();
      assert.deepEqual([f.header.version, f.header.withEvents, f.header.key.split("\u0000").slice(0, 2)], [snap.version, true, [SCOPE.orgId, SCOPE.sandboxName]]);
      // A refresh that keeps the base writes nothing (a write renames a new file into place).
      const inode = statSync(file).ino;
      await cache.get(ts.store, SCOPE, PDG, { events: true });
      await cache.idle();
      assert.equal(cache.stats(SCOPE, PDG)!.mode, "unchanged");
      assert.equal(statSync(file).ino, inode);
      assert.deepEqual(readdirSync(dir), [path.basename(file)]);
      assert.deepEqual(warnings, []);
    } finally {
      await done();
    }
  });

  it("a new cache over the same store and directory (a restart) loads the file: mode loaded, changed 0, same snapshot and job results as a fresh build", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const first = cacheWith(dir);
      await first.cache.get(ts.store, SCOPE, PDG, { events: true });
      await first.cache.close();
      const second = cacheWith(dir);
      const results = await job(ts.store, second.cache);
      const st = second.cache.stats(SCOPE, PDG)!;
      assert.deepEqual([st.mode, st.changed], ["loaded", 0]);
      assert.ok(st.loadMs! >= 0 && st.loadMs! <= st.ms);
      const loaded = await second.cache.get(ts.store, SCOPE, PDG, { events: true });
      assert.equal(second.cache.stats(SCOPE, PDG)!.mode, "unchanged");
      const fresh = await buildSnapshot(ts.store, SCOPE, PDG, { events: true });
      assert.deepEqual(dump(loaded), dump(fresh));
      assert.deepEqual(partDump(loaded.base), partDump(fresh.base));
      // Events' derived timestamps are the part's eventTime: one array in the file and in memory.
      assert.equal(loaded.base.events.contents().derivedTime, loaded.base.eventTime);
      assert.deepEqual(results, await job(ts.store, new SnapshotCache()));
      const adults = await referenceMembers(ts.store, definition("x", DEFS[0]!).query, { excludeOptOut: false });
      assert.deepEqual(results["d0"], [...adults].sort());
      assert.ok(results["d0"]!.length > 0 && results["d1"]!.length > 0, "non-empty audiences");
      await second.cache.idle();
      assert.equal(second.cache.lastWrites.size, 0, "a loaded base is not written again");
      assert.deepEqual([...first.warnings, ...second.warnings], []);
    } finally {
      await done();
    }
  });

  it("profiles changed, added and deleted between the write and the restart are re-read (changed = their count), equal to a fresh build", async () => {
    const { ts, pop, dir, done } = await setUp();
    try {
      const { t } = await writeFilesThenChange(ts.store, pop, dir);
      await ingestRecords(ts.store, SCOPE, pop.web, [
        { index: 0, value: { _id: "after-write", timestamp: new Date(NOW - 3_600_000).toISOString(), eventType: "purchase", value: 1, identityMap: { ECID: [{ id: "P9", primary: true }] } } },
      ], { now: t });
      await ts.store.deleteByIdentities(SCOPE, [{ namespace: "ecid", id: "P7" }], "ALL");
      const second = cacheWith(dir, { maxOverlayShare: 1 });
      for (const policy of [PDG, NONE]) {
        const snap = await second.cache.get(ts.store, SCOPE, policy, { events: true });
        const st = second.cache.stats(SCOPE, policy)!;
        assert.deepEqual([st.mode, st.changed], ["loaded", 4], `${policy.identityGraph.type}: P4 updated, ADDED, P9's event, P7 deleted`);
        assert.deepEqual(dump(snap), dump(await buildSnapshot(ts.store, SCOPE, policy, { events: true })));
      }
      const results = await job(ts.store, second.cache);
      assert.deepEqual(results, await job(ts.store, new SnapshotCache()));
      const added = await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: "ADDED" });
      assert.deepEqual(results["d3"], [added]);
      const p4 = await ts.store.findProfileId(SCOPE, { namespace: "ecid", id: "P4" });
      assert.ok(results["d2"]!.includes(p4!));
      assert.deepEqual([...second.warnings], []);
    } finally {
      await done();
    }
  });

  it("a truncated file, another format version, another key: one warning naming the reason, a full build, the file rewritten", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const first = cacheWith(dir);
      for (const policy of [PDG, NONE]) await first.cache.get(ts.store, SCOPE, policy, { events: true });
      await first.cache.close();
      const file = first.cache.fileOf(SCOPE, PDG)!;
      const other = first.cache.fileOf(SCOPE, NONE)!;
      const good = readFileSync(file);
      const damage: Array<[string, () => void, RegExp]> = [
        ["truncated", () => truncateSync(file, Math.floor(good.length / 2)), /ignored \(truncated or unfinished: no end marker/],
        ["another format", () => {
          const at = good.lastIndexOf('"format":1,');
          assert.ok(at > 0);
          const b = Buffer.from(good);
          b.write('"format":7,', at, "latin1");
          writeFileSync(file, b);
        }, /ignored \(format version 7, this build reads 1\)/],
        ["another key", () => copyFileSync(other, file), /ignored \(written for another key/],
      ];
      for (const [what, spoil, reason] of damage) {
        writeFileSync(file, good);
        spoil();
        const { cache, warnings } = cacheWith(dir);
        const snap = await cache.get(ts.store, SCOPE, PDG, { events: true });
        assert.equal(cache.stats(SCOPE, PDG)!.mode, "built", what);
        assert.equal(warnings.length, 1, `${what}: ${warnings.join("; ")}`);
        assert.match(warnings[0]!, reason);
        assert.ok(warnings[0]!.includes(file));
        await cache.close();
        const again = cacheWith(dir);
        const reloaded = await again.cache.get(ts.store, SCOPE, PDG, { events: true });
        assert.deepEqual([again.cache.stats(SCOPE, PDG)!.mode, again.warnings], ["loaded", []], `${what}: rewritten`);
        assert.deepEqual(dump(reloaded), dump(snap));
      }
    } finally {
      await done();
    }
  });

  it("a store reopened since the write: the file is loaded (its change log answers for the file's version), changed = the profiles changed before and after the reopen, equal to a fresh build", async () => {
    const { ts, pop, dir, done } = await setUp();
    let reopened: ProfileStore | null = null;
    try {
      // Before the restart: P4 updated, a profile added.
      const { t, first } = await writeFilesThenChange(ts.store, pop, dir);
      await ts.store.close();
      reopened = ts.reopen();
      // After it: an event for P9, P7 deleted.
      await ingestRecords(reopened, SCOPE, pop.web, [
        { index: 0, value: { _id: "after-reopen", timestamp: new Date(NOW - 3_600_000).toISOString(), eventType: "purchase", value: 1, identityMap: { ECID: [{ id: "P9", primary: true }] } } },
      ], { now: t });
      await reopened.deleteByIdentities(SCOPE, [{ namespace: "ecid", id: "P7" }], "ALL");
      const second = cacheWith(dir, { maxOverlayShare: 1 });
      for (const policy of [PDG, NONE]) {
        const snap = await second.cache.get(reopened, SCOPE, policy, { events: true });
        const st = second.cache.stats(SCOPE, policy)!;
        assert.deepEqual([st.mode, st.changed], ["loaded", 4], `${policy.identityGraph.type}: P4 updated, ADDED, P9's event, P7 deleted`);
        assert.deepEqual(dump(snap), dump(await buildSnapshot(reopened, SCOPE, policy, { events: true })));
      }
      const results = await job(reopened, second.cache);
      assert.deepEqual(results, await job(reopened, new SnapshotCache()));
      assert.deepEqual(results["d3"], [await reopened.findProfileId(SCOPE, { namespace: "ecid", id: "ADDED" })]);
      await second.cache.close();
      assert.equal(second.cache.lastWrites.size, 0, "a loaded base is not written again");
      assert.deepEqual([...first.warnings, ...second.warnings], []);
    } finally {
      await reopened?.close();
      await done();
    }
  });

  it("a version older than the store's change log (history trimmed, or a file from before it): one warning and a full build", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const first = cacheWith(dir);
      const snap = await first.cache.get(ts.store, SCOPE, PDG, { events: true });
      await first.cache.close();
      const file = first.cache.fileOf(SCOPE, PDG)!;
      // The same file claiming a version below the log's start (as an older server's file would).
      const f = await openSnapshotFile(file);
      await f.fh.close();
      assert.equal(f.header.version, snap.version);
      // Header JSON, then u32 length, u32 CRC-32 and the 8-byte end marker: same length, CRC redone.
      const b = Buffer.from(readFileSync(file));
      const length = b.readUInt32LE(b.length - 16);
      const start = b.length - 16 - length;
      const older = String(f.header.version - 10 ** 12);
      const header = b.subarray(start, start + length).toString("utf8").replace(`"version":${f.header.version}`, `"version":${older}`);
      assert.equal(Buffer.byteLength(header), length);
      b.write(header, start, "utf8");
      b.writeUInt32LE(crc32(b.subarray(start, start + length)), b.length - 12);
      writeFileSync(file, b);
      const second = cacheWith(dir);
      const rebuilt = await second.cache.get(ts.store, SCOPE, PDG, { events: true });
      assert.equal(second.cache.stats(SCOPE, PDG)!.mode, "built");
      assert.equal(second.warnings.length, 1);
      assert.match(second.warnings[0]!, /ignored \(the change feed cannot tell what changed since version \d+/);
      assert.deepEqual(dump(rebuilt), dump(await buildSnapshot(ts.store, SCOPE, PDG, { events: true })));
      await second.cache.close();
      assert.equal(second.cache.lastWrites.size, 1, "written anew");
    } finally {
      await done();
    }
  });

  it("a file of another profile store is ignored", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const first = cacheWith(dir, { storeIdentity: "embedded:/a/profiles.db" });
      await first.cache.get(ts.store, SCOPE, PDG, { events: true });
      await first.cache.close();
      const second = cacheWith(dir, { storeIdentity: "embedded:/b/profiles.db" });
      await second.cache.get(ts.store, SCOPE, PDG, { events: true });
      assert.deepEqual([second.cache.stats(SCOPE, PDG)!.mode, second.warnings.length], ["built", 1]);
      assert.match(second.warnings[0]!, /written for another profile store/);
      await second.cache.close();
    } finally {
      await done();
    }
  });

  it("two merge policies: two files, each loaded after a restart", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const first = cacheWith(dir);
      for (const policy of [PDG, NONE]) await first.cache.get(ts.store, SCOPE, policy, { events: true });
      await first.cache.close();
      const files = [first.cache.fileOf(SCOPE, PDG)!, first.cache.fileOf(SCOPE, NONE)!].map((f) => path.basename(f));
      assert.notEqual(files[0], files[1]);
      assert.deepEqual(readdirSync(dir).sort(), [...files].sort());
      const second = cacheWith(dir);
      for (const policy of [PDG, NONE]) {
        const snap = await second.cache.get(ts.store, SCOPE, policy, { events: true });
        assert.equal(second.cache.stats(SCOPE, policy)!.mode, "loaded");
        assert.deepEqual(dump(snap), dump(await buildSnapshot(ts.store, SCOPE, policy, { events: true })));
      }
      assert.deepEqual(second.warnings, []);
    } finally {
      await done();
    }
  });

  it("a file that cannot be written is a warning, never a failed get", async () => {
    const { ts, dir, done } = await setUp();
    try {
      const blocker = path.join(dir, "a-file");
      writeFileSync(blocker, "x");
      const { cache, warnings } = cacheWith(path.join(blocker, "snapshots"));
      const snap = await cache.get(ts.store, SCOPE, PDG, { events: true });
      assert.equal(snap.profileCount, 30);
      await cache.close();
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /not written: .*(ENOTDIR|EEXIST)/);
      assert.equal(cache.lastWrites.size, 0);
    } finally {
      await done();
    }
  });
});

describe("batch snapshot files: the server", () => {
  it("writes a preview's snapshot under <dataDir>/snapshots, and none with batchSnapshots.persist false", async () => {
    for (const persist of [true, false]) {
      const h = await startHarness("snapfiles", { patch: (c) => (c.batchSnapshots = { persist }) });
      try {
        const r = await client(h.url).post("/data/core/ups/preview", { predicateExpression: 'homeAddress.countryCode = "US"', graphType: "pdg" });
        assert.equal(r.status, 201);
        // Closing waits for the preview and for the snapshot file being written.
        await h.server.close();
        const dir = path.join(h.store.dataDir, "snapshots");
        assert.deepEqual(existsSync(dir) ? readdirSync(dir).map((f) => path.extname(f)) : [], persist ? [".snapshot"] : [], `persist ${persist}`);
      } finally {
        await h.store.dispose();
      }
    }
  });
});

describe("batch snapshot files: configuration", () => {
  it("defaults to <dataDir>/snapshots; the file and the environment move it or turn it off", () => {
    const cwd = tempDir();
    try {
      const dirOf = (file: unknown, env: NodeJS.ProcessEnv = {}) => {
        if (file === undefined) rmSync(path.join(cwd, "segmentd.config.json"), { force: true });
        else writeFileSync(path.join(cwd, "segmentd.config.json"), JSON.stringify(file));
        return batchSnapshotDir(loadConfig({ cwd, env }));
      };
      assert.equal(dirOf(undefined), path.join(cwd, ".data", "snapshots"));
      assert.equal(dirOf({ dataDir: "d" }), path.join(cwd, "d", "snapshots"));
      assert.equal(dirOf({ batchSnapshots: { dir: "snaps" } }), path.join(cwd, "snaps"));
      assert.equal(dirOf({ batchSnapshots: { persist: false, dir: "snaps" } }), null);
      assert.equal(dirOf(undefined, { SEGMENTD_BATCH_SNAPSHOTS_PERSIST: "0" }), null);
      assert.equal(dirOf({ batchSnapshots: { persist: false } }, { SEGMENTD_BATCH_SNAPSHOTS_PERSIST: "true" }), path.join(cwd, ".data", "snapshots"));
      assert.equal(dirOf(undefined, { SEGMENTD_BATCH_SNAPSHOT_DIR: "/var/snap" }), "/var/snap");
      assert.throws(() => dirOf({ batchSnapshots: { persist: "yes" } }), ConfigError);
      assert.throws(() => dirOf({ batchSnapshots: { path: "x" } }), /unknown key "batchSnapshots.path"/);
      assert.throws(() => dirOf(undefined, { SEGMENTD_BATCH_SNAPSHOTS_PERSIST: "maybe" }), /SEGMENTD_BATCH_SNAPSHOTS_PERSIST must be 1, 0, true or false/);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

/** Both policies' snapshot files written (by the cache returned), then P4 updated and a profile added (at `t`). */
async function writeFilesThenChange(store: ProfileStore, pop: Population, dir: string): Promise<{ t: number; first: ReturnType<typeof cacheWith> }> {
  const first = cacheWith(dir, { maxOverlayShare: 1 });
  for (const policy of [PDG, NONE]) await first.cache.get(store, SCOPE, policy, { events: true });
  await first.cache.close();
  const t = NOW - 500;
  await ingestRecords(store, SCOPE, pop.crm, [
    { index: 0, value: { identityMap: { ECID: [{ id: "P4", primary: true }] }, tier: "changed", _repo: { modifyDate: new Date(t).toISOString() } } },
    { index: 1, value: { identityMap: { ECID: [{ id: "ADDED", primary: true }] }, added: true, person: { age: 77 }, _repo: { modifyDate: new Date(t).toISOString() } } },
  ], { now: t });
  return { t, first };
}
