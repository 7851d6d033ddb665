// The storage kit (src/storage-kit/): every embedded store's connection has the
// kit's settings, and the PostgreSQL helpers every store uses keep their
// promises — libpq's default user, a throwing transaction rolls back, sections
// under one advisory lock never overlap, migrations apply once. The SQLite part
// runs in the embedded suite, the PostgreSQL part in the pg suite.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type Database from "better-sqlite3";
import pg from "pg";
import { SqliteBatchRepository } from "../src/batch/store/sqlite-repository.js";
import { openSqliteHygieneStore } from "../src/hygiene/store/sqlite-store.js";
import { EmbeddedProfileStore } from "../src/profiles/embedded/sqlite-store.js";
import { withDefaultUser } from "../src/platform/pg-url.js";
import { migratePostgres, migrateSqlite, type Migration } from "../src/storage-kit/migrations.js";
import { createPool, withAdvisoryLock, withTransaction, type AdvisoryKey } from "../src/storage-kit/postgres.js";
import { openSqlite, SQLITE_BUSY_TIMEOUT_MS } from "../src/storage-kit/sqlite.js";
import { openSqliteStore } from "../src/index.js";
import { testDatabaseUrl, testStoreKind, userlessUrl } from "./helpers/test-store.js";

const SYNC_FULL = 2;
const SYNC_NORMAL = 1;
const TEMP_STORE_MEMORY = 2;

interface Pragmas {
  journal: unknown;
  synchronous: unknown;
  busyTimeout: unknown;
  foreignKeys: unknown;
  tempStore: unknown;
}

function pragmas(db: Database.Database): Pragmas {
  const p = (name: string) => db.pragma(name, { simple: true });
  return { journal: p("journal_mode"), synchronous: p("synchronous"), busyTimeout: p("busy_timeout"), foreignKeys: p("foreign_keys"), tempStore: p("temp_store") };
}

/** A store's own connection (a private field; synchronous and busy_timeout are per connection). */
const connectionOf = (store: object): Database.Database => (store as { db: Database.Database }).db;

const MIGRATIONS: Migration[] = [
  { version: 1, name: "one", statements: ["CREATE TABLE kit_a (x INTEGER)"] },
  { version: 2, name: "two", statements: ["CREATE TABLE kit_b (y INTEGER)"] },
];

if (testStoreKind() === "embedded") {
  describe("storage kit, SQLite", () => {
    let dir = "";
    before(() => {
      dir = mkdtempSync(path.join(tmpdir(), "segmentd-kit-"));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    it("opens a file in WAL mode with synchronous=FULL, foreign keys and the busy timeout; the rest only when asked", () => {
      const plain = openSqlite(path.join(dir, "plain.sqlite"));
      const tuned = openSqlite(path.join(dir, "tuned.sqlite"), { pageSize: 16384, synchronous: "normal", tempStoreMemory: true });
      try {
        assert.deepEqual(pragmas(plain), { journal: "wal", synchronous: SYNC_FULL, busyTimeout: SQLITE_BUSY_TIMEOUT_MS, foreignKeys: 1, tempStore: 0 });
        assert.deepEqual(pragmas(tuned), { journal: "wal", synchronous: SYNC_NORMAL, busyTimeout: SQLITE_BUSY_TIMEOUT_MS, foreignKeys: 1, tempStore: TEMP_STORE_MEMORY });
        assert.equal(tuned.pragma("page_size", { simple: true }), 16384);
      } finally {
        plain.close();
        tuned.close();
      }
    });

    it("each embedded store's connection has the kit's settings (the profile store also temp_store=MEMORY)", async () => {
      const meta = openSqliteStore(path.join(dir, "meta"));
      const hygiene = openSqliteHygieneStore(path.join(dir, "hygiene"));
      const batch = new SqliteBatchRepository(path.join(dir, "batch.db"));
      const profiles = new EmbeddedProfileStore({ path: path.join(dir, "profiles.db"), checkpoints: "inline" });
      try {
        const base = { journal: "wal", synchronous: SYNC_FULL, busyTimeout: SQLITE_BUSY_TIMEOUT_MS, foreignKeys: 1 };
        assert.deepEqual(pragmas(connectionOf(meta)), { ...base, tempStore: 0 });
        assert.deepEqual(pragmas(connectionOf(hygiene)), { ...base, tempStore: 0 });
        assert.deepEqual(pragmas(connectionOf(batch)), { ...base, tempStore: 0 });
        assert.deepEqual(pragmas(connectionOf(profiles)), { ...base, tempStore: TEMP_STORE_MEMORY });
      } finally {
        await Promise.all([meta.close(), hygiene.close(), batch.close(), profiles.close()]);
      }
    });

    it("migrations apply once, in order, each recorded with its name", () => {
      const file = path.join(dir, "migrate.sqlite");
      const db = openSqlite(file);
      try {
        migrateSqlite(db, MIGRATIONS.slice(0, 1), { table: "kit_migrations" });
        db.prepare("INSERT INTO kit_a (x) VALUES (1)").run();
        // A later version: only the new migration runs; the data of the first stays.
        migrateSqlite(db, MIGRATIONS, { table: "kit_migrations" });
        migrateSqlite(db, MIGRATIONS, { table: "kit_migrations" });
        assert.deepEqual(db.prepare("SELECT version, name FROM kit_migrations ORDER BY version").all(), [
          { version: 1, name: "one" },
          { version: 2, name: "two" },
        ]);
        assert.equal(db.prepare("SELECT count(*) AS n FROM kit_a").pluck().get(), 1);
      } finally {
        db.close();
      }
    });

    it("a migration that fails leaves nothing of itself and is not recorded", () => {
      const db = openSqlite(":memory:");
      try {
        const broken: Migration = { version: 3, name: "broken", statements: ["CREATE TABLE kit_c (z INTEGER)", "CREATE TABLE kit_a (x INTEGER)"] };
        assert.throws(() => migrateSqlite(db, [...MIGRATIONS, broken], { table: "kit_migrations" }), /kit_a already exists/);
        assert.deepEqual(db.prepare("SELECT version FROM kit_migrations ORDER BY version").pluck().all(), [1, 2]);
        assert.equal(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'kit_c'").pluck().get(), 0);
      } finally {
        db.close();
      }
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

if (testStoreKind() === "postgres") {
  describe("storage kit, PostgreSQL", () => {
    const schema = `t_kit_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = () => new pg.Client({ connectionString: withDefaultUser(testDatabaseUrl()) });
    let pool: pg.Pool;
    before(async () => {
      const c = admin();
      await c.connect();
      await c.query(`CREATE SCHEMA ${schema}`);
      await c.end();
      pool = createPool(userlessUrl(schema), { max: 6 });
    });
    after(async () => {
      await pool.end();
      const c = admin();
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    });

    it("a pool from a URL naming no user connects as libpq would, also with USER and PGUSER unset", async () => {
      const saved = { USER: process.env.USER, PGUSER: process.env.PGUSER };
      delete process.env.USER;
      delete process.env.PGUSER;
      const own = createPool(userlessUrl(schema), { max: 1 });
      try {
        const r = await own.query<{ u: string; s: string }>("SELECT current_user AS u, current_schema() AS s");
        assert.deepEqual(r.rows[0], { u: userInfo().username, s: schema });
      } finally {
        for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
        else process.env[k] = v;
        await own.end();
      }
    });

    it("a transaction whose function throws rolls back, rethrows, and hands its client back", async () => {
      await pool.query("CREATE TABLE kit_rows (x int)");
      const boom = new Error("boom");
      await assert.rejects(
        withTransaction(pool, async (c) => {
          await c.query("INSERT INTO kit_rows (x) VALUES (1)");
          throw boom;
        }),
        (err) => err === boom,
      );
      assert.equal((await pool.query("SELECT count(*)::int AS n FROM kit_rows")).rows[0].n, 0);
      await withTransaction(pool, async (c) => {
        await c.query("INSERT INTO kit_rows (x) VALUES (2)");
      });
      assert.deepEqual((await pool.query("SELECT x FROM kit_rows")).rows, [{ x: 2 }]);
      assert.equal(pool.totalCount, pool.idleCount);
    });

    /** Runs two sections at once, the second starting while the first holds its lock; returns the order they ran in. */
    async function twoSections(run: (key: AdvisoryKey, fn: () => Promise<void>) => Promise<void>, first: AdvisoryKey, second: AdvisoryKey): Promise<string[]> {
      const log: string[] = [];
      let entered!: () => void;
      const firstIn = new Promise<void>((r) => (entered = r));
      const a = run(first, async () => {
        log.push("a in");
        entered();
        await sleep(300);
        log.push("a out");
      });
      await firstIn;
      const b = run(second, async () => {
        log.push("b in");
        log.push("b out");
      });
      await Promise.all([a, b]);
      return log;
    }

    const inTransaction = (key: AdvisoryKey, fn: () => Promise<void>) => withTransaction(pool, fn, { lock: key });

    it("two transactions under one advisory lock run one after the other; under two locks they overlap", async () => {
      assert.deepEqual(await twoSections(inTransaction, "kit-lock", "kit-lock"), ["a in", "a out", "b in", "b out"]);
      assert.deepEqual(await twoSections(inTransaction, [7466, 1], [7466, 1]), ["a in", "a out", "b in", "b out"]);
      assert.deepEqual(await twoSections(inTransaction, "kit-lock", "kit-other"), ["a in", "b in", "b out", "a out"]);
    });

    it("sections under one session lock run one after the other, and the lock is released after a throw", async () => {
      const session = (key: AdvisoryKey, fn: () => Promise<void>) => withAdvisoryLock(pool, key as string, fn);
      assert.deepEqual(await twoSections(session, "kit-session", "kit-session"), ["a in", "a out", "b in", "b out"]);
      await assert.rejects(withAdvisoryLock(pool, "kit-session", async () => Promise.reject(new Error("set-up failed"))), /set-up failed/);
      // Another session can take it at once: nobody holds it.
      const c = await pool.connect();
      try {
        assert.equal((await c.query("SELECT pg_try_advisory_lock(hashtext('kit-session')) AS ok")).rows[0].ok, true);
        await c.query("SELECT pg_advisory_unlock(hashtext('kit-session'))");
      } finally {
        c.release();
      }
    });

    it("migrations apply once even when two servers start at once, each recorded with its name", async () => {
      const other = createPool(userlessUrl(schema), { max: 2 });
      try {
        await migratePostgres(pool, MIGRATIONS.slice(0, 1), { table: "kit_migrations", lock: "kit_migrations" });
        await pool.query("INSERT INTO kit_a (x) VALUES (1)");
        await Promise.all([
          migratePostgres(pool, MIGRATIONS, { table: "kit_migrations", lock: "kit_migrations" }),
          migratePostgres(other, MIGRATIONS, { table: "kit_migrations", lock: "kit_migrations" }),
        ]);
        const r = await pool.query("SELECT version, name FROM kit_migrations ORDER BY version");
        assert.deepEqual(r.rows, [
          { version: 1, name: "one" },
          { version: 2, name: "two" },
        ]);
        assert.equal((await pool.query("SELECT count(*)::int AS n FROM kit_a")).rows[0].n, 1);
      } finally {
        await other.end();
      }
    });
  });
}
