/**
 * Computed attributes in the PostgreSQL metadata store (stores/computed-attributes.ts). The insert
 * takes the sandbox's advisory lock, so the limit count and the insert are one step for every
 * server process sharing the database.
 */
import type pg from "pg";
import { withTransaction } from "../../storage-kit/postgres.js";
import type { SandboxIdScope as TenantScope } from "../../platform/tenant.js";
import {
  COMPUTED_ATTRIBUTE_COLUMN_NAMES,
  ComputedAttributeLimitError,
  DuplicateComputedAttributeError,
  computedAttributeColumns,
  computedAttributeFromRow,
  type ComputedAttributeRecord,
  type ComputedAttributeRepository,
  type ComputedAttributeRow,
} from "../computed-attributes.js";

export class PgComputedAttributes implements ComputedAttributeRepository {
  constructor(private readonly pool: pg.Pool) {}

  async insert(scope: TenantScope, record: ComputedAttributeRecord, limit: number): Promise<void> {
    try {
      await withTransaction(this.pool, async (c) => {
        const r = await c.query<{ n: string }>(
          "SELECT COUNT(*) AS n FROM computed_attributes WHERE org_id = $1 AND sandbox_id = $2 AND status != 'DISABLED'",
          [scope.orgId, scope.sandboxId],
        );
        if (Number(r.rows[0]!.n) + 1 > limit) throw new ComputedAttributeLimitError(limit);
        await c.query(`INSERT INTO computed_attributes (${COMPUTED_ATTRIBUTE_COLUMN_NAMES}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, computedAttributeColumns(scope, record));
      }, { lock: `ca/${scope.orgId}/${scope.sandboxId}` });
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      if (e.code === "23505" && e.constraint === "computed_attributes_name") throw new DuplicateComputedAttributeError(record.name);
      throw err;
    }
  }

  async update(scope: TenantScope, record: ComputedAttributeRecord): Promise<boolean> {
    const r = await this.pool.query(
      "UPDATE computed_attributes SET status = $1, update_time = $2, doc = $3 WHERE org_id = $4 AND sandbox_id = $5 AND id = $6",
      [record.status, record.updateEpoch, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async updateIf(scope: TenantScope, record: ComputedAttributeRecord, expected: Pick<ComputedAttributeRecord, "status" | "updateEpoch">): Promise<boolean> {
    const r = await this.pool.query(
      "UPDATE computed_attributes SET status = $1, update_time = $2, doc = $3 WHERE org_id = $4 AND sandbox_id = $5 AND id = $6 AND status = $7 AND update_time = $8",
      [record.status, record.updateEpoch, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id, expected.status, expected.updateEpoch],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async get(scope: TenantScope, id: string): Promise<ComputedAttributeRecord | undefined> {
    const r = await this.pool.query<ComputedAttributeRow>("SELECT doc FROM computed_attributes WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return r.rows[0] ? computedAttributeFromRow(r.rows[0]) : undefined;
  }

  async list(scope: TenantScope): Promise<ComputedAttributeRecord[]> {
    const r = await this.pool.query<ComputedAttributeRow>(
      `SELECT doc FROM computed_attributes WHERE org_id = $1 AND sandbox_id = $2 ORDER BY creation_time, id COLLATE "C"`,
      [scope.orgId, scope.sandboxId],
    );
    return r.rows.map(computedAttributeFromRow);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    const r = await this.pool.query("DELETE FROM computed_attributes WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return (r.rowCount ?? 0) > 0;
  }
}
