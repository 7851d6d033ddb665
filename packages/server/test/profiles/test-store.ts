// Opens the profile store the test run asks for: SEGMENTD_TEST_STORE=embedded
// (default, a temporary SQLite file, through the worker-thread store the server
// uses by default), embedded-direct (the same file store on the calling thread)
// or postgres (a fresh schema in SEGMENTD_TEST_DATABASE_URL, dropped afterwards).
// `openTestStore(kind)` picks a kind explicitly (store-direct.test.ts runs the
// direct store whatever the run's setting).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import pg from "pg";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { WorkerProfileStore } from "../../src/profiles/embedded/worker-store.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import type { ProfileStore } from "../../src/profiles/store.js";

export type TestStoreKind = "embedded" | "embedded-direct" | "postgres";
const requested = process.env["SEGMENTD_TEST_STORE"] ?? "embedded";
/** The store family (embedded or postgres): what the suites' expectations depend on. */
export const STORE_KIND = requested === "postgres" ? "postgres" : "embedded";
/** The exact store this run opens. */
export const TEST_STORE: TestStoreKind = requested === "postgres" ? "postgres" : requested === "embedded-direct" ? "embedded-direct" : "embedded";
export const DATABASE_URL = process.env["SEGMENTD_TEST_DATABASE_URL"] ?? "postgres://127.0.0.1:5432/test";

export interface TestStore {
  store: ProfileStore;
  /** Where the data lives (SQLite file or PostgreSQL schema), for openStoreAt in another process. */
  location: string;
  /** Opens a second store on the same data (restart / durability checks). */
  reopen(): ProfileStore;
  cleanup(): Promise<void>;
}

/** Store options a test may set (the same for every kind). */
export interface TestStoreOptions {
  changeFeedCapacity?: number;
}

export function openTestStore(kind: TestStoreKind = TEST_STORE, opts: TestStoreOptions = {}): TestStore {
  if (kind === "postgres") {
    const schema = `t_profiles_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const open = () => openStoreAt(schema, kind, opts);
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
  const open = () => openStoreAt(file, kind, opts);
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
export function openStoreAt(location: string, kind: TestStoreKind = TEST_STORE, opts: TestStoreOptions = {}): ProfileStore {
  switch (kind) {
    case "postgres":
      return new PostgresProfileStore({ connectionString: DATABASE_URL, schema: location, poolSize: 4, ...opts });
    case "embedded-direct":
      return new EmbeddedProfileStore({ path: location, ...opts });
    case "embedded":
      return new WorkerProfileStore({ path: location, ...opts });
  }
}
