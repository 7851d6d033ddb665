// Compact storage of memberships and transitions in the embedded store.
//
// A batch job writes millions of membership rows, each stored four times
// (memberships row, memberships_def index, transitions row, transitions_def_at
// index). With the definition id (a 36-character UUID), the status, the source
// and an ISO lastQualificationTime as text, a row and its copies took ~285 bytes;
// with a small integer per definition (definition_codes), integer statuses and
// sources and epoch-ms times, ~80 (5M memberships: 1.4 GB -> 0.4 GB of pages
// written, 7.0 -> 2.4 µs per membership in a raw SQLite experiment).
import type Database from "better-sqlite3";
import type { MembershipSource, MembershipStatus } from "../types.js";

/** Names stored as 1, 2, … in their order, and back; unknown names and codes are refused by name. */
function codec<T extends string>(what: string, names: readonly T[]): { codes: Readonly<Record<T, number>>; code(name: string): number; name(code: number): T } {
  const codes = Object.fromEntries(names.map((n, i) => [n, i + 1])) as Record<T, number>;
  return {
    codes,
    code(name) {
      const code = Object.hasOwn(codes, name) ? codes[name as T] : undefined;
      if (code === undefined) throw new RangeError(`${what} ${JSON.stringify(name)} is not one of ${names.join(", ")}`);
      return code;
    },
    name(code) {
      const name = names[code - 1];
      if (name === undefined) throw new Error(`stored ${what} code ${code} is unknown`);
      return name;
    },
  };
}

const STATUSES = codec<MembershipStatus>("membership status", ["realized", "exited"]);
const SOURCES = codec<MembershipSource>("membership source", ["batch", "streaming", "edge", "backfill"]);
export const STATUS_CODE = STATUSES.codes;
export const SOURCE_CODE = SOURCES.codes;
export const statusCode = STATUSES.code;
export const statusName = STATUSES.name;
export const sourceCode = SOURCES.code;
export const sourceName = SOURCES.name;

/**
 * A lastQualificationTime as stored: epoch ms when the text is the canonical ISO form of that
 * instant (what the engines write), else the text itself (SQLite keeps it as TEXT in the INTEGER
 * column), so that every value reads back exactly as written.
 */
export function encodeTime(iso: string): number | string {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) && new Date(ms).toISOString() === iso ? ms : iso;
}

export function decodeTime(stored: number | string): string {
  return typeof stored === "number" ? new Date(stored).toISOString() : stored;
}

/**
 * Definition id <-> code. A code is created in its own autocommit statement before the write
 * that uses it (as tenants are), so no rolled-back transaction can leave a cached code behind;
 * codes are never deleted or reused, so a cached one stays true.
 */
export class DefinitionCodes {
  private readonly byId = new Map<string, number>();
  private readonly byCode = new Map<number, string>();
  // Prepared once: a miss (a definition never stored, read by every listMemberIds of it) costs a lookup, not a parse.
  private readonly codeOf: Database.Statement;
  private readonly idOfCode: Database.Statement;
  private readonly insert: Database.Statement;

  /** After MEMBERSHIP_SCHEMA: the statements need definition_codes. */
  constructor(db: Database.Database) {
    this.codeOf = db.prepare("SELECT code FROM definition_codes WHERE id = ?").pluck();
    this.idOfCode = db.prepare("SELECT id FROM definition_codes WHERE code = ?").pluck();
    this.insert = db.prepare("INSERT OR IGNORE INTO definition_codes (id) VALUES (?)");
  }

  /** The code of a definition id that has been stored, else undefined. */
  find(id: string): number | undefined {
    const cached = this.byId.get(id);
    if (cached !== undefined) return cached;
    const code = this.codeOf.get(id) as number | undefined;
    if (code !== undefined) this.remember(id, code);
    return code;
  }

  /** Codes for every id (created as needed); call outside write transactions. */
  ensure(ids: Iterable<string>): Map<string, number> {
    const out = new Map<string, number>();
    for (const id of ids) {
      if (out.has(id)) continue;
      let code = this.find(id);
      if (code === undefined) {
        this.insert.run(id);
        code = this.find(id)!;
      }
      out.set(id, code);
    }
    return out;
  }

  idOf(code: number): string {
    const cached = this.byCode.get(code);
    if (cached !== undefined) return cached;
    const id = this.idOfCode.get(code) as string | undefined;
    if (id === undefined) throw new Error(`definition code ${code} is not stored`);
    this.remember(id, code);
    return id;
  }

  private remember(id: string, code: number): void {
    this.byId.set(id, code);
    this.byCode.set(code, id);
  }
}

export const MEMBERSHIP_SCHEMA = `
CREATE TABLE IF NOT EXISTS definition_codes (code INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS memberships (tid INTEGER NOT NULL, pid INTEGER NOT NULL, def INTEGER NOT NULL, status INTEGER NOT NULL,
  lqt INTEGER NOT NULL, PRIMARY KEY (tid, pid, def)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memberships_def ON memberships (tid, def, status, pid);
CREATE TABLE IF NOT EXISTS transitions (seq INTEGER PRIMARY KEY, tid INTEGER NOT NULL, pid INTEGER NOT NULL, def INTEGER NOT NULL,
  from_status INTEGER, to_status INTEGER NOT NULL, source INTEGER NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS transitions_def_at ON transitions (tid, def, at);
CREATE INDEX IF NOT EXISTS transitions_def_pid ON transitions (tid, def, pid, at);
`;

/**
 * Data directories written before the compact tables hold memberships and transitions with text
 * columns: converted in place, in one transaction, the first time such a file is opened.
 */
export function migrateTextMemberships(db: Database.Database): boolean {
  const columns = db.prepare("SELECT type FROM pragma_table_info('memberships') WHERE name = 'def'").pluck().all() as string[];
  if (columns.length === 0 || columns[0]!.toUpperCase() !== "TEXT") return false;
  db.transaction(() => {
    db.exec(`DROP INDEX IF EXISTS memberships_def; DROP INDEX IF EXISTS transitions_def_at; DROP INDEX IF EXISTS transitions_at;
      ALTER TABLE memberships RENAME TO memberships_text; ALTER TABLE transitions RENAME TO transitions_text;`);
    db.exec(MEMBERSHIP_SCHEMA);
    db.exec("INSERT OR IGNORE INTO definition_codes (id) SELECT def FROM memberships_text UNION SELECT def FROM transitions_text ORDER BY 1");
    // Row by row in SQL (a JS iterator would hold the connection); the time through encodeTime.
    db.function("segmentd_encode_time", { deterministic: true }, (t: unknown) => (typeof t === "string" ? encodeTime(t) : t));
    const status = (col: string) => `CASE ${col} WHEN 'realized' THEN ${STATUS_CODE.realized} WHEN 'exited' THEN ${STATUS_CODE.exited} END`;
    db.exec(`INSERT INTO memberships (tid, pid, def, status, lqt)
      SELECT m.tid, m.pid, c.code, ${status("m.status")}, segmentd_encode_time(m.lqt) FROM memberships_text m JOIN definition_codes c ON c.id = m.def`);
    db.exec(`INSERT INTO transitions (seq, tid, pid, def, from_status, to_status, source, at)
      SELECT t.seq, t.tid, t.pid, c.code, ${status("t.from_status")}, ${status("t.to_status")},
        CASE t.source WHEN 'batch' THEN ${SOURCE_CODE.batch} WHEN 'streaming' THEN ${SOURCE_CODE.streaming} WHEN 'edge' THEN ${SOURCE_CODE.edge} WHEN 'backfill' THEN ${SOURCE_CODE.backfill} END, t.at
      FROM transitions_text t JOIN definition_codes c ON c.id = t.def`);
    db.exec("DROP TABLE memberships_text; DROP TABLE transitions_text;");
  })();
  return true;
}
