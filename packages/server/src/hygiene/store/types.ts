/**
 * The hygiene store: quota counters, entitlement overrides, work orders and
 * dataset expirations, in one database so that "check the quota, consume it,
 * persist the order" is one transaction. Two implementations (embedded SQLite,
 * PostgreSQL) pass one conformance suite (test/hygiene/store-conformance.test.ts).
 * Every method is scoped to one organization; none spans organizations except
 * the scheduler's `due*` scans, which return (org, id) pairs to act on. Reads
 * by id also take a sandbox: given, a record of another sandbox of the org is
 * not found (a `dev` request never sees a `prod` order); omitted (the runner,
 * the scheduler, a request without x-sandbox-name), the whole org is searched.
 * Replaces match the record's own org, sandbox and id.
 */
import type { QuotaName } from "../quotas.js";
import type {
  ChargeOutcome,
  ExpirationInsertOutcome,
  ExpirationListQuery,
  ExpirationRecord,
  ExpirationStatus,
  Page,
  QuotaCharge,
  WorkOrderListQuery,
  WorkOrderRecord,
  WorkOrderStatus,
} from "../records.js";
import type { PeriodicQuota } from "../quotas.js";

export interface OrgRef {
  orgId: string;
  id: string;
}

export interface HygieneStore {
  readonly kind: "embedded" | "postgres";

  /** Consumed units of each (quota, period); 0 for counters never charged. */
  consumed(orgId: string, keys: ReadonlyArray<{ quota: PeriodicQuota; period: string }>): Promise<number[]>;

  /**
   * Atomically: if every charge fits (`consumed + units <= allowance`), add all
   * of them and insert the work order; otherwise change nothing and report the
   * first charge that does not fit.
   */
  insertWorkOrder(order: WorkOrderRecord, charges: readonly QuotaCharge[]): Promise<ChargeOutcome>;
  getWorkOrder(orgId: string, workorderId: string, sandboxName?: string): Promise<WorkOrderRecord | undefined>;
  listWorkOrders(orgId: string, query: WorkOrderListQuery): Promise<Page<WorkOrderRecord>>;
  /**
   * Compare-and-set: replaces the stored order, bumping its revision, only when
   * the stored revision is still `order.revision` and its status is one of
   * `expected`. So two executors never both claim one order, and a rename and
   * the runner never overwrite each other. Returns false otherwise.
   */
  replaceWorkOrder(order: WorkOrderRecord, expected: readonly WorkOrderStatus[]): Promise<boolean>;
  /** Orders not finished (received, validated, submitted, ingested), oldest first. */
  unfinishedWorkOrders(limit: number): Promise<OrgRef[]>;

  /**
   * Atomically: refuse when the dataset already has an active expiration or the
   * org already has `allowance` active ones; else insert.
   */
  insertExpiration(record: ExpirationRecord, allowance: number): Promise<ExpirationInsertOutcome>;
  getExpiration(orgId: string, ttlId: string, sandboxName?: string): Promise<ExpirationRecord | undefined>;
  /** The dataset's most recent expiration (active first, then newest). */
  expirationForDataset(orgId: string, sandboxName: string, datasetId: string): Promise<ExpirationRecord | undefined>;
  listExpirations(orgId: string, query: ExpirationListQuery): Promise<Page<ExpirationRecord>>;
  /** Compare-and-set on revision and status, as for work orders. */
  replaceExpiration(record: ExpirationRecord, expected: readonly ExpirationStatus[]): Promise<boolean>;
  countActiveExpirations(orgId: string): Promise<number>;
  /** Pending expirations with `expiry <= now`, plus executing ones (to resume after a crash). */
  dueExpirations(now: number, limit: number): Promise<OrgRef[]>;

  entitlementOverrides(orgId: string): Promise<Partial<Record<QuotaName, number>>>;
  /** `null` removes an override (back to configuration). */
  setEntitlementOverrides(orgId: string, values: Partial<Record<QuotaName, number | null>>): Promise<void>;

  close(): Promise<void>;
}
