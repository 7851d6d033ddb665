// The events' (tid, pid, ts) index of the embedded store, in two generations.
//
// Why: events arrive in time order for random profiles, so each one lands in a random leaf of a
// (tid, pid, ts) index. Once that index outgrows what a commit can share, a 50,000-event commit
// dirties tens of thousands of its pages, writes each to the WAL, and the checkpoint writes it
// again: at 6M events this costs more than everything else an append does (docs/performance.md,
// "Two-generation event index"). So new entries go to a small table (`event_index_new`, which
// stays in the page cache) and are moved into the large one (`event_index`) in key order, a step
// at a time, once the small one holds MERGE_AT entries: each leaf of the large index is then
// written about once per MERGE_AT events instead of once per commit.
//
// The append path adds a chunk's entries in one INSERT … SELECT over the rows it has just appended
// (APPEND_ENTRIES: 6.6–8.3 µs of writer CPU per event through the whole append, against 14 µs with
// an AFTER INSERT trigger and 12 µs with the single index, measured with better-sqlite3 over 1M
// events); triggers keep both
// tables in step with the rarer writes (deletes, and the pid a graph merge re-points). Readers go
// through the `event_index_all` view (SQLite pushes the WHERE terms into both arms of the UNION
// ALL: two index searches).
import type Database from "better-sqlite3";

export const EVENT_INDEX_SCHEMA = `
CREATE TABLE IF NOT EXISTS event_index (tid INTEGER NOT NULL, pid INTEGER NOT NULL, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (tid, pid, ts, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event_index_new (tid INTEGER NOT NULL, pid INTEGER NOT NULL, ts INTEGER NOT NULL, seq INTEGER NOT NULL,
  PRIMARY KEY (tid, pid, ts, seq)) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS event_index_all AS
  SELECT tid, pid, ts, seq FROM event_index UNION ALL SELECT tid, pid, ts, seq FROM event_index_new;
CREATE TRIGGER IF NOT EXISTS events_index_delete AFTER DELETE ON events BEGIN
  DELETE FROM event_index WHERE tid = old.tid AND pid = old.pid AND ts = old.ts AND seq = old.seq;
  DELETE FROM event_index_new WHERE tid = old.tid AND pid = old.pid AND ts = old.ts AND seq = old.seq;
END;
CREATE TRIGGER IF NOT EXISTS events_index_update AFTER UPDATE OF tid, pid, ts, seq ON events BEGIN
  DELETE FROM event_index WHERE tid = old.tid AND pid = old.pid AND ts = old.ts AND seq = old.seq;
  DELETE FROM event_index_new WHERE tid = old.tid AND pid = old.pid AND ts = old.ts AND seq = old.seq;
  INSERT INTO event_index_new (tid, pid, ts, seq) VALUES (new.tid, new.pid, new.ts, new.seq);
END;
`;

/**
 * The index entries of the events appended after seq `?` (the largest seq before the append), in
 * key order: inserted sorted, each leaf is visited once in turn (1M events through the whole
 * append, two runs each: 6.6–7.1 µs of CPU per event against 8.0–8.3 µs unsorted).
 */
export const APPEND_ENTRIES = "INSERT INTO event_index_new (tid, pid, ts, seq) SELECT tid, pid, ts, seq FROM events WHERE seq > ? ORDER BY tid, pid, ts, seq";

/** Entries in event_index_new past which they are moved into event_index. */
export const MERGE_AT = 1_000_000;
/** Most entries moved per merge step (one transaction; a write waits for at most one step). */
export const MERGE_STEP = 125_000;
/**
 * Fewest entries moved per merge step. A step moves MERGE_STEP_PACE times the largest append since
 * the step before, within [MERGE_STEP_MIN, MERGE_STEP]: a bulk load (50,000-event appends) moves
 * full steps, as before; streaming's small appends (tens of events each) move 16,000, ~8 ms of
 * the writer, where a full step (~60 ms at 1M events, more as the large index grows) held up every
 * write queued behind it (bench:streaming at 12,000 events/s: p99 233 ms during a merge round).
 * The round still ends: a step comes after every flush of writes, and moves more than one carries.
 */
export const MERGE_STEP_MIN = 16_000;
export const MERGE_STEP_PACE = 4;

/**
 * Files written before the two generations index events with `events_pid_ts (tid, pid, ts)`:
 * its entries are copied into event_index (in index order) and it is dropped, in one transaction
 * with the tables and triggers, the first time such a file is opened.
 */
export function migrateEventIndex(db: Database.Database): boolean {
  const old = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'events_pid_ts'").get();
  if (old === undefined) {
    db.exec(EVENT_INDEX_SCHEMA);
    return false;
  }
  db.transaction(() => {
    db.exec(EVENT_INDEX_SCHEMA);
    db.exec("DELETE FROM event_index; DELETE FROM event_index_new;");
    db.exec("INSERT INTO event_index (tid, pid, ts, seq) SELECT tid, pid, ts, seq FROM events INDEXED BY events_pid_ts ORDER BY tid, pid, ts, seq");
    db.exec("DROP INDEX events_pid_ts");
  })();
  return true;
}

type Key = [number, number, number, number];

/**
 * Moves event_index_new into event_index, up to MERGE_STEP entries (the lowest keys) per step. `noteAdded`
 * counts entries as events are inserted (an upper bound: deletes are not subtracted); a step
 * counts exactly before it moves anything.
 */
export class EventIndexMerger {
  private pending: number;
  /** The largest append (entries) since the last step: paces the step size. */
  private largestSinceStep = 0;
  private merging = false;
  private readonly count: Database.Statement;
  private readonly boundary: Database.Statement;
  private readonly copy: Database.Statement;
  private readonly remove: Database.Statement;

  constructor(private readonly db: Database.Database, private readonly mergeAt = MERGE_AT, private readonly step = MERGE_STEP, private readonly minStep = MERGE_STEP_MIN) {
    this.count = db.prepare("SELECT count(*) FROM event_index_new").pluck();
    this.boundary = db.prepare("SELECT tid, pid, ts, seq FROM event_index_new ORDER BY tid, pid, ts, seq LIMIT 1 OFFSET ?").raw(true);
    this.copy = db.prepare("INSERT INTO event_index (tid, pid, ts, seq) SELECT tid, pid, ts, seq FROM event_index_new WHERE (tid, pid, ts, seq) <= (?, ?, ?, ?) ORDER BY tid, pid, ts, seq");
    this.remove = db.prepare("DELETE FROM event_index_new WHERE (tid, pid, ts, seq) <= (?, ?, ?, ?)");
    this.pending = this.count.get() as number;
  }

  noteAdded(n: number): void {
    this.pending += n;
    if (n > this.largestSinceStep) this.largestSinceStep = n;
  }

  /** Entries the next step moves (see MERGE_STEP_MIN). */
  private stepSize(): number {
    return Math.min(this.step, Math.max(this.minStep, MERGE_STEP_PACE * this.largestSinceStep));
  }

  /** After a failed step: the next one waits for another `mergeAt` added entries. */
  backOff(): void {
    this.pending = 0;
    this.merging = false;
  }

  /** Whether a step is due (cheap: no query). */
  due(): boolean {
    return this.merging || this.pending >= this.mergeAt;
  }

  /** One step in its own transaction; returns the entries moved. Call outside any transaction. */
  runStep(): number {
    this.pending = this.count.get() as number;
    if (!this.merging && this.pending < this.mergeAt) return 0;
    const step = this.stepSize();
    const moved = this.moveLowest(Math.min(step, this.pending));
    this.pending -= moved;
    this.largestSinceStep = 0;
    // A round ends once what is left is less than a step: the next round starts at MERGE_AT again.
    this.merging = this.pending >= step;
    return moved;
  }

  /** Moves every entry (tests, and a caller that wants the small table empty). */
  mergeAll(): number {
    let moved = 0;
    for (let left = this.count.get() as number; left > 0; left = this.count.get() as number) moved += this.moveLowest(Math.min(this.step, left));
    this.pending = 0;
    this.merging = false;
    return moved;
  }

  /** The `n` (> 0 for a move) lowest keys of the small table into the large one, in one transaction. */
  private moveLowest(n: number): number {
    if (n <= 0) return 0;
    const key = this.boundary.get(n - 1) as Key;
    return this.db.transaction(() => {
      this.copy.run(...key);
      return this.remove.run(...key).changes;
    })();
  }
}
