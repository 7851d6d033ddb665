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
