/**
 * The Schema Registry in the PostgreSQL metadata store (stores/schema-registry.ts). Writes that
 * check before they write take a transaction-scoped advisory lock on the sandbox's registry, so
 * they are serialized across every server process; the unique indexes stay the final guard.
 */
import type pg from "pg";
import type { SandboxIdScope as TenantScope } from "../../platform/tenant.js";
import { withTransaction } from "../../storage-kit/postgres.js";
import {
  DESCRIPTOR_COLUMN_NAMES,
  DESCRIPTOR_FIELDS,
  DescriptorConflictError,
  DescriptorLimitError,
  MAX_DESCRIPTORS_PER_SCHEMA,
  SCHEMA_COLUMN_NAMES,
  SCHEMA_FIELDS,
  SchemaInUseError,
  SchemaNotFoundError,
  descriptorColumns,
  descriptorFromRow,
  schemaColumns,
  schemaFromRow,
  type DescriptorRow,
  type SchemaListQuery,
  type SchemaRegistryRepository,
  type SchemaRow,
  type StoredDescriptor,
  type StoredSchema,
} from "../schema-registry.js";

const placeholders = (n: number) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(", ");

function locked<T>(pool: pg.Pool, scope: TenantScope, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  return withTransaction(pool, fn, { lock: `schema-registry/${scope.orgId}/${scope.sandboxId}` });
}

async function schemaIdIn(c: pg.ClientBase, scope: TenantScope, idOrAltId: string): Promise<string | undefined> {
  const r = await c.query<{ id: string }>("SELECT id FROM registry_schemas WHERE org_id = $1 AND sandbox_id = $2 AND (id = $3 OR alt_id = $3)", [scope.orgId, scope.sandboxId, idOrAltId]);
  return r.rows[0]?.id;
}

async function datasetsOf(c: pg.Pool | pg.PoolClient, scope: TenantScope, schemaId: string): Promise<string[]> {
  const r = await c.query<{ dataset_id: string }>(
    `SELECT dataset_id FROM registry_dataset_schemas WHERE org_id = $1 AND sandbox_id = $2 AND schema_id = $3 ORDER BY dataset_id COLLATE "C"`,
    [scope.orgId, scope.sandboxId, schemaId],
  );
  return r.rows.map((x) => x.dataset_id);
}

export class PgSchemas implements SchemaRegistryRepository {
  constructor(private readonly pool: pg.Pool) {}

  async insertSchema(scope: TenantScope, schema: StoredSchema): Promise<void> {
    await this.pool.query(`INSERT INTO registry_schemas (${SCHEMA_COLUMN_NAMES}) VALUES (${placeholders(8)})`, schemaColumns(scope, schema));
  }

  async getSchema(scope: TenantScope, idOrAltId: string): Promise<StoredSchema | undefined> {
    const r = await this.pool.query<SchemaRow>(`SELECT ${SCHEMA_FIELDS} FROM registry_schemas WHERE org_id = $1 AND sandbox_id = $2 AND (id = $3 OR alt_id = $3)`, [scope.orgId, scope.sandboxId, idOrAltId]);
    return r.rows[0] ? schemaFromRow(r.rows[0]) : undefined;
  }

  async listSchemas(scope: TenantScope, query: SchemaListQuery): Promise<{ items: StoredSchema[]; total: number }> {
    const dir = query.direction === "desc" ? "DESC" : "ASC";
    return withTransaction(this.pool, async (c) => {
      const total = Number((await c.query<{ n: string }>("SELECT COUNT(*) AS n FROM registry_schemas WHERE org_id = $1 AND sandbox_id = $2", [scope.orgId, scope.sandboxId])).rows[0]!.n);
      const r = await c.query<SchemaRow>(
        `SELECT ${SCHEMA_FIELDS} FROM registry_schemas WHERE org_id = $1 AND sandbox_id = $2 ORDER BY title COLLATE "C" ${dir}, id COLLATE "C" ${dir} LIMIT $3 OFFSET $4`,
        [scope.orgId, scope.sandboxId, query.limit, query.offset],
      );
      return { total, items: r.rows.map(schemaFromRow) };
    }, { snapshot: true });
  }

  async deleteSchema(scope: TenantScope, id: string): Promise<boolean> {
    return locked(this.pool, scope, async (c) => {
      const schemaId = await schemaIdIn(c, scope, id);
      if (schemaId === undefined) return false;
      const users = await datasetsOf(c, scope, schemaId);
      if (users.length > 0) throw new SchemaInUseError(users);
      await c.query("DELETE FROM registry_descriptors WHERE org_id = $1 AND sandbox_id = $2 AND schema_id = $3", [scope.orgId, scope.sandboxId, schemaId]);
      await c.query("DELETE FROM registry_schemas WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, schemaId]);
      return true;
    });
  }

  async insertDescriptor(scope: TenantScope, d: StoredDescriptor): Promise<void> {
    await locked(this.pool, scope, async (c) => {
      if ((await schemaIdIn(c, scope, d.schemaId)) !== d.schemaId) throw new SchemaNotFoundError(d.schemaId);
      const existing = (await c.query<{ id: string; source_property: string; is_primary: number }>(
        "SELECT id, source_property, is_primary FROM registry_descriptors WHERE org_id = $1 AND sandbox_id = $2 AND schema_id = $3",
        [scope.orgId, scope.sandboxId, d.schemaId],
      )).rows;
      const onProperty = existing.find((e) => e.source_property === d.sourceProperty);
      if (onProperty) throw new DescriptorConflictError("property", onProperty.id);
      const primary = existing.find((e) => e.is_primary === 1);
      if (d.primary && primary) throw new DescriptorConflictError("primary", primary.id);
      if (existing.length >= MAX_DESCRIPTORS_PER_SCHEMA) throw new DescriptorLimitError();
      await c.query(`INSERT INTO registry_descriptors (${DESCRIPTOR_COLUMN_NAMES}) VALUES (${placeholders(9)})`, descriptorColumns(scope, d));
    });
  }

  async getDescriptor(scope: TenantScope, id: string): Promise<StoredDescriptor | undefined> {
    const r = await this.pool.query<DescriptorRow>(`SELECT ${DESCRIPTOR_FIELDS} FROM registry_descriptors WHERE org_id = $1 AND sandbox_id = $2 AND id = $3`, [scope.orgId, scope.sandboxId, id]);
    return r.rows[0] ? descriptorFromRow(r.rows[0]) : undefined;
  }

  async listDescriptors(scope: TenantScope, schemaId?: string): Promise<StoredDescriptor[]> {
    const params: unknown[] = [scope.orgId, scope.sandboxId];
    if (schemaId !== undefined) params.push(schemaId);
    const r = await this.pool.query<DescriptorRow>(
      `SELECT ${DESCRIPTOR_FIELDS} FROM registry_descriptors WHERE org_id = $1 AND sandbox_id = $2${schemaId === undefined ? "" : " AND schema_id = $3"} ORDER BY creation_time, id COLLATE "C"`,
      params,
    );
    return r.rows.map(descriptorFromRow);
  }

  async deleteDescriptor(scope: TenantScope, id: string): Promise<boolean> {
    const r = await this.pool.query("DELETE FROM registry_descriptors WHERE org_id = $1 AND sandbox_id = $2 AND id = $3", [scope.orgId, scope.sandboxId, id]);
    return (r.rowCount ?? 0) > 0;
  }

  async linkDataset(scope: TenantScope, datasetId: string, schemaId: string): Promise<boolean> {
    return locked(this.pool, scope, async (c) => {
      if ((await schemaIdIn(c, scope, schemaId)) !== schemaId) return false;
      await c.query(
        "INSERT INTO registry_dataset_schemas (org_id, sandbox_id, dataset_id, schema_id) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, sandbox_id, dataset_id) DO NOTHING",
        [scope.orgId, scope.sandboxId, datasetId, schemaId],
      );
      return true;
    });
  }

  async unlinkDataset(scope: TenantScope, datasetId: string): Promise<void> {
    await this.pool.query("DELETE FROM registry_dataset_schemas WHERE org_id = $1 AND sandbox_id = $2 AND dataset_id = $3", [scope.orgId, scope.sandboxId, datasetId]);
  }

  async schemasOfDatasets(scope: TenantScope, datasetIds: readonly string[]): Promise<Map<string, string>> {
    if (datasetIds.length === 0) return new Map();
    const r = await this.pool.query<{ dataset_id: string; schema_id: string }>(
      "SELECT dataset_id, schema_id FROM registry_dataset_schemas WHERE org_id = $1 AND sandbox_id = $2 AND dataset_id = ANY($3::text[])",
      [scope.orgId, scope.sandboxId, [...datasetIds]],
    );
    return new Map(r.rows.map((x) => [x.dataset_id, x.schema_id]));
  }

  async datasetsOfSchema(scope: TenantScope, schemaId: string): Promise<string[]> {
    return datasetsOf(this.pool, scope, schemaId);
  }
}
