// What the event-index tests read straight from a store file (read-only, its own connection).
import { readOnlyDb } from "../helpers/read-only-db.js";

export interface EventIndexCounts {
  /** Entries in the large and the small table. */
  large: number;
  small: number;
  events: number;
  distinctIds: number;
  /** Entries whose row is gone or says another tid, pid or ts. */
  orphans: number;
  /** Rows without their entry. */
  unindexed: number;
  oldIndex: boolean;
}

export function eventIndexCounts(file: string): EventIndexCounts {
  return readOnlyDb(file, (db) => {
    const n = (sql: string) => db.prepare(sql).pluck().get() as number;
    return {
      large: n("SELECT count(*) FROM event_index"),
      small: n("SELECT count(*) FROM event_index_new"),
      events: n("SELECT count(*) FROM events"),
      distinctIds: n("SELECT count(DISTINCT eid) FROM events"),
      orphans: n("SELECT count(*) FROM event_index_all i WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.seq = i.seq AND e.tid = i.tid AND e.pid = i.pid AND e.ts = i.ts)"),
      unindexed: n("SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM event_index_all i WHERE i.tid = e.tid AND i.pid = e.pid AND i.ts = e.ts AND i.seq = e.seq)"),
      oldIndex: db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'events_pid_ts'").get() !== undefined,
    };
  });
}

export function storedEventIds(file: string): Set<string> {
  return readOnlyDb(file, (db) => new Set(db.prepare("SELECT eid FROM events").pluck().all() as string[]));
}
