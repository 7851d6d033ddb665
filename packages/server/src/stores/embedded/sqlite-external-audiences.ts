/** External audiences in the embedded metadata store (one table, the audience as its JSON document). */
import type Database from "better-sqlite3";
import { DuplicateAudienceError, type ExternalAudienceRepository, type TenantScope } from "../types.js";
import type { ExternalAudience } from "../records.js";
import { EXTERNAL_AUDIENCE_COLUMN_NAMES, externalAudienceColumns, externalAudienceFromRow } from "../row-mapping.js";

type Row = { doc: string };

export class SqliteExternalAudiences implements ExternalAudienceRepository {
  constructor(private readonly db: Database.Database) {}

  async insert(scope: TenantScope, record: ExternalAudience): Promise<void> {
    try {
      this.db.prepare(`INSERT INTO external_audiences (${EXTERNAL_AUDIENCE_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(...externalAudienceColumns(scope, record));
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === "SQLITE_CONSTRAINT_UNIQUE" && (e.message ?? "").includes("namespace")) throw new DuplicateAudienceError(record.namespace, record.audienceId);
      throw err;
    }
  }

  async update(scope: TenantScope, record: ExternalAudience): Promise<boolean> {
    // namespace and audienceId never change (the service refuses it), so the unique key cannot collide here.
    const r = this.db
      .prepare("UPDATE external_audiences SET update_time = ?, doc = ? WHERE org_id = ? AND sandbox_id = ? AND id = ?")
      .run(record.updateTime, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id);
    return r.changes > 0;
  }

  async get(scope: TenantScope, id: string): Promise<ExternalAudience | undefined> {
    const row = this.db.prepare("SELECT doc FROM external_audiences WHERE org_id = ? AND sandbox_id = ? AND id = ?").get(scope.orgId, scope.sandboxId, id) as Row | undefined;
    return row ? externalAudienceFromRow(row) : undefined;
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, ExternalAudience>> {
    const rows = this.db
      .prepare("SELECT doc FROM external_audiences WHERE org_id = ? AND sandbox_id = ? AND id IN (SELECT value FROM json_each(?))")
      .all(scope.orgId, scope.sandboxId, JSON.stringify(ids)) as Row[];
    return new Map(rows.map((r) => externalAudienceFromRow(r)).map((a) => [a.id, a]));
  }

  async list(scope: TenantScope): Promise<ExternalAudience[]> {
    const rows = this.db.prepare("SELECT doc FROM external_audiences WHERE org_id = ? AND sandbox_id = ? ORDER BY creation_time, id").all(scope.orgId, scope.sandboxId) as Row[];
    return rows.map(externalAudienceFromRow);
  }

  async count(scope: TenantScope): Promise<number> {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM external_audiences WHERE org_id = ? AND sandbox_id = ?").get(scope.orgId, scope.sandboxId) as { n: number }).n;
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM external_audiences WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, id).changes > 0;
  }
}
