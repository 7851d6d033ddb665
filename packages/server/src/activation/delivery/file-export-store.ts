// Durable state of file exports, beside the delivery state: SQLite `file-exports.db` in the data
// directory (embedded) or tables `file_export_*` in the delivery schema (PostgreSQL). Per flow:
// its schedule (anchor, period, next due instant), how far the transition log was exported
// (incremental mode) and which audiences had their first full file; per run: its trigger, status
// (queued → running → success | failed), counts and manifest. A run is listed with files only
// once it succeeded, which is committed after its files and manifest were renamed into place.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { openSqlite } from "../../storage-kit/sqlite.js";
import { pgDollarSql, sqliteDollarSql, type DollarSql, type Row } from "../../storage-kit/dollar-sql.js";
import { createPool } from "../../storage-kit/postgres.js";
import { migratePostgres, migrateSqlite, type Migration } from "../../storage-kit/migrations.js";
import { moduleSchema } from "../../platform/pg-url.js";
import type { TenantScope } from "../types.js";

export interface ExportFlowState {
  anchor: number;
  periodMs: number;
  nextDue: number;
  lastDue: number | null;
  /** The log position the last successful run exported through (null: none yet). */
  throughSeq: number | null;
  /** Audiences whose first (full) file was written: incremental mode writes their transitions from then on. */
  doneAudiences: string[];
}

export type ExportRunStatus = "queued" | "running" | "success" | "failed" | "expired";

export interface ExportRunRow {
  runId: string;
  flowId: string;
  trigger: "schedule" | "manual";
  dueAt: number | null;
  status: ExportRunStatus;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  rows: number;
  bytes: number;
  files: number;
  manifest: ExportManifest | null;
  error: string | null;
}

export interface ManifestFile {
  name: string;
  audienceId: string;
  mode: "full" | "incremental";
  part: number;
  rows: number;
  bytes: number;
  sha256: string;
}

export interface ExportManifest {
  runId: string;
  flowId: string;
  trigger: "schedule" | "manual";
  scheduledFor: string | null;
  mode: "full" | "incremental";
  format: "ndjson" | "csv";
  compression: "NONE" | "GZIP";
  audiences: string[];
  attributes: string[];
  identityNamespaces: string[];
  files: ManifestFile[];
  logPositions: { from: number | null; through: number };
  startedAt: string;
  finishedAt: string;
}

const MIGRATIONS: Migration[] = [{
  version: 1,
  name: "file export state",
  statements: [
    `CREATE TABLE file_export_flows (org TEXT NOT NULL, sandbox TEXT NOT NULL, flow_id TEXT NOT NULL, anchor BIGINT NOT NULL, period BIGINT NOT NULL,
      next_due BIGINT NOT NULL, last_due BIGINT, through_seq BIGINT, done_audiences TEXT NOT NULL, PRIMARY KEY (org, sandbox, flow_id))`,
    `CREATE TABLE file_export_runs (org TEXT NOT NULL, sandbox TEXT NOT NULL, run_id TEXT NOT NULL, flow_id TEXT NOT NULL, trigger TEXT NOT NULL, due_at BIGINT,
      status TEXT NOT NULL, created_at BIGINT NOT NULL, started_at BIGINT, finished_at BIGINT, rows_out BIGINT NOT NULL DEFAULT 0, bytes_out BIGINT NOT NULL DEFAULT 0,
      files_out INTEGER NOT NULL DEFAULT 0, manifest TEXT, error TEXT, PRIMARY KEY (org, sandbox, run_id))`,
    "CREATE INDEX file_export_runs_flow ON file_export_runs (org, sandbox, flow_id, created_at)",
  ],
}];

const TABLES = /\bfile_export_(flows|runs)\b/g;
type Sql = DollarSql;

const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const key = (s: TenantScope, flowId: string): [string, string, string] => [s.orgId, s.sandboxName, flowId];

function runOf(r: Row): ExportRunRow {
  return {
    runId: String(r.run_id), flowId: String(r.flow_id), trigger: r.trigger as ExportRunRow["trigger"], dueAt: numOrNull(r.due_at), status: r.status as ExportRunStatus,
    createdAt: num(r.created_at), startedAt: numOrNull(r.started_at), finishedAt: numOrNull(r.finished_at), rows: num(r.rows_out), bytes: num(r.bytes_out), files: num(r.files_out),
    manifest: r.manifest === null || r.manifest === undefined ? null : JSON.parse(String(r.manifest)) as ExportManifest,
    error: r.error === null || r.error === undefined ? null : String(r.error),
  };
}

export class FileExportStore {
  private constructor(private readonly sql: Sql) {}

  static async open(config: { dataDir: string; databaseUrl?: string | undefined }): Promise<FileExportStore> {
    if (config.databaseUrl !== undefined && config.databaseUrl !== "") {
      const schema = moduleSchema(config.databaseUrl, "delivery");
      const pool = createPool(config.databaseUrl, { max: 3 });
      await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`).catch(() => undefined);
      const qualified = MIGRATIONS.map((m) => ({ ...m, statements: m.statements.map((s) => s.replace(TABLES, (t) => `"${schema}".${t}`)) }));
      await migratePostgres(pool, qualified, { table: `${schema}_files_migrations`.slice(0, 60), lock: `${schema}_files_migrations` });
      return new FileExportStore(pgDollarSql(pool, schema, TABLES));
    }
    mkdirSync(config.dataDir, { recursive: true });
    const db = openSqlite(path.join(config.dataDir, "file-exports.db"));
    migrateSqlite(db, MIGRATIONS, { table: "file_export_migrations" });
    return new FileExportStore(sqliteDollarSql(db));
  }

  close(): Promise<void> {
    return this.sql.close();
  }

  async flow(scope: TenantScope, flowId: string): Promise<ExportFlowState | null> {
    const r = (await this.sql.query("SELECT * FROM file_export_flows WHERE org = $1 AND sandbox = $2 AND flow_id = $3", key(scope, flowId)))[0];
    if (r === undefined) return null;
    return { anchor: num(r.anchor), periodMs: num(r.period), nextDue: num(r.next_due), lastDue: numOrNull(r.last_due), throughSeq: numOrNull(r.through_seq),
      doneAudiences: JSON.parse(String(r.done_audiences)) as string[] };
  }

  /** The schedule (first seen, or its anchor or period changed). */
  async saveSchedule(scope: TenantScope, flowId: string, s: { anchor: number; periodMs: number; nextDue: number }): Promise<void> {
    await this.sql.query(`INSERT INTO file_export_flows (org, sandbox, flow_id, anchor, period, next_due, last_due, through_seq, done_audiences)
      VALUES ($1, $2, $3, $4, $5, $6, NULL, NULL, '[]')
      ON CONFLICT (org, sandbox, flow_id) DO UPDATE SET anchor = $4, period = $5, next_due = $6`, [...key(scope, flowId), s.anchor, s.periodMs, s.nextDue]);
  }

  async queueRun(scope: TenantScope, flowId: string, runId: string, trigger: ExportRunRow["trigger"], dueAt: number | null, now: number): Promise<void> {
    await this.sql.query(`INSERT INTO file_export_runs (org, sandbox, run_id, flow_id, trigger, due_at, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7)`,
      [scope.orgId, scope.sandboxName, runId, flowId, trigger, dueAt, now]);
  }

  /** Runs of the flow in these states, oldest first. */
  async runsIn(scope: TenantScope, flowId: string, states: readonly ExportRunStatus[]): Promise<ExportRunRow[]> {
    const rows = await this.sql.query("SELECT * FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3 ORDER BY created_at, run_id", key(scope, flowId));
    return rows.map(runOf).filter((r) => states.includes(r.status));
  }

  async startRun(scope: TenantScope, runId: string, now: number): Promise<void> {
    await this.sql.query("UPDATE file_export_runs SET status = 'running', started_at = $1 WHERE org = $2 AND sandbox = $3 AND run_id = $4", [now, scope.orgId, scope.sandboxName, runId]);
  }

  /** The run succeeded: its manifest and counts, and the flow's progress, in one transaction. */
  async finishRun(scope: TenantScope, flowId: string, m: ExportManifest, now: number, progress: { nextDue?: number; lastDue?: number; throughSeq: number; doneAudiences: string[] }): Promise<void> {
    const rows = m.files.reduce((n, f) => n + f.rows, 0);
    const bytes = m.files.reduce((n, f) => n + f.bytes, 0);
    await this.sql.tx(async (q) => {
      await q(`UPDATE file_export_runs SET status = 'success', finished_at = $1, rows_out = $2, bytes_out = $3, files_out = $4, manifest = $5
        WHERE org = $6 AND sandbox = $7 AND run_id = $8`, [now, rows, bytes, m.files.length, JSON.stringify(m), scope.orgId, scope.sandboxName, m.runId]);
      await q("UPDATE file_export_flows SET through_seq = $1, done_audiences = $2 WHERE org = $3 AND sandbox = $4 AND flow_id = $5",
        [progress.throughSeq, JSON.stringify(progress.doneAudiences), ...key(scope, flowId)]);
      if (progress.nextDue !== undefined) {
        await q("UPDATE file_export_flows SET next_due = $1, last_due = $2 WHERE org = $3 AND sandbox = $4 AND flow_id = $5", [progress.nextDue, progress.lastDue ?? null, ...key(scope, flowId)]);
      }
    });
  }

  /** Successful runs past the newest `keep` (their files are about to be removed): marked expired, their ids returned. */
  async expireRuns(scope: TenantScope, flowId: string, keep: number, now: number): Promise<string[]> {
    const rows = await this.sql.query("SELECT run_id FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND status = 'success' ORDER BY created_at DESC, run_id LIMIT 1000 OFFSET $4",
      [...key(scope, flowId), keep]);
    const ids = rows.map((r) => String(r.run_id));
    for (const id of ids) {
      await this.sql.query("UPDATE file_export_runs SET status = 'expired', error = $1, finished_at = finished_at WHERE org = $2 AND sandbox = $3 AND run_id = $4",
        [`files removed: the flow keeps the files of its newest ${keep} runs (expired ${new Date(now).toISOString()})`, scope.orgId, scope.sandboxName, id]);
    }
    return ids;
  }

  async failRun(scope: TenantScope, runId: string, error: string, now: number): Promise<void> {
    await this.sql.query("UPDATE file_export_runs SET status = 'failed', finished_at = $1, error = $2 WHERE org = $3 AND sandbox = $4 AND run_id = $5",
      [now, error.slice(0, 2000), scope.orgId, scope.sandboxName, runId]);
  }

  async runs(scope: TenantScope, flowId: string, offset: number, limit: number): Promise<{ items: ExportRunRow[]; total: number }> {
    const total = num((await this.sql.query("SELECT count(*) AS n FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3", key(scope, flowId)))[0]?.n);
    const rows = await this.sql.query("SELECT * FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3 ORDER BY created_at DESC, run_id LIMIT $4 OFFSET $5",
      [...key(scope, flowId), limit, offset]);
    return { items: rows.map(runOf), total };
  }

  /** One run of the tenant (any flow), null when it has none with that id. */
  async run(scope: TenantScope, runId: string): Promise<ExportRunRow | null> {
    const rows = await this.sql.query("SELECT * FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND run_id = $3", [scope.orgId, scope.sandboxName, runId]);
    return rows[0] === undefined ? null : runOf(rows[0]);
  }

  /** Rows exported by successful runs, failed runs, and the last failure. */
  async totals(scope: TenantScope, flowId: string): Promise<{ rows: number; failed: number; lastError: { at: string; message: string } | null }> {
    const agg = (await this.sql.query(`SELECT sum(CASE WHEN status = 'success' THEN rows_out ELSE 0 END) AS r, sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS f
      FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3`, key(scope, flowId)))[0];
    const last = (await this.sql.query(`SELECT finished_at, error FROM file_export_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND status = 'failed'
      ORDER BY finished_at DESC LIMIT 1`, key(scope, flowId)))[0];
    return { rows: num(agg?.r), failed: num(agg?.f), lastError: last === undefined ? null : { at: new Date(num(last.finished_at)).toISOString(), message: String(last.error) } };
  }

  async dropFlow(scope: TenantScope, flowId: string): Promise<void> {
    await this.sql.tx(async (q) => {
      for (const t of ["file_export_flows", "file_export_runs"]) await q(`DELETE FROM ${t} WHERE org = $1 AND sandbox = $2 AND flow_id = $3`, key(scope, flowId));
    });
  }
}
