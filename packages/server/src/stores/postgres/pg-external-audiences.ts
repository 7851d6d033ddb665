/** External audiences in the PostgreSQL metadata store (one table, the audience as its JSON document). */
import type pg from "pg";
import { DuplicateAudienceError, type ExternalAudienceRepository, type TenantScope } from "../types.js";
import type { ExternalAudience } from "../records.js";
import { EXTERNAL_AUDIENCE_COLUMN_NAMES, externalAudienceColumns, externalAudienceFromRow } from "../row-mapping.js";

type Row = { doc: string };

export class PgExternalAudiences implements ExternalAudienceRepository {
  constructor(private readonly pool: pg.Pool) {}

  async insert(scope: TenantScope, record: ExternalAudience): Promise<void> {
    try {
      await this.pool.query(`INSERT INTO external_audiences (${EXTERNAL_AUDIENCE_COLUMN_NAMES}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, externalAudienceColumns(scope, record));
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      if (e.code === "23505" && e.constraint === "external_audiences_key") throw new DuplicateAudienceError(record.namespace, record.audienceId);
      throw err;
    }
  }

  async update(scope: TenantScope, record: ExternalAudience): Promise<boolean> {
    // namespace and audienceId never change (the service refuses it), so the unique key cannot collide here.
    const r = await this.pool.query(
      "UPDATE external_audiences SET update_time = $1, doc = $2 WHERE org_id = $3 AND sandbox_id = $4 AND id = $5",
      [record.updateTime, JSON.stringify(record), scope.orgId, scope.sandboxId, record.id],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async get(scope: TenantScope, id: string): Promise<ExternalAudience | undefined> {
    const r = await this.pool.query<Row>("SELECT doc FROM external_audiences WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return r.rows[0] ? externalAudienceFromRow(r.rows[0]) : undefined;
  }

  async getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, ExternalAudience>> {
    const r = await this.pool.query<Row>("SELECT doc FROM external_audiences WHERE org_id = $1 AND sandbox_id = $2 AND id = ANY($3::text[])", [scope.orgId, scope.sandboxId, [...ids]]);
    return new Map(r.rows.map((row) => externalAudienceFromRow(row)).map((a) => [a.id, a]));
  }

  async list(scope: TenantScope): Promise<ExternalAudience[]> {
    const r = await this.pool.query<Row>(`SELECT doc FROM external_audiences WHERE org_id = $1 AND sandbox_id = $2 ORDER BY creation_time, id COLLATE "C"`, [scope.orgId, scope.sandboxId]);
    return r.rows.map(externalAudienceFromRow);
  }

  async count(scope: TenantScope): Promise<number> {
    const r = await this.pool.query<{ n: string }>("SELECT COUNT(*) AS n FROM external_audiences WHERE org_id = $1 AND sandbox_id = $2", [scope.orgId, scope.sandboxId]);
    return Number(r.rows[0]!.n);
  }

  async delete(scope: TenantScope, id: string): Promise<boolean> {
    const r = await this.pool.query("DELETE FROM external_audiences WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return (r.rowCount ?? 0) > 0;
  }
}
