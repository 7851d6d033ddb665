/**
 * SQL fragments shared by the embedded and PostgreSQL stores, so that both
 * order and filter identically (the conformance suite checks they do).
 */
import type { Migration } from "../storage-kit/migrations.js";
import { computedAttributeStatements } from "./computed-attributes.js";
import { schemaRegistryStatements } from "./schema-registry.js";
import type { DefinitionListQuery, DefinitionSortField, MergePolicyListQuery, MergePolicyOrderField } from "./types.js";

/**
 * Sort expressions. Text columns compare by code point in both databases
 * (SQLite BINARY, PostgreSQL COLLATE "C"); a missing description sorts as "".
 */
export function definitionSortColumn(field: DefinitionSortField, dialect: "sqlite" | "postgres"): string {
  const c = dialect === "postgres" ? ' COLLATE "C"' : "";
  switch (field) {
    case "creationTime":
      return "creation_time";
    case "updateTime":
      return "update_time";
    case "updateEpoch":
      return "update_epoch";
    case "name":
      return `name${c}`;
    case "description":
      return `COALESCE(description, '')${c}`;
    case "id":
      return `id${c}`;
  }
}

export function definitionOrderBy(query: DefinitionListQuery, dialect: "sqlite" | "postgres"): string {
  const keys = query.sort.map((k) => `${definitionSortColumn(k.field, dialect)} ${k.direction === "asc" ? "ASC" : "DESC"}`);
  // The id tie-break follows the first key's direction, so that the common
  // "creationTime desc" order is one backward scan of definitions_created.
  const tieDir = query.sort[0]?.direction === "desc" ? "DESC" : "ASC";
  if (!query.sort.some((k) => k.field === "id")) keys.push(`${definitionSortColumn("id", dialect)} ${tieDir}`);
  return keys.join(", ");
}

/** WHERE conditions for the evaluation-method filters; `p(n)` renders the n-th placeholder. */
export function definitionFilters(query: DefinitionListQuery, params: unknown[], p: (n: number) => string): string {
  const parts: string[] = [];
  for (const key of ["batch", "continuous", "synchronous"] as const) {
    const v = query.filters[key];
    if (v === undefined) continue;
    params.push(v ? 1 : 0);
    parts.push(`${key} = ${p(params.length)}`);
  }
  return parts.map((s) => ` AND ${s}`).join("");
}

export function mergePolicyOrderColumn(field: MergePolicyOrderField, dialect: "sqlite" | "postgres"): string {
  const c = dialect === "postgres" ? ' COLLATE "C"' : "";
  switch (field) {
    case "name":
      return `name${c}`;
    case "updateEpoch":
      return "update_epoch";
    case "id":
      return `id${c}`;
  }
}

export function mergePolicyFilters(query: MergePolicyListQuery, params: unknown[], p: (n: number) => string): string {
  const f = query.filters;
  const parts: string[] = [];
  const add = (col: string, v: unknown) => {
    params.push(v);
    parts.push(`${col} = ${p(params.length)}`);
  };
  if (f.default !== undefined) add("is_default", f.default ? 1 : 0);
  if (f.isActiveOnEdge !== undefined) add("is_active_on_edge", f.isActiveOnEdge ? 1 : 0);
  if (f.schemaName !== undefined) add("schema_name", f.schemaName);
  if (f.identityGraphType !== undefined) add("identity_graph_type", f.identityGraphType);
  if (f.attributeMergeType !== undefined) add("attribute_merge_type", f.attributeMergeType);
  if (f.version !== undefined) add("version", f.version);
  return parts.map((s) => ` AND ${s}`).join("");
}

export function mergePolicyOrderBy(query: MergePolicyListQuery, dialect: "sqlite" | "postgres"): string {
  const dir = query.order.direction === "asc" ? "ASC" : "DESC";
  const first = `${mergePolicyOrderColumn(query.order.field, dialect)} ${dir}`;
  return query.order.field === "id" ? first : `${first}, ${mergePolicyOrderColumn("id", dialect)} ASC`;
}

/** Where both metadata stores record their applied migrations (storage-kit/migrations.ts). */
export const MIGRATIONS_TABLE = "segmentd_migrations";

/** The migrations both stores apply, as portable SQL (INTEGER booleans, TEXT JSON documents). */

export function coreMigrations(dialect: "sqlite" | "postgres"): Migration[] {
  const big = dialect === "postgres" ? "BIGINT" : "INTEGER";
  return [
    {
      version: 1,
      name: "definitions and merge policies",
      statements: [
        `CREATE TABLE definitions (
          org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL,
          name TEXT NOT NULL, description TEXT,
          creation_time ${big} NOT NULL, update_time ${big} NOT NULL, update_epoch ${big} NOT NULL,
          batch INTEGER NOT NULL, continuous INTEGER NOT NULL, synchronous INTEGER NOT NULL,
          merge_policy_id TEXT NOT NULL, canonical_text TEXT NOT NULL, doc TEXT NOT NULL,
          PRIMARY KEY (org_id, sandbox_id, id))`,
        // The unique index, not a read-then-write check, is what makes
        // concurrent creates of one name yield exactly one success.
        `CREATE UNIQUE INDEX definitions_name ON definitions (org_id, sandbox_id, name)`,
        `CREATE INDEX definitions_created ON definitions (org_id, sandbox_id, creation_time, id)`,
        `CREATE TABLE definition_refs (
          org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, from_id TEXT NOT NULL, to_id TEXT NOT NULL,
          PRIMARY KEY (org_id, sandbox_id, from_id, to_id))`,
        `CREATE INDEX definition_refs_to ON definition_refs (org_id, sandbox_id, to_id)`,
        `CREATE TABLE merge_policies (
          org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL,
          name TEXT NOT NULL, schema_name TEXT NOT NULL,
          is_default INTEGER NOT NULL, is_active_on_edge INTEGER NOT NULL,
          identity_graph_type TEXT NOT NULL, attribute_merge_type TEXT NOT NULL,
          version INTEGER NOT NULL, update_epoch ${big} NOT NULL, creation_time ${big} NOT NULL,
          doc TEXT NOT NULL,
          PRIMARY KEY (org_id, sandbox_id, id))`,
        `CREATE UNIQUE INDEX merge_policies_one_edge ON merge_policies (org_id, sandbox_id) WHERE is_active_on_edge = 1`,
        `CREATE UNIQUE INDEX merge_policies_one_default ON merge_policies (org_id, sandbox_id, schema_name) WHERE is_default = 1`,
      ],
    },
    {
      version: 2,
      name: "covering index for the per-sandbox limit counts",
      // Counting a sandbox's definitions by method on every write must not read
      // the JSON documents; this index answers those counts on its own.
      statements: [`CREATE INDEX definitions_methods ON definitions (org_id, sandbox_id, continuous, synchronous)`],
    },
    {
      version: 3,
      name: "datastreams",
      // Additive: a database migrated by an earlier version opens unchanged and gains the table.
      // The id is the key on its own (an Edge Network request carries nothing else); the scope
      // columns serve the tenant APIs. The datastream itself is the JSON document.
      statements: [
        `CREATE TABLE IF NOT EXISTS datastreams (
          id TEXT NOT NULL PRIMARY KEY,
          org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL,
          creation_time ${big} NOT NULL, update_time ${big} NOT NULL,
          doc TEXT NOT NULL)`,
        `CREATE INDEX IF NOT EXISTS datastreams_sandbox ON datastreams (org_id, sandbox_id, creation_time, id)`,
      ],
    },
    {
      version: 4,
      name: "external audiences",
      // Additive. The unique index, not a read-then-write check, makes concurrent
      // creates of one (namespace, audienceId) yield exactly one success.
      statements: [
        `CREATE TABLE IF NOT EXISTS external_audiences (
          org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL,
          namespace TEXT NOT NULL, audience_id TEXT NOT NULL,
          creation_time ${big} NOT NULL, update_time ${big} NOT NULL,
          doc TEXT NOT NULL,
          PRIMARY KEY (org_id, sandbox_id, id))`,
        `CREATE UNIQUE INDEX IF NOT EXISTS external_audiences_key ON external_audiences (org_id, sandbox_id, namespace, audience_id)`,
      ],
    },
    // Tenant schemas, identity descriptors and the datasets created from them (the statements sit with their rows).
    { version: 5, name: "schema registry", statements: schemaRegistryStatements(big) },
    // Computed attributes (AEP's /data/core/ca/attributes); the statements sit with their rows.
    { version: 6, name: "computed attributes", statements: computedAttributeStatements(big) },
  ];
}
