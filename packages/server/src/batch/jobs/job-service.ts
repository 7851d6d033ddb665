/**
 * Segment jobs API rules (segmentation-api.md §4): create with definition ids
 * or "*", list with status / sort / paging / `property` filters, get, cancel,
 * bulk-get. Handlers (http/jobs-routes.ts) only translate HTTP to these calls.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../../platform/clock.js";
import { ApiError, badRequest, notFound } from "../../services/errors.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import type { DefinitionRecord, MetadataStore } from "../../stores/types.js";
import { isPublished } from "../../stores/records.js";
import { DependencyCycleError, dependencyOrder } from "../engine/dependency-order.js";
import type { BatchRepository } from "../store/types.js";
import { ACTIVE_STATUSES, JOB_STATUSES, jobLinks, type JobSegment, type JobStatus, type SegmentJob, type StoredJob } from "./segment-job.js";
import type { JobRunner } from "./job-runner.js";
import { BatchErrorCodes } from "../errors.js";

const KIND = "segment-job" as const;
export const PROFILE_SCHEMA = "_xdm.context.profile";
/** Page size of the definitions listing used to resolve "*". */
const DEFINITION_PAGE = 100;

/** What the batch services need of a tenant (schedules run jobs without a request). */
export type BatchTenant = Pick<TenantContext, "orgId" | "sandbox">;

/** A job created with a given id that exists already (a schedule's firing made by another pass). */
export class DuplicateJobError extends Error {
  constructor(readonly jobId: string) {
    super(`segment job ${jobId} exists already`);
    this.name = "DuplicateJobError";
  }
}

export interface CreateJobInput {
  /** The job's id (default a random one); a job with this id existing already: DuplicateJobError, nothing created. */
  id?: string;
  /** Definition ids, or ["*"] for every batch-enabled definition. */
  segmentIds: string[];
  source: "api" | "scheduler";
  requestId: string;
  profileInstanceId?: string;
  properties?: { scheduleId?: string; runId?: string };
}

export interface JobListQuery {
  start: number;
  limit: number;
  status?: JobStatus;
  direction: "asc" | "desc";
  /** `path==value` or `arrayAttr~key==value`, all must hold. */
  properties: string[];
}

type PropertyFilter = (job: SegmentJob) => boolean;

function lookup(v: unknown, path: readonly string[]): unknown {
  let cur = v;
  for (const p of path) {
    if (cur === null || typeof cur !== "object" || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[p];
  }
  return cur;
}

function asText(v: unknown): string | null {
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : null;
}

export function parsePropertyFilter(text: string): PropertyFilter {
  const m = /^([A-Za-z0-9_.]+)(?:~([A-Za-z0-9_.]+))?==(.*)$/.exec(text);
  if (m === null) throw badRequest(`Invalid property filter "${text.slice(0, 200)}": use path==value or arrayAttribute~key==value`, BatchErrorCodes.badFilter);
  const path = m[1]!.split(".");
  const value = m[3]!;
  if (m[2] === undefined) return (job) => asText(lookup(job, path)) === value;
  const inner = m[2].split(".");
  return (job) => {
    const arr = lookup(job, path);
    return Array.isArray(arr) && arr.some((item) => asText(lookup(item, inner)) === value);
  };
}

export class JobService {
  constructor(
    private readonly metadata: MetadataStore,
    private readonly repo: BatchRepository,
    private readonly runner: JobRunner,
    private readonly clock: Clock,
  ) {}

  /** Every batch-enabled, published definition of the sandbox (draft and inactive audiences are not evaluated). */
  private async allBatchDefinitions(ctx: BatchTenant): Promise<DefinitionRecord[]> {
    const scope = scopeOf(ctx);
    const out: DefinitionRecord[] = [];
    for (let offset = 0; ; offset += DEFINITION_PAGE) {
      const page = await this.metadata.definitions.list(scope, { filters: { batch: true }, sort: [{ field: "creationTime", direction: "asc" }], offset, limit: DEFINITION_PAGE });
      out.push(...page.items.filter((r) => isPublished(r.definition)));
      if (page.items.length < DEFINITION_PAGE) return out;
    }
  }

  async create(ctx: BatchTenant, input: CreateJobInput): Promise<SegmentJob> {
    const ids = input.segmentIds;
    if (ids.length === 0) throw badRequest("A segment job needs at least one segmentId", BatchErrorCodes.badJob);
    const all = ids.includes("*");
    if (all && ids.length > 1) throw badRequest('segmentId "*" cannot be combined with other segment ids', BatchErrorCodes.badJob);
    let records: DefinitionRecord[];
    if (all) {
      records = await this.allBatchDefinitions(ctx);
    } else {
      const unique = [...new Set(ids)];
      const found = await this.metadata.definitions.getMany(scopeOf(ctx), unique);
      const missing = unique.filter((id) => !found.has(id));
      if (missing.length > 0) {
        throw new ApiError(400, BatchErrorCodes.unknownDefinition, `Segment definitions not found: ${missing.slice(0, 20).join(", ")}`);
      }
      records = unique.map((id) => found.get(id)!);
    }
    try {
      dependencyOrder(records.map((r) => ({ id: r.definition.id, references: r.references })));
    } catch (e) {
      if (e instanceof DependencyCycleError) throw badRequest(e.message, BatchErrorCodes.cycle);
      throw e;
    }
    const now = this.clock.now();
    const id = input.id ?? randomUUID();
    const segments: JobSegment[] = all
      ? [{ segmentId: "*" }]
      : records.map((r) => ({
          segmentId: r.definition.id,
          segment: { id: r.definition.id, expression: r.definition.expression, mergePolicyId: r.definition.mergePolicyId, mergePolicy: { id: r.definition.mergePolicyId, version: 1 } },
        }));
    const job: SegmentJob = {
      id,
      imsOrgId: ctx.orgId,
      sandbox: ctx.sandbox,
      profileInstanceId: input.profileInstanceId ?? "ups",
      source: input.source,
      status: "NEW",
      batchId: randomUUID(),
      computeJobId: now % 1_000_000,
      computeGatewayJobId: randomUUID(),
      segments,
      metrics: { totalTime: {}, profileSegmentationTime: {} },
      requestId: input.requestId,
      schema: { name: PROFILE_SCHEMA },
      ...(input.properties === undefined ? {} : { properties: input.properties }),
      _links: jobLinks(id),
      creationTime: now,
      updateTime: now,
      updateEpoch: Math.floor(now / 1000),
    };
    const stored: StoredJob = { job, definitionIds: records.map((r) => r.definition.id) };
    try {
      await this.repo.insert(KIND, { scope: scopeOf(ctx), id, status: "NEW", creationTime: now, doc: stored });
    } catch (err) {
      // The primary key refused it: the job exists (made by another process), not an error of the store.
      if (input.id !== undefined && (await this.repo.get(KIND, scopeOf(ctx), id)) !== null) throw new DuplicateJobError(id);
      throw err;
    }
    await this.runner.enqueue(scopeOf(ctx), id);
    // AEP answers with the job as created (status NEW), whatever happened since.
    return job;
  }

  async get(ctx: BatchTenant, id: string): Promise<SegmentJob> {
    const r = await this.repo.get<StoredJob>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Segment job", id);
    return r.doc.job;
  }

  async bulkGet(ctx: BatchTenant, ids: readonly string[]): Promise<Map<string, SegmentJob>> {
    const out = new Map<string, SegmentJob>();
    for (const id of ids) {
      const r = await this.repo.get<StoredJob>(KIND, scopeOf(ctx), id);
      if (r !== null) out.set(id, r.doc.job);
    }
    return out;
  }

  async list(ctx: BatchTenant, q: JobListQuery): Promise<{ items: SegmentJob[]; total: number }> {
    const filters = q.properties.map(parsePropertyFilter);
    const scope = scopeOf(ctx);
    const base = { direction: q.direction, ...(q.status === undefined ? {} : { status: q.status }) };
    if (filters.length === 0) {
      const page = await this.repo.list<StoredJob>(KIND, scope, { ...base, offset: q.start, limit: q.limit });
      return { items: page.items.map((r) => r.doc.job), total: page.total };
    }
    // Property filters look inside the document: filter the sandbox's jobs, then page.
    const all = await this.repo.list<StoredJob>(KIND, scope, { ...base, offset: 0, limit: Number.MAX_SAFE_INTEGER });
    const matching = all.items.map((r) => r.doc.job).filter((j) => filters.every((f) => f(j)));
    return { items: matching.slice(q.start, q.start + q.limit), total: matching.length };
  }

  /**
   * DELETE (Adobe: "cancel or delete"): a queued job is cancelled at once; a processing job
   * becomes CANCELLING and stops at its next chunk (CANCELLED, nothing written); a finished job
   * (a status no job leaves) is deleted — the memberships it wrote stay.
   */
  async cancel(ctx: BatchTenant, id: string): Promise<void> {
    const scope = scopeOf(ctx);
    for (;;) {
      const r = await this.repo.get<StoredJob>(KIND, scope, id);
      if (r === null) throw notFound("Segment job", id);
      const status = r.status as JobStatus;
      if (!ACTIVE_STATUSES.includes(status)) {
        await this.repo.delete(KIND, scope, id);
        return;
      }
      if (status === "CANCELLING") return;
      const now = this.clock.now();
      const next: JobStatus = status === "PROCESSING" ? "CANCELLING" : "CANCELLED";
      r.doc.job.status = next;
      r.doc.job.updateTime = now;
      r.doc.job.updateEpoch = Math.floor(now / 1000);
      r.status = next;
      if (await this.repo.updateIf(KIND, r, [status])) {
        if (next === "CANCELLING") this.runner.requestCancel(scope, id);
        return;
      }
      // The status moved under us (e.g. QUEUED → PROCESSING): decide again.
    }
  }
}

export function isJobStatus(s: string): s is JobStatus {
  return (JOB_STATUSES as readonly string[]).includes(s);
}
