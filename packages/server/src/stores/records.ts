/**
 * The shapes stores persist. They are the API objects (AEP field names) plus a
 * few server-internal fields that never leave the service layer.
 */

export interface SandboxRef {
  sandboxId: string;
  sandboxName: string;
  type: "production" | "development";
  default: boolean;
}

export interface Expression {
  type: "PQL";
  format: "pql/text" | "pql/json";
  value: string;
}

export interface EvaluationInfo {
  batch: { enabled: boolean };
  continuous: { enabled: boolean };
  synchronous: { enabled: boolean };
}

/**
 * segmentd's own extension of the AEP definition: how the expression
 * classifies (decisions.md §1). Not an AEP field; the name cannot clash with one.
 */
export interface ClassificationInfo {
  queryType: string | null;
  batch: boolean;
  continuous: boolean;
  synchronous: boolean;
  reasons: string[];
  /** Whether the definition's merge policy is active on edge (required for edge evaluation). */
  mergePolicyActiveOnEdge: boolean;
}

/** A segment definition as the API returns it. */
export interface SegmentDefinition {
  id: string;
  imsOrgId: string;
  sandbox: SandboxRef;
  name: string;
  description?: string;
  profileInstanceId: string;
  schema: { name: string };
  expression: Expression;
  mergePolicyId: string;
  evaluationInfo: EvaluationInfo;
  dataGovernancePolicy: { excludeOptOut: boolean };
  payloadSchema?: string;
  ttlInDays?: number;
  creationTime: number;
  updateEpoch: number;
  updateTime: number;
  classification: ClassificationInfo;
  /** The audience view's own fields (the Audiences API); absent on records written before it: published, no labels. */
  audience?: AudienceMeta;
}

/** Adobe's audience lifecycle; `deleted` is what DELETE does, never a stored state. */
export type LifecycleState = "draft" | "published" | "inactive" | "archived";

/** Whether a definition is evaluated: only published audiences are (draft, inactive and archived ones are not). */
export function isPublished(d: Pick<SegmentDefinition, "audience">): boolean {
  return (d.audience?.lifecycleState ?? "published") === "published";
}

export interface AudienceMeta {
  lifecycleState: LifecycleState;
  labels: string[];
  createdBy?: string;
  lastModifiedBy?: string;
}

/**
 * An externally generated audience (Adobe's "custom upload" and other origins):
 * metadata only, never evaluated; its members are set by ingestion.
 */
export interface ExternalAudience {
  id: string;
  /** Client-supplied; unique per namespace in a sandbox. */
  audienceId: string;
  namespace: string;
  name: string;
  description?: string;
  imsOrgId: string;
  sandbox: SandboxRef;
  type: "ExternalSegment";
  originName: string;
  lifecycleState: LifecycleState;
  labels: string[];
  datasetId?: string;
  sourceId?: string;
  linkedAudienceRef?: Record<string, string>;
  audienceMeta?: Record<string, unknown>;
  ttlInDays?: number;
  createdBy?: string;
  lastModifiedBy?: string;
  /** Epoch ms. */
  creationTime: number;
  updateTime: number;
  updateEpoch: number;
}

export interface DefinitionRecord {
  definition: SegmentDefinition;
  /** The expression as canonical PQL text (what engines evaluate), whatever format was submitted. */
  canonicalText: string;
  /** Ids named by `inSegment(...)` in the expression. */
  references: string[];
}

export interface MergePolicy {
  id: string;
  name: string;
  imsOrgId: string;
  sandbox: SandboxRef;
  schema: { name: string };
  version: number;
  identityGraph: { type: "none" | "pdg" };
  attributeMerge: { type: "timestampOrdered" | "dataSetPrecedence"; order?: string[] };
  isActiveOnEdge: boolean;
  default: boolean;
  updateEpoch: number;
}

export interface MergePolicyRecord {
  policy: MergePolicy;
  creationTime: number;
}

/**
 * An edge datastream as the API returns it (edge/datastreams.ts): ties the
 * `dataStreamId` an Edge Network request carries to its organization, sandbox
 * and event dataset.
 */
export interface DatastreamRecord {
  id: string;
  name: string;
  imsOrgId: string;
  sandboxName: string;
  /** Hub dataset (experience event class) that receives every collected event. */
  eventDatasetId: string;
  /** Adobe's "Edge Segmentation" option of the datastream's Experience Platform service. */
  edgeSegmentation: boolean;
  /** Epoch ms. */
  creationTime: number;
  updateTime: number;
}
