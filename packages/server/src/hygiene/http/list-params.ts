/**
 * Query parameters of GET /workorder and GET /ttl (hygiene-api.md §4.2, §5.2).
 * Unknown parameters are ignored (real clients send `start`); known ones with
 * bad values are a 400 naming the parameter.
 */
import { invalid, ttlInvalid, type HygieneError } from "../errors.js";
import {
  EXPIRATION_ORDER_FIELDS,
  EXPIRATION_STATUSES,
  WORK_ORDER_ORDER_FIELDS,
  WORK_ORDER_STATUSES,
  type ExpirationListQuery,
  type ExpirationOrderField,
  type ExpirationStatus,
  type WorkOrderListQuery,
  type WorkOrderOrderField,
  type WorkOrderStatus,
} from "../records.js";

export type Query = Record<string, string | string[] | undefined>;

export const DEFAULT_PAGE_LIMIT = 25;
export const MAX_PAGE_LIMIT = 100;

function one(q: Query, key: string): string | undefined {
  const v = q[key];
  const s = Array.isArray(v) ? v[v.length - 1] : v;
  return s === undefined || s === "" ? undefined : s;
}

function int(q: Query, key: string, min: number, max: number, fallback: number, err: (m: string) => HygieneError): number {
  const s = one(q, key);
  if (s === undefined) return fallback;
  if (!/^\d+$/.test(s) || Number(s) < min || Number(s) > max) throw err(`'${key}' must be an integer from ${min} to ${max}.`);
  return Number(s);
}

function date(q: Query, key: string, err: (m: string) => HygieneError): number | undefined {
  const s = one(q, key);
  if (s === undefined) return undefined;
  const t = /^\d{4}-\d{2}-\d{2}$/.test(s) ? Date.parse(`${s}T00:00:00Z`) : Date.parse(s);
  if (Number.isNaN(t)) throw err(`'${key}' must be an ISO-8601 date or date-time.`);
  return t;
}

function statuses<S extends string>(q: Query, allowed: readonly S[], err: (m: string) => HygieneError): S[] | undefined {
  const s = one(q, "status");
  if (s === undefined) return undefined;
  const list = s.split(",").map((x) => x.trim());
  const bad = list.find((x) => !(allowed as readonly string[]).includes(x));
  if (bad !== undefined) throw err(`Unknown status '${bad}'. Allowed: ${allowed.join(", ")}.`);
  return list as S[];
}

function orderBy<F extends string>(q: Query, allowed: readonly F[], fallback: { field: F; direction: "asc" | "desc" }, err: (m: string) => HygieneError) {
  const s = one(q, "orderBy");
  if (s === undefined) return fallback;
  // A "+" in a query string arrives as a space.
  const m = /^([+\- ]?)([A-Za-z]+)$/.exec(s);
  if (!m || !(allowed as readonly string[]).includes(m[2]!)) throw err(`Invalid orderBy '${s}'. Use an optional +/- prefix and one of: ${allowed.join(", ")}.`);
  return { field: m[2] as F, direction: m[1] === "-" ? ("desc" as const) : ("asc" as const) };
}

/** `sandboxName` param: `*` = all; default = the header sandbox, or all of the org when no header was sent. */
function sandboxFilter(q: Query, headerSandbox: string | undefined): string | undefined {
  const s = one(q, "sandboxName");
  if (s === "*") return undefined;
  return s ?? headerSandbox;
}

export function workOrderListQuery(q: Query, headerSandbox: string | undefined): WorkOrderListQuery {
  const limit = int(q, "limit", 1, MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT, invalid);
  const page = int(q, "page", 0, 1_000_000, 0, invalid);
  const fromDate = date(q, "fromDate", invalid);
  const toDate = date(q, "toDate", invalid);
  if ((fromDate === undefined) !== (toDate === undefined)) throw invalid("'fromDate' and 'toDate' must be given together.");
  const filterDate = date(q, "filterDate", invalid);
  const type = one(q, "type");
  if (type !== undefined && type !== "identity-delete" && type !== "identity-update") throw invalid(`Unknown type '${type}'. Allowed: identity-delete, identity-update.`);
  const out: WorkOrderListQuery = {
    sandboxName: sandboxFilter(q, headerSandbox),
    statuses: statuses<WorkOrderStatus>(q, WORK_ORDER_STATUSES, invalid),
    action: type,
    workorderId: one(q, "workorderId"),
    displayName: one(q, "displayName"),
    description: one(q, "description"),
    search: one(q, "search"),
    author: one(q, "author"),
    createdFrom: fromDate ?? filterDate,
    createdTo: toDate ?? (filterDate !== undefined ? filterDate + 86_400_000 - 1 : undefined),
    orderBy: orderBy<WorkOrderOrderField>(q, WORK_ORDER_ORDER_FIELDS, { field: "createdAt", direction: "desc" }, invalid),
    offset: page * limit,
    limit,
  };
  return out;
}

export function expirationListQuery(q: Query, headerSandbox: string | undefined): ExpirationListQuery {
  const limit = int(q, "limit", 1, MAX_PAGE_LIMIT, int(q, "size", 1, MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT, ttlInvalid), ttlInvalid);
  const page = int(q, "page", 0, 1_000_000, 0, ttlInvalid);
  const expiryDate = date(q, "expiryDate", ttlInvalid);
  return {
    sandboxName: sandboxFilter(q, headerSandbox),
    statuses: statuses<ExpirationStatus>(q, EXPIRATION_STATUSES, ttlInvalid),
    datasetId: one(q, "datasetId"),
    ttlId: one(q, "ttlId"),
    datasetName: one(q, "datasetName"),
    displayName: one(q, "displayName"),
    description: one(q, "description"),
    search: one(q, "search"),
    author: one(q, "author"),
    expiryFrom: date(q, "expiryFromDate", ttlInvalid) ?? expiryDate,
    expiryTo: date(q, "expiryToDate", ttlInvalid) ?? (expiryDate !== undefined ? expiryDate + 86_400_000 - 1 : undefined),
    orderBy: orderBy<ExpirationOrderField>(q, EXPIRATION_ORDER_FIELDS, { field: "updatedAt", direction: "desc" }, ttlInvalid),
    offset: page * limit,
    limit,
  };
}
