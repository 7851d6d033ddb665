/**
 * One migration runner for both dialects: an ordered list of versioned
 * migrations, each applied once and recorded in a table (version, name,
 * applied_at), so a database of an earlier version opens and gains only what
 * it lacks.
 */
import type Database from "better-sqlite3";
import type pg from "pg";
import { withTransaction } from "./postgres.js";

export interface Migration {
  version: number;
  name: string;
  statements: string[];
}

export interface MigrationTable {
  /** Table recording the applied versions. */
  table: string;
}

function checkTable(table: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`invalid migrations table ${JSON.stringify(table)}`);
  return table;
}

/** Applies the missing migrations, each in its own transaction. */
export function migrateSqlite(db: Database.Database, migrations: readonly Migration[], o: MigrationTable): void {
  const table = checkTable(o.table);
  db.exec(`CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = new Set((db.prepare(`SELECT version FROM ${table}`).all() as { version: number }[]).map((r) => r.version));
  const record = db.prepare(`INSERT INTO ${table} (version, name, applied_at) VALUES (?, ?, ?)`);
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    db.transaction(() => {
      for (const s of m.statements) db.exec(s);
      record.run(m.version, m.name, Date.now());
    })();
  }
}

/**
 * Applies the missing migrations in one transaction under an advisory lock:
 * of several servers starting at once against one database, one migrates and
 * the others then find every version applied.
 */
export async function migratePostgres(pool: pg.Pool, migrations: readonly Migration[], o: MigrationTable & { lock: string }): Promise<void> {
  const table = checkTable(o.table);
  await withTransaction(
    pool,
    async (c) => {
      await c.query(`CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
      const done = new Set((await c.query<{ version: number }>(`SELECT version FROM ${table}`)).rows.map((r) => r.version));
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        for (const s of m.statements) await c.query(s);
        await c.query(`INSERT INTO ${table} (version, name, applied_at) VALUES ($1, $2, $3)`, [m.version, m.name, Date.now()]);
      }
    },
    { lock: o.lock },
  );
}
