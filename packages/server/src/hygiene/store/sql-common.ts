/**
 * SQL shared by the SQLite and PostgreSQL hygiene stores: the schema (plain
 * SQL both dialects accept) and the list filters. Dialect differences are
 * limited to placeholders, which callers supply through `Params`.
 */
import type { ExpirationListQuery, ExpirationOrderField, ExpirationRecord, WorkOrderListQuery, WorkOrderOrderField, WorkOrderRecord } from "../records.js";

export const HYGIENE_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS hygiene_quota_usage (
    org_id TEXT NOT NULL, quota TEXT NOT NULL, period TEXT NOT NULL, consumed BIGINT NOT NULL,
    PRIMARY KEY (org_id, quota, period))`,
  `CREATE TABLE IF NOT EXISTS hygiene_entitlements (
    org_id TEXT NOT NULL, quota TEXT NOT NULL, allowance BIGINT NOT NULL,
    PRIMARY KEY (org_id, quota))`,
  `CREATE TABLE IF NOT EXISTS hygiene_work_orders (
    org_id TEXT NOT NULL, id TEXT NOT NULL, sandbox_name TEXT NOT NULL, action TEXT NOT NULL, status TEXT NOT NULL,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, created_by TEXT NOT NULL, updated_by TEXT NOT NULL,
    display_name TEXT NOT NULL, description TEXT NOT NULL, dataset_name TEXT NOT NULL, operation_count BIGINT NOT NULL,
    revision BIGINT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (org_id, id))`,
  `CREATE INDEX IF NOT EXISTS hygiene_work_orders_status ON hygiene_work_orders (status, created_at)`,
  `CREATE INDEX IF NOT EXISTS hygiene_work_orders_list ON hygiene_work_orders (org_id, sandbox_name, created_at)`,
  `CREATE TABLE IF NOT EXISTS hygiene_expirations (
    org_id TEXT NOT NULL, id TEXT NOT NULL, sandbox_name TEXT NOT NULL, dataset_id TEXT NOT NULL, dataset_name TEXT NOT NULL,
    display_name TEXT NOT NULL, description TEXT NOT NULL, status TEXT NOT NULL, expiry BIGINT NOT NULL,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, updated_by TEXT NOT NULL, revision BIGINT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (org_id, id))`,
  // The final guard for "at most one active expiration per dataset".
  `CREATE UNIQUE INDEX IF NOT EXISTS hygiene_expirations_one_active ON hygiene_expirations (org_id, sandbox_name, dataset_id)
    WHERE status IN ('pending', 'executing')`,
  `CREATE INDEX IF NOT EXISTS hygiene_expirations_due ON hygiene_expirations (status, expiry)`,
];

export type SqlValue = string | number;

/** Collects parameters; `add` returns the dialect's placeholder for the value just added. */
export class Params {
  readonly values: SqlValue[] = [];
  constructor(private readonly placeholder: (n: number) => string) {}
  add(v: SqlValue): string {
    this.values.push(v);
    return this.placeholder(this.values.length);
  }
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function contains(col: string, value: string, p: Params): string {
  return `lower(${col}) LIKE ${p.add(`%${escapeLike(value.toLowerCase())}%`)} ESCAPE '\\'`;
}

/** `author` is an exact value, or an SQL pattern after `LIKE ` / `NOT LIKE ` (hygiene-api.md §4.2). */
function authorFilter(col: string, author: string, p: Params): string {
  const m = /^(NOT LIKE|LIKE) (.*)$/s.exec(author);
  if (m) return `${col} ${m[1]} ${p.add(m[2]!)}`;
  return `${col} = ${p.add(author)}`;
}

function inList(col: string, values: readonly string[], p: Params): string {
  return `${col} IN (${values.map((v) => p.add(v)).join(", ")})`;
}

export function workOrderWhere(orgId: string, q: WorkOrderListQuery, p: Params): string {
  const w = [`org_id = ${p.add(orgId)}`];
  if (q.sandboxName !== undefined) w.push(`sandbox_name = ${p.add(q.sandboxName)}`);
  if (q.statuses && q.statuses.length > 0) w.push(inList("status", q.statuses, p));
  if (q.action !== undefined) w.push(`action = ${p.add(q.action)}`);
  if (q.workorderId !== undefined) w.push(`id = ${p.add(q.workorderId)}`);
  if (q.displayName !== undefined) w.push(contains("display_name", q.displayName, p));
  if (q.description !== undefined) w.push(contains("description", q.description, p));
  if (q.author !== undefined) w.push(authorFilter("updated_by", q.author, p));
  if (q.createdFrom !== undefined) w.push(`created_at >= ${p.add(q.createdFrom)}`);
  if (q.createdTo !== undefined) w.push(`created_at <= ${p.add(q.createdTo)}`);
  if (q.search !== undefined) {
    const parts = ["created_by", "updated_by", "display_name", "description", "dataset_name"].map((c) => contains(c, q.search!, p));
    parts.push(`id = ${p.add(q.search)}`);
    w.push(`(${parts.join(" OR ")})`);
  }
  return w.join(" AND ");
}

const WORK_ORDER_COLUMNS: Record<WorkOrderOrderField, string> = {
  displayName: "display_name",
  description: "description",
  id: "id",
  createdBy: "created_by",
  createdAt: "created_at",
  updatedAt: "updated_at",
  operation: "action",
  operationCount: "operation_count",
  status: "status",
};

export function workOrderOrderBy(q: WorkOrderListQuery): string {
  const dir = q.orderBy.direction === "asc" ? "ASC" : "DESC";
  // `id` last makes the order total, so pages never overlap.
  return `${WORK_ORDER_COLUMNS[q.orderBy.field]} ${dir}, id ${dir}`;
}

export function expirationWhere(orgId: string, q: ExpirationListQuery, p: Params): string {
  const w = [`org_id = ${p.add(orgId)}`];
  if (q.sandboxName !== undefined) w.push(`sandbox_name = ${p.add(q.sandboxName)}`);
  if (q.statuses && q.statuses.length > 0) w.push(inList("status", q.statuses, p));
  if (q.datasetId !== undefined) w.push(`dataset_id = ${p.add(q.datasetId)}`);
  if (q.ttlId !== undefined) w.push(`id = ${p.add(q.ttlId)}`);
  if (q.datasetName !== undefined) w.push(contains("dataset_name", q.datasetName, p));
  if (q.displayName !== undefined) w.push(contains("display_name", q.displayName, p));
  if (q.description !== undefined) w.push(contains("description", q.description, p));
  if (q.author !== undefined) w.push(authorFilter("updated_by", q.author, p));
  if (q.expiryFrom !== undefined) w.push(`expiry >= ${p.add(q.expiryFrom)}`);
  if (q.expiryTo !== undefined) w.push(`expiry <= ${p.add(q.expiryTo)}`);
  if (q.search !== undefined) {
    const parts = ["updated_by", "display_name", "description", "dataset_name"].map((c) => contains(c, q.search!, p));
    parts.push(`id = ${p.add(q.search)}`);
    w.push(`(${parts.join(" OR ")})`);
  }
  return w.join(" AND ");
}

const EXPIRATION_COLUMNS: Record<ExpirationOrderField, string> = {
  displayName: "display_name",
  description: "description",
  datasetName: "dataset_name",
  id: "id",
  updatedBy: "updated_by",
  updatedAt: "updated_at",
  expiry: "expiry",
  status: "status",
};

export function expirationOrderBy(q: ExpirationListQuery): string {
  const dir = q.orderBy.direction === "asc" ? "ASC" : "DESC";
  return `${EXPIRATION_COLUMNS[q.orderBy.field]} ${dir}, id ${dir}`;
}

/** Column values of a work order row, in the order of WORK_ORDER_INSERT's columns. */
export const WORK_ORDER_INSERT_COLUMNS = [
  "org_id", "id", "sandbox_name", "action", "status", "created_at", "updated_at", "created_by", "updated_by",
  "display_name", "description", "dataset_name", "operation_count", "revision", "doc",
] as const;

export function workOrderRow(o: WorkOrderRecord): SqlValue[] {
  return [o.orgId, o.workorderId, o.sandboxName, o.action, o.status, o.createdAt, o.updatedAt, o.createdBy, o.updatedBy,
    o.displayName, o.description, o.datasetName, o.operationCount, o.revision, JSON.stringify(o)];
}

export const EXPIRATION_INSERT_COLUMNS = [
  "org_id", "id", "sandbox_name", "dataset_id", "dataset_name", "display_name", "description", "status", "expiry",
  "created_at", "updated_at", "updated_by", "revision", "doc",
] as const;

/** The row a replace writes: the record with its revision bumped. */
export function bumped<T extends { revision: number }>(r: T): T {
  return { ...r, revision: r.revision + 1 };
}

export function expirationRow(e: ExpirationRecord): SqlValue[] {
  return [e.orgId, e.ttlId, e.sandboxName, e.datasetId, e.datasetName, e.displayName, e.description, e.status, e.expiry,
    e.createdAt, e.updatedAt, e.updatedBy, e.revision, JSON.stringify(e)];
}
