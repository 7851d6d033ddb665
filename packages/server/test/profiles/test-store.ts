// Opens the profile store the test run asks for: SEGMENTD_TEST_STORE=embedded
// (default, a temporary SQLite file) or postgres (a fresh schema in
// SEGMENTD_TEST_DATABASE_URL, dropped afterwards).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import pg from "pg";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import type { ProfileStore } from "../../src/profiles/store.js";

export const STORE_KIND = (process.env["SEGMENTD_TEST_STORE"] ?? "embedded") === "postgres" ? "postgres" : "embedded";
export const DATABASE_URL = process.env["SEGMENTD_TEST_DATABASE_URL"] ?? "postgres://127.0.0.1:5432/test";

export interface TestStore {
  store: ProfileStore;
  /** Where the data lives (SQLite file or PostgreSQL schema), for openStoreAt in another process. */
  location: string;
  /** Opens a second store on the same data (restart / durability checks). */
  reopen(): ProfileStore;
  cleanup(): Promise<void>;
}

export function openTestStore(): TestStore {
  if (STORE_KIND === "postgres") {
    const schema = `t_profiles_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const open = () => openStoreAt(schema);
    const store = open();
    return {
      store,
      location: schema,
      reopen: open,
      async cleanup() {
        await store.close();
        const url = new URL(DATABASE_URL);
        if (url.username === "") url.username = process.env["PGUSER"] || process.env["USER"] || userInfo().username;
        const c = new pg.Client({ connectionString: url.toString() });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await c.end();
      },
    };
  }
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-profiles-"));
  const file = path.join(dir, "profiles.db");
  const open = () => openStoreAt(file);
  const store = open();
  return {
    store,
    location: file,
    reopen: open,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Opens the store of this test run at a location from TestStore.location. */
export function openStoreAt(location: string): ProfileStore {
  return STORE_KIND === "postgres"
    ? new PostgresProfileStore({ connectionString: DATABASE_URL, schema: location, poolSize: 4 })
    : new EmbeddedProfileStore({ path: location });
}
