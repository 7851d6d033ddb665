// The embedded store's WAL checkpoints run on a thread of their own (checkpointer.ts) by default.
// These tests pin what that changes: the writer's connection never checkpoints inside a commit
// (its automatic checkpoint is off), the thread copies committed pages into the database file
// within a few rounds, SQLite's automatic checkpoint comes back if the thread dies, and closing
// the store leaves a checkpointed file with no WAL behind.
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { describe, it } from "node:test";
import type Database from "better-sqlite3";
import type { Worker } from "node:worker_threads";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { withTempFile } from "../helpers/temp-file.js";
import type { MembershipSet } from "../../src/profiles/store.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "CKPT@AdobeOrg", sandboxName: "prod" };
const AT = Date.UTC(2026, 10, 21);

function set(def: string, count: number): MembershipSet {
  return { definitionId: def, entered: Float64Array.from({ length: count }, (_, i) => i + 1), reentered: new Float64Array(0), exited: new Float64Array(0) };
}

/** White box: the store's connection and its checkpoint thread are the behaviour under test. */
function internals(store: EmbeddedProfileStore): { db: Database.Database; checkpointer: { worker: Worker } | null } {
  return store as unknown as { db: Database.Database; checkpointer: { worker: Worker } | null };
}

/** Polls until `check` holds; the bound is generous (a loaded 2-core host delays the thread's interval), never the point. */
async function until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  for (const end = Date.now() + ms; !check();) {
    if (Date.now() > end) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}


await describe("background WAL checkpoints", async () => {
  await it("copy committed pages into the database file while the writer never checkpoints", async () => {
    await withTempFile("bgckpt", async (file) => {
      const store = new EmbeddedProfileStore({ path: file });
      try {
        await store.checkpointsReady();
        assert.equal(internals(store).db.pragma("wal_autocheckpoint", { simple: true }), 0);
        await store.applyMembershipSets(SCOPE, [set("d1", 20_000)], { source: "batch", at: AT });
        const before = statSync(file).size;
        await until("the checkpoint thread copied the write into the file", () => statSync(file).size > before);
        assert.equal(await store.countMembers(SCOPE, "d1").then((c) => c.realized), 20_000);
      } finally {
        await store.close();
      }
      assert.equal(existsSync(`${file}-wal`), false, "the last close checkpointed and removed the WAL");
    });
  });

  await it("give the checkpoints back to SQLite when the thread dies", async () => {
    await withTempFile("bgckpt", async (file) => {
      const store = new EmbeddedProfileStore({ path: file });
      try {
        await store.checkpointsReady();
        await internals(store).checkpointer!.worker.terminate();
        await until("the store noticed", () => internals(store).checkpointer === null);
        assert.equal(internals(store).db.pragma("wal_autocheckpoint", { simple: true }), 1000);
        // Still writes and reads, and closes without waiting for the dead thread.
        await store.applyMembershipSets(SCOPE, [set("d2", 5000)], { source: "batch", at: AT });
        assert.equal((await store.countMembers(SCOPE, "d2")).realized, 5000);
      } finally {
        await store.close();
      }
    });
  });

  await it("keep the WAL near its limit under steady writes: the writer catches up and the WAL starts over", async () => {
    await withTempFile("bgckpt", async (file) => {
      // The thread's rounds never come during the test: only the writer's catch-up can bound the WAL.
      const limit = 512 * 1024;
      const store = new EmbeddedProfileStore({ path: file, checkpointIntervalMs: 3_600_000, walLimitBytes: limit });
      try {
        await store.checkpointsReady();
        let largest = 0;
        for (let round = 0; round < 12; round++) {
          await store.applyMembershipSets(SCOPE, [set(`w${round}`, 4000)], { source: "batch", at: AT });
          largest = Math.max(largest, statSync(`${file}-wal`).size);
        }
        // One write is ~0.3 MB of WAL: twelve of them, never copied back, would pass 3 MB.
        assert.ok(largest < 3 * limit, `the WAL reached ${largest} bytes`);
        assert.equal((await store.countMembers(SCOPE, "w11")).realized, 4000);
      } finally {
        await store.close();
      }
    });
  });

  await it("stay inline when asked, and for an in-memory store", async () => {
    await withTempFile("bgckpt", async (file) => {
      const inline = new EmbeddedProfileStore({ path: file, checkpoints: "inline" });
      const memory = new EmbeddedProfileStore({ path: ":memory:" });
      try {
        assert.equal(internals(inline).checkpointer, null);
        assert.equal(internals(inline).db.pragma("wal_autocheckpoint", { simple: true }), 1000);
        assert.equal(internals(memory).checkpointer, null);
      } finally {
        await inline.close();
        await memory.close();
      }
    });
  });
});
