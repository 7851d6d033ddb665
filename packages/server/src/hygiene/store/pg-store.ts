/**
 * PostgreSQL hygiene store (pg 8). Check-and-consume runs in one transaction
 * that first takes a transaction-scoped advisory lock on the organization, so
 * every server process sharing the database serializes quota decisions of one
 * org (other orgs proceed in parallel). The conditional UPSERT and the partial
 * unique index stay as the final guards.
 */
import type pg from "pg";
import { createPool, withAdvisoryLock, withTransaction } from "../../storage-kit/postgres.js";
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

const dollar = (n: number) => `$${n}`;
const placeholders = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `$${i + from}`).join(", ");
const ACTIVE_SQL = ACTIVE_EXPIRATION_STATUSES.map((s) => `'${s}'`).join(", ");

/** BIGINT comes back as a string from pg; our counters stay far below 2^53. */
const toNum = (v: string | number): number => (typeof v === "number" ? v : Number(v));

export class PgHygieneStore implements HygieneStore {
  readonly kind = "postgres" as const;

  constructor(private readonly pool: pg.Pool) {}

  /** A transaction serialized against every other quota decision of the organization (null: none). */
  private tx<T>(orgId: string | null, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return withTransaction(this.pool, fn, { lock: orgId === null ? null : `segmentd-hygiene|${orgId}` });
  }

  async consumed(orgId: string, keys: ReadonlyArray<{ quota: PeriodicQuota; period: string }>): Promise<number[]> {
    if (keys.length === 0) return [];
    const r = await this.pool.query<{ quota: string; period: string; consumed: string }>(
      "SELECT quota, period, consumed FROM hygiene_quota_usage WHERE org_id = $1 AND (quota, period) IN (SELECT * FROM unnest($2::text[], $3::text[]))",
      [orgId, keys.map((k) => k.quota), keys.map((k) => k.period)],
    );
    const m = new Map(r.rows.map((row) => [`${row.quota}\u0000${row.period}`, toNum(row.consumed)]));
    return keys.map((k) => m.get(`${k.quota}\u0000${k.period}`) ?? 0);
  }

  async insertWorkOrder(order: WorkOrderRecord, charges: readonly QuotaCharge[]): Promise<ChargeOutcome> {
    return this.tx(order.orgId, async (c) => {
      for (const ch of charges) {
        const r = await c.query<{ consumed: string }>("SELECT consumed FROM hygiene_quota_usage WHERE org_id = $1 AND quota = $2 AND period = $3", [
          order.orgId,
          ch.quota,
          ch.period,
        ]);
        const consumed = r.rows[0] ? toNum(r.rows[0].consumed) : 0;
        if (consumed + ch.units > ch.allowance) return { ok: false, quota: ch.quota, allowance: ch.allowance, consumed };
      }
      for (const ch of charges) {
        await c.query(
          `INSERT INTO hygiene_quota_usage (org_id, quota, period, consumed) VALUES ($1, $2, $3, $4)
           ON CONFLICT (org_id, quota, period) DO UPDATE SET consumed = hygiene_quota_usage.consumed + EXCLUDED.consumed`,
          [order.orgId, ch.quota, ch.period, ch.units],
        );
      }
      await c.query(`INSERT INTO hygiene_work_orders (${WORK_ORDER_INSERT_COLUMNS.join(", ")}) VALUES (${placeholders(WORK_ORDER_INSERT_COLUMNS.length)})`, workOrderRow(order));
      return { ok: true } as const;
    });
  }

  /** A record's document by id within the organization, and within the sandbox when one is given. */
  private async docById<T>(table: "hygiene_work_orders" | "hygiene_expirations", orgId: string, id: string, sandboxName?: string): Promise<T | undefined> {
    const r =
      sandboxName === undefined
        ? await this.pool.query<{ doc: string }>(`SELECT doc FROM ${table} WHERE org_id = $1 AND id = $2`, [orgId, id])
        : await this.pool.query<{ doc: string }>(`SELECT doc FROM ${table} WHERE org_id = $1 AND id = $2 AND sandbox_name = $3`, [orgId, id, sandboxName]);
    return r.rows[0] ? (JSON.parse(r.rows[0].doc) as T) : undefined;
  }

  async getWorkOrder(orgId: string, workorderId: string, sandboxName?: string): Promise<WorkOrderRecord | undefined> {
    return this.docById<WorkOrderRecord>("hygiene_work_orders", orgId, workorderId, sandboxName);
  }

  async listWorkOrders(orgId: string, query: WorkOrderListQuery): Promise<Page<WorkOrderRecord>> {
    const p = new Params(dollar);
    const where = workOrderWhere(orgId, query, p);
    const total = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM hygiene_work_orders WHERE ${where}`, p.values);
    const n = p.values.length;
    const rows = await this.pool.query<{ doc: string }>(
      `SELECT doc FROM hygiene_work_orders WHERE ${where} ORDER BY ${workOrderOrderBy(query)} LIMIT $${n + 1} OFFSET $${n + 2}`,
      [...p.values, query.limit, query.offset],
    );
    return { total: toNum(total.rows[0]!.n), items: rows.rows.map((r) => JSON.parse(r.doc) as WorkOrderRecord) };
  }

  async replaceWorkOrder(order: WorkOrderRecord, expected: readonly WorkOrderStatus[]): Promise<boolean> {
    const [, , ...rest] = workOrderRow(bumped(order));
    const cols = WORK_ORDER_INSERT_COLUMNS.slice(2);
    const sets = cols.map((c, i) => `${c} = $${i + 1}`).join(", ");
    const k = cols.length;
    const r = await this.pool.query(
      `UPDATE hygiene_work_orders SET ${sets} WHERE org_id = $${k + 1} AND sandbox_name = $${k + 2} AND id = $${k + 3} AND revision = $${k + 4} AND status = ANY($${k + 5}::text[])`,
      [...rest, order.orgId, order.sandboxName, order.workorderId, order.revision, [...expected]],
    );
    return r.rowCount === 1;
  }

  async unfinishedWorkOrders(limit: number): Promise<OrgRef[]> {
    const r = await this.pool.query<OrgRef>(
      `SELECT org_id AS "orgId", id FROM hygiene_work_orders WHERE status IN ('received', 'validated', 'submitted', 'ingested') ORDER BY created_at, id LIMIT $1`,
      [limit],
    );
    return r.rows;
  }

  async insertExpiration(record: ExpirationRecord, allowance: number): Promise<ExpirationInsertOutcome> {
    return this.tx(record.orgId, async (c): Promise<ExpirationInsertOutcome> => {
      const existing = await c.query<{ doc: string }>(
        `SELECT doc FROM hygiene_expirations WHERE org_id = $1 AND sandbox_name = $2 AND dataset_id = $3 AND status IN (${ACTIVE_SQL})`,
        [record.orgId, record.sandboxName, record.datasetId],
      );
      if (existing.rows[0]) return { ok: false, reason: "duplicate", existing: JSON.parse(existing.rows[0].doc) as ExpirationRecord };
      const active = await this.countActiveWith(c, record.orgId);
      if (active + 1 > allowance) return { ok: false, reason: "quota", active, allowance };
      await c.query(`INSERT INTO hygiene_expirations (${EXPIRATION_INSERT_COLUMNS.join(", ")}) VALUES (${placeholders(EXPIRATION_INSERT_COLUMNS.length)})`, expirationRow(record));
      return { ok: true };
    });
  }

  async getExpiration(orgId: string, ttlId: string, sandboxName?: string): Promise<ExpirationRecord | undefined> {
    return this.docById<ExpirationRecord>("hygiene_expirations", orgId, ttlId, sandboxName);
  }

  async expirationForDataset(orgId: string, sandboxName: string, datasetId: string): Promise<ExpirationRecord | undefined> {
    const r = await this.pool.query<{ doc: string }>(
      `SELECT doc FROM hygiene_expirations WHERE org_id = $1 AND sandbox_name = $2 AND dataset_id = $3
       ORDER BY CASE WHEN status IN (${ACTIVE_SQL}) THEN 0 ELSE 1 END, updated_at DESC, id DESC LIMIT 1`,
      [orgId, sandboxName, datasetId],
    );
    return r.rows[0] ? (JSON.parse(r.rows[0].doc) as ExpirationRecord) : undefined;
  }

  async listExpirations(orgId: string, query: ExpirationListQuery): Promise<Page<ExpirationRecord>> {
    const p = new Params(dollar);
    const where = expirationWhere(orgId, query, p);
    const total = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM hygiene_expirations WHERE ${where}`, p.values);
    const n = p.values.length;
    const rows = await this.pool.query<{ doc: string }>(
      `SELECT doc FROM hygiene_expirations WHERE ${where} ORDER BY ${expirationOrderBy(query)} LIMIT $${n + 1} OFFSET $${n + 2}`,
      [...p.values, query.limit, query.offset],
    );
    return { total: toNum(total.rows[0]!.n), items: rows.rows.map((r) => JSON.parse(r.doc) as ExpirationRecord) };
  }

  async replaceExpiration(record: ExpirationRecord, expected: readonly ExpirationStatus[]): Promise<boolean> {
    const [, , ...rest] = expirationRow(bumped(record));
    const cols = EXPIRATION_INSERT_COLUMNS.slice(2);
    const sets = cols.map((c, i) => `${c} = $${i + 1}`).join(", ");
    const k = cols.length;
    // A single conditional UPDATE: the row lock makes a cancel and the scheduler's claim exclusive.
    const r = await this.pool.query(
      `UPDATE hygiene_expirations SET ${sets} WHERE org_id = $${k + 1} AND sandbox_name = $${k + 2} AND id = $${k + 3} AND revision = $${k + 4} AND status = ANY($${k + 5}::text[])`,
      [...rest, record.orgId, record.sandboxName, record.ttlId, record.revision, [...expected]],
    );
    return r.rowCount === 1;
  }

  private async countActiveWith(c: pg.Pool | pg.PoolClient, orgId: string): Promise<number> {
    const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM hygiene_expirations WHERE org_id = $1 AND status IN (${ACTIVE_SQL})`, [orgId]);
    return toNum(r.rows[0]!.n);
  }

  async countActiveExpirations(orgId: string): Promise<number> {
    return this.countActiveWith(this.pool, orgId);
  }

  async dueExpirations(now: number, limit: number): Promise<OrgRef[]> {
    const r = await this.pool.query<OrgRef>(
      `SELECT org_id AS "orgId", id FROM hygiene_expirations WHERE (status = 'pending' AND expiry <= $1) OR status = 'executing' ORDER BY expiry, id LIMIT $2`,
      [now, limit],
    );
    return r.rows;
  }

  async entitlementOverrides(orgId: string): Promise<Partial<Record<QuotaName, number>>> {
    const r = await this.pool.query<{ quota: string; allowance: string }>("SELECT quota, allowance FROM hygiene_entitlements WHERE org_id = $1", [orgId]);
    const out: Partial<Record<QuotaName, number>> = {};
    for (const row of r.rows) if (isQuotaName(row.quota)) out[row.quota] = toNum(row.allowance);
    return out;
  }

  async setEntitlementOverrides(orgId: string, values: Partial<Record<QuotaName, number | null>>): Promise<void> {
    await this.tx(orgId, async (c) => {
      for (const [quota, v] of Object.entries(values)) {
        if (v === null || v === undefined) await c.query("DELETE FROM hygiene_entitlements WHERE org_id = $1 AND quota = $2", [orgId, quota]);
        else
          await c.query(
            "INSERT INTO hygiene_entitlements (org_id, quota, allowance) VALUES ($1, $2, $3) ON CONFLICT (org_id, quota) DO UPDATE SET allowance = EXCLUDED.allowance",
            [orgId, quota, v],
          );
      }
    });
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * Connects and creates the hygiene tables if needed. `schema` (optional) sets
 * the search_path, which the tests use to get a fresh schema per test file.
 */
export async function openPgHygieneStore(url: string, options: { max?: number; schema?: string } = {}): Promise<PgHygieneStore> {
  const pool = createPool(url, { max: options.max ?? 10, ...(options.schema === undefined ? {} : { searchPath: options.schema }) });
  try {
    // Serialize schema creation between processes starting at once.
    await withAdvisoryLock(pool, "segmentd-hygiene-schema", async (c) => {
      for (const ddl of HYGIENE_SCHEMA) await c.query(ddl);
    });
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  return new PgHygieneStore(pool);
}
