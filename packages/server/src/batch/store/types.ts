/**
 * Persistence of the batch area's resources (segment jobs, schedules, export
 * jobs): one narrow repository, implemented for SQLite (embedded) and
 * PostgreSQL. Resources are stored as their API document plus the few columns
 * that lists filter and sort on; every call is scoped to one tenant except the
 * two maintenance queries the runner needs at start-up and for scheduling.
 */
import type { TenantScope } from "../../profiles/types.js";

export type ResourceKind = "segment-job" | "schedule" | "export-job" | "preview" | "schedule-default" | "backfill";

export interface StoredResource<T> {
  scope: TenantScope;
  id: string;
  status: string;
  /** Epoch ms; lists sort on it (then id). */
  creationTime: number;
  doc: T;
}

export interface ResourceListQuery {
  status?: string;
  direction: "asc" | "desc";
  offset: number;
  limit: number;
}

export interface BatchRepository {
  insert<T>(kind: ResourceKind, r: StoredResource<T>): Promise<void>;
  /** Replaces the document and status; false when the id does not exist in this scope. */
  update<T>(kind: ResourceKind, r: StoredResource<T>): Promise<boolean>;
  /**
   * Replaces the document only while the stored status is one of `from`
   * (compare-and-set, so a cancel and the runner's progress never overwrite
   * each other's status). Returns whether it was written.
   */
  updateIf<T>(kind: ResourceKind, r: StoredResource<T>, from: readonly string[]): Promise<boolean>;
  get<T>(kind: ResourceKind, scope: TenantScope, id: string): Promise<StoredResource<T> | null>;
  list<T>(kind: ResourceKind, scope: TenantScope, q: ResourceListQuery): Promise<{ items: StoredResource<T>[]; total: number }>;
  delete(kind: ResourceKind, scope: TenantScope, id: string): Promise<boolean>;
  /** Every tenant's resources in these statuses, oldest first (start-up recovery, scheduler). */
  listAllByStatus<T>(kind: ResourceKind, statuses: readonly string[]): Promise<StoredResource<T>[]>;
  close(): Promise<void>;
}
