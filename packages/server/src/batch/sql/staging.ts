/**
 * Runs compiled SQL predicates over one chunk of merged profiles, in a
 * job-local in-memory SQLite database.
 *
 * WHY a staging database instead of querying the profile store's tables:
 * the store keeps unmerged fragments, and a definition is evaluated on the
 * profile merged under ITS merge policy (timestamp order or dataset
 * precedence, pdg or no stitching). The store's scan does that merge once
 * per policy; the merged documents are staged here chunk by chunk, and every
 * SQL-covered definition of the job is one column of a single SELECT, so the
 * chunk is read once whatever the number of definitions.
 */
import Database from "better-sqlite3";

export interface StagedEntry {
  /** The merged profile entity as JSON text. */
  doc: string;
  events: ReadonlyArray<{ ts: number | null; doc: string }>;
}

/** SQLite returns at most 2000 columns by default; stay well below it. */
const MAX_COLUMNS = 500;

export class SqliteChunkEvaluator {
  private readonly db: Database.Database;
  private readonly selects: Database.Statement[];
  private readonly insertProfile: Database.Statement;
  private readonly insertEvent: Database.Statement;
  private readonly clear: () => void;

  /** `predicates[j]` is the SQLite-dialect predicate of definition j. */
  constructor(private readonly predicates: readonly string[]) {
    this.db = new Database(":memory:");
    this.db.exec(`
      CREATE TABLE p (rid INTEGER PRIMARY KEY, doc TEXT NOT NULL);
      CREATE TABLE ev (rid INTEGER NOT NULL, ts INTEGER, doc TEXT NOT NULL);
      CREATE INDEX ev_rid ON ev (rid, ts);
    `);
    this.insertProfile = this.db.prepare("INSERT INTO p (rid, doc) VALUES (?, ?)");
    this.insertEvent = this.db.prepare("INSERT INTO ev (rid, ts, doc) VALUES (?, ?, ?)");
    const del = this.db.transaction(() => {
      this.db.exec("DELETE FROM p; DELETE FROM ev;");
    });
    this.clear = () => del();
    this.selects = [];
    for (let i = 0; i < predicates.length; i += MAX_COLUMNS) {
      const cols = predicates.slice(i, i + MAX_COLUMNS).map((sql, j) => `(${sql}) AS d${i + j}`);
      // raw(): rows as arrays, avoiding an object per row.
      this.selects.push(this.db.prepare(`SELECT ${cols.join(", ")} FROM p ORDER BY rid`).raw(true));
    }
  }

  get size(): number {
    return this.predicates.length;
  }

  /**
   * Flags for every (entry, predicate): `out[i * size + j]` is 1 when entry i
   * satisfies predicate j.
   */
  evaluate(entries: readonly StagedEntry[]): Uint8Array {
    const n = this.predicates.length;
    const out = new Uint8Array(entries.length * n);
    if (n === 0 || entries.length === 0) return out;
    this.clear();
    this.db.transaction(() => {
      entries.forEach((e, rid) => {
        this.insertProfile.run(rid, e.doc);
        for (const ev of e.events) this.insertEvent.run(rid, ev.ts, ev.doc);
      });
    })();
    this.selects.forEach((stmt, k) => {
      const base = k * MAX_COLUMNS;
      const rows = stmt.all() as Array<Array<number | bigint | null>>;
      rows.forEach((row, i) => {
        for (let j = 0; j < row.length; j++) if (row[j] === 1 || row[j] === 1n) out[i * n + base + j] = 1;
      });
    });
    return out;
  }

  close(): void {
    this.db.close();
  }
}

/**
 * An event's instant for the `ts` column: PQL reads `timestamp` as epoch ms
 * when it is a number and as an ISO 8601 instant or date when it is a string.
 */
export function eventInstant(body: Record<string, unknown>): number | null {
  const v = body["timestamp"];
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v !== "string" || !/^[+-]?\d{4,}-\d{2}-\d{2}/.test(v)) return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
}
