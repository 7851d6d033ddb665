/**
 * The list's query parameters as AEP documents them: `sortBy` (name, status, updateEpoch,
 * createEpoch; a leading `-` for descending; default -updateEpoch), `property` filters (repeatable:
 * name, mergeFunction.value and status with =, !=, =contains(...), =!contains(...); createEpoch and
 * updateEpoch with >= and <=) and `status` (case-insensitive). A sandbox holds at most its limit
 * of attributes, so they are filtered, sorted and paged here, alike on both stores.
 */
import { ApiError } from "../services/errors.js";
import type { ComputedAttributeRecord } from "../stores/computed-attributes.js";
import { COMPUTED_ATTRIBUTE_STATUSES } from "../stores/computed-attributes.js";
import { COMPUTED_ERROR } from "./limits.js";

const SORT_FIELDS = ["name", "status", "updateEpoch", "createEpoch"] as const;
type SortField = (typeof SORT_FIELDS)[number];

type TextField = "name" | "mergeFunction.value" | "status";
type EpochField = "createEpoch" | "updateEpoch";

export type PropertyFilter =
  | { field: TextField; op: "eq" | "ne" | "contains" | "notContains"; value: string }
  | { field: EpochField; op: "ge" | "le"; value: number };

export interface ListQuery {
  offset: number;
  limit: number;
  sort: { field: SortField; direction: "asc" | "desc" };
  filters: PropertyFilter[];
  status?: string;
}

function bad(message: string): ApiError {
  return new ApiError(400, COMPUTED_ERROR.invalid, message);
}

export function parseSortBy(text: string | undefined): ListQuery["sort"] {
  if (text === undefined || text === "") return { field: "updateEpoch", direction: "desc" };
  const m = /^(-?)([A-Za-z]+)$/.exec(text);
  if (m === null || !(SORT_FIELDS as readonly string[]).includes(m[2]!)) {
    throw bad(`Invalid sortBy "${text.slice(0, 100)}": use name, status, updateEpoch or createEpoch, with a leading - for descending order`);
  }
  return { field: m[2] as SortField, direction: m[1] === "-" ? "desc" : "asc" };
}

const PROPERTY_HELP = "use name, mergeFunction.value or status with =, !=, =contains(...) or =!contains(...), or createEpoch or updateEpoch with >= or <=";

export function parseProperty(text: string): PropertyFilter {
  const epoch = /^(createEpoch|createdEpoch|updateEpoch)(>=|<=)(\d{1,16})$/.exec(text);
  if (epoch !== null) {
    const field: EpochField = epoch[1] === "updateEpoch" ? "updateEpoch" : "createEpoch";
    return { field, op: epoch[2] === ">=" ? "ge" : "le", value: Number(epoch[3]) };
  }
  const t = /^(name|mergeFunction\.value|status)(!=|=)(.*)$/s.exec(text);
  if (t !== null) {
    const field = t[1] as TextField;
    const contains = /^(!?)contains\((.*)\)$/s.exec(t[3]!);
    if (t[2] === "=" && contains !== null) return { field, op: contains[1] === "!" ? "notContains" : "contains", value: contains[2]! };
    return { field, op: t[2] === "=" ? "eq" : "ne", value: t[3]! };
  }
  throw bad(`Invalid property filter "${text.slice(0, 100)}": ${PROPERTY_HELP}`);
}

export function parseStatus(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  const s = text.toUpperCase();
  if (!(COMPUTED_ATTRIBUTE_STATUSES as readonly string[]).includes(s)) {
    throw bad(`Invalid status "${text.slice(0, 40)}": use draft, new, processing, processed, failed or disabled`);
  }
  return s;
}

function textOf(r: ComputedAttributeRecord, field: TextField): string {
  return field === "name" ? r.name : field === "status" ? r.status : r.mergeFunction;
}

function matches(r: ComputedAttributeRecord, f: PropertyFilter): boolean {
  if (f.field === "createEpoch" || f.field === "updateEpoch") {
    const v = r[f.field];
    return f.op === "ge" ? v >= f.value : v <= f.value;
  }
  if (f.field !== "name") {
    // Enumerated fields: any case, and contains(...) takes a comma list, as the guide's
    // `status=contains(new,processing,disabled)` does (any item found).
    const v = textOf(r, f.field).toUpperCase();
    const items = String(f.value).toUpperCase().split(",").map((x) => x.trim());
    const found = items.some((x) => (f.op === "eq" || f.op === "ne" ? v === x : v.includes(x)));
    return f.op === "eq" || f.op === "contains" ? found : !found;
  }
  const v = r.name;
  const x = f.value;
  switch (f.op) {
    case "eq":
      return v === x;
    case "ne":
      return v !== x;
    case "contains":
      return v.includes(x);
    default:
      return !v.includes(x);
  }
}

function compare(a: ComputedAttributeRecord, b: ComputedAttributeRecord, field: SortField): number {
  const x = a[field];
  const y = b[field];
  if (typeof x === "number" && typeof y === "number") return x - y;
  // Code point order, as the stores sort text.
  return x < y ? -1 : x > y ? 1 : 0;
}

export function filterAndSort(all: readonly ComputedAttributeRecord[], q: ListQuery): ComputedAttributeRecord[] {
  const kept = all.filter((r) => (q.status === undefined || r.status === q.status) && q.filters.every((f) => matches(r, f)));
  const sign = q.sort.direction === "asc" ? 1 : -1;
  // The id breaks ties, so that pages never overlap.
  return kept.sort((a, b) => sign * compare(a, b, q.sort.field) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
