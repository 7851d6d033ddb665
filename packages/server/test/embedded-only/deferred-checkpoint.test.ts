// A batch job's membership write (applyMembershipSets of at least 1,000 changes) commits with
// the automatic WAL checkpoint switched off and checkpoints in a later turn. These tests pin
// that the commit does not copy the WAL into the database file, that the deferred checkpoint
// does in a later turn, and that the setting comes back (after a success and after a failure).
// (With the default background checkpoints, checkpointer.test.ts, no commit checkpoints at all.)
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import type { MembershipSet } from "../../src/profiles/store.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "CKPT@AdobeOrg", sandboxName: "prod" };
const AT = Date.UTC(2026, 10, 21);

function set(def: string, from: number, count: number): MembershipSet {
  return { definitionId: def, entered: Float64Array.from({ length: count }, (_, i) => from + i), reentered: new Float64Array(0), exited: new Float64Array(0) };
}

/** The store's own connection (white box: the pragma is the behaviour under test). */
function connectionOf(store: EmbeddedProfileStore): Database.Database {
  return (store as unknown as { db: Database.Database }).db;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A store on a fresh file, a second connection to the same file, both closed and removed after `fn`. */
async function withStore(fn: (store: EmbeddedProfileStore, other: Database.Database, file: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-ckpt-"));
  const file = path.join(dir, "profiles.sqlite");
  // Inline checkpoints: the deferral applies when SQLite's automatic checkpoint is on.
  const store = new EmbeddedProfileStore({ path: file, checkpoints: "inline" });
  const other = new Database(file);
  try {
    await fn(store, other, file);
  } finally {
    other.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await describe("deferred WAL checkpoint of bulk membership writes", async () => {
  await it("restores wal_autocheckpoint and checkpoints in a later turn", async () => {
    await withStore(async (store, other, file) => {
      await store.applyMembershipSets(SCOPE, [set("d0", 1, 10)], { source: "batch", at: AT }); // creates the tables' pages
      await nextTurn();
      const before = statSync(file).size;
      const counts = await store.applyMembershipSets(SCOPE, [set("d1", 1, 3000), set("d2", 1, 2000)], { source: "batch", at: AT });
      assert.deepEqual([counts.realized, counts.exited], [5000, 0]);
      assert.equal(connectionOf(store).pragma("wal_autocheckpoint", { simple: true }), 1000);
      // Committed (another connection reads it from the WAL) but not yet copied into the file.
      assert.equal((other.prepare("SELECT count(*) AS n FROM memberships").get() as { n: number }).n, 5010);
      assert.equal(statSync(file).size, before);
      await nextTurn();
      await nextTurn();
      assert.ok(statSync(file).size > before, "the deferred checkpoint copied the write into the database file");
    });
  });

  await it("restores wal_autocheckpoint after a write that fails", async () => {
    await withStore(async (store, other) => {
      other.exec("CREATE TRIGGER refuse_d3 BEFORE INSERT ON transitions WHEN NEW.def = (SELECT code FROM definition_codes WHERE id = 'd3') BEGIN SELECT RAISE(ABORT, 'refused'); END");
      await assert.rejects(store.applyMembershipSets(SCOPE, [set("d3", 1, 2000)], { source: "batch", at: AT }), /refused/);
      assert.equal(connectionOf(store).pragma("wal_autocheckpoint", { simple: true }), 1000);
      assert.equal((other.prepare("SELECT count(*) AS n FROM memberships").get() as { n: number }).n, 0);
    });
  });
});
