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
import { lockForTransaction, runSchema, withTransaction } from "../../storage-kit/postgres.js";
import { sandboxNameKey } from "../../platform/tenant.js";
import type { ChangeFeed, FeedHistory } from "../change-feed.js";
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
  await runSchema(c, PG_CHANGE_LOG_SCHEMA);
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

/** Commits that drew a version and the time they waited for the log's lock (issue #43: is it harmless with several hubs?). */
export interface ChangeLogStats {
  commits: number;
  lockWaitMs: number;
}

/** Writes one write group's rows, last in its transaction; returns their version (undefined: nothing changed). */
export async function appendChangeLog(c: pg.PoolClient, lock: string, touched: ReadonlyMap<number, ReadonlySet<number>>, stats?: ChangeLogStats): Promise<number | undefined> {
  const tids: number[] = [];
  const pids: string[] = [];
  for (const [tid, set] of touched) {
    if (set.size === 0) continue;
    tids.push(tid);
    pids.push(JSON.stringify([...set]));
  }
  if (tids.length === 0) return undefined;
  const t0 = performance.now();
  await lockForTransaction(c, lock);
  if (stats !== undefined) {
    stats.commits++;
    stats.lockWaitMs += performance.now() - t0;
  }
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

/**
 * The profiles of a tenant whose data changed after `since`, read from the log itself (every
 * process's writes, not only this one's as the in-memory feed): a streaming worker's backfill
 * fence (cluster/partition-backfill-apply.ts). Null when the log no longer reaches back to
 * `since` (trimmed past it, or started after it): the caller treats every profile as changed.
 * The rows are read before the floors: a trim that deleted rows committed its new floor with them.
 */
export async function changedAfterInLog(pool: pg.Pool, tid: number, since: number): Promise<Set<string> | null> {
  const rows = await queryRows<{ pids: string }>(pool, "SELECT pids FROM change_log WHERE tid = $1 AND version > $2", [tid, since]);
  const floors = await queryRows<{ version: string | number }>(pool, "SELECT version FROM change_floors WHERE tid = 0 OR tid = $1", [tid]);
  if (floors.some((f) => Number(f.version) > since)) return null;
  const out = new Set<string>();
  for (const r of rows) for (const pid of JSON.parse(r.pids) as number[]) out.add(String(pid));
  return out;
}

/** Rows read per statement when the log is read after a version (readChangeLogAfter). */
const TAIL_CHUNK = 10_000;

/**
 * The log's rows after `after`, in version order, with each tenant's key (several hubs write one
 * log: what the others committed). No lock is needed: versions commit in the order they are drawn,
 * so a read that sees one sees every lower one. `through`: the highest version read (else `after`).
 */
export async function readChangeLogAfter(pool: pg.Pool, after: number, keyOf: (tids: readonly number[]) => Promise<Map<number, string>>): Promise<{ entries: Array<[number, string, string[]]>; through: number }> {
  const entries: Array<[number, string, string[]]> = [];
  let through = after;
  for (;;) {
    const rows = await queryRows<{ version: number; tid: number; pids: string }>(pool, "SELECT version, tid, pids FROM change_log WHERE version > $1 ORDER BY version LIMIT $2", [through, TAIL_CHUNK]);
    if (rows.length === 0) break;
    const keys = await keyOf([...new Set(rows.map((r) => r.tid))]);
    for (const r of rows) {
      const key = keys.get(r.tid);
      if (key !== undefined) entries.push([Number(r.version), key, (JSON.parse(r.pids) as number[]).map(String)]);
    }
    through = Number(rows[rows.length - 1]!.version);
    if (rows.length < TAIL_CHUNK) break;
  }
  return { entries, through };
}

/**
 * Several hubs on one database: the change log read after the version this process has seen,
 * into its feed (ChangeFeed.learn) — every `everyMs`, and on demand (catchUp: a read that starts
 * after the call, coalesced with others waiting), so the batch snapshot's refresh sees what any
 * hub committed before the job.
 */
export class ChangeLogTail {
  private reading: Promise<void> = Promise.resolve();
  private queued: Promise<void> | null = null;
  private readonly timer: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly pool: pg.Pool, private readonly feed: ChangeFeed, private through: number,
    /** The store's tenant keys by id, shared (tenants another process created are read once). */
    private readonly keys: Map<number, string>, everyMs = 500) {
    feed.shareLog(through);
    this.timer = setInterval(() => void this.catchUp().catch(() => undefined), everyMs);
    this.timer.unref();
  }

  catchUp(): Promise<void> {
    if (this.queued !== null) return this.queued;
    const p: Promise<void> = this.reading.then(async () => {
      if (this.queued === p) this.queued = null;
      if (this.stopped) return;
      const r = await readChangeLogAfter(this.pool, this.through, (tids) => this.keysOf(tids));
      this.feed.learn(r.entries, r.through);
      this.through = r.through;
    });
    this.queued = p;
    this.reading = p.catch(() => undefined);
    return p;
  }

  private async keysOf(tids: readonly number[]): Promise<Map<number, string>> {
    const missing = tids.filter((t) => !this.keys.has(t));
    if (missing.length > 0) {
      for (const r of await queryRows<{ tid: number; org: string; sandbox: string }>(this.pool, "SELECT tid, org, sandbox FROM tenants WHERE tid = ANY($1::int[])", [missing])) {
        this.keys.set(r.tid, sandboxNameKey({ orgId: r.org, sandboxName: r.sandbox }));
      }
    }
    return this.keys;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.reading;
  }
}
