/**
 * Export jobs (segmentation-api.md §6): write the members of audiences to a
 * dataset as profile records (merged attributes, identityMap,
 * segmentMembership), with metrics.
 *
 * Rules segmentd applies:
 * - the destination is a Catalog dataset of class profile that is NOT
 *   profile-enabled (an export must not feed back into profiles);
 * - filter.segments[].status: `realized` and `existing` both select stored
 *   `realized` memberships (the stored statuses are realized/exited, decisions
 *   §2), `exited` selects exited ones; default ["realized", "existing"];
 * - a profile in several selected audiences is exported once;
 * - `fields` (comma-separated dot paths) projects the attributes; identityMap
 *   and segmentMembership are always written;
 * - the records are written in one ingestion batch (destination.batchId).
 * Not implemented: segmentPerBatch, additionalFields.eventList,
 * filter.segmentQualificationTime / fromIngestTimestamp / emptyProfiles,
 * evaluationInfo.segmentation (segment before exporting); they are refused
 * with 400 rather than ignored.
 */
import type { Clock } from "../../platform/clock.js";
import type { Logger } from "../../platform/logger.js";
import type { ProfileStore } from "../../profiles/store.js";
import { NO_MERGE_POLICY, type JsonObject, type JsonValue, type MembershipStatus, type MergePolicySpec, type ValidRecord } from "../../profiles/types.js";
import { badRequest, notFound } from "../../services/errors.js";
import type { MetadataStore } from "../../stores/types.js";
import { BatchErrorCodes } from "../errors.js";
import { profileScope, type BatchTenant } from "../jobs/job-service.js";
import type { TimeMetric } from "../jobs/segment-job.js";
import type { BatchRepository } from "../store/types.js";

const KIND = "export-job" as const;
const PAGE = 1000;

export interface ExportInput {
  fields?: unknown;
  mergePolicy?: unknown;
  filter?: unknown;
  additionalFields?: unknown;
  destination?: unknown;
  schema?: unknown;
  evaluationInfo?: unknown;
}

export interface ExportJob {
  id: number;
  jobType: "BATCH";
  destination: { datasetId: string; segmentPerBatch: false; batchId?: string };
  fields?: string;
  schema: { name: string };
  imsOrgId: string;
  status: "NEW" | "PROCESSING" | "SUCCEEDED" | "FAILED";
  filter: { segments: Array<{ segmentId: string; segmentNs: string; status: Array<"realized" | "existing" | "exited"> }> };
  mergePolicy: { id: string; version: number };
  profileInstanceId: string;
  errors?: Array<{ code: string; msg: string }>;
  metrics: { totalTime: TimeMetric; profileExportTime: TimeMetric; aCPDatasetWriteTime: TimeMetric; totalExportedProfileCounter?: number; exportedProfileByNamespaceCounter?: Record<string, number> };
  creationTime: number;
  updateTime: number;
  requestId: string;
}

type Status = "realized" | "existing" | "exited";

function project(entity: JsonObject, paths: readonly string[] | null): JsonObject {
  if (paths === null) return entity;
  const out: JsonObject = {};
  for (const p of paths) {
    const parts = p.split(".");
    let src: JsonValue | undefined = entity;
    for (const k of parts) src = src !== null && typeof src === "object" && !Array.isArray(src) ? src[k] : undefined;
    if (src === undefined) continue;
    let dst = out;
    parts.slice(0, -1).forEach((k) => {
      const next = dst[k];
      dst = (dst[k] = next !== null && typeof next === "object" && !Array.isArray(next) ? next : {}) as JsonObject;
    });
    dst[parts[parts.length - 1]!] = src;
  }
  return out;
}

export class ExportService {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly metadata: MetadataStore,
    private readonly profiles: ProfileStore,
    private readonly repo: BatchRepository,
    private readonly clock: Clock,
    private readonly logger?: Pick<Logger, "error">,
  ) {}

  async create(ctx: BatchTenant, input: ExportInput, requestId: string, profileInstanceId = "ups"): Promise<ExportJob> {
    const scope = profileScope(ctx);
    for (const k of ["additionalFields", "evaluationInfo"] as const) {
      if (input[k] !== undefined) throw badRequest(`${k} is not supported by segmentd export jobs`, BatchErrorCodes.badExport);
    }
    const dest = input.destination as { datasetId?: unknown; segmentPerBatch?: unknown } | undefined;
    if (typeof dest?.datasetId !== "string") throw badRequest("destination.datasetId is required", BatchErrorCodes.badExport);
    if (dest.segmentPerBatch === true) throw badRequest("destination.segmentPerBatch is not supported", BatchErrorCodes.badExport);
    const schemaName = (input.schema as { name?: unknown } | undefined)?.name;
    if (schemaName !== "_xdm.context.profile") throw badRequest('schema.name is required and must be "_xdm.context.profile"', BatchErrorCodes.badExport);
    const dataset = await this.profiles.getDataset(scope, dest.datasetId);
    if (dataset === null) throw badRequest(`Dataset ${dest.datasetId} does not exist in this sandbox`, BatchErrorCodes.badExport);
    if (dataset.schemaClass !== "profile" || dataset.profileEnabled) {
      throw badRequest(`Dataset ${dest.datasetId} cannot receive an export: it must be of class profile and not enabled for Profile`, BatchErrorCodes.badExport);
    }
    const f = (input.filter ?? {}) as { segments?: unknown; [k: string]: unknown };
    for (const k of Object.keys(f)) if (k !== "segments") throw badRequest(`filter.${k} is not supported by segmentd export jobs`, BatchErrorCodes.badExport);
    if (!Array.isArray(f.segments) || f.segments.length === 0) throw badRequest("filter.segments is required: the audiences to export", BatchErrorCodes.badExport);
    const segments = (f.segments as Array<{ segmentId?: unknown; segmentNs?: unknown; status?: unknown }>).map((s) => {
      if (typeof s.segmentId !== "string") throw badRequest("filter.segments[].segmentId is required", BatchErrorCodes.badExport);
      const status = s.status ?? ["realized", "existing"];
      if (!Array.isArray(status) || status.length === 0 || !status.every((x) => x === "realized" || x === "existing" || x === "exited")) {
        throw badRequest('filter.segments[].status lists "realized", "existing" and/or "exited"', BatchErrorCodes.badExport);
      }
      return { segmentId: s.segmentId, segmentNs: typeof s.segmentNs === "string" ? s.segmentNs : "ups", status: status as Status[] };
    });
    const found = await this.metadata.definitions.getMany({ orgId: ctx.orgId, sandboxId: ctx.sandbox.sandboxId }, segments.map((s) => s.segmentId));
    const missing = segments.filter((s) => !found.has(s.segmentId)).map((s) => s.segmentId);
    if (missing.length > 0) throw badRequest(`Segment definitions not found: ${missing.join(", ")}`, BatchErrorCodes.unknownDefinition);
    if (input.fields !== undefined && typeof input.fields !== "string") throw badRequest("fields must be a comma-separated string of field paths", BatchErrorCodes.badExport);
    const mpId = (input.mergePolicy as { id?: unknown } | undefined)?.id;
    const mergePolicyId = typeof mpId === "string" ? mpId : found.get(segments[0]!.segmentId)!.definition.mergePolicyId;
    const now = this.clock.now();
    const existing = await this.repo.list<ExportJob>(KIND, scope, { direction: "desc", offset: 0, limit: 1 });
    const id = (existing.items[0]?.doc.id ?? 0) + 1;
    const job: ExportJob = {
      id,
      jobType: "BATCH",
      destination: { datasetId: dest.datasetId, segmentPerBatch: false },
      ...(typeof input.fields === "string" ? { fields: input.fields } : {}),
      schema: { name: schemaName },
      imsOrgId: ctx.orgId,
      status: "NEW",
      filter: { segments },
      mergePolicy: { id: mergePolicyId, version: 1 },
      profileInstanceId,
      metrics: { totalTime: {}, profileExportTime: {}, aCPDatasetWriteTime: {} },
      creationTime: now,
      updateTime: now,
      requestId,
    };
    await this.repo.insert(KIND, { scope, id: String(id), status: "NEW", creationTime: now, doc: job });
    // The runner works on its own copy: the response shows the job as created.
    const run = this.run(ctx, structuredClone(job)).catch((err: unknown) => this.logger?.error({ err, exportJobId: id }, "export job failed"));
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return job;
  }

  async idle(): Promise<void> {
    await Promise.all([...this.running]);
  }

  private async save(ctx: BatchTenant, job: ExportJob): Promise<void> {
    job.updateTime = this.clock.now();
    await this.repo.update(KIND, { scope: profileScope(ctx), id: String(job.id), status: job.status, creationTime: job.creationTime, doc: job });
  }

  private async policy(ctx: BatchTenant, id: string): Promise<MergePolicySpec> {
    const p = (await this.metadata.mergePolicies.get({ orgId: ctx.orgId, sandboxId: ctx.sandbox.sandboxId }, id))?.policy;
    return p === undefined ? NO_MERGE_POLICY : { id: p.id, identityGraph: p.identityGraph, attributeMerge: p.attributeMerge };
  }

  private async run(ctx: BatchTenant, job: ExportJob): Promise<void> {
    const scope = profileScope(ctx);
    const start = this.clock.now();
    job.status = "PROCESSING";
    job.metrics.totalTime = { startTimeInMs: start };
    await this.save(ctx, job);
    try {
      const policy = await this.policy(ctx, job.mergePolicy.id);
      const pids = new Set<string>();
      for (const s of job.filter.segments) {
        const stored = new Set<MembershipStatus>(s.status.map((x) => (x === "exited" ? "exited" : "realized")));
        for (const status of stored) {
          for (let after = "0"; ;) {
            const page = await this.profiles.listMembers(scope, s.segmentId, { status, limit: PAGE, afterProfileId: after });
            for (const m of page) pids.add(m.profileId);
            if (page.length < PAGE) break;
            after = page[page.length - 1]!.profileId;
          }
        }
      }
      const fields = job.fields === undefined ? null : job.fields.split(",").map((x) => x.trim()).filter((x) => x !== "");
      const records: ValidRecord[] = [];
      const byNamespace: Record<string, number> = {};
      for (const pid of [...pids].sort((a, b) => Number(a) - Number(b))) {
        const identities = await this.profiles.graphIdentities(scope, pid);
        const primary = identities[0];
        if (primary === undefined) continue;
        const profile = await this.profiles.getProfile(scope, primary, policy);
        if (profile === null) continue;
        const body: JsonObject = { ...project(profile.entity, fields), identityMap: profile.entity["identityMap"] ?? {}, segmentMembership: profile.entity["segmentMembership"] ?? {} };
        const json = JSON.stringify(body);
        records.push({ index: records.length, kind: "profile", body, primary, identities, timestamp: null, eventId: null, size: Buffer.byteLength(json), json });
        for (const ns of new Set(profile.identities.map((i) => i.namespace))) byNamespace[ns] = (byNamespace[ns] ?? 0) + 1;
      }
      const exportEnd = this.clock.now();
      job.metrics.profileExportTime = { startTimeInMs: start, endTimeInMs: exportEnd, totalTimeInMs: exportEnd - start };
      const batch = await this.profiles.createBatch(scope, job.destination.datasetId, exportEnd);
      await this.profiles.append(scope, job.destination.datasetId, records, { ingestedAt: exportEnd, maxIdentitiesPerGraph: 50, batch: { id: batch.id, read: records.length, failed: [] } });
      await this.profiles.setBatchStatus(scope, batch.id, "success", this.clock.now());
      const end = this.clock.now();
      job.destination.batchId = batch.id;
      job.metrics.aCPDatasetWriteTime = { startTimeInMs: exportEnd, endTimeInMs: end, totalTimeInMs: end - exportEnd };
      job.metrics.totalTime = { startTimeInMs: start, endTimeInMs: end, totalTimeInMs: end - start };
      job.metrics.totalExportedProfileCounter = records.length;
      job.metrics.exportedProfileByNamespaceCounter = byNamespace;
      job.status = "SUCCEEDED";
    } catch (e) {
      job.status = "FAILED";
      job.errors = [{ code: "SEGMENTD-EXPORT-FAILED", msg: e instanceof Error ? e.message : String(e) }];
    }
    await this.save(ctx, job);
  }

  async get(ctx: BatchTenant, id: string): Promise<ExportJob> {
    const r = await this.repo.get<ExportJob>(KIND, profileScope(ctx), id);
    if (r === null) throw notFound("Export job", id);
    return r.doc;
  }

  /** Newest first; `offset` is AEP's cursor `<creationTime>_<id>` of the last job of the previous page. */
  async list(ctx: BatchTenant, q: { limit: number; offset?: string; status?: string }): Promise<{ items: ExportJob[]; next: string | null }> {
    const all = await this.repo.list<ExportJob>(KIND, profileScope(ctx), { direction: "desc", offset: 0, limit: Number.MAX_SAFE_INTEGER, ...(q.status === undefined ? {} : { status: q.status }) });
    let jobs = all.items.map((r) => r.doc).sort((a, b) => b.creationTime - a.creationTime || b.id - a.id);
    if (q.offset !== undefined) {
      const m = /^(\d+)_(\d+)$/.exec(q.offset);
      if (m === null) throw badRequest(`Invalid offset "${q.offset.slice(0, 50)}": use <creationTime>_<id> from page.pageOffset`, BatchErrorCodes.badFilter);
      const [t, id] = [Number(m[1]), Number(m[2])];
      jobs = jobs.filter((j) => j.creationTime < t || (j.creationTime === t && j.id < id));
    }
    const items = jobs.slice(0, q.limit);
    const last = items[items.length - 1];
    return { items, next: jobs.length > q.limit && last !== undefined ? `${last.creationTime}_${last.id}` : null };
  }
}
