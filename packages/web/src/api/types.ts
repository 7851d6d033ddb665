/**
 * The shapes the UI reads from segmentd's APIs. Where a route's response schema
 * is complete, the type is the one generated from the server's /openapi.json
 * (./openapi.d.ts, `npm run gen:web-types`), so that it cannot drift from what
 * the server sends; the explanation's trace is PQL's own TraceNode. The rest
 * (Adobe's shapes, whose schemas are looser than what the UI relies on) are
 * written here, with only the fields the UI uses.
 */
import type { TraceNode } from "@segmentd/pql";
import type { paths } from "./openapi.js";

export type { OccursBounds, TraceNode } from "@segmentd/pql";

/** The JSON body of an operation's 200 answer. */
type Ok<P extends keyof paths, M extends "get" | "post"> = paths[P][M] extends { responses: { 200: { content: { "application/json": infer B } } } } ? B : never;

export type Method = "batch" | "continuous" | "synchronous";

export interface EvaluationFlag {
  enabled: boolean;
}

// Adobe's objects carry more than the UI reads: the UI's types pick the fields it uses (their types
// still the generated ones), so that a fixture or a draft need not invent the rest.
type GeneratedDefinition = Ok<"/data/core/ups/segment/definitions", "get">["segments"][number];
export type SegmentDefinition = Pick<GeneratedDefinition, "id" | "name" | "description" | "schema" | "expression" | "mergePolicyId" | "evaluationInfo" | "creationTime" | "updateTime"> & {
  classification?: Pick<GeneratedDefinition["classification"], "queryType" | "reasons">;
};
export type DefinitionPage = Omit<Ok<"/data/core/ups/segment/definitions", "get">, "segments" | "link"> & { segments: SegmentDefinition[] };

type GeneratedMergePolicy = Ok<"/data/core/ups/config/mergePolicies", "get">["children"][number];
/** "pdg" stitches profiles by the identity graph; older answers may lack it. */
export type MergePolicy = Pick<GeneratedMergePolicy, "id" | "name" | "isActiveOnEdge" | "default" | "schema"> & { identityGraph?: GeneratedMergePolicy["identityGraph"] };

export type EligibilityAnswer = Omit<Ok<"/data/core/ups/segment/eligibility", "post">, "classification">;

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

export type MetricWindow = AudienceMetrics["window"];
export type AudienceMetrics = Ok<"/data/core/ups/segment/definitions/{id}/metrics", "get">;
export type MetricBucket = AudienceMetrics["buckets"][number];

/** A continuous or edge audience's backfill: its state and progress (segmentd extension, issue #40). */
export type Backfill = Ok<"/data/core/ups/segment/definitions/{id}/backfill", "get">;

export type MemberPage = Ok<"/data/core/ups/segment/definitions/{id}/members", "get">;
export type Member = MemberPage["children"][number];
export type Identity = Member["identities"][number];
export type MembershipStatus = Member["status"];

type GeneratedExplanation = Ok<"/data/core/ups/segment/definitions/{id}/explain", "get">;
/**
 * Which fragment and merge rule supplied an attribute the expression read. Wider than the schema
 * on purpose: the UI shows a rule a newer server adds by its name, and a source an older one sent
 * without record or time.
 */
export type ExplainedAttribute = Omit<GeneratedExplanation["attributes"][number], "rule" | "source"> & {
  rule: string;
  source: { datasetId: string; recordId?: string; timestamp?: string } | null;
};
/** Why a profile is in or out (older servers send no attributes); the trace's schema is open (recursive), so its type is PQL's. */
export type Explanation = Omit<GeneratedExplanation, "trace" | "attributes" | "computedAttributes"> & {
  trace: TraceNode;
  attributes?: ExplainedAttribute[];
  /** Older servers send none. */
  computedAttributes?: GeneratedExplanation["computedAttributes"];
};
export type MembershipTransition = Explanation["membership"]["history"][number];

type GeneratedImpact = Ok<"/data/core/ups/segment/definitions/{id}/impact", "post">;
export type ImpactGroup = GeneratedImpact["enter"];
export type ImpactSide = GeneratedImpact["before"];
/** The eligibility part is POST /segment/eligibility's answer, whose schema is open. */
export type ImpactAnswer = Omit<GeneratedImpact, "eligibility"> & { eligibility?: Partial<EligibilityAnswer> };

/** A computed attribute (AEP's /data/core/ca/attributes), the fields the palette reads. */
type GeneratedComputedAttribute = Ok<"/data/core/ca/attributes", "get">["computedAttributes"][number];
export type ComputedAttribute = Pick<GeneratedComputedAttribute, "id" | "name" | "displayName" | "status" | "positionPath" | "mergeFunction" | "returnSchema" | "duration">;

/** The builder's palette, as GET …/segment/builder/fields samples it. */
export type BuilderPalette = Ok<"/data/core/ups/segment/builder/fields", "get">;
export type BuilderField = BuilderPalette["profile"]["fields"][number];
export type BuilderFieldType = BuilderField["type"];
export type BuilderEventType = BuilderPalette["events"]["eventTypes"][number];

/** Estimates of several expressions at once; each one's figures are GET /estimate/{previewId}'s. */
export type BuilderEstimates = Ok<"/data/core/ups/segment/builder/estimate", "post">;
export type ExpressionEstimate = BuilderEstimates["estimates"][number];
