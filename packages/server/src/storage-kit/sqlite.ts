/**
 * How every embedded store opens its SQLite file, so the settings cannot drift
 * apart again: WAL (readers never block the writer), `synchronous=FULL` (an
 * acknowledged write survives power loss, not only a killed process; a store
 * that wants NORMAL must say why) and a busy timeout, so several processes
 * sharing a file wait for the write lock instead of failing.
 */
import Database from "better-sqlite3";

/** How long a connection waits for another connection's lock before SQLITE_BUSY. */
export const SQLITE_BUSY_TIMEOUT_MS = 5000;

export interface SqliteOptions {
  /** Page size of a new file (ignored for a file that exists); applied before WAL mode writes the first page. */
  pageSize?: number;
  /** Default "full". */
  synchronous?: "full" | "normal";
  /** Keep temporary tables and sort spills in memory. */
  tempStoreMemory?: boolean;
}

/** Opens (creating if needed) a database file, or ":memory:", with the shared settings. */
export function openSqlite(file: string, options: SqliteOptions = {}): Database.Database {
  const db = new Database(file);
  try {
    if (options.pageSize !== undefined) db.pragma(`page_size = ${options.pageSize}`);
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`);
    // better-sqlite3's build default too; stated so that it does not depend on the build.
    db.pragma("foreign_keys = ON");
    if (options.tempStoreMemory === true) db.pragma("temp_store = MEMORY");
    db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * A second, read-only connection to a file another connection writes (long scans):
 * its own page cache, never a writer.
 */
export function openSqliteReader(file: string, options: { cacheKiB: number }): Database.Database {
  const db = new Database(file);
  db.pragma("query_only = 1");
  db.pragma(`cache_size = -${options.cacheKiB}`);
  db.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  return db;
}
