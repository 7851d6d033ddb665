/**
 * Segment jobs across the worker fleet (#44): what the hub and the workers share. The hub puts a
 * job's announcement in a NATS KV bucket (key: the job id); every worker reads the bucket, and for
 * each job evaluates its shard (batch/shards/worker-shard.ts) and writes each partition it holds
 * that no one has written yet — memberships, transitions and the partition's report in one
 * transaction (JobPartitionWrites: once per partition whoever evaluates it). A worker that cannot
 * evaluate a job puts `fail.<job id>` with the reason. The hub completes the job when every
 * partition has reported, and removes the keys; a removed announcement is a cancelled job.
 */
import { format, parse } from "@segmentd/pql";
import type { JetStreamClient } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { DefinitionCounters, JobDefinition } from "../batch/engine/evaluation-types.js";
import type { MergePolicySpec } from "../profiles/types.js";

export const BATCH_JOB_BUCKET = "segmentd_batch_jobs";

/** The bucket (created by whoever comes first: the hub or a worker). */
export async function batchJobBucket(js: JetStreamClient): Promise<KV> {
  return new Kvm(js).create(BATCH_JOB_BUCKET, { history: 1 });
}

/** A job id as a KV key and a table key: the API's ids (UUIDs) and the tests' names. */
const JOB_ID = /^[A-Za-z0-9_-]{1,128}$/;

export interface BatchJobAnnouncement {
  v: 1;
  jobId: string;
  orgId: string;
  sandboxName: string;
  /** The job's evaluation instant (epoch ms): the memberships' qualification time. */
  at: number;
  /** The partition count the workers' stream was made with: every one must report. */
  partitions: number;
  definitions: Array<{ id: string; text: string; references: readonly string[]; excludeOptOut: boolean; policy: MergePolicySpec & { id: string } }>;
}

/** What a partition's row reports: its share of the job's metrics. */
export interface PartitionReportBody {
  profiles: number;
  counters: Record<string, DefinitionCounters>;
  /** Entries per merge policy id (absent in reports of older workers). */
  profilesByPolicy?: Record<string, number>;
}

export function announcement(o: Omit<BatchJobAnnouncement, "v" | "definitions"> & { definitions: readonly JobDefinition[] }): BatchJobAnnouncement {
  if (!JOB_ID.test(o.jobId)) throw new RangeError(`a fleet job's id must be 1-128 letters, digits, '-' or '_', got ${JSON.stringify(o.jobId)}`);
  return {
    v: 1, jobId: o.jobId, orgId: o.orgId, sandboxName: o.sandboxName, at: o.at, partitions: o.partitions,
    definitions: o.definitions.map((d) => ({ id: d.id, text: format(d.query), references: d.references, excludeOptOut: d.excludeOptOut, policy: d.policy })),
  };
}

/** An announcement read from the bucket, or null when it is not one (then it is ignored, never evaluated). */
export function decodeAnnouncement(data: Uint8Array): (BatchJobAnnouncement & { jobs: JobDefinition[] }) | null {
  let m: BatchJobAnnouncement;
  try {
    m = JSON.parse(new TextDecoder().decode(data)) as BatchJobAnnouncement;
  } catch {
    return null;
  }
  if (m === null || typeof m !== "object" || m.v !== 1 || typeof m.jobId !== "string" || !JOB_ID.test(m.jobId) || typeof m.orgId !== "string" || typeof m.sandboxName !== "string") return null;
  if (!Number.isSafeInteger(m.at) || !Number.isSafeInteger(m.partitions) || m.partitions < 1 || !Array.isArray(m.definitions)) return null;
  try {
    const jobs = m.definitions.map((d) => ({ id: d.id, query: parse(d.text), references: [...d.references], excludeOptOut: d.excludeOptOut === true, policy: d.policy }));
    return { ...m, jobs };
  } catch {
    return null;
  }
}

export const failKey = (jobId: string): string => `fail.${jobId}`;
