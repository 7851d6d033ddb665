// The embedded store keeps memberships and transitions with integer codes (membership-codes.ts).
// These tests pin what a user sees of that: every value reads back exactly as written (including
// a lastQualificationTime that is not in the canonical ISO form), a definition never stored reads
// as empty, and a data directory written with the older text tables opens with its memberships
// and transitions converted, once, keeping a time that is not in the canonical ISO form as written.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import Database from "better-sqlite3";
import { decodeTime, encodeTime } from "../../src/profiles/embedded/membership-codes.js";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { readOnlyDb } from "../helpers/read-only-db.js";
import { withTempFile } from "../helpers/temp-file.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "CODES@AdobeOrg", sandboxName: "prod" };

/** The text tables as releases before the compact ones created them. */
const TEXT_TABLES = `
CREATE TABLE tenants (tid INTEGER PRIMARY KEY, org TEXT NOT NULL, sandbox TEXT NOT NULL, UNIQUE (org, sandbox));
CREATE TABLE memberships (tid INTEGER NOT NULL, pid INTEGER NOT NULL, def TEXT NOT NULL, status TEXT NOT NULL,
  lqt TEXT NOT NULL, PRIMARY KEY (tid, pid, def)) WITHOUT ROWID;
CREATE INDEX memberships_def ON memberships (tid, def, status, pid);
CREATE TABLE transitions (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, pid INTEGER NOT NULL, def TEXT NOT NULL,
  from_status TEXT, to_status TEXT NOT NULL, source TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX transitions_def_at ON transitions (tid, def, at);
CREATE INDEX transitions_at ON transitions (tid, at);
`;


await describe("embedded membership codes", async () => {
  await it("stores canonical times as epoch ms and any other text as itself", () => {
    assert.equal(encodeTime("2026-11-21T10:00:00.000Z"), Date.UTC(2026, 10, 21, 10));
    assert.equal(encodeTime("2026-11-21T10:00:00Z"), "2026-11-21T10:00:00Z");
    assert.equal(encodeTime("not a time"), "not a time");
    assert.equal(decodeTime(Date.UTC(2026, 10, 21, 10)), "2026-11-21T10:00:00.000Z");
    assert.equal(decodeTime("2026-11-21T10:00:00Z"), "2026-11-21T10:00:00Z");
  });

  await it("reads back what applyMembershipChanges wrote, and nothing for an unknown definition", async () => {
    await withTempFile("codes", async (file) => {
      const store = new EmbeddedProfileStore({ path: file });
      try {
        const t = await store.applyMembershipChanges(SCOPE, [
          { profileId: "7", definitionId: "def-a", status: "realized", source: "edge", at: Date.UTC(2026, 10, 21, 10) },
          { profileId: "7", definitionId: "def-b", status: "realized", source: "streaming", at: Date.UTC(2026, 10, 21, 11) },
        ]);
        assert.equal(t.length, 2);
        await store.applyMembershipChanges(SCOPE, [{ profileId: "7", definitionId: "def-b", status: "exited", source: "batch", at: Date.UTC(2026, 10, 21, 12) }]);
        assert.deepEqual(await store.getMemberships(SCOPE, "7"), [
          { profileId: "7", definitionId: "def-a", status: "realized", lastQualificationTime: "2026-11-21T10:00:00.000Z" },
          { profileId: "7", definitionId: "def-b", status: "exited", lastQualificationTime: "2026-11-21T12:00:00.000Z" },
        ]);
        const transitions = await store.listTransitions(SCOPE, { definitionId: "def-b" });
        assert.deepEqual(transitions.map((x) => [x.from, x.to, x.source]), [[null, "realized", "streaming"], ["realized", "exited", "batch"]]);
        assert.deepEqual((await store.listTransitions(SCOPE, { sources: ["edge"] })).map((x) => x.definitionId), ["def-a"]);
        assert.deepEqual(await store.listMemberIds(SCOPE, "never-stored", "realized"), []);
        assert.deepEqual(await store.countMembers(SCOPE, "never-stored"), { realized: 0, exited: 0 });
        assert.deepEqual(await store.listMembers(SCOPE, "never-stored"), []);
        assert.deepEqual(await store.listTransitions(SCOPE, { definitionId: "never-stored" }), []);
      } finally {
        await store.close();
      }
    });
  });

  await it("converts a data directory's text membership tables when it opens, once", async () => {
    await withTempFile("codes", async (file) => {
      const old = new Database(file);
      old.exec(TEXT_TABLES);
      old.prepare("INSERT INTO tenants (tid, org, sandbox) VALUES (1, ?, ?)").run(SCOPE.orgId, SCOPE.sandboxName);
      const put = old.prepare("INSERT INTO memberships VALUES (1, ?, ?, ?, ?)");
      put.run(3, "def-x", "realized", "2026-11-20T08:00:00.000Z");
      put.run(3, "def-y", "exited", "2026-11-20T09:00:00Z");
      put.run(4, "def-x", "exited", "2026-11-20T10:00:00.000Z");
      const tr = old.prepare("INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at) VALUES (1, ?, ?, ?, ?, ?, ?)");
      tr.run(3, "def-x", null, "realized", "batch", 1000);
      tr.run(4, "def-x", "realized", "exited", "edge", 2000);
      tr.run(9, "def-gone", null, "realized", "streaming", 3000);
      old.close();

      for (let open = 0; open < 2; open++) {
        const store = new EmbeddedProfileStore({ path: file });
        try {
          assert.deepEqual(await store.getMemberships(SCOPE, "3"), [
            { profileId: "3", definitionId: "def-x", status: "realized", lastQualificationTime: "2026-11-20T08:00:00.000Z" },
            { profileId: "3", definitionId: "def-y", status: "exited", lastQualificationTime: "2026-11-20T09:00:00Z" },
          ]);
          const t = (await store.listTransitions(SCOPE)).map((x) => [x.profileId, x.definitionId, x.from, x.to, x.source, x.at]);
          assert.deepEqual(t.slice(0, 3), [
            ["3", "def-x", null, "realized", "batch", new Date(1000).toISOString()],
            ["4", "def-x", "realized", "exited", "edge", new Date(2000).toISOString()],
            ["9", "def-gone", null, "realized", "streaming", new Date(3000).toISOString()],
          ]);
          if (open === 0) {
            assert.deepEqual(await store.countMembers(SCOPE, "def-x"), { realized: 1, exited: 1 });
            assert.deepEqual(await store.listMemberIds(SCOPE, "def-x", "exited"), ["4"]);
            // New writes go on from the converted rows (4 re-enters def-x).
            const added = await store.applyMembershipChanges(SCOPE, [{ profileId: "4", definitionId: "def-x", status: "realized", source: "batch", at: Date.UTC(2026, 10, 21) }]);
            assert.deepEqual(added.map((x) => x.from), ["exited"]);
          }
          // The second open converts nothing again and sees the write made after the first.
          assert.deepEqual(await store.countMembers(SCOPE, "def-x"), { realized: 2, exited: 0 });
          assert.equal(t.length, open === 0 ? 3 : 4);
        } finally {
          await store.close();
        }
        const [tables, defType] = readOnlyDb(file, (check) => [
          check.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%_text'").pluck().all(),
          check.prepare("SELECT type FROM pragma_table_info('memberships') WHERE name = 'def'").pluck().get(),
        ]);
        assert.deepEqual(tables, [], "the text tables are gone");
        assert.equal(defType, "INTEGER");
      }
    });
  });
});
