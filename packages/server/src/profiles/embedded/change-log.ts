// The embedded store's change log: the change feed (change-feed.ts) on disk, so that a version
// handed out before a restart (a batch snapshot file's, say) is still answered after it.
//
// change_log: one row per committed write group and tenant (version, tid, the changed profile
// ids as a JSON array), written inside the group's transaction, so the log and the data commit
// or roll back together (a kill -9 cannot leave one without the other). change_floors: per
// tenant, the version below which rows were trimmed; tid 0 holds the version the log started at.
// Added in place (CREATE ... IF NOT EXISTS) like the rest of the schema: an older file gains it,
// and versions handed out before it existed answer null (they are below the log's start).

import type Database from "better-sqlite3";
import { sandboxNameKey } from "../../platform/tenant.js";
import { ChangeFeed, recordTouched, type FeedHistory } from "../change-feed.js";

export const CHANGE_LOG_SCHEMA = `
CREATE TABLE IF NOT EXISTS change_log (version INTEGER NOT NULL, tid INTEGER NOT NULL, pids TEXT NOT NULL, PRIMARY KEY (version, tid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS change_floors (tid INTEGER PRIMARY KEY, version INTEGER NOT NULL);
`;

/** change_floors' row of the log's start (no tenant has tid 0: tids start at 1). */
const LOG_START = 0;

/** Milliseconds between two trims of the log at most (they run between commits, trimLog). */
export const TRIM_INTERVAL_MS = 2000;

/**
 * Creates the tables and reads the log back as a feed history. A new log starts at `from`
 * (default now × 1024: above any version an earlier process handed out without a log), and no
 * version below `from` is handed out (the worker store's mirror answered with it before the
 * worker opened: worker-store.ts).
 */
export function openChangeLog(db: Database.Database, from?: number, now = Date.now()): FeedHistory {
  db.exec(CHANGE_LOG_SCHEMA);
  db.prepare("INSERT INTO change_floors (tid, version) VALUES (?, ?) ON CONFLICT (tid) DO NOTHING").run(LOG_START, from ?? now * 1024);
  const keys = new Map<number, string>();
  for (const r of db.prepare("SELECT tid, org, sandbox FROM tenants").all() as Array<{ tid: number; org: string; sandbox: string }>) {
    keys.set(r.tid, sandboxNameKey({ orgId: r.org, sandboxName: r.sandbox }));
  }
  let base = 0;
  let current = from ?? 0;
  const floors: FeedHistory["floors"] = [];
  for (const r of db.prepare("SELECT tid, version FROM change_floors").all() as Array<{ tid: number; version: number }>) {
    current = Math.max(current, r.version);
    if (r.tid === LOG_START) base = r.version;
    else if (keys.has(r.tid)) floors.push([keys.get(r.tid)!, r.version]);
  }
  const entries: FeedHistory["entries"] = [];
  for (const r of db.prepare("SELECT version, tid, pids FROM change_log ORDER BY version").iterate() as IterableIterator<{ version: number; tid: number; pids: string }>) {
    const key = keys.get(r.tid);
    if (key === undefined) continue;
    entries.push([r.version, key, (JSON.parse(r.pids) as number[]).map(String)]);
    current = Math.max(current, r.version);
  }
  return { base, current, floors, entries };
}

/**
 * Writes one write group's rows, inside its transaction; returns their version. The version is
 * read from the log itself (its largest, an index seek) as well as from the feed: another
 * connection to the file may have written rows since, and a version is never given twice.
 */
export function appendChangeLog(stmt: (sql: string) => Database.Statement, touched: ReadonlyMap<number, ReadonlySet<number>>, current: number): number | undefined {
  if (![...touched.values()].some((pids) => pids.size > 0)) return undefined;
  const top = (stmt("SELECT max(version) FROM change_log").pluck().get() as number | null) ?? 0;
  const version = Math.max(top, current) + 1;
  const ins = stmt("INSERT INTO change_log (version, tid, pids) VALUES (?, ?, ?)");
  for (const [tid, pids] of touched) if (pids.size > 0) ins.run(version, tid, JSON.stringify([...pids]));
  return version;
}

/** Deletes the rows the feed evicted (tenant key → its new floor) and records the floors, in one transaction. */
export function trimChangeLog(db: Database.Database, stmt: (sql: string) => Database.Statement, evicted: ReadonlyMap<string, number>): void {
  if (evicted.size === 0) return;
  const tids = new Map<string, number>();
  for (const r of stmt("SELECT tid, org, sandbox FROM tenants").all() as Array<{ tid: number; org: string; sandbox: string }>) {
    tids.set(sandboxNameKey({ orgId: r.org, sandboxName: r.sandbox }), r.tid);
  }
  db.transaction(() => {
    for (const [key, floor] of evicted) {
      const tid = tids.get(key);
      if (tid === undefined) continue;
      stmt("DELETE FROM change_log WHERE version <= ? AND tid = ?").run(floor, tid);
      stmt("INSERT INTO change_floors (tid, version) VALUES (?, ?) ON CONFLICT (tid) DO UPDATE SET version = max(version, excluded.version)").run(tid, floor);
    }
  })();
}

type Stmt = (sql: string) => Database.Statement;
type FeedListener = (version: number, changes: ReadonlyMap<string, ReadonlySet<string>>) => void;

/** The store's change feed with its log: primed from it at open, written in each write group, trimmed now and then. */
export class SqliteChangeLog {
  readonly feed: ChangeFeed;
  /** Told of each version the feed records (the worker sends them to its mirror). */
  private listener: FeedListener | null = null;
  private lastTrim = 0;

  constructor(private readonly db: Database.Database, private readonly stmt: Stmt, capacity?: number, from?: number) {
    this.feed = new ChangeFeed(capacity, Date.now(), openChangeLog(db, from));
  }

  /** Inside the write group's transaction: its rows; their version (undefined: no profile changed). */
  append(touched: ReadonlyMap<number, ReadonlySet<number>>): number | undefined {
    return appendChangeLog(this.stmt, touched, this.feed.current);
  }

  /** After the group's COMMIT: the feed (under the rows' version), then the listener. */
  record(touched: ReadonlyMap<number, ReadonlySet<number>>, keyOf: (tid: number) => string | undefined, version: number | undefined): void {
    const changes = recordTouched(this.feed, touched, keyOf, version);
    if (version !== undefined && changes.size > 0) this.listener?.(version, changes);
  }

  onRecord(listener: FeedListener): void {
    this.listener = listener;
  }

  /**
   * Deletes the rows the feed no longer keeps: at most every TRIM_INTERVAL_MS (between commits)
   * and at close (now). Rows not deleted yet (a kill) are evicted again at the next open.
   */
  trim(now: boolean): void {
    if (!now && Date.now() - this.lastTrim < TRIM_INTERVAL_MS) return;
    this.lastTrim = Date.now();
    try {
      trimChangeLog(this.db, this.stmt, this.feed.takeEvicted());
    } catch (error) {
      // Nothing is lost: the rows stay (the feed keeps its floor in memory); the next open trims them.
      console.error("segmentd: change log trim failed:", error);
    }
  }
}
