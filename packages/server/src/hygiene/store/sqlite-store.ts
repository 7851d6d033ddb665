/**
 * Embedded hygiene store on better-sqlite3. better-sqlite3 is synchronous and a
 * process has one connection, so a transaction can never interleave with
 * another request of this process; `BEGIN IMMEDIATE` (`.immediate()`) also
 * takes SQLite's write lock up front, so several processes sharing the file
 * serialize their check-and-consume instead of failing at commit.
 */
import type Database from "better-sqlite3";
import { openSqlite } from "../../storage-kit/sqlite.js";
import path from "node:path";
import { mkdirSync } from "node:fs";
import type { PeriodicQuota, QuotaName } from "../quotas.js";
import { isQuotaName } from "../quotas.js";
import type {
  ChargeOutcome,
  ExpirationInsertOutcome,
  ExpirationListQuery,
  ExpirationRecord,
  ExpirationStatus,
  Page,
  QuotaCharge,
  WorkOrderListQuery,
  WorkOrderRecord,
  WorkOrderStatus,
} from "../records.js";
import { ACTIVE_EXPIRATION_STATUSES } from "../records.js";
import type { HygieneStore, OrgRef } from "./types.js";
import {
  EXPIRATION_INSERT_COLUMNS,
  HYGIENE_SCHEMA,
  Params,
  WORK_ORDER_INSERT_COLUMNS,
  bumped,
  expirationOrderBy,
  expirationRow,
  expirationWhere,
  workOrderOrderBy,
  workOrderRow,
  workOrderWhere,
} from "./sql-common.js";

const q = () => "?";
const marks = (n: number) => Array.from({ length: n }, () => "?").join(", ");
const ACTIVE_SQL = ACTIVE_EXPIRATION_STATUSES.map((s) => `'${s}'`).join(", ");

export class SqliteHygieneStore implements HygieneStore {
  readonly kind = "embedded" as const;

  constructor(private readonly db: Database.Database) {
    for (const ddl of HYGIENE_SCHEMA) db.exec(ddl);
  }

  private consumedSync(orgId: string, quota: string, period: string): number {
    const row = this.db.prepare("SELECT consumed FROM hygiene_quota_usage WHERE org_id = ? AND quota = ? AND period = ?").get(orgId, quota, period) as
      | { consumed: number }
      | undefined;
    return row?.consumed ?? 0;
  }

  async consumed(orgId: string, keys: ReadonlyArray<{ quota: PeriodicQuota; period: string }>): Promise<number[]> {
    return keys.map((k) => this.consumedSync(orgId, k.quota, k.period));
  }

  async insertWorkOrder(order: WorkOrderRecord, charges: readonly QuotaCharge[]): Promise<ChargeOutcome> {
    const run = this.db.transaction((): ChargeOutcome => {
      for (const c of charges) {
        const consumed = this.consumedSync(order.orgId, c.quota, c.period);
        if (consumed + c.units > c.allowance) return { ok: false, quota: c.quota, allowance: c.allowance, consumed };
      }
      const up = this.db.prepare(
        `INSERT INTO hygiene_quota_usage (org_id, quota, period, consumed) VALUES (?, ?, ?, ?)
         ON CONFLICT (org_id, quota, period) DO UPDATE SET consumed = consumed + excluded.consumed`,
      );
      for (const c of charges) up.run(order.orgId, c.quota, c.period, c.units);
      this.db.prepare(`INSERT INTO hygiene_work_orders (${WORK_ORDER_INSERT_COLUMNS.join(", ")}) VALUES (${marks(WORK_ORDER_INSERT_COLUMNS.length)})`).run(...workOrderRow(order));
      return { ok: true };
    });
    return run.immediate();
  }

  /** A record's document by id within the organization, and within the sandbox when one is given. */
  private docById<T>(table: "hygiene_work_orders" | "hygiene_expirations", orgId: string, id: string, sandboxName?: string): T | undefined {
    const row = (
      sandboxName === undefined
        ? this.db.prepare(`SELECT doc FROM ${table} WHERE org_id = ? AND id = ?`).get(orgId, id)
        : this.db.prepare(`SELECT doc FROM ${table} WHERE org_id = ? AND id = ? AND sandbox_name = ?`).get(orgId, id, sandboxName)
    ) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as T) : undefined;
  }

  async getWorkOrder(orgId: string, workorderId: string, sandboxName?: string): Promise<WorkOrderRecord | undefined> {
    return this.docById<WorkOrderRecord>("hygiene_work_orders", orgId, workorderId, sandboxName);
  }

  async listWorkOrders(orgId: string, query: WorkOrderListQuery): Promise<Page<WorkOrderRecord>> {
    const p = new Params(q);
    const where = workOrderWhere(orgId, query, p);
    const total = (this.db.prepare(`SELECT count(*) AS n FROM hygiene_work_orders WHERE ${where}`).get(...p.values) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT doc FROM hygiene_work_orders WHERE ${where} ORDER BY ${workOrderOrderBy(query)} LIMIT ? OFFSET ?`)
      .all(...p.values, query.limit, query.offset) as Array<{ doc: string }>;
    return { total, items: rows.map((r) => JSON.parse(r.doc) as WorkOrderRecord) };
  }

  async replaceWorkOrder(order: WorkOrderRecord, expected: readonly WorkOrderStatus[]): Promise<boolean> {
    const [, , ...rest] = workOrderRow(bumped(order));
    const sets = WORK_ORDER_INSERT_COLUMNS.slice(2).map((c) => `${c} = ?`).join(", ");
    const r = this.db
      .prepare(`UPDATE hygiene_work_orders SET ${sets} WHERE org_id = ? AND sandbox_name = ? AND id = ? AND revision = ? AND status IN (${marks(expected.length)})`)
      .run(...rest, order.orgId, order.sandboxName, order.workorderId, order.revision, ...expected);
    return r.changes === 1;
  }

  async unfinishedWorkOrders(limit: number): Promise<OrgRef[]> {
    return this.db
      .prepare("SELECT org_id AS orgId, id FROM hygiene_work_orders WHERE status IN ('received', 'validated', 'submitted', 'ingested') ORDER BY created_at, id LIMIT ?")
      .all(limit) as OrgRef[];
  }

  async insertExpiration(record: ExpirationRecord, allowance: number): Promise<ExpirationInsertOutcome> {
    const run = this.db.transaction((): ExpirationInsertOutcome => {
      const existing = this.db
        .prepare(`SELECT doc FROM hygiene_expirations WHERE org_id = ? AND sandbox_name = ? AND dataset_id = ? AND status IN (${ACTIVE_SQL})`)
        .get(record.orgId, record.sandboxName, record.datasetId) as { doc: string } | undefined;
      if (existing) return { ok: false, reason: "duplicate", existing: JSON.parse(existing.doc) as ExpirationRecord };
      const active = this.countActiveSync(record.orgId);
      if (active + 1 > allowance) return { ok: false, reason: "quota", active, allowance };
      this.db.prepare(`INSERT INTO hygiene_expirations (${EXPIRATION_INSERT_COLUMNS.join(", ")}) VALUES (${marks(EXPIRATION_INSERT_COLUMNS.length)})`).run(...expirationRow(record));
      return { ok: true };
    });
    return run.immediate();
  }

  async getExpiration(orgId: string, ttlId: string, sandboxName?: string): Promise<ExpirationRecord | undefined> {
    return this.docById<ExpirationRecord>("hygiene_expirations", orgId, ttlId, sandboxName);
  }

  async expirationForDataset(orgId: string, sandboxName: string, datasetId: string): Promise<ExpirationRecord | undefined> {
    const row = this.db
      .prepare(
        `SELECT doc FROM hygiene_expirations WHERE org_id = ? AND sandbox_name = ? AND dataset_id = ?
         ORDER BY CASE WHEN status IN (${ACTIVE_SQL}) THEN 0 ELSE 1 END, updated_at DESC, id DESC LIMIT 1`,
      )
      .get(orgId, sandboxName, datasetId) as { doc: string } | undefined;
    return row ? (JSON.parse(row.doc) as ExpirationRecord) : undefined;
  }

  async listExpirations(orgId: string, query: ExpirationListQuery): Promise<Page<ExpirationRecord>> {
    const p = new Params(q);
    const where = expirationWhere(orgId, query, p);
    const total = (this.db.prepare(`SELECT count(*) AS n FROM hygiene_expirations WHERE ${where}`).get(...p.values) as { n: number }).n;
    const rows = this.db
      .prepare(`SELECT doc FROM hygiene_expirations WHERE ${where} ORDER BY ${expirationOrderBy(query)} LIMIT ? OFFSET ?`)
      .all(...p.values, query.limit, query.offset) as Array<{ doc: string }>;
    return { total, items: rows.map((r) => JSON.parse(r.doc) as ExpirationRecord) };
  }

  async replaceExpiration(record: ExpirationRecord, expected: readonly ExpirationStatus[]): Promise<boolean> {
    const [, , ...rest] = expirationRow(bumped(record));
    const sets = EXPIRATION_INSERT_COLUMNS.slice(2).map((c) => `${c} = ?`).join(", ");
    const r = this.db
      .prepare(`UPDATE hygiene_expirations SET ${sets} WHERE org_id = ? AND sandbox_name = ? AND id = ? AND revision = ? AND status IN (${marks(expected.length)})`)
      .run(...rest, record.orgId, record.sandboxName, record.ttlId, record.revision, ...expected);
    return r.changes === 1;
  }

  private countActiveSync(orgId: string): number {
    return (this.db.prepare(`SELECT count(*) AS n FROM hygiene_expirations WHERE org_id = ? AND status IN (${ACTIVE_SQL})`).get(orgId) as { n: number }).n;
  }

  async countActiveExpirations(orgId: string): Promise<number> {
    return this.countActiveSync(orgId);
  }

  async dueExpirations(now: number, limit: number): Promise<OrgRef[]> {
    return this.db
      .prepare("SELECT org_id AS orgId, id FROM hygiene_expirations WHERE (status = 'pending' AND expiry <= ?) OR status = 'executing' ORDER BY expiry, id LIMIT ?")
      .all(now, limit) as OrgRef[];
  }

  async entitlementOverrides(orgId: string): Promise<Partial<Record<QuotaName, number>>> {
    const rows = this.db.prepare("SELECT quota, allowance FROM hygiene_entitlements WHERE org_id = ?").all(orgId) as Array<{ quota: string; allowance: number }>;
    const out: Partial<Record<QuotaName, number>> = {};
    for (const r of rows) if (isQuotaName(r.quota)) out[r.quota] = r.allowance;
    return out;
  }

  async setEntitlementOverrides(orgId: string, values: Partial<Record<QuotaName, number | null>>): Promise<void> {
    const put = this.db.prepare(
      "INSERT INTO hygiene_entitlements (org_id, quota, allowance) VALUES (?, ?, ?) ON CONFLICT (org_id, quota) DO UPDATE SET allowance = excluded.allowance",
    );
    const del = this.db.prepare("DELETE FROM hygiene_entitlements WHERE org_id = ? AND quota = ?");
    this.db.transaction(() => {
      for (const [quota, v] of Object.entries(values)) {
        if (v === null || v === undefined) del.run(orgId, quota);
        else put.run(orgId, quota, v);
      }
    }).immediate();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

/** Opens `<dataDir>/hygiene.sqlite` (or an in-memory database for ":memory:"). */
export function openSqliteHygieneStore(dataDir: string): SqliteHygieneStore {
  let file = ":memory:";
  if (dataDir !== ":memory:") {
    mkdirSync(dataDir, { recursive: true });
    file = path.join(dataDir, "hygiene.sqlite");
  }
  // synchronous=FULL as the other embedded stores: an accepted work order (and the quota it consumed) survives power loss.
  return new SqliteHygieneStore(openSqlite(file));
}
