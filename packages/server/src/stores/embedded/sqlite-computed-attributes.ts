/** Computed attributes in the embedded metadata store (stores/computed-attributes.ts); the limit is counted in the insert's IMMEDIATE transaction. */
import type Database from "better-sqlite3";
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

export class SqliteComputedAttributes implements ComputedAttributeRepository {
  constructor(private readonly db: Database.Database) {}

  async insert(scope: TenantScope, record: ComputedAttributeRecord, limit: number): Promise<void> {
    try {
      this.db.transaction(() => {
        const n = (this.db
          .prepare("SELECT COUNT(*) AS n FROM computed_attributes WHERE org_id = ? AND sandbox_id = ? AND status != 'DISABLED'")
          .get(scope.orgId, scope.sandboxId) as { n: number }).n;
        if (n + 1 > limit) throw new ComputedAttributeLimitError(limit);
        this.db.prepare(`INSERT INTO computed_attributes (${COMPUTED_ATTRIBUTE_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(...computedAttributeColumns(scope, record));
      }).immediate();
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === "SQLITE_CONSTRAINT_UNIQUE" && (e.message ?? "").includes("computed_attributes.name")) throw new DuplicateComputedAttributeError(record.name);
      throw err;
    }
  }

  async update(scope: TenantScope, record: ComputedAttributeRecord): Promise<boolean> {
    const r = this.db
      .prepare("UPDATE computed_attributes SET status = ?, update_time = ?, doc = ? WHERE org_id = ? AND sandbox_id = ? AND id = ?")
      .run(record.status, record.updateEpoch, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id);
    return r.changes > 0;
  }

  async updateIf(scope: TenantScope, record: ComputedAttributeRecord, expected: Pick<ComputedAttributeRecord, "status" | "updateEpoch">): Promise<boolean> {
    const r = this.db
      .prepare("UPDATE computed_attributes SET status = ?, update_time = ?, doc = ? WHERE org_id = ? AND sandbox_id = ? AND id = ? AND status = ? AND update_time = ?")
      .run(record.status, record.updateEpoch, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id, expected.status, expected.updateEpoch);
    return r.changes > 0;
  }

  async get(scope: TenantScope, id: string): Promise<ComputedAttributeRecord | undefined> {
    const row = this.db.prepare("SELECT doc FROM computed_attributes WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, id) as ComputedAttributeRow | undefined;
    return row ? computedAttributeFromRow(row) : undefined;
  }

  async list(scope: TenantScope): Promise<ComputedAttributeRecord[]> {
    const rows = this.db
      .prepare("SELECT doc FROM computed_attributes WHERE org_id = ? AND sandbox_id = ? ORDER BY creation_time, id")
      .all(scope.orgId, scope.sandboxId) as ComputedAttributeRow[];
    return rows.map(computedAttributeFromRow);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM computed_attributes WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, id).changes > 0;
  }
}
