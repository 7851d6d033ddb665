/**
 * The segment job resource as AEP returns it (segmentation-api.md §4.1), and
 * what segmentd keeps beside it. Timestamps in epoch ms.
 */
import type { Expression, SandboxRef } from "../../stores/records.js";

export const JOB_STATUSES = ["NEW", "QUEUED", "PROCESSING", "CANCELLING", "CANCELLED", "FAILED", "SUCCEEDED"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const ACTIVE_STATUSES: readonly JobStatus[] = ["NEW", "QUEUED", "PROCESSING", "CANCELLING"];

export interface TimeMetric {
  startTimeInMs?: number;
  endTimeInMs?: number;
  totalTimeInMs?: number;
}

export interface JobMetrics {
  totalTime: TimeMetric;
  profileSegmentationTime: TimeMetric;
  totalProfiles?: number;
  totalProfilesByMergePolicy?: Record<string, number>;
  segmentedProfileCounter?: Record<string, number>;
  segmentedProfileByNamespaceCounter?: Record<string, Record<string, number>>;
  segmentedProfileByStatusCounter?: Record<string, { realized: number; existing: number; exited: number }>;
  /** segmentd extension: progress while PROCESSING (profiles evaluated so far, all scans). */
  profilesProcessed?: number;
  /** segmentd extension: how each definition was evaluated ("sql" or the reason it was not). */
  evaluation?: Record<string, string>;
}

export type JobSegment =
  | {
      segmentId: string;
      segment: { id: string; expression: Expression; mergePolicyId: string; mergePolicy: { id: string; version: number } };
    }
  | { segmentId: "*" };

export interface SegmentJob {
  id: string;
  imsOrgId: string;
  sandbox: SandboxRef;
  profileInstanceId: string;
  source: "api" | "scheduler";
  status: JobStatus;
  batchId: string;
  computeJobId: number;
  computeGatewayJobId: string;
  segments: JobSegment[];
  metrics: JobMetrics;
  errors?: Array<{ code: string; msg: string }>;
  requestId: string;
  schema: { name: string };
  properties?: { scheduleId?: string; runId?: string };
  _links: { cancel: { href: string; method: "DELETE" }; checkStatus: { href: string; method: "GET" } };
  creationTime: number;
  updateTime: number;
  updateEpoch: number;
}

/** What the repository stores: the resource plus the resolved definition ids. */
export interface StoredJob {
  job: SegmentJob;
  /** The definitions the job evaluates (resolved at create time, also for "*"). */
  definitionIds: string[];
  /** The runner (hub) processing it, when it has an id (several hubs); internal. */
  runBy?: string;
}

export const JOBS_PATH = "/data/core/ups/segment/jobs";

export function jobLinks(id: string): SegmentJob["_links"] {
  const href = `${JOBS_PATH}/${encodeURIComponent(id)}`;
  return { cancel: { href, method: "DELETE" }, checkStatus: { href, method: "GET" } };
}
