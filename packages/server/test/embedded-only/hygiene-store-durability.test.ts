// The embedded hygiene store runs with synchronous=FULL in WAL mode, as the
// other embedded stores do (docs/architecture.md): an accepted work order and
// the quota it consumed are on disk when the request returns, even across a
// power loss. synchronous is a per-connection setting, so it is read on the
// store's own connection.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import type Database from "better-sqlite3";
import { openSqliteHygieneStore } from "../../src/hygiene/store/sqlite-store.js";

const SYNCHRONOUS_FULL = 2;

test("the embedded hygiene store opens its file in WAL mode with synchronous=FULL", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-hygiene-sync-"));
  const store = openSqliteHygieneStore(dir);
  try {
    const db = (store as unknown as { db: Database.Database }).db;
    assert.equal(db.pragma("synchronous", { simple: true }), SYNCHRONOUS_FULL);
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
