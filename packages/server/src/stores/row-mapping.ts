/** Turning records into column values and rows back into records, shared by both stores. */
import type { DatastreamRecord, DefinitionRecord, ExternalAudience, MergePolicyRecord, SegmentDefinition, MergePolicy } from "./records.js";

export interface DefinitionRow {
  id: string;
  doc: string;
  canonical_text: string;
}

export function definitionColumns(scope: { orgId: string; sandboxId: string }, r: DefinitionRecord): unknown[] {
  const d = r.definition;
  return [
    scope.orgId,
    scope.sandboxId,
    d.id,
    d.name,
    d.description ?? null,
    d.creationTime,
    d.updateTime,
    d.updateEpoch,
    d.evaluationInfo.batch.enabled ? 1 : 0,
    d.evaluationInfo.continuous.enabled ? 1 : 0,
    d.evaluationInfo.synchronous.enabled ? 1 : 0,
    d.mergePolicyId,
    r.canonicalText,
    JSON.stringify(d),
  ];
}

export const DEFINITION_COLUMN_NAMES =
  "org_id, sandbox_id, id, name, description, creation_time, update_time, update_epoch, batch, continuous, synchronous, merge_policy_id, canonical_text, doc";

export function definitionFromRow(row: DefinitionRow, references: string[]): DefinitionRecord {
  return { definition: JSON.parse(row.doc) as SegmentDefinition, canonicalText: row.canonical_text, references };
}

export interface MergePolicyRow {
  doc: string;
  creation_time: number | string;
}

export const MERGE_POLICY_COLUMN_NAMES =
  "org_id, sandbox_id, id, name, schema_name, is_default, is_active_on_edge, identity_graph_type, attribute_merge_type, version, update_epoch, creation_time, doc";

export function mergePolicyColumns(scope: { orgId: string; sandboxId: string }, r: MergePolicyRecord): unknown[] {
  const p = r.policy;
  return [
    scope.orgId,
    scope.sandboxId,
    p.id,
    p.name,
    p.schema.name,
    p.default ? 1 : 0,
    p.isActiveOnEdge ? 1 : 0,
    p.identityGraph.type,
    p.attributeMerge.type,
    p.version,
    p.updateEpoch,
    r.creationTime,
    JSON.stringify(p),
  ];
}

export function mergePolicyFromRow(row: MergePolicyRow): MergePolicyRecord {
  return { policy: JSON.parse(row.doc) as MergePolicy, creationTime: Number(row.creation_time) };
}

export interface DatastreamRow {
  doc: string;
}

export const DATASTREAM_COLUMN_NAMES = "id, org_id, sandbox_id, creation_time, update_time, doc";

export function datastreamColumns(scope: { orgId: string; sandboxId: string }, d: DatastreamRecord): unknown[] {
  return [d.id, scope.orgId, scope.sandboxId, d.creationTime, d.updateTime, JSON.stringify(d)];
}

export function datastreamFromRow(row: DatastreamRow): DatastreamRecord {
  return JSON.parse(row.doc) as DatastreamRecord;
}

export const EXTERNAL_AUDIENCE_COLUMN_NAMES = "org_id, sandbox_id, id, namespace, audience_id, creation_time, update_time, doc";

export function externalAudienceColumns(scope: { orgId: string; sandboxId: string }, a: ExternalAudience): unknown[] {
  return [scope.orgId, scope.sandboxId, a.id, a.namespace, a.audienceId, a.creationTime, a.updateTime, JSON.stringify(a)];
}

export function externalAudienceFromRow(row: { doc: string }): ExternalAudience {
  return JSON.parse(row.doc) as ExternalAudience;
}
