// The PostgreSQL store's change log: the change feed (change-feed.ts) in tables, so that a
// version handed out before a restart (a batch snapshot file's) is still answered after it.
// Same tables as the embedded store's (embedded/change-log.ts): change_log, one row per write
// group and tenant, written in the group's transaction; change_floors, the trimmed floors (tid
// 0: the version the log started at).
//
// Versions come from a sequence, but several processes may write one database, and a sequence
// value taken by a transaction that commits after one holding a higher value would be missed by
// a reader that already saw the higher one. So a transaction-scoped advisory lock is taken just
// before the version is drawn and held until COMMIT: versions commit in the order they are drawn.
// It serializes only the tail of each write group (the insert and the commit) across processes;
// within a process groups commit one at a time anyway. The lock is taken last, after the tenant
// locks, and nothing waits while holding it, so it cannot deadlock.
import type pg from "pg";
import { lockForTransaction, withTransaction } from "../../storage-kit/postgres.js";
import { sandboxNameKey } from "../../platform/tenant.js";
import type { FeedHistory } from "../change-feed.js";
import { queryRows } from "./pg-context.js";

export const PG_CHANGE_LOG_SCHEMA = `
CREATE TABLE IF NOT EXISTS change_log (version int8 NOT NULL, tid int NOT NULL, pids text NOT NULL, PRIMARY KEY (version, tid));
CREATE TABLE IF NOT EXISTS change_floors (tid int PRIMARY KEY, version int8 NOT NULL);
`;

/** Milliseconds between two trims of the log at most (after a commit, in the background). */
export const PG_TRIM_INTERVAL_MS = 2000;

/** The advisory lock ordering the log's versions, per schema (schemas are separate stores). */
export function changeLogLock(schema: string): string {
  return `segmentd_change_log ${schema}`;
}

/** Creates the tables and the version sequence (in the schema set-up, under its lock). A new log starts at now × 1024. */
export async function createChangeLog(c: pg.ClientBase, now = Date.now()): Promise<void> {
  const start = now * 1024;
  await c.query(PG_CHANGE_LOG_SCHEMA);
  // The first version drawn is start + 1: a `since` of exactly `start` (a feed with no change yet) must see it.
  await c.query(`CREATE SEQUENCE IF NOT EXISTS change_log_version AS int8 START WITH ${start + 1}`);
  await c.query("INSERT INTO change_floors (tid, version) VALUES (0, $1) ON CONFLICT (tid) DO NOTHING", [start]);
}

/** Reads the log back as a feed history, under the log's lock: no version drawn and not yet committed is skipped. */
export async function readChangeLog(pool: pg.Pool, lock: string): Promise<FeedHistory> {
  return withTransaction(pool, async (c) => {
    const keys = new Map<number, string>();
    for (const r of await queryRows<{ tid: number; org: string; sandbox: string }>(c, "SELECT tid, org, sandbox FROM tenants")) {
      keys.set(r.tid, sandboxNameKey({ orgId: r.org, sandboxName: r.sandbox }));
    }
    let base = 0;
    let current = 0;
    const floors: FeedHistory["floors"] = [];
    for (const r of await queryRows<{ tid: number; version: number }>(c, "SELECT tid, version FROM change_floors")) {
      current = Math.max(current, r.version);
      if (r.tid === 0) base = r.version;
      else if (keys.has(r.tid)) floors.push([keys.get(r.tid)!, r.version]);
    }
    const entries: FeedHistory["entries"] = [];
    for (const r of await queryRows<{ version: number; tid: number; pids: string }>(c, "SELECT version, tid, pids FROM change_log ORDER BY version")) {
      const key = keys.get(r.tid);
      current = Math.max(current, r.version);
      if (key !== undefined) entries.push([r.version, key, (JSON.parse(r.pids) as number[]).map(String)]);
    }
    return { base, current, floors, entries };
  }, { lock });
}

/** Writes one write group's rows, last in its transaction; returns their version (undefined: nothing changed). */
export async function appendChangeLog(c: pg.PoolClient, lock: string, touched: ReadonlyMap<number, ReadonlySet<number>>): Promise<number | undefined> {
  const tids: number[] = [];
  const pids: string[] = [];
  for (const [tid, set] of touched) {
    if (set.size === 0) continue;
    tids.push(tid);
    pids.push(JSON.stringify([...set]));
  }
  if (tids.length === 0) return undefined;
  await lockForTransaction(c, lock);
  const rows = await queryRows<{ version: number }>(c, `WITH v AS (SELECT nextval('change_log_version') AS version)
    INSERT INTO change_log (version, tid, pids) SELECT v.version, t.tid, t.pids FROM v, unnest($1::int[], $2::text[]) AS t(tid, pids) RETURNING version`, [tids, pids]);
  return rows[0]!.version;
}

/** Deletes the rows the feed evicted (tenant key → its new floor) and records the floors, in one transaction. */
export async function trimChangeLog(pool: pg.Pool, evicted: ReadonlyMap<string, number>): Promise<void> {
  if (evicted.size === 0) return;
  await withTransaction(pool, async (c) => {
    const tids = new Map<string, number>();
    for (const r of await queryRows<{ tid: number; org: string; sandbox: string }>(c, "SELECT tid, org, sandbox FROM tenants")) {
      tids.set(sandboxNameKey({ orgId: r.org, sandboxName: r.sandbox }), r.tid);
    }
    for (const [key, floor] of evicted) {
      const tid = tids.get(key);
      if (tid === undefined) continue;
      await c.query("DELETE FROM change_log WHERE version <= $1 AND tid = $2", [floor, tid]);
      await c.query("INSERT INTO change_floors (tid, version) VALUES ($1, $2) ON CONFLICT (tid) DO UPDATE SET version = GREATEST(change_floors.version, EXCLUDED.version)", [tid, floor]);
    }
  });
}
