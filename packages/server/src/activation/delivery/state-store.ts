// Durable delivery state, next to the profile store: SQLite `delivery.db` in the data directory
// (embedded) or schema `segmentd_delivery` (PostgreSQL). The transitions table is the outbox
// (docs/activation.md "Delivery"); this holds what each dataflow made of it: how far its log was
// cut into delivery units, the units not yet acknowledged (and dead letters), snapshot jobs
// (an added audience's members, "Activate now"), counters and hourly flow runs.
import { mkdirSync } from "node:fs";
import path from "node:path";
import type pg from "pg";
import { openSqlite } from "../../storage-kit/sqlite.js";
import { pgDollarSql, sqliteDollarSql, type DollarSql, type Row } from "../../storage-kit/dollar-sql.js";
import { createPool } from "../../storage-kit/postgres.js";
import { migratePostgres, migrateSqlite, type Migration } from "../../storage-kit/migrations.js";
import { moduleSchema } from "../../platform/pg-url.js";
import type { TenantScope } from "../types.js";

/** A transition (or a snapshot member) inside a delivery unit. */
export interface UnitItem {
  /** Log position; 0 for a snapshot member. */
  seq: number;
  profileId: string;
  audienceId: string;
  status: "realized" | "existing" | "exited";
  /** lastQualificationTime, epoch ms */
  at: number;
}

export interface DeliveryUnit {
  unitId: string;
  kind: "log" | "snapshot";
  items: UnitItem[];
  state: "pending" | "dead" | "delivered";
  attempts: number;
  firstAttemptAt: number | null;
  nextAt: number;
  createdAt: number;
  lastError: string | null;
  runId: string;
}

export interface FlowState {
  enqueuedThrough: number;
  audiences: string[];
  sent: number;
  failed: number;
  dead: number;
  lastError: { at: string; message: string; status?: number } | null;
}

export interface SnapshotJob {
  runId: string;
  audienceId: string;
  kind: "added" | "resend";
  afterProfileId: string;
  page: number;
  createdAt: number;
}

export interface RunRow {
  runId: string;
  flowId: string;
  kind: "delivery" | "resend";
  createdAt: number;
  updatedAt: number;
  sent: number;
  failed: number;
  dead: number;
  errors: Array<{ at: string; message: string; status?: number }>;
}

const MIGRATIONS: Migration[] = [{
  version: 1,
  name: "delivery state",
  statements: [
    `CREATE TABLE delivery_flows (org TEXT NOT NULL, sandbox TEXT NOT NULL, flow_id TEXT NOT NULL, enqueued_through BIGINT NOT NULL,
      audiences TEXT NOT NULL, sent BIGINT NOT NULL DEFAULT 0, failed BIGINT NOT NULL DEFAULT 0, dead BIGINT NOT NULL DEFAULT 0,
      last_error TEXT, PRIMARY KEY (org, sandbox, flow_id))`,
    `CREATE TABLE delivery_units (org TEXT NOT NULL, sandbox TEXT NOT NULL, flow_id TEXT NOT NULL, unit_id TEXT NOT NULL, kind TEXT NOT NULL,
      items TEXT NOT NULL, max_seq BIGINT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, first_attempt_at BIGINT, next_at BIGINT NOT NULL, created_at BIGINT NOT NULL,
      last_error TEXT, run_id TEXT NOT NULL, PRIMARY KEY (org, sandbox, flow_id, unit_id))`,
    `CREATE TABLE delivery_snapshots (org TEXT NOT NULL, sandbox TEXT NOT NULL, flow_id TEXT NOT NULL, run_id TEXT NOT NULL, audience TEXT NOT NULL,
      kind TEXT NOT NULL, after_pid TEXT NOT NULL, page INTEGER NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (org, sandbox, flow_id, run_id, audience))`,
    `CREATE TABLE delivery_runs (org TEXT NOT NULL, sandbox TEXT NOT NULL, run_id TEXT NOT NULL, flow_id TEXT NOT NULL, kind TEXT NOT NULL,
      created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, sent BIGINT NOT NULL, failed BIGINT NOT NULL, dead BIGINT NOT NULL, errors TEXT NOT NULL,
      PRIMARY KEY (org, sandbox, run_id))`,
    "CREATE INDEX delivery_runs_flow ON delivery_runs (org, sandbox, flow_id, created_at)",
  ],
}];

type Sql = DollarSql;

const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
const key = (s: TenantScope, flowId: string): [string, string, string] => [s.orgId, s.sandboxName, flowId];

/** A delivered unit's log positions, as takenAfter reads items: `[[seq], …]`. */
function seqsJson(items: readonly UnitItem[]): string {
  const out: string[] = [];
  for (const i of items) if (i.seq > 0) out.push(`[${i.seq}]`);
  return `[${out.join(",")}]`;
}

/** A unit's items as stored: `[[seq, profileId, audienceId, status, at], …]` (JSON). */
function itemsJson(items: readonly UnitItem[]): string {
  const rows = new Array<[number, string, string, string, number]>(items.length);
  for (let k = 0; k < items.length; k++) {
    const i = items[k]!;
    rows[k] = [i.seq, i.profileId, i.audienceId, i.status, i.at];
  }
  return JSON.stringify(rows);
}

export class DeliveryStateStore {
  private constructor(private readonly sql: Sql, readonly pool: pg.Pool | null) {}

  static async open(config: { dataDir: string; databaseUrl?: string | undefined }): Promise<DeliveryStateStore> {
    if (config.databaseUrl !== undefined && config.databaseUrl !== "") {
      const schema = moduleSchema(config.databaseUrl, "delivery");
      const pool = createPool(config.databaseUrl, { max: 6 });
      await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`).catch(() => undefined);
      const store = new DeliveryStateStore(pgDollarSql(pool, schema, /\bdelivery_(flows|units|snapshots|runs)\b/g), pool);
      const qualified = MIGRATIONS.map((m) => ({ ...m, statements: m.statements.map((s) => s.replace(/\bdelivery_(flows|units|snapshots|runs)\b/g, (t) => `"${schema}".${t}`)) }));
      await migratePostgres(pool, qualified, { table: `${schema}_migrations`.slice(0, 60), lock: `${schema}_migrations` });
      return store;
    }
    mkdirSync(config.dataDir, { recursive: true });
    // synchronous=NORMAL (WAL): a killed process loses nothing; a power loss may lose the newest
    // commits, which only moves the state back (units re-sent, never lost: the log itself is in
    // profiles.db, synchronous=FULL). An fsync per acknowledgement on the event loop cost the
    // healthy receivers their lag.
    const db = openSqlite(path.join(config.dataDir, "delivery.db"), { synchronous: "normal" });
    migrateSqlite(db, MIGRATIONS, { table: "delivery_migrations" });
    return new DeliveryStateStore(sqliteDollarSql(db), null);
  }

  close(): Promise<void> {
    return this.sql.close();
  }

  async flow(scope: TenantScope, flowId: string): Promise<FlowState | null> {
    const rows = await this.sql.query("SELECT * FROM delivery_flows WHERE org = $1 AND sandbox = $2 AND flow_id = $3", key(scope, flowId));
    const r = rows[0];
    if (r === undefined) return null;
    return { enqueuedThrough: num(r.enqueued_through), audiences: JSON.parse(String(r.audiences)) as string[], sent: num(r.sent), failed: num(r.failed),
      dead: num(r.dead), lastError: r.last_error === null ? null : JSON.parse(String(r.last_error)) as FlowState["lastError"] };
  }

  /** The lowest position any dataflow has cut its log to (where the log horizon starts), null with none. */
  async lowestEnqueued(): Promise<number | null> {
    const rows = await this.sql.query("SELECT min(enqueued_through) AS m FROM delivery_flows");
    return rows[0]?.m === null || rows[0]?.m === undefined ? null : num(rows[0].m);
  }

  /** A new flow: its log starts at `through`, and each audience's members go first (snapshot jobs). */
  async createFlow(scope: TenantScope, flowId: string, through: number, audiences: string[], runId: string, now: number): Promise<void> {
    await this.sql.tx(async (q) => {
      await q("INSERT INTO delivery_flows (org, sandbox, flow_id, enqueued_through, audiences) VALUES ($1, $2, $3, $4, $5)", [...key(scope, flowId), through, JSON.stringify(audiences)]);
      for (const a of audiences) await this.addJob(q, scope, flowId, { runId, audienceId: a, kind: "added", afterProfileId: "0", page: 0, createdAt: now });
    });
  }

  /** The flow's audiences changed: the added ones' members go first (snapshot jobs). */
  async setAudiences(scope: TenantScope, flowId: string, audiences: string[], added: string[], runId: string, kind: SnapshotJob["kind"], now: number): Promise<void> {
    await this.sql.tx(async (q) => {
      await q("UPDATE delivery_flows SET audiences = $1 WHERE org = $2 AND sandbox = $3 AND flow_id = $4", [JSON.stringify(audiences), ...key(scope, flowId)]);
      for (const a of added) await this.addJob(q, scope, flowId, { runId, audienceId: a, kind, afterProfileId: "0", page: 0, createdAt: now });
    });
  }

  private async addJob(q: (sql: string, p?: unknown[]) => Promise<Row[]>, scope: TenantScope, flowId: string, j: SnapshotJob): Promise<void> {
    await q(`INSERT INTO delivery_snapshots (org, sandbox, flow_id, run_id, audience, kind, after_pid, page, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
      ON CONFLICT DO NOTHING`, [...key(scope, flowId), j.runId, j.audienceId, j.kind, j.afterProfileId, j.page, j.createdAt]);
    await q(`INSERT INTO delivery_runs (org, sandbox, run_id, flow_id, kind, created_at, updated_at, sent, failed, dead, errors) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, 0, '[]')
      ON CONFLICT DO NOTHING`, [scope.orgId, scope.sandboxName, j.runId, flowId, j.kind === "resend" ? "resend" : "delivery", j.createdAt, j.createdAt]);
  }

  async snapshotJobs(scope: TenantScope, flowId: string): Promise<SnapshotJob[]> {
    const rows = await this.sql.query("SELECT * FROM delivery_snapshots WHERE org = $1 AND sandbox = $2 AND flow_id = $3 ORDER BY created_at, run_id, audience", key(scope, flowId));
    return rows.map((r) => ({ runId: String(r.run_id), audienceId: String(r.audience), kind: r.kind as SnapshotJob["kind"], afterProfileId: String(r.after_pid), page: num(r.page), createdAt: num(r.created_at) }));
  }

  async endSnapshot(scope: TenantScope, flowId: string, job: SnapshotJob): Promise<void> {
    await this.sql.query("DELETE FROM delivery_snapshots WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND run_id = $4 AND audience = $5", [...key(scope, flowId), job.runId, job.audienceId]);
  }

  /**
   * Stores a unit before its first request (its id and items are then the same on every retry and
   * after a restart) and, in the same transaction, how far the log (or a snapshot job) was cut.
   */
  async addUnit(scope: TenantScope, flowId: string, u: DeliveryUnit, progress: { enqueuedThrough?: number; job?: SnapshotJob & { next: string } }, acked: readonly DeliveryUnit[] = [], now = 0): Promise<void> {
    await this.addUnits(scope, flowId, [u], progress, acked, now);
  }

  /** Several units stored as addUnit stores one, in one transaction (the log cut through the last of them). */
  async addUnits(scope: TenantScope, flowId: string, units: readonly DeliveryUnit[], progress: { enqueuedThrough?: number; job?: SnapshotJob & { next: string } }, acked: readonly DeliveryUnit[] = [], now = 0): Promise<void> {
    await this.sql.tx(async (q) => {
      // Acknowledgements not yet written go first, in the same commit: a unit is sent only after
      // the acknowledgements of the units cut before it are stored (a restart never re-sends an
      // older unit of a profile after a newer one was delivered).
      const { sent, byRun } = await this.markUnits(q, scope, flowId, acked);
      for (const u of units) {
        let maxSeq = 0;
        for (const i of u.items) if (i.seq > maxSeq) maxSeq = i.seq;
        await q(`INSERT INTO delivery_units (org, sandbox, flow_id, unit_id, kind, items, max_seq, state, attempts, first_attempt_at, next_at, created_at, last_error, run_id)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING`,
        [...key(scope, flowId), u.unitId, u.kind, itemsJson(u.items), maxSeq, u.state, u.attempts, u.firstAttemptAt, u.nextAt, u.createdAt, u.lastError, u.runId]);
      }
      if (progress.enqueuedThrough !== undefined) {
        await q("UPDATE delivery_flows SET enqueued_through = $1, sent = sent + $5 WHERE org = $2 AND sandbox = $3 AND flow_id = $4", [progress.enqueuedThrough, ...key(scope, flowId), sent]);
        // Delivered units are kept while the log cut has not passed them (their positions are taken).
        await q("DELETE FROM delivery_units WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND state = 'delivered' AND max_seq <= $4", [...key(scope, flowId), progress.enqueuedThrough]);
      } else if (sent > 0) await this.countSent(q, scope, flowId, sent);
      // Runs last, as failed() updates them: the same lock order (units, flows, runs) on PostgreSQL, no deadlock.
      await this.countRuns(q, scope, byRun, now);
      if (progress.job !== undefined) {
        await q("UPDATE delivery_snapshots SET after_pid = $1, page = $2 WHERE org = $3 AND sandbox = $4 AND flow_id = $5 AND run_id = $6 AND audience = $7",
          [progress.job.next, progress.job.page + 1, ...key(scope, flowId), progress.job.runId, progress.job.audienceId]);
      }
    });
  }

  async setEnqueued(scope: TenantScope, flowId: string, through: number): Promise<void> {
    await this.sql.query("UPDATE delivery_flows SET enqueued_through = $1 WHERE org = $2 AND sandbox = $3 AND flow_id = $4 AND enqueued_through < $1", [through, ...key(scope, flowId)]);
  }

  async units(scope: TenantScope, flowId: string, state: DeliveryUnit["state"], limit = 10_000): Promise<DeliveryUnit[]> {
    const rows = await this.sql.query(`SELECT * FROM delivery_units WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND state = $4 ORDER BY created_at, unit_id LIMIT $5`,
      [...key(scope, flowId), state, limit]);
    return rows.map((r) => ({
      unitId: String(r.unit_id), kind: r.kind as DeliveryUnit["kind"], state: r.state as DeliveryUnit["state"], attempts: num(r.attempts),
      firstAttemptAt: r.first_attempt_at === null ? null : num(r.first_attempt_at), nextAt: num(r.next_at), createdAt: num(r.created_at),
      lastError: r.last_error === null ? null : String(r.last_error), runId: String(r.run_id),
      items: (JSON.parse(String(r.items)) as Array<[number, string, string, UnitItem["status"], number]>).map(([seq, profileId, audienceId, status, at]) => ({ seq, profileId, audienceId, status, at })),
    }));
  }

  /** Log positions after `after` that are already in a unit (any state): not cut again after a restart. */
  async takenAfter(scope: TenantScope, flowId: string, after: number): Promise<number[]> {
    const rows = await this.sql.query("SELECT items FROM delivery_units WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND max_seq > $4", [...key(scope, flowId), after]);
    return rows.flatMap((r) => (JSON.parse(String(r.items)) as Array<[number]>).map((i) => i[0]).filter((s) => s > after));
  }

  /** Acknowledged: the units are marked delivered and counted, in one transaction. */
  async delivered(scope: TenantScope, flowId: string, units: DeliveryUnit | readonly DeliveryUnit[], now: number): Promise<void> {
    const list = Array.isArray(units) ? units as readonly DeliveryUnit[] : [units as DeliveryUnit];
    if (list.length === 0) return;
    await this.sql.tx(async (q) => {
      const { sent, byRun } = await this.markUnits(q, scope, flowId, list);
      if (sent > 0) await this.countSent(q, scope, flowId, sent);
      await this.countRuns(q, scope, byRun, now);
    });
  }

  private async countSent(q: (sql: string, p?: unknown[]) => Promise<Row[]>, scope: TenantScope, flowId: string, sent: number): Promise<void> {
    await q("UPDATE delivery_flows SET sent = sent + $1 WHERE org = $2 AND sandbox = $3 AND flow_id = $4", [sent, ...key(scope, flowId)]);
  }

  /**
   * Marks units delivered (those not already); returns the items to add to the flow's count and to
   * each run's (the caller's statements, in the order units, flows, runs).
   */
  private async markUnits(q: (sql: string, p?: unknown[]) => Promise<Row[]>, scope: TenantScope, flowId: string, units: readonly DeliveryUnit[]): Promise<{ sent: number; byRun: Map<string, number> }> {
    let sent = 0;
    const byRun = new Map<string, number>();
    for (const u of units) {
      // A delivered unit keeps only its log positions (takenAfter reads them): a small row rewritten, not the items.
      const gone = await q("UPDATE delivery_units SET state = 'delivered', items = $5 WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND unit_id = $4 AND state <> 'delivered' RETURNING unit_id",
        [...key(scope, flowId), u.unitId, seqsJson(u.items)]);
      if (gone.length === 0) continue;
      sent += u.items.length;
      byRun.set(u.runId, (byRun.get(u.runId) ?? 0) + u.items.length);
    }
    return { sent, byRun };
  }

  private async countRuns(q: (sql: string, p?: unknown[]) => Promise<Row[]>, scope: TenantScope, byRun: ReadonlyMap<string, number>, now: number): Promise<void> {
    for (const [runId, n] of byRun) {
      await q("UPDATE delivery_runs SET sent = sent + $1, updated_at = $2 WHERE org = $3 AND sandbox = $4 AND run_id = $5", [n, now, scope.orgId, scope.sandboxName, runId]);
    }
  }

  /** A failed attempt: retried at `nextAt`, or (dead) kept as a dead letter. */
  async failed(scope: TenantScope, flowId: string, u: DeliveryUnit, error: { at: string; message: string; status?: number }, next: { dead: boolean; nextAt: number; firstAttemptAt: number }, now: number): Promise<void> {
    await this.sql.tx(async (q) => {
      await q(`UPDATE delivery_units SET attempts = attempts + 1, first_attempt_at = $1, next_at = $2, last_error = $3, state = $4
        WHERE org = $5 AND sandbox = $6 AND flow_id = $7 AND unit_id = $8`,
      [next.firstAttemptAt, next.nextAt, JSON.stringify(error), next.dead ? "dead" : "pending", ...key(scope, flowId), u.unitId]);
      await q("UPDATE delivery_flows SET failed = failed + 1, dead = dead + $1, last_error = $2 WHERE org = $3 AND sandbox = $4 AND flow_id = $5",
        [next.dead ? u.items.length : 0, JSON.stringify(error), ...key(scope, flowId)]);
      const run = await q("SELECT errors FROM delivery_runs WHERE org = $1 AND sandbox = $2 AND run_id = $3", [scope.orgId, scope.sandboxName, u.runId]);
      const errors = [error, ...(run[0] === undefined ? [] : JSON.parse(String(run[0].errors)) as unknown[])].slice(0, 10);
      await q("UPDATE delivery_runs SET failed = failed + 1, dead = dead + $1, errors = $2, updated_at = $3 WHERE org = $4 AND sandbox = $5 AND run_id = $6",
        [next.dead ? u.items.length : 0, JSON.stringify(errors), now, scope.orgId, scope.sandboxName, u.runId]);
    });
  }

  /** Dead letters back to pending (same unit id: the same webhook-id), their attempts counted anew. */
  async replayDead(scope: TenantScope, flowId: string, now: number, unitIds?: readonly string[]): Promise<number> {
    return this.sql.tx(async (q) => {
      const dead = (await q("SELECT unit_id, items FROM delivery_units WHERE org = $1 AND sandbox = $2 AND flow_id = $3 AND state = 'dead'", key(scope, flowId)))
        .filter((r) => unitIds === undefined || unitIds.includes(String(r.unit_id)));
      let items = 0;
      for (const r of dead) {
        items += (JSON.parse(String(r.items)) as unknown[]).length;
        await q(`UPDATE delivery_units SET state = 'pending', attempts = 0, first_attempt_at = NULL, next_at = $1 WHERE org = $2 AND sandbox = $3 AND flow_id = $4 AND unit_id = $5`,
          [now, ...key(scope, flowId), String(r.unit_id)]);
      }
      await q("UPDATE delivery_flows SET dead = CASE WHEN dead > $1 THEN dead - $1 ELSE 0 END WHERE org = $2 AND sandbox = $3 AND flow_id = $4", [items, ...key(scope, flowId)]);
      return dead.length;
    });
  }

  /** Hourly delivery runs share one row per flow and hour. */
  async ensureRun(scope: TenantScope, flowId: string, runId: string, now: number): Promise<void> {
    await this.sql.query(`INSERT INTO delivery_runs (org, sandbox, run_id, flow_id, kind, created_at, updated_at, sent, failed, dead, errors) VALUES ($1, $2, $3, $4, 'delivery', $5, $5, 0, 0, 0, '[]')
      ON CONFLICT DO NOTHING`, [scope.orgId, scope.sandboxName, runId, flowId, now]);
  }

  async runs(scope: TenantScope, flowId: string, offset: number, limit: number): Promise<{ items: RunRow[]; total: number }> {
    const total = num((await this.sql.query("SELECT count(*) AS n FROM delivery_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3", key(scope, flowId)))[0]?.n);
    const rows = await this.sql.query("SELECT * FROM delivery_runs WHERE org = $1 AND sandbox = $2 AND flow_id = $3 ORDER BY created_at DESC, run_id LIMIT $4 OFFSET $5", [...key(scope, flowId), limit, offset]);
    return { items: rows.map(runOf), total };
  }

  async run(scope: TenantScope, runId: string): Promise<RunRow | null> {
    const rows = await this.sql.query("SELECT * FROM delivery_runs WHERE org = $1 AND sandbox = $2 AND run_id = $3", [scope.orgId, scope.sandboxName, runId]);
    return rows[0] === undefined ? null : runOf(rows[0]);
  }

  /** A deleted dataflow's state goes with it. */
  async dropFlow(scope: TenantScope, flowId: string): Promise<void> {
    await this.sql.tx(async (q) => {
      for (const t of ["delivery_flows", "delivery_units", "delivery_snapshots"]) await q(`DELETE FROM ${t} WHERE org = $1 AND sandbox = $2 AND flow_id = $3`, key(scope, flowId));
    });
  }
}

function runOf(r: Row): RunRow {
  return { runId: String(r.run_id), flowId: String(r.flow_id), kind: r.kind as RunRow["kind"], createdAt: num(r.created_at), updatedAt: num(r.updated_at),
    sent: num(r.sent), failed: num(r.failed), dead: num(r.dead), errors: JSON.parse(String(r.errors)) as RunRow["errors"] };
}
