/**
 * Store interfaces: the only way services reach persistent state. Every method
 * takes a `TenantScope` — there is deliberately no query that spans
 * organizations or sandboxes, with one documented exception: the two
 * by-id/all reads of `DatastreamRepository` that the unauthenticated edge
 * interact path needs (its request names the tenant only through the
 * datastream). Two implementations (embedded SQLite, PostgreSQL) pass one
 * conformance suite (packages/server/test/store-conformance.test.ts).
 *
 * Adding a repository (datasets, jobs, work orders, quotas...): declare its
 * interface here, add it to `MetadataStore`, append a migration to
 * `coreMigrations` in `sql-common.ts` (both stores apply that list; a new table
 * is additive, `CREATE TABLE IF NOT EXISTS`), implement it in both stores, and
 * extend the conformance suite.
 */
import type { SandboxIdScope } from "../platform/tenant.js";
import type { SchemaRegistryRepository } from "./schema-registry.js";
import type { ComputedAttributeRepository } from "./computed-attributes.js";
import type { DatastreamRecord, DefinitionRecord, ExternalAudience, MergePolicyRecord } from "./records.js";

export type { DatastreamRecord, DefinitionRecord, ExternalAudience, MergePolicyRecord } from "./records.js";

/** Which organization and sandbox a call acts for, keyed by sandbox id. Required by every store query. */
export type TenantScope = SandboxIdScope;

/** Per-sandbox counters enforced inside the write transaction (no read-then-write race). */
export interface DefinitionLimits {
  definitions: number;
  streaming: number;
  edge: number;
}

export const DEFINITION_SORT_FIELDS = ["creationTime", "updateTime", "updateEpoch", "name", "description", "id"] as const;
export type DefinitionSortField = (typeof DEFINITION_SORT_FIELDS)[number];

export interface SortKey<F extends string> {
  field: F;
  direction: "asc" | "desc";
}

export interface DefinitionListQuery {
  filters: { batch?: boolean; continuous?: boolean; synchronous?: boolean };
  /** Applied in order; the store appends `id` (in the first key's direction) so that the order is total and paging is stable. */
  sort: SortKey<DefinitionSortField>[];
  offset: number;
  limit: number;
}

export interface Page<T> {
  items: T[];
  total: number;
}

export interface DefinitionRepository {
  /** Throws DuplicateNameError or LimitExceededError; nothing is written then. */
  insert(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<void>;
  /** Whole-record replace. Returns false when the id does not exist in this scope. */
  update(scope: TenantScope, record: DefinitionRecord, limits: DefinitionLimits): Promise<boolean>;
  get(scope: TenantScope, id: string): Promise<DefinitionRecord | undefined>;
  getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, DefinitionRecord>>;
  list(scope: TenantScope, query: DefinitionListQuery): Promise<Page<DefinitionRecord>>;
  /** Ids of the definitions whose expression references `id` through `inSegment`. */
  dependents(scope: TenantScope, id: string): Promise<string[]>;
  /** Throws HasDependentsError while other definitions reference it. Returns false when not found. */
  delete(scope: TenantScope, id: string): Promise<boolean>;
}

export const MERGE_POLICY_ORDER_FIELDS = ["name", "updateEpoch", "id"] as const;
export type MergePolicyOrderField = (typeof MERGE_POLICY_ORDER_FIELDS)[number];

export interface MergePolicyListQuery {
  filters: {
    default?: boolean;
    isActiveOnEdge?: boolean;
    schemaName?: string;
    identityGraphType?: string;
    attributeMergeType?: string;
    version?: number;
  };
  order: SortKey<MergePolicyOrderField>;
  offset: number;
  limit: number;
}

export interface MergePolicyRepository {
  /**
   * Inserting or updating a policy with `default: true` clears `default` on the
   * other policies of the same schema class, in the same transaction. A second
   * `isActiveOnEdge` policy in a sandbox throws EdgePolicyConflictError.
   */
  insert(scope: TenantScope, record: MergePolicyRecord): Promise<void>;
  update(scope: TenantScope, record: MergePolicyRecord, guard?: MergePolicyWriteGuard): Promise<boolean>;
  get(scope: TenantScope, id: string): Promise<MergePolicyRecord | undefined>;
  getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, MergePolicyRecord>>;
  getDefault(scope: TenantScope, schemaName: string): Promise<MergePolicyRecord | undefined>;
  list(scope: TenantScope, query: MergePolicyListQuery): Promise<Page<MergePolicyRecord>>;
  count(scope: TenantScope): Promise<number>;
  /** Throws MergePolicyInUseError while definitions use it. Returns false when not found. */
  delete(scope: TenantScope, id: string, guard?: MergePolicyWriteGuard): Promise<boolean>;
}

/** How a tenant's write is held (the API passes it; a replica copying the hub's state does not). */
export interface MergePolicyWriteGuard {
  /**
   * Refuse, inside the write's transaction, an update or delete that would leave the policy's
   * schema class without a default (DefaultMergePolicyRequiredError): its default moves only by
   * making another policy the default.
   */
  keepDefault?: boolean;
}

/** A datastream with the scope it is stored under (the one-time import of datastreams.json). */
export interface ScopedDatastream {
  scope: TenantScope;
  record: DatastreamRecord;
}

/**
 * Edge datastreams. Ids are global (an Edge Network request carries only the
 * id); every tenant API call goes through the scoped methods, so another
 * sandbox's id reads as missing and is never changed.
 */
export interface DatastreamRepository {
  /** Throws when the id exists already (in any scope). */
  insert(scope: TenantScope, record: DatastreamRecord): Promise<void>;
  /** Whole-record replace. Returns false when the id does not exist in this scope (nothing written). */
  update(scope: TenantScope, record: DatastreamRecord): Promise<boolean>;
  get(scope: TenantScope, id: string): Promise<DatastreamRecord | undefined>;
  /** The sandbox's datastreams, oldest first (creationTime, then id). */
  list(scope: TenantScope): Promise<DatastreamRecord[]>;
  /** Returns false when the id does not exist in this scope (nothing deleted). */
  delete(scope: TenantScope, id: string): Promise<boolean>;
  /**
   * The reads that span tenants (the exception named at the top of this file),
   * for the edge interact path only — never for a tenant API answer: the edge
   * keeps every datastream in memory, loaded with `all`, and reads one it does
   * not know yet (created by another process) with `findById`.
   */
  findById(id: string): Promise<DatastreamRecord | undefined>;
  all(): Promise<DatastreamRecord[]>;
  /**
   * Inserts every item in one transaction when the table holds no datastream
   * at all (of any tenant); returns whether it did. Processes importing at
   * once: exactly one imports.
   */
  importIfEmpty(items: readonly ScopedDatastream[]): Promise<boolean>;
}

/**
 * Externally generated audiences (the Audiences API). A sandbox holds at most a
 * few thousand (the service's limit), so `list` returns them all and the
 * Audiences API filters, sorts and pages them together with the definitions.
 */
export interface ExternalAudienceRepository {
  /** Throws DuplicateAudienceError when the sandbox has this namespace and audienceId already; nothing is written then. */
  insert(scope: TenantScope, record: ExternalAudience): Promise<void>;
  /** Whole-record replace. Returns false when the id does not exist in this scope. */
  update(scope: TenantScope, record: ExternalAudience): Promise<boolean>;
  get(scope: TenantScope, id: string): Promise<ExternalAudience | undefined>;
  getMany(scope: TenantScope, ids: readonly string[]): Promise<Map<string, ExternalAudience>>;
  /** The sandbox's external audiences, oldest first (creationTime, then id). */
  list(scope: TenantScope): Promise<ExternalAudience[]>;
  count(scope: TenantScope): Promise<number>;
  delete(scope: TenantScope, id: string): Promise<boolean>;
}

export interface MetadataStore {
  readonly kind: "embedded" | "postgres";
  readonly definitions: DefinitionRepository;
  readonly externalAudiences: ExternalAudienceRepository;
  readonly mergePolicies: MergePolicyRepository;
  readonly datastreams: DatastreamRepository;
  /** Tenant schemas and identity descriptors (stores/schema-registry.ts). */
  readonly schemas: SchemaRegistryRepository;
  /** Computed attributes (stores/computed-attributes.ts). */
  readonly computedAttributes: ComputedAttributeRepository;
  /** Resolves when the store answers a trivial query (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class StoreError extends Error {}

export class DuplicateNameError extends StoreError {
  constructor(readonly definitionName: string) {
    super(`A segment definition named "${definitionName}" already exists in this sandbox`);
  }
}

export class DuplicateAudienceError extends StoreError {
  constructor(
    readonly namespace: string,
    readonly audienceId: string,
  ) {
    super(`an audience with namespace ${namespace} and audienceId ${audienceId} already exists in this sandbox`);
  }
}

export class LimitExceededError extends StoreError {
  constructor(
    readonly limit: keyof DefinitionLimits,
    readonly max: number,
  ) {
    super(`limit ${limit} (${max}) reached`);
  }
}

export class HasDependentsError extends StoreError {
  constructor(readonly dependents: string[]) {
    super(`referenced by ${dependents.join(", ")}`);
  }
}

export class EdgePolicyConflictError extends StoreError {
  constructor(readonly activeId: string) {
    super(`merge policy ${activeId} is already active on edge`);
  }
}

export class DefaultMergePolicyRequiredError extends StoreError {
  constructor(
    readonly mergePolicyId: string,
    readonly schemaName: string,
  ) {
    super(`merge policy ${mergePolicyId} is the default of schema class ${schemaName}`);
  }
}

export class MergePolicyInUseError extends StoreError {
  constructor(
    readonly definitionIds: string[],
    readonly total: number,
  ) {
    super(`merge policy used by ${total} definition(s)`);
  }
}
