/**
 * The Schema Registry in the embedded metadata store (stores/schema-registry.ts). Writes that
 * check before they insert run in one IMMEDIATE transaction (see sqlite-store.ts).
 */
import type Database from "better-sqlite3";
import type { SandboxIdScope as TenantScope } from "../../platform/tenant.js";
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


export class SqliteSchemas implements SchemaRegistryRepository {
  constructor(private readonly db: Database.Database) {}

  private schemaId(scope: TenantScope, idOrAltId: string): string | undefined {
    const row = this.db
      .prepare("SELECT id FROM registry_schemas WHERE org_id = ? AND sandbox_id = ? AND (id = ? OR alt_id = ?)")
      .get(scope.orgId, scope.sandboxId, idOrAltId, idOrAltId) as { id: string } | undefined;
    return row?.id;
  }

  async insertSchema(scope: TenantScope, schema: StoredSchema): Promise<void> {
    this.db.prepare(`INSERT INTO registry_schemas (${SCHEMA_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`).run(...schemaColumns(scope, schema));
  }

  async getSchema(scope: TenantScope, idOrAltId: string): Promise<StoredSchema | undefined> {
    const row = this.db
      .prepare(`SELECT ${SCHEMA_FIELDS} FROM registry_schemas WHERE org_id = ? AND sandbox_id = ? AND (id = ? OR alt_id = ?)`)
      .get(scope.orgId, scope.sandboxId, idOrAltId, idOrAltId) as SchemaRow | undefined;
    return row ? schemaFromRow(row) : undefined;
  }

  async listSchemas(scope: TenantScope, query: SchemaListQuery): Promise<{ items: StoredSchema[]; total: number }> {
    const dir = query.direction === "desc" ? "DESC" : "ASC";
    return this.db.transaction(() => {
      const total = (this.db.prepare("SELECT COUNT(*) AS n FROM registry_schemas WHERE org_id = ? AND sandbox_id = ?").get(scope.orgId, scope.sandboxId) as { n: number }).n;
      const rows = this.db
        .prepare(`SELECT ${SCHEMA_FIELDS} FROM registry_schemas WHERE org_id = ? AND sandbox_id = ? ORDER BY title ${dir}, id ${dir} LIMIT ? OFFSET ?`)
        .all(scope.orgId, scope.sandboxId, query.limit, query.offset) as SchemaRow[];
      return { total, items: rows.map(schemaFromRow) };
    })();
  }

  async deleteSchema(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.transaction(() => {
      const schemaId = this.schemaId(scope, id);
      if (schemaId === undefined) return false;
      const users = this.datasetsOf(scope, schemaId);
      if (users.length > 0) throw new SchemaInUseError(users);
      this.db.prepare("DELETE FROM registry_descriptors WHERE org_id = ? AND sandbox_id = ? AND schema_id = ?").run(scope.orgId, scope.sandboxId, schemaId);
      this.db.prepare("DELETE FROM registry_schemas WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, schemaId);
      return true;
    }).immediate();
  }

  async insertDescriptor(scope: TenantScope, d: StoredDescriptor): Promise<void> {
    this.db.transaction(() => {
      if (this.schemaId(scope, d.schemaId) !== d.schemaId) throw new SchemaNotFoundError(d.schemaId);
      const existing = this.db
        .prepare("SELECT id, source_property, is_primary FROM registry_descriptors WHERE org_id = ? AND sandbox_id = ? AND schema_id = ?")
        .all(scope.orgId, scope.sandboxId, d.schemaId) as { id: string; source_property: string; is_primary: number }[];
      const onProperty = existing.find((e) => e.source_property === d.sourceProperty);
      if (onProperty) throw new DescriptorConflictError("property", onProperty.id);
      const primary = existing.find((e) => e.is_primary === 1);
      if (d.primary && primary) throw new DescriptorConflictError("primary", primary.id);
      if (existing.length >= MAX_DESCRIPTORS_PER_SCHEMA) throw new DescriptorLimitError();
      this.db.prepare(`INSERT INTO registry_descriptors (${DESCRIPTOR_COLUMN_NAMES}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(...descriptorColumns(scope, d));
    }).immediate();
  }

  async getDescriptor(scope: TenantScope, id: string): Promise<StoredDescriptor | undefined> {
    const row = this.db
      .prepare(`SELECT ${DESCRIPTOR_FIELDS} FROM registry_descriptors WHERE org_id = ? AND sandbox_id = ? AND id = ?`)
      .get(scope.orgId, scope.sandboxId, id) as DescriptorRow | undefined;
    return row ? descriptorFromRow(row) : undefined;
  }

  async listDescriptors(scope: TenantScope, schemaId?: string): Promise<StoredDescriptor[]> {
    const bySchema = schemaId === undefined ? "" : " AND schema_id = ?";
    const rows = this.db
      .prepare(`SELECT ${DESCRIPTOR_FIELDS} FROM registry_descriptors WHERE org_id = ? AND sandbox_id = ?${bySchema} ORDER BY creation_time, id`)
      .all(scope.orgId, scope.sandboxId, ...(schemaId === undefined ? [] : [schemaId])) as DescriptorRow[];
    return rows.map(descriptorFromRow);
  }

  async deleteDescriptor(scope: TenantScope, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM registry_descriptors WHERE org_id = ? AND sandbox_id = ? AND id = ?").run(scope.orgId, scope.sandboxId, id).changes > 0;
  }

  async linkDataset(scope: TenantScope, datasetId: string, schemaId: string): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.schemaId(scope, schemaId) !== schemaId) return false;
      this.db
        .prepare("INSERT INTO registry_dataset_schemas (org_id, sandbox_id, dataset_id, schema_id) VALUES (?, ?, ?, ?) ON CONFLICT (org_id, sandbox_id, dataset_id) DO NOTHING")
        .run(scope.orgId, scope.sandboxId, datasetId, schemaId);
      return true;
    }).immediate();
  }

  async unlinkDataset(scope: TenantScope, datasetId: string): Promise<void> {
    this.db.prepare("DELETE FROM registry_dataset_schemas WHERE org_id = ? AND sandbox_id = ? AND dataset_id = ?").run(scope.orgId, scope.sandboxId, datasetId);
  }

  async schemasOfDatasets(scope: TenantScope, datasetIds: readonly string[]): Promise<Map<string, string>> {
    if (datasetIds.length === 0) return new Map();
    const rows = this.db
      .prepare("SELECT dataset_id, schema_id FROM registry_dataset_schemas WHERE org_id = ? AND sandbox_id = ? AND dataset_id IN (SELECT value FROM json_each(?))")
      .all(scope.orgId, scope.sandboxId, JSON.stringify(datasetIds)) as { dataset_id: string; schema_id: string }[];
    return new Map(rows.map((r) => [r.dataset_id, r.schema_id]));
  }

  async datasetsOfSchema(scope: TenantScope, schemaId: string): Promise<string[]> {
    return this.datasetsOf(scope, schemaId);
  }

  private datasetsOf(scope: TenantScope, schemaId: string): string[] {
    const rows = this.db
      .prepare("SELECT dataset_id FROM registry_dataset_schemas WHERE org_id = ? AND sandbox_id = ? AND schema_id = ? ORDER BY dataset_id")
      .all(scope.orgId, scope.sandboxId, schemaId) as { dataset_id: string }[];
    return rows.map((r) => r.dataset_id);
  }
}
