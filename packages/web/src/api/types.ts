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
