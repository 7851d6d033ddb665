/**
 * The Audiences API's view (segmentation-api.md §3.1): a segment definition
 * rendered as a Platform audience, an external audience as stored, and the
 * list's filters, sort and paging, applied to both kinds together.
 */
import { createHash } from "node:crypto";
import type { ExternalAudience, LifecycleState, SegmentDefinition } from "../stores/records.js";
import { badRequest } from "./errors.js";

export const PLATFORM_NAMESPACE = "AEPSegments";
export const PLATFORM_ORIGIN = "REAL_TIME_CUSTOMER_PROFILE";
export const LIFECYCLE_STATES: readonly LifecycleState[] = ["draft", "published", "inactive", "archived"];

export type Audience = Record<string, unknown> & { id: string; name: string; creationTime: number; updateTime: number };

/** A quoted version tag that changes with every write of the record. */
function etag(id: string, updateTime: number): string {
  const h = createHash("sha256").update(`${id}\u0000${updateTime}`).digest("hex");
  return `"${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}"`;
}

/** `_xdm.context.profile` → the profile union's `$ref`. */
function definedOn(schemaName: string): { "meta:resourceType": string; "meta:containerId": string; $ref: string }[] {
  const cls = schemaName.replace(/^_xdm\.context\./, "");
  return [{ "meta:resourceType": "unions", "meta:containerId": "tenant", $ref: `https://ns.adobe.com/xdm/context/${cls}__union` }];
}

export function platformAudience(d: SegmentDefinition, dependencies: readonly string[], dependents: readonly string[]): Audience {
  const meta = d.audience;
  return {
    id: d.id,
    audienceId: d.id,
    schema: d.schema,
    profileInstanceId: d.profileInstanceId,
    imsOrgId: d.imsOrgId,
    sandbox: d.sandbox,
    isSystem: false,
    name: d.name,
    ...(d.description !== undefined ? { description: d.description } : {}),
    expression: d.expression,
    mergePolicyId: d.mergePolicyId,
    evaluationInfo: d.evaluationInfo,
    dataGovernancePolicy: d.dataGovernancePolicy,
    ...(d.ttlInDays !== undefined ? { ttlInDays: d.ttlInDays } : {}),
    creationTime: d.creationTime,
    createEpoch: Math.floor(d.creationTime / 1000),
    updateEpoch: d.updateEpoch,
    updateTime: d.updateTime,
    _etag: etag(d.id, d.updateTime),
    dependents: [...dependents],
    definedOn: definedOn(d.schema.name),
    dependencies: [...dependencies],
    type: "SegmentDefinition",
    state: "enabled",
    overridePerformanceWarnings: false,
    saveSegmentMembership: true,
    ansibleUiEnabled: false,
    ...(meta?.createdBy !== undefined ? { createdBy: meta.createdBy } : {}),
    ...(meta?.lastModifiedBy !== undefined ? { lastModifiedBy: meta.lastModifiedBy } : {}),
    lifecycleState: meta?.lifecycleState ?? "published",
    labels: meta?.labels ?? [],
    namespace: PLATFORM_NAMESPACE,
    originName: PLATFORM_ORIGIN,
  };
}

export function externalAudience(a: ExternalAudience): Audience {
  return {
    ...a,
    isSystem: false,
    createEpoch: Math.floor(a.creationTime / 1000),
    _etag: etag(a.id, a.updateTime),
    state: "enabled",
    saveSegmentMembership: true,
  };
}

export interface AudienceListQuery {
  start: number;
  limit: number;
  sort: { field: string; direction: "asc" | "desc" };
  /** `attr==value` pairs, all of which must match exactly. */
  properties: { attr: string; value: string }[];
  name?: string;
  description?: string;
  entityType?: string;
}

export const AUDIENCE_SORT_FIELDS = ["name", "description", "creationTime", "createEpoch", "updateTime", "updateEpoch", "id", "audienceId", "namespace", "lifecycleState", "type", "originName"] as const;

export function parseAudienceSort(text: string | undefined): AudienceListQuery["sort"] {
  if (text === undefined || text.trim() === "") return { field: "creationTime", direction: "desc" };
  const m = /^\s*([A-Za-z]+)\s*(?::\s*(asc|desc)\s*)?$/i.exec(text);
  if (!m || !(AUDIENCE_SORT_FIELDS as readonly string[]).includes(m[1]!)) {
    throw badRequest(`Invalid sort "${text.trim().slice(0, 100)}": use field:asc or field:desc, with field one of ${AUDIENCE_SORT_FIELDS.join(", ")}`);
  }
  return { field: m[1]!, direction: (m[2]?.toLowerCase() ?? "asc") as "asc" | "desc" };
}

export function parseProperty(text: string): { attr: string; value: string } {
  const m = /^([A-Za-z_][A-Za-z0-9_.]*)==(.*)$/s.exec(text);
  if (!m) throw badRequest(`Invalid property "${text.slice(0, 100)}": use property=attribute==value`);
  return { attr: m[1]!, value: m[2]! };
}

/** The scalar at a dotted path, as the text a `property` filter compares with. */
function scalarAt(a: Audience, attr: string): string | undefined {
  let v: unknown = a;
  for (const k of attr.split(".")) {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : undefined;
}

function sortValue(a: Audience, field: string): string | number {
  const v = a[field];
  return typeof v === "number" ? v : typeof v === "string" ? v : "";
}

/** Filters, sorts (ties by id, in the same direction) and pages. */
export function selectAudiences(all: readonly Audience[], q: AudienceListQuery): { items: Audience[]; total: number } {
  const name = q.name?.toLowerCase();
  const description = q.description?.toLowerCase();
  const kept = all.filter((a) =>
    (name === undefined || a.name.toLowerCase().includes(name)) &&
    (description === undefined || (typeof a["description"] === "string" && a["description"].toLowerCase().includes(description))) &&
    // Every audience here is a profile audience (segmentd has no account audiences).
    (q.entityType === undefined || q.entityType === "_xdm.context.profile") &&
    q.properties.every((p) => scalarAt(a, p.attr) === p.value));
  const dir = q.sort.direction === "asc" ? 1 : -1;
  kept.sort((x, y) => {
    const a = sortValue(x, q.sort.field), b = sortValue(y, q.sort.field);
    if (a !== b) return (a < b ? -1 : 1) * dir;
    return (x.id < y.id ? -1 : x.id > y.id ? 1 : 0) * dir;
  });
  return { items: kept.slice(q.start, q.start + q.limit), total: kept.length };
}
