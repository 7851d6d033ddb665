/**
 * What the metadata stores keep of computed attributes (AEP's /data/core/ca/attributes, served by
 * computed/): one row per attribute, the attribute itself as its JSON document, with the columns
 * the invariants need beside it — a unique name per sandbox and the per-sandbox limit, counted
 * inside the insert's transaction so that concurrent creates cannot pass it together.
 */
import type { SandboxIdScope } from "../platform/tenant.js";

type TenantScope = SandboxIdScope;

export const COMPUTED_ATTRIBUTE_STATUSES = ["DRAFT", "NEW", "PROCESSING", "PROCESSED", "FAILED", "DISABLED"] as const;
export type ComputedAttributeStatus = (typeof COMPUTED_ATTRIBUTE_STATUSES)[number];

export const DURATION_UNITS = ["HOURS", "DAYS", "WEEKS", "MONTHS"] as const;
export type DurationUnit = (typeof DURATION_UNITS)[number];

export const MERGE_FUNCTIONS = ["SUM", "COUNT", "MIN", "MAX", "MOST_RECENT", "LIST"] as const;
export type MergeFunction = (typeof MERGE_FUNCTIONS)[number];

/** A computed attribute as stored: the API object without the request-derived fields (org, sandbox, path). */
export interface ComputedAttributeRecord {
  id: string;
  name: string;
  displayName: string;
  description: string;
  expression: { type: "PQL"; format: "pql/text"; value: string };
  keepCurrent: boolean;
  duration: { count: number; unit: DurationUnit };
  mergeFunction: MergeFunction;
  /** `meta:xdmType` of the value. */
  returnType: string;
  status: ComputedAttributeStatus;
  createEpoch: number;
  updateEpoch: number;
  createdBy?: string;
  /** When the first evaluation over the stored profiles finished (epoch ms; computed/processing.ts). */
  lastEvaluationTs?: number;
  /** That evaluation's progress (PROCESSING) and outcome (PROCESSED, FAILED). */
  evaluation?: AttributeEvaluation;
}

export interface AttributeEvaluation {
  profilesEvaluated: number;
  /** The sandbox's profiles when the evaluation started. */
  profilesTotal: number;
  /** Profiles with at least one event contributing to the value. */
  profilesWithValue: number;
  /** FAILED: why. */
  error?: string;
}

export interface ComputedAttributeRepository {
  /**
   * Throws DuplicateComputedAttributeError when the sandbox has an attribute of that name, and
   * ComputedAttributeLimitError when it holds `limit` attributes that are not DISABLED already;
   * nothing is written then.
   */
  insert(scope: TenantScope, record: ComputedAttributeRecord, limit: number): Promise<void>;
  /** Whole-record replace (the name never changes). Returns false when the id is not in this scope. */
  update(scope: TenantScope, record: ComputedAttributeRecord): Promise<boolean>;
  /**
   * The same, only while the stored status and updateEpoch are `expected`'s: false otherwise (or
   * when the id is not in this scope). A PATCH moves updateEpoch forward, the evaluation never
   * does, so neither overwrites a change of the other it has not read.
   */
  updateIf(scope: TenantScope, record: ComputedAttributeRecord, expected: Pick<ComputedAttributeRecord, "status" | "updateEpoch">): Promise<boolean>;
  get(scope: TenantScope, id: string): Promise<ComputedAttributeRecord | undefined>;
  /** The sandbox's attributes, oldest first (creation time, then id); a sandbox holds at most its limit of them. */
  list(scope: TenantScope): Promise<ComputedAttributeRecord[]>;
  /** Returns false when the id is not in this scope (nothing deleted). */
  delete(scope: TenantScope, id: string): Promise<boolean>;
}

export class DuplicateComputedAttributeError extends Error {
  constructor(readonly attributeName: string) {
    super(`a computed attribute named ${attributeName} exists in this sandbox`);
  }
}

export class ComputedAttributeLimitError extends Error {
  constructor(readonly limit: number) {
    super(`the sandbox holds ${limit} computed attributes already`);
  }
}

// Rows, shared by both stores.

export interface ComputedAttributeRow {
  doc: string;
}

export const COMPUTED_ATTRIBUTE_COLUMN_NAMES = "org_id, sandbox_id, id, name, status, creation_time, update_time, doc";

export function computedAttributeColumns(scope: TenantScope, r: ComputedAttributeRecord): unknown[] {
  return [scope.orgId, scope.sandboxId, r.id, r.name, r.status, r.createEpoch, r.updateEpoch, JSON.stringify(r)];
}

export function computedAttributeFromRow(row: ComputedAttributeRow): ComputedAttributeRecord {
  return JSON.parse(row.doc) as ComputedAttributeRecord;
}

/** Migration 6 of `coreMigrations` (sql-common.ts): additive, so a database of any earlier version gains the table. */
export function computedAttributeStatements(big: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS computed_attributes (
      org_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
      creation_time ${big} NOT NULL, update_time ${big} NOT NULL, doc TEXT NOT NULL,
      PRIMARY KEY (org_id, sandbox_id, id))`,
    // The unique index, not a read-then-write check, makes concurrent creates of one name yield one success.
    `CREATE UNIQUE INDEX IF NOT EXISTS computed_attributes_name ON computed_attributes (org_id, sandbox_id, name)`,
  ];
}
