/**
 * One small async SQL interface over both stores for the modules that keep their own state
 * tables (the deliverer's state, file exports): statements written once with $1…$n, run on
 * SQLite (one connection, statements and transactions queued, prepared once, $n bound
 * positionally) or on a PostgreSQL pool (table names qualified with the module's schema).
 */
import type Database from "better-sqlite3";
import type pg from "pg";
import { withTransaction } from "./postgres.js";

export type Row = Record<string, unknown>;
export type Query = (sql: string, params?: unknown[]) => Promise<Row[]>;

export interface DollarSql {
  query: Query;
  tx<T>(fn: (q: Query) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function sqliteDollarSql(db: Database.Database): DollarSql {
  // One connection: statements and transactions are queued so that an await inside a
  // transaction never lets another caller's statement into it.
  let chain: Promise<unknown> = Promise.resolve();
  // Prepared once per statement text (preparing cost more than running them).
  const cache = new Map<string, { st: Database.Statement; order: number[] }>();
  const run = (sql: string, params: unknown[] = []): Row[] => {
    let c = cache.get(sql);
    if (cache.size > 200) cache.clear(); // statement texts are fixed; bounded anyway
    if (c === undefined) {
      // $n as positional `?` in order of appearance (a statement may use one value twice): no
      // named-parameter object built per call.
      const order: number[] = [];
      const st = db.prepare(sql.replace(/\$(\d+)/g, (_, n: string) => (order.push(Number(n) - 1), "?")));
      cache.set(sql, c = { st, order });
    }
    const args = c.order.map((i) => params[i]);
    return c.st.reader ? (c.st.all(...args) as Row[]) : (c.st.run(...args), []);
  };
  const queued = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = chain.then(fn, fn);
    chain = p.catch(() => undefined);
    return p;
  };
  return {
    query: (sql, params) => queued(async () => run(sql, params)),
    tx: (fn) => queued(async () => {
      db.exec("BEGIN IMMEDIATE");
      try {
        const out = await fn(async (sql, params) => run(sql, params));
        db.exec("COMMIT");
        return out;
      } catch (err) {
        db.exec("ROLLBACK");
        throw err;
      }
    }),
    close: async () => {
      await chain;
      db.close();
    },
  };
}

/** `tables` matches the module's table names, which are qualified with `schema`. */
export function pgDollarSql(pool: pg.Pool, schema: string, tables: RegExp): DollarSql {
  const qualify = (sql: string) => sql.replace(tables, (t) => `"${schema}".${t}`);
  return {
    query: async (sql, params = []) => (await pool.query(qualify(sql), params)).rows as Row[],
    tx: (fn) => withTransaction(pool, (c) => fn(async (sql, params = []) => (await c.query(qualify(sql), params)).rows as Row[])),
    close: () => pool.end(),
  };
}
