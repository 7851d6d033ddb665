/**
 * What the metadata stores keep of the Schema Registry (services/schema-registry.ts): tenant
 * schemas, their identity descriptors, and which dataset was created from which schema. The
 * schema and the descriptor are stored as the API objects (AEP field names, `doc`); a few
 * columns beside them serve the lookups and the invariants below.
 */
import type { SandboxIdScope } from "../platform/tenant.js";

type TenantScope = SandboxIdScope;

export type XdmClass = "profile" | "experienceevent";

/** A tenant schema: its `$id`, `meta:altId`, title and class, and the whole API object. */
export interface StoredSchema {
  id: string;
  altId: string;
  title: string;
  schemaClass: XdmClass;
  created: number;
  doc: Record<string, unknown>;
}

/** An identity descriptor (`xdm:descriptorIdentity`) of a tenant schema. */
export interface StoredDescriptor {
  /** `@id` */
  id: string;
  /** `xdm:sourceSchema`: the schema's `$id`. */
  schemaId: string;
  /** `xdm:sourceProperty`, a JSON pointer. */
  sourceProperty: string;
  namespace: string;
  primary: boolean;
  created: number;
  doc: Record<string, unknown>;
}

/** At most this many identity descriptors per schema: a dataset takes at most 50 identity fields. */
export const MAX_DESCRIPTORS_PER_SCHEMA = 50;

export interface SchemaListQuery {
  direction: "asc" | "desc";
  offset: number;
  limit: number;
}

export interface SchemaRegistryRepository {
  insertSchema(scope: TenantScope, schema: StoredSchema): Promise<void>;
  /** By `$id` or `meta:altId`. */
  getSchema(scope: TenantScope, idOrAltId: string): Promise<StoredSchema | undefined>;
  /** By title (code point order), then `$id`. */
  listSchemas(scope: TenantScope, query: SchemaListQuery): Promise<{ items: StoredSchema[]; total: number }>;
  /**
   * Deletes the schema and its descriptors in one transaction. Throws SchemaInUseError while a
   * dataset is linked to it (nothing is deleted then). Returns false when not found.
   */
  deleteSchema(scope: TenantScope, id: string): Promise<boolean>;
  /**
   * Throws SchemaNotFoundError when the schema is not in this scope, DescriptorConflictError for
   * a second primary identity or a second descriptor on one property, and DescriptorLimitError
   * past MAX_DESCRIPTORS_PER_SCHEMA; nothing is written then.
   */
  insertDescriptor(scope: TenantScope, descriptor: StoredDescriptor): Promise<void>;
  getDescriptor(scope: TenantScope, id: string): Promise<StoredDescriptor | undefined>;
  /** Oldest first (creation time, then `@id`); one schema's when `schemaId` is given. */
  listDescriptors(scope: TenantScope, schemaId?: string): Promise<StoredDescriptor[]>;
  deleteDescriptor(scope: TenantScope, id: string): Promise<boolean>;
  /** Records that a dataset was created from the schema; false (nothing written) when the schema is not in this scope. */
  linkDataset(scope: TenantScope, datasetId: string, schemaId: string): Promise<boolean>;
  unlinkDataset(scope: TenantScope, datasetId: string): Promise<void>;
  /** Dataset id → schema `$id`, for the ids that have a link. */
  schemasOfDatasets(scope: TenantScope, datasetIds: readonly string[]): Promise<Map<string, string>>;
  /** The datasets linked to a schema, by id. */
  datasetsOfSchema(scope: TenantScope, schemaId: string): Promise<string[]>;
}

export class SchemaRegistryError extends Error {}

export class SchemaNotFoundError extends SchemaRegistryError {
  constructor(readonly schemaId: string) {
    super(`schema ${schemaId} not found`);
  }
}

export class SchemaInUseError extends SchemaRegistryError {
  constructor(readonly datasetIds: string[]) {
    super(`schema used by dataset(s) ${datasetIds.join(", ")}`);
  }
}

export class DescriptorConflictError extends SchemaRegistryError {
  constructor(
    readonly reason: "primary" | "property",
    readonly existingId: string,
  ) {
    super(reason === "primary" ? `primary identity descriptor ${existingId} exists` : `descriptor ${existingId} exists on this property`);
  }
}

export class DescriptorLimitError extends SchemaRegistryError {
  constructor() {
    super(`at most ${MAX_DESCRIPTORS_PER_SCHEMA} descriptors per schema`);
  }
}

// Rows, shared by both stores.

export interface SchemaRow {
  doc: string;
  schema_class: string;
  creation_time: number | string;
}

export const SCHEMA_COLUMN_NAMES = "org_id, sandbox_id, id, alt_id, title, schema_class, creation_time, doc";
/** The columns a read selects (SchemaRow). */
export const SCHEMA_FIELDS = "doc, schema_class, creation_time";

export function schemaColumns(scope: TenantScope, s: StoredSchema): unknown[] {
  return [scope.orgId, scope.sandboxId, s.id, s.altId, s.title, s.schemaClass, s.created, JSON.stringify(s.doc)];
}

export function schemaFromRow(row: SchemaRow): StoredSchema {
  const doc = JSON.parse(row.doc) as Record<string, unknown>;
  return { id: String(doc["$id"]), altId: String(doc["meta:altId"]), title: String(doc["title"]), schemaClass: row.schema_class as XdmClass, created: Number(row.creation_time), doc };
}

export interface DescriptorRow {
  doc: string;
  source_property: string;
  namespace: string;
  is_primary: number | boolean;
  creation_time: number | string;
}

export const DESCRIPTOR_COLUMN_NAMES = "org_id, sandbox_id, id, schema_id, source_property, namespace, is_primary, creation_time, doc";
/** The columns a read selects (DescriptorRow). */
export const DESCRIPTOR_FIELDS = "doc, source_property, namespace, is_primary, creation_time";

export function descriptorColumns(scope: TenantScope, d: StoredDescriptor): unknown[] {
  return [scope.orgId, scope.sandboxId, d.id, d.schemaId, d.sourceProperty, d.namespace, d.primary ? 1 : 0, d.created, JSON.stringify(d.doc)];
}

export function descriptorFromRow(row: DescriptorRow): StoredDescriptor {
  const doc = JSON.parse(row.doc) as Record<string, unknown>;
  return {
    id: String(doc["@id"]), schemaId: String(doc["xdm:sourceSchema"]), sourceProperty: row.source_property, namespace: row.namespace,
    primary: Number(row.is_primary) === 1, created: Number(row.creation_time), doc,
  };
}

/** Migration 5 of `coreMigrations` (sql-common.ts): additive, so a database of any earlier version gains the tables. */
export function schemaRegistryStatements(big: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS registry_schemas (
      org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL, alt_id TEXT NOT NULL,
      title TEXT NOT NULL, schema_class TEXT NOT NULL, creation_time ${big} NOT NULL, doc TEXT NOT NULL,
      PRIMARY KEY (org_id, sandbox_id, id))`,
    `CREATE UNIQUE INDEX IF NOT EXISTS registry_schemas_alt ON registry_schemas (org_id, sandbox_id, alt_id)`,
    `CREATE TABLE IF NOT EXISTS registry_descriptors (
      org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL, schema_id TEXT NOT NULL,
      source_property TEXT NOT NULL, namespace TEXT NOT NULL, is_primary INTEGER NOT NULL,
      creation_time ${big} NOT NULL, doc TEXT NOT NULL,
      PRIMARY KEY (org_id, sandbox_id, id))`,
    // The unique indexes, not only the checks before the insert, hold the two rules under concurrency.
    `CREATE UNIQUE INDEX IF NOT EXISTS registry_descriptors_one_primary ON registry_descriptors (org_id, sandbox_id, schema_id) WHERE is_primary = 1`,
    `CREATE UNIQUE INDEX IF NOT EXISTS registry_descriptors_property ON registry_descriptors (org_id, sandbox_id, schema_id, source_property)`,
    `CREATE TABLE IF NOT EXISTS registry_dataset_schemas (
      org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, dataset_id TEXT NOT NULL, schema_id TEXT NOT NULL,
      PRIMARY KEY (org_id, sandbox_id, dataset_id))`,
    `CREATE INDEX IF NOT EXISTS registry_dataset_schemas_schema ON registry_dataset_schemas (org_id, sandbox_id, schema_id)`,
  ];
}
