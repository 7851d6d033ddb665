/**
 * The store under test, picked from SEGMENTD_TEST_STORE: `embedded` (default,
 * SQLite in a temp dir) or `postgres` (SEGMENTD_TEST_DATABASE_URL, default
 * postgres://127.0.0.1:5432/test), isolated in a fresh schema that is dropped
 * when the store is disposed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before } from "node:test";
import pg from "pg";
import { openPgStore, openSqliteStore, type MetadataStore } from "../../src/index.js";
import { withDefaultUser } from "../../src/platform/pg-url.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";

export type TestStoreKind = "embedded" | "postgres";

export function testStoreKind(): TestStoreKind {
  const k = process.env.SEGMENTD_TEST_STORE ?? "embedded";
  if (k !== "embedded" && k !== "postgres") throw new Error(`SEGMENTD_TEST_STORE must be embedded or postgres, got ${k}`);
  return k;
}

export function testDatabaseUrl(): string {
  return process.env.SEGMENTD_TEST_DATABASE_URL ?? "postgres://127.0.0.1:5432/test";
}

/** The test URL without its user name (if it had one), selecting the schema given. */
export function userlessUrl(schema: string): string {
  const u = new URL(testDatabaseUrl());
  u.username = "";
  u.password = "";
  u.searchParams.set("options", `-c search_path=${schema}`);
  return u.toString();
}

export function withUser(url: string): string {
  const u = new URL(url);
  if (u.username === "") u.username = process.env.PGUSER || "postgres";
  return u.toString();
}

/**
 * A fresh schema for processes that share one database (several hubs, workers): its URL (the
 * schema as search_path) and `drop()`, which removes it and the module schemas the server made
 * beside it (`<schema>_profiles`, `_metadata`, `_batch`, `_hygiene`, `_delivery`).
 */
export async function freshSchema(prefix: string): Promise<{ schema: string; databaseUrl: string; drop(): Promise<void> }> {
  const schema = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: withUser(testDatabaseUrl()) });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const u = new URL(testDatabaseUrl());
  u.searchParams.set("options", `-c search_path=${schema}`);
  return {
    schema,
    databaseUrl: u.toString(),
    async drop() {
      const a = new pg.Client({ connectionString: withUser(testDatabaseUrl()) });
      await a.connect();
      for (const s of ["", "_profiles", "_metadata", "_batch", "_hygiene", "_delivery"]) await a.query(`DROP SCHEMA IF EXISTS ${schema}${s} CASCADE`);
      await a.end();
    },
  };
}

export interface TestStoreHandle {
  kind: TestStoreKind;
  /** For servers opened from config: data dir (embedded) and database URL (postgres, schema-scoped). */
  dataDir: string;
  databaseUrl?: string;
  open(): Promise<MetadataStore>;
  dispose(): Promise<void>;
}

export async function createTestStore(label = "t"): Promise<TestStoreHandle> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `segmentd-${label}-`));
  const kind = testStoreKind();
  if (kind === "embedded") {
    return {
      kind,
      dataDir,
      open: async () => openSqliteStore(dataDir),
      dispose: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const base = withUser(testDatabaseUrl());
  const schema = `t_${label.replace(/[^a-z0-9]/gi, "").toLowerCase().slice(0, 20)}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const u = new URL(base);
  u.searchParams.set("options", `-c search_path=${schema}`);
  const databaseUrl = u.toString();
  return {
    kind,
    dataDir,
    databaseUrl,
    open: () => openPgStore(databaseUrl),
    dispose: async () => {
      const a = new pg.Client({ connectionString: base });
      await a.connect();
      await a.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      // The deliverer's state schema (moduleSchema "<schema>_delivery"), once a webhook flow existed.
      await a.query(`DROP SCHEMA IF EXISTS ${schema}_delivery CASCADE`);
      await a.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Drops a schema a test made in the test database (its tables and all). */
export async function dropTestSchema(schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: withDefaultUser(testDatabaseUrl()) });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await c.end();
  }
}

/**
 * A PostgreSQL profile store in a schema of its own for the enclosing describe: opened before its
 * tests, closed and dropped after them. Call inside `describe`.
 */
export function pgStoreForSuite(prefix: string): () => PostgresProfileStore {
  const schema = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  let store: PostgresProfileStore | undefined;
  before(() => {
    store = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
  });
  after(async () => {
    await store?.close();
    await dropTestSchema(schema);
  });
  return () => store!;
}
