/**
 * What the hygiene store persists: work orders, dataset expirations and the
 * quota counters. Times are epoch milliseconds here; the HTTP layer renders
 * them as ISO-8601 (hygiene-api.md §1.3).
 */
import type { Identity, JsonValue } from "../profiles/types.js";
import type { PeriodicQuota } from "./quotas.js";

export type WorkOrderAction = "identity-delete" | "identity-update";
export const WORK_ORDER_STATUSES = ["received", "validated", "submitted", "ingested", "completed", "failed"] as const;
export type WorkOrderStatus = (typeof WORK_ORDER_STATUSES)[number];

export interface ProductStatus {
  productName: string;
  productStatus: "waiting" | "success" | "failed";
  createdAt: number;
}

export interface FieldChanges {
  /** Dotted path → new value. */
  set: Record<string, JsonValue>;
  /** Dotted paths to remove. */
  remove: string[];
}

export interface WorkOrderRecord {
  workorderId: string;
  orgId: string;
  sandboxName: string;
  bundleId: string;
  action: WorkOrderAction;
  createdAt: number;
  updatedAt: number;
  /** Distinct identities in the order = units charged against the quota. */
  operationCount: number;
  targetServices: string[];
  status: WorkOrderStatus;
  createdBy: string;
  updatedBy: string;
  /** As submitted: `ALL`, one id, or a comma list. */
  datasetId: string;
  datasetName: string;
  displayName: string;
  description: string;
  identities: Identity[];
  fieldChanges: FieldChanges | null;
  productStatusDetails: ProductStatus[];
  /** Why execution failed, when it did. */
  failure: string | null;
  /** What execution did (records removed/updated, profiles gone, memberships exited). */
  outcome: WorkOrderOutcome | null;
  /** Optimistic-concurrency counter: every replace must name the revision it read (the store bumps it). */
  revision: number;
  /** Several hubs: the hub whose runner claimed it (a take-over leaves a live claimant's order alone). Never shown. */
  claimedBy?: string;
}

export interface WorkOrderOutcome {
  records: number;
  profilesRemoved: number;
  membershipsExited: number;
}

export const EXPIRATION_STATUSES = ["pending", "executing", "cancelled", "completed"] as const;
export type ExpirationStatus = (typeof EXPIRATION_STATUSES)[number];
/** Statuses that occupy a slot of datasetExpirationQuota and block a second expiration of the dataset. */
export const ACTIVE_EXPIRATION_STATUSES: readonly ExpirationStatus[] = ["pending", "executing"];

export interface ExpirationHistoryEntry {
  status: "created" | "updated" | "cancelled" | "executing" | "completed";
  expiry: number;
  updatedAt: number;
  updatedBy: string;
}

export interface ExpirationRecord {
  ttlId: string;
  orgId: string;
  sandboxName: string;
  datasetId: string;
  datasetName: string;
  displayName: string;
  description: string;
  status: ExpirationStatus;
  expiry: number;
  createdAt: number;
  updatedAt: number;
  updatedBy: string;
  history: ExpirationHistoryEntry[];
  /** Optimistic-concurrency counter, as for work orders. */
  revision: number;
}

/** One quota's share of an order: `units` against `allowance` in `period`. */
export interface QuotaCharge {
  quota: PeriodicQuota;
  period: string;
  units: number;
  allowance: number;
}

export type ChargeOutcome =
  | { ok: true }
  /** The first quota (in charge order) that would be exceeded, and what it had consumed. */
  | { ok: false; quota: PeriodicQuota; allowance: number; consumed: number };

export type ExpirationInsertOutcome =
  | { ok: true }
  | { ok: false; reason: "duplicate"; existing: ExpirationRecord }
  | { ok: false; reason: "quota"; active: number; allowance: number };

export interface Page<T> {
  items: T[];
  total: number;
}

export type SortDirection = "asc" | "desc";

export interface WorkOrderListQuery {
  /** undefined = every sandbox of the org ("*"). */
  sandboxName?: string;
  statuses?: WorkOrderStatus[];
  action?: WorkOrderAction;
  workorderId?: string;
  /** Case-insensitive substrings. */
  displayName?: string;
  description?: string;
  /** Substring over createdBy, updatedBy, displayName, description, datasetName; or exact id. */
  search?: string;
  author?: string;
  createdFrom?: number;
  createdTo?: number;
  orderBy: { field: WorkOrderOrderField; direction: SortDirection };
  offset: number;
  limit: number;
}

export const WORK_ORDER_ORDER_FIELDS = ["displayName", "description", "id", "createdBy", "createdAt", "updatedAt", "operation", "operationCount", "status"] as const;
export type WorkOrderOrderField = (typeof WORK_ORDER_ORDER_FIELDS)[number];

export interface ExpirationListQuery {
  sandboxName?: string;
  statuses?: ExpirationStatus[];
  datasetId?: string;
  ttlId?: string;
  datasetName?: string;
  displayName?: string;
  description?: string;
  search?: string;
  author?: string;
  expiryFrom?: number;
  expiryTo?: number;
  orderBy: { field: ExpirationOrderField; direction: SortDirection };
  offset: number;
  limit: number;
}

export const EXPIRATION_ORDER_FIELDS = ["displayName", "description", "datasetName", "id", "updatedBy", "updatedAt", "expiry", "status"] as const;
export type ExpirationOrderField = (typeof EXPIRATION_ORDER_FIELDS)[number];
