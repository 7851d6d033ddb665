/** The shapes the UI reads from segmentd's APIs (only the fields it uses). */

export type Method = "batch" | "continuous" | "synchronous";

export interface EvaluationFlag {
  enabled: boolean;
}

export interface SegmentDefinition {
  id: string;
  name: string;
  description?: string;
  schema: { name: string };
  expression: { type: string; format: string; value: string };
  mergePolicyId: string;
  evaluationInfo: Record<Method, EvaluationFlag>;
  creationTime: number;
  updateTime: number;
  classification?: { queryType: string | null; reasons: string[] };
}

export interface DefinitionPage {
  segments: SegmentDefinition[];
  page: { totalCount: number; totalPages: number; pageSize: number; limit: number; start: number; pageNumber: number };
}

export interface MergePolicy {
  id: string;
  name: string;
  isActiveOnEdge: boolean;
  default: boolean;
  schema: { name: string };
  /** "pdg" stitches profiles by the identity graph; older answers may lack it. */
  identityGraph?: { type: string };
}

export interface EligibilityAnswer {
  valid: boolean;
  diagnostics: Array<{ code?: string; message: string; line?: number; column?: number }>;
  mergePolicy: { id: string; isActiveOnEdge: boolean } | null;
  eligible: Record<Method, boolean>;
  reasons: { continuous: string[]; synchronous: string[] };
}

export type MetricWindow = "24h" | "7d" | "30d";

export interface MetricBucket {
  start: string;
  end: string;
  qualified: number;
  disqualified: number;
  net: number;
}

export interface AudienceMetrics {
  segmentId: string;
  window: MetricWindow;
  from: string;
  to: string;
  totalQualified: number;
  newAudienceUpdated: number;
  qualified: number;
  disqualified: number;
  bucketSizeMs: number;
  buckets: MetricBucket[];
}

export interface SegmentJob {
  id: string;
  status: string;
  segments?: Array<{ segmentId: string }>;
  creationTime: number;
  updateTime: number;
  metrics?: {
    profilesProcessed?: number;
    totalProfiles?: number;
    segmentedProfileCounter?: Record<string, number>;
  };
  errors?: Array<{ code: string; msg: string }>;
}

export interface QuotaEntry {
  name: string;
  description: string;
  consumed: number;
  quota: number;
}

export interface WorkOrder {
  workorderId: string;
  action: string;
  status: string;
  createdAt: string;
  updatedAt: string;
  datasetId?: string;
  datasetName?: string;
  displayName?: string;
  operationCount?: number;
}

export interface DatasetExpiration {
  ttlId: string;
  datasetId: string;
  datasetName?: string;
  displayName?: string;
  status: string;
  expiry: string;
  updatedAt: string;
}

export interface UiConfig {
  devTenant: boolean;
  credentials?: { token: string; apiKey: string; orgId: string; sandboxName: string };
}

/** Time bounds an `occurs` tested against (epoch ms; PQL's OccursBounds). */
export interface OccursBounds {
  lower?: number;
  lowerInclusive: boolean;
  upper?: number;
  upperInclusive: boolean;
  exclude?: { start: number; end: number };
  empty?: boolean;
}

/** One node of an explanation's trace (PQL's TraceNode as the server sends it). */
export interface TraceNode {
  kind: string;
  text: string;
  value: unknown;
  children: TraceNode[];
  items?: { tested: number; held: number; first: unknown[] };
  bounds?: OccursBounds;
}

export type MembershipStatus = "realized" | "exited";

export interface MembershipTransition {
  from: MembershipStatus | null;
  to: MembershipStatus;
  source: string;
  at: string;
}

/** Which fragment and merge rule supplied an attribute the expression read (newer servers only). */
export interface ExplainedAttribute {
  path: string;
  value: unknown;
  /** The fragment the merge kept: its dataset, record (`namespace:id` of its primary identity) and time. */
  source: { datasetId: string; recordId?: string; timestamp?: string } | null;
  /** timestampOrdered, dataSetPrecedence, identityGraph or none (no fragment has a value). */
  rule: string;
  /** dataSetPrecedence: the dataset's place in the policy's order (1 = first); null when unlisted. */
  rank?: number | null;
}

export interface Explanation {
  segmentId: string | null;
  entityId: string;
  entityIdNS: string;
  profileId: string;
  evaluatedAt: string;
  mergePolicyId: string | null;
  result: boolean;
  excludedByConsent: boolean;
  exitsAt: string | null;
  membership: { status: MembershipStatus | null; lastQualificationTime: string | null; history: MembershipTransition[] };
  references: Array<{ id: string; status: MembershipStatus | null }>;
  events: { read: number; truncated: boolean };
  trace: TraceNode;
  attributes?: ExplainedAttribute[];
}

export interface Identity {
  namespace: string;
  id: string;
}

export interface Member {
  profileId: string;
  identities: Identity[];
  status: MembershipStatus;
  lastQualificationTime: string;
  since: { source: string; at: string } | null;
}

export interface MemberPage {
  segmentId: string;
  status: MembershipStatus;
  children: Member[];
  _page: { count: number; limit: number; totalCount: number; next: string | null };
}

export interface ImpactGroup {
  count: number;
  sample: Array<{ profileId: string; identities: Identity[] }>;
}

export interface ImpactSide {
  qualified: number;
  expression: string;
  mergePolicyId: string;
}

export interface ImpactAnswer {
  segmentId: string;
  evaluatedAt: string;
  exact: boolean;
  profiles: number;
  before: ImpactSide;
  after: ImpactSide;
  enter: ImpactGroup;
  leave: ImpactGroup;
  stay: ImpactGroup;
  eligibility?: Partial<EligibilityAnswer>;
  tookMs: number;
}

/** A field of the builder's palette, as GET …/segment/builder/fields samples it. */
export type BuilderFieldType = "string" | "number" | "integer" | "boolean" | "date" | "date-time" | "array" | "object";

export interface BuilderField {
  path: string;
  type: BuilderFieldType;
  /** Arrays: the type of their items. */
  items?: BuilderFieldType;
  /** Sampled records holding the field. */
  count: number;
  examples: (string | number | boolean)[];
}

export interface BuilderEventType {
  eventType: string;
  count: number;
  fields: BuilderField[];
}

export interface BuilderPalette {
  computedAt: string;
  profile: { sampled: number; fields: BuilderField[] };
  events: { sampled: number; eventTypes: BuilderEventType[]; fields: BuilderField[] };
  identities: { namespaces: string[]; descriptors: { path: string; namespace: string; primary: boolean }[] };
}

/** One expression's estimate, the figures GET /estimate/{previewId} answers for it. */
export interface ExpressionEstimate {
  estimatedSize: number;
  standardError: number;
  estimatedSizeRange: { low: number; high: number };
  profilesReadSoFar: number;
  profilesMatchedSoFar: number;
}

export interface BuilderEstimates {
  evaluatedAt: string;
  totalRows: number;
  numRowsToRead: number;
  confidenceInterval: string;
  estimates: ExpressionEstimate[];
  tookMs: number;
}
