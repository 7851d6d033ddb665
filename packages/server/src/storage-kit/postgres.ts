/**
 * How every PostgreSQL store connects and runs transactions: one pool factory
 * (libpq's default user, see platform/pg-url.ts; an idle client's lost
 * connection never crashes the process) and one transaction helper with
 * optional advisory locks, so writes that must not race are serialized across
 * every server process sharing the database.
 */
import pg from "pg";
import { withDefaultUser } from "../platform/pg-url.js";

export interface PoolOptions {
  /** Connections at most. */
  max: number;
  /** Sets search_path on every connection (a URL's own `options` take precedence). */
  searchPath?: string;
  /** Type parsers for this pool only. */
  types?: pg.CustomTypesConfig;
}

export function createPool(url: string, options: PoolOptions): pg.Pool {
  const config: pg.PoolConfig = { connectionString: withDefaultUser(url), max: options.max };
  if (options.searchPath !== undefined) config.options = `-c search_path=${options.searchPath}`;
  if (options.types !== undefined) config.types = options.types;
  const pool = new pg.Pool(config);
  // An idle client losing its connection must not crash the process; the next query reports it.
  pool.on("error", () => {});
  return pool;
}

/** An advisory lock: a name (hashed with hashtext) or PostgreSQL's two-integer form. */
export type AdvisoryKey = string | readonly [number, number];

/** Takes a transaction-scoped advisory lock: held until the transaction ends, whichever way. */
export async function lockForTransaction(c: pg.ClientBase, key: AdvisoryKey): Promise<void> {
  if (typeof key === "string") await c.query("SELECT pg_advisory_xact_lock(hashtext($1))", [key]);
  else await c.query("SELECT pg_advisory_xact_lock($1, $2)", [key[0], key[1]]);
}

export interface TransactionOptions {
  /** Taken first, for the whole transaction; null or absent: none. */
  lock?: AdvisoryKey | null;
  /** One read-only REPEATABLE READ snapshot (a count and its page agree). */
  snapshot?: boolean;
}

/** Runs `fn` in one transaction on one client: COMMIT when it resolves, ROLLBACK when it throws. */
export async function withTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query(options.snapshot === true ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN");
    if (options.lock !== undefined && options.lock !== null) await lockForTransaction(c, options.lock);
    const out = await fn(c);
    await c.query("COMMIT");
    return out;
  } catch (err) {
    await c.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

/**
 * Runs `fn` on one client holding a session-level advisory lock (schema set-up
 * that must not run twice at once, and may not fit in one transaction).
 */
export async function withAdvisoryLock<T>(pool: pg.Pool, key: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  let healthy = true;
  try {
    await c.query("SELECT pg_advisory_lock(hashtext($1))", [key]);
    try {
      return await fn(c);
    } finally {
      // A client that could not unlock is discarded, never handed out still holding the lock.
      await c.query("SELECT pg_advisory_unlock(hashtext($1))", [key]).catch(() => {
        healthy = false;
      });
    }
  } finally {
    c.release(!healthy);
  }
}

/**
 * Runs schema DDL (statements ending `;` at a line's end, no `$$` bodies) one statement at a
 * time. Sent as one string they are one transaction: `CREATE INDEX IF NOT EXISTS` takes a share
 * lock on its table even when the index exists, and holding those of several tables while a
 * running writer holds one and waits for another deadlocks — a process restarting beside others
 * that write (a killed worker) failed its start so. One statement holds one table's lock at a time.
 */
export async function runSchema(c: pg.ClientBase, sql: string): Promise<void> {
  for (const statement of sql.split(/;[ \t]*\r?\n/)) {
    const body = statement.replace(/^\s*--.*$/gm, "").trim();
    if (body !== "") await c.query(body.endsWith(";") ? body : `${body};`);
  }
}
