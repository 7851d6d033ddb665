/**
 * Export jobs (segmentation-api.md §6): write the members of audiences to a
 * dataset as profile records (merged attributes, identityMap,
 * segmentMembership, optionally the profile's events), with metrics.
 *
 * Rules segmentd applies:
 * - the destination is a Catalog dataset of class profile that is NOT
 *   profile-enabled (an export must not feed back into profiles);
 * - filter.segments[].status: `realized` and `existing` both select stored
 *   `realized` memberships (the stored statuses are realized/exited, decisions
 *   §2), `exited` selects exited ones; default ["realized", "existing"];
 * - filter.segmentQualificationTime {startTime?, endTime?} (RFC 3339, both
 *   inclusive) keeps only the memberships whose lastQualificationTime is in
 *   the range;
 * - filter.fromIngestTimestamp (RFC 3339, strictly after) keeps only profiles
 *   updated after it: a profile fragment ingested after it, or an event whose
 *   timestamp is after it (the store records when fragments were ingested but
 *   not when events were, so an event counts by its own timestamp);
 * - filter.emptyProfiles (default false): a profile with events but no profile
 *   fragment is exported only when true;
 * - a profile in several selected audiences is exported once per batch;
 * - `fields` (comma-separated dot paths) projects the attributes; identityMap
 *   and segmentMembership are always written;
 * - additionalFields.eventList adds `eventList` to each record: the profile's
 *   events (under the merge policy's identity graph), oldest first, projected
 *   to eventList.fields (`_id` and `timestamp` always kept), filtered by
 *   eventList.filter.fromIngestTimestamp (strictly after) / toIngestTimestamp
 *   (up to and including), compared with the event's timestamp (see above);
 * - destination.segmentPerBatch false: one ingestion batch
 *   (destination.batchId); true: one batch per filter.segments entry
 *   (destination.batches[{segmentId, segmentNs, status, batchId}]);
 * - records are staged with their batch and the batches completed only once
 *   every record is staged: a cancelled or failed export aborts its batches,
 *   so none of its records is ever visible in the dataset;
 * - evaluationInfo.segmentation true: a segment job over the selected
 *   definitions runs first (evaluationInfo.segmentJobId); the export reads the
 *   memberships once it SUCCEEDED and FAILS when it did not;
 * - DELETE cancels: NEW / PROCESSING → CANCELLING → CANCELLED (the runner stops
 *   at its next profile, aborts its batches and cancels its segment job if that
 *   has not finished); a cancel that arrives while the batches are being
 *   completed is too late (the job SUCCEEDS). A finished job is deleted
 *   (200, as Adobe's "cancel or delete");
 * - start-up recovery: a job left NEW / PROCESSING by a stop is FAILED, a
 *   CANCELLING one CANCELLED; their loading batches are aborted. Several hubs:
 *   a job records its hub, recovery takes only dead hubs' jobs, and a DELETE
 *   through another hub stores CANCELLING for the running hub to read.
 * Every request field is type-checked; a refused request stores nothing.
 * Without filter.segments (absent or empty) every profile of the sandbox is
 * exported, as AEP does, under the given merge policy or the sandbox's default
 * profile policy; qualification-time filters and evaluationInfo.segmentation
 * need segments and are refused without them.
 * The merge policy must exist in the sandbox (400 otherwise); the job records the
 * version it was read at. Not implemented: exporting under an earlier version of
 * a policy (`mergePolicy.version` is type-checked; the current policy is used);
 * jobType is always BATCH; no computeGatewayJobId.
 */
import type { Clock } from "../../platform/clock.js";
import { claimedElsewhere } from "../../platform/roles.js";
import type { Logger } from "../../platform/logger.js";
import type { DatasetCatalog, IdentityGraph, IngestBatches, MembershipReads, ProfileReads } from "../../profiles/store.js";
import { NO_MERGE_POLICY, type Identity, type JsonObject, type MembershipStatus, type MergePolicySpec, type TenantScope, type ValidRecord } from "../../profiles/types.js";
import { badRequest, notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import type { MetadataStore } from "../../stores/types.js";
import { BatchErrorCodes } from "../errors.js";
import type { BatchTenant, JobService } from "../jobs/job-service.js";
import type { JobStatus, TimeMetric } from "../jobs/segment-job.js";
import type { BatchRepository, StoredResource } from "../store/types.js";
import { exportFileName, exportRecordId, RECORDS_PER_FILE } from "./export-files.js";
import { bad, booleanAt, fieldList, fieldsAt, isObject, objectAt, project, rangeAt, timeAt } from "./export-request-checks.js";

/** Audience members and profiles read; a dataset destination is written through a batch of its own. */
export type ExportStore = DatasetCatalog & IngestBatches & IdentityGraph & ProfileReads & MembershipReads;

const KIND = "export-job" as const;
/** Memberships per listMembers page, and profiles per staged chunk. */
const PAGE = RECORDS_PER_FILE;
/** Events per getEvents page. */
const EVENT_PAGE = 1000;
const MAX_IDENTITIES_PER_GRAPH = 50;

export const EXPORT_STATUSES = ["NEW", "PROCESSING", "CANCELLING", "CANCELLED", "SUCCEEDED", "FAILED"] as const;
export type ExportStatus = (typeof EXPORT_STATUSES)[number];
const ACTIVE: readonly ExportStatus[] = ["NEW", "PROCESSING", "CANCELLING"];
export const CANCEL_MESSAGE = "Export job has been marked for cancelling";
export const DELETE_MESSAGE = "Export job has been deleted";

export interface ExportInput {
  fields?: unknown;
  mergePolicy?: unknown;
  filter?: unknown;
  additionalFields?: unknown;
  destination?: unknown;
  schema?: unknown;
  evaluationInfo?: unknown;
}

type Status = "realized" | "existing" | "exited";

export interface ExportSegment {
  segmentId: string;
  segmentNs: string;
  status: Status[];
}

export interface ExportBatch extends ExportSegment {
  batchId: string;
}

export interface EventListSpec {
  fields?: string;
  filter?: { fromIngestTimestamp?: string; toIngestTimestamp?: string };
}

export interface ExportJob {
  id: number;
  jobType: "BATCH";
  destination: { datasetId: string; segmentPerBatch: boolean; batchId?: string; batches?: ExportBatch[] };
  fields?: string;
  schema: { name: string };
  imsOrgId: string;
  status: ExportStatus;
  filter: {
    segments: ExportSegment[];
    segmentQualificationTime?: { startTime?: string; endTime?: string };
    fromIngestTimestamp?: string;
    emptyProfiles?: boolean;
  };
  additionalFields?: { eventList: EventListSpec };
  /** segmentJobId: segmentd extension, the segment job run before the export. */
  evaluationInfo?: { segmentation: boolean; segmentJobId?: string };
  mergePolicy: { id: string; version: number };
  profileInstanceId: string;
  errors?: Array<{ code: string; msg: string }>;
  metrics: { totalTime: TimeMetric; profileExportTime: TimeMetric; aCPDatasetWriteTime: TimeMetric; totalExportedProfileCounter?: number; exportedProfileByNamespaceCounter?: Record<string, number> };
  creationTime: number;
  updateTime: number;
  requestId: string;
}

/** As stored: the job, and the hub running it (several hubs; never shown by the API). */
type StoredExport = ExportJob & { runBy?: string };

/** Several hubs: who runs this process's exports, and which runners are alive now. */
export interface ExportRunners {
  runnerId?: string;
  liveRunners?: () => ReadonlySet<string> | undefined;
}

/** The request's times as epoch ms (validated once, at create). */
interface RunPlan {
  qualifiedFrom: number | null;
  qualifiedTo: number | null;
  updatedAfter: number | null;
  emptyProfiles: boolean;
  fields: string[] | null;
  events: { fields: string[] | null; after: number | null; upTo: number | null } | null;
}

/** Why a run stopped early. */
class ExportCancelled extends Error {}
class ExportFailure extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

function key(scope: TenantScope, id: number | string): string {
  return `${scope.orgId}\u0000${scope.sandboxName}\u0000${id}`;
}

/** The job as the API shows it: without the hub that runs it. */
function view(doc: StoredExport): ExportJob {
  const { runBy: _runBy, ...job } = doc;
  return job;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const FINISHED_SEGMENT_JOB: readonly JobStatus[] = ["SUCCEEDED", "FAILED", "CANCELLED"];

export class ExportService {
  private readonly running = new Set<Promise<void>>();
  /** Jobs running in this process (scope + id). */
  private readonly active = new Set<string>();
  private readonly cancelRequested = new Set<string>();
  private stopped = false;
  private inserting: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly metadata: MetadataStore,
    private readonly profiles: ExportStore,
    private readonly repo: BatchRepository,
    private readonly clock: Clock,
    private readonly logger?: Pick<Logger, "error">,
    /** Runs the segment job of evaluationInfo.segmentation. */
    private readonly jobs?: JobService,
    private readonly runners: ExportRunners = {},
  ) {}

  /** The stored document of the runner's copy: with this hub's id when there are several. */
  private stored(job: ExportJob): StoredExport {
    return this.runners.runnerId === undefined ? job : { ...job, runBy: this.runners.runnerId };
  }

  /** Another live hub runs (or has just created) this active job, which this process does not run. */
  private runsElsewhere(doc: StoredExport, live = this.runners.liveRunners?.()): boolean {
    return live !== undefined && claimedElsewhere({ by: doc.runBy, self: this.runners.runnerId, live, at: doc.updateTime, now: this.clock.now() });
  }

  async create(ctx: BatchTenant, input: unknown, requestId: string, profileInstanceId = "ups"): Promise<ExportJob> {
    const scope = scopeOf(ctx);
    if (!isObject(input)) throw bad("The request body must be a JSON object (CreateExportJobRequest)");
    const body = input as ExportInput;
    const dest = body.destination;
    if (!isObject(dest) || typeof dest["datasetId"] !== "string") throw bad("destination.datasetId is required");
    const datasetId = dest["datasetId"];
    const segmentPerBatch = booleanAt(dest["segmentPerBatch"], "destination.segmentPerBatch") ?? false;
    const schemaName = isObject(body.schema) ? body.schema["name"] : undefined;
    if (schemaName !== "_xdm.context.profile") throw bad('schema.name is required and must be "_xdm.context.profile"');
    const fields = fieldsAt(body.fields, "fields");

    // filter
    const f = objectAt(body.filter ?? {}, "filter", ["segments", "segmentQualificationTime", "fromIngestTimestamp", "emptyProfiles"]);
    if (f["segments"] !== undefined && !Array.isArray(f["segments"])) throw bad("filter.segments must be an array of {segmentId, segmentNs?, status?}; omit it to export every profile");
    const segments = ((f["segments"] ?? []) as unknown[]).map((s): ExportSegment => {
      if (!isObject(s) || typeof s["segmentId"] !== "string") throw bad("filter.segments[].segmentId is required");
      const status = s["status"] ?? ["realized", "existing"];
      if (!Array.isArray(status) || status.length === 0 || !status.every((x) => x === "realized" || x === "existing" || x === "exited")) {
        throw bad('filter.segments[].status lists "realized", "existing" and/or "exited"');
      }
      if (s["segmentNs"] !== undefined && typeof s["segmentNs"] !== "string") throw bad("filter.segments[].segmentNs must be a string");
      return { segmentId: s["segmentId"], segmentNs: typeof s["segmentNs"] === "string" ? s["segmentNs"] : "ups", status: status as Status[] };
    });
    const qualification = f["segmentQualificationTime"] === undefined ? undefined : rangeAt(f["segmentQualificationTime"], "filter.segmentQualificationTime", ["startTime", "endTime"]);
    const updatedAfter = timeAt(f["fromIngestTimestamp"], "filter.fromIngestTimestamp");
    const emptyProfiles = booleanAt(f["emptyProfiles"], "filter.emptyProfiles");

    // additionalFields
    let eventList: EventListSpec | undefined;
    let eventRange: ReturnType<typeof rangeAt> = {};
    if (body.additionalFields !== undefined) {
      const a = objectAt(body.additionalFields, "additionalFields", ["eventList"]);
      if (a["eventList"] === undefined) throw bad("additionalFields.eventList is required when additionalFields is given");
      const e = objectAt(a["eventList"], "additionalFields.eventList", ["fields", "filter"]);
      const eventFields = fieldsAt(e["fields"], "additionalFields.eventList.fields");
      if (e["filter"] !== undefined) eventRange = rangeAt(e["filter"], "additionalFields.eventList.filter", ["fromIngestTimestamp", "toIngestTimestamp"]);
      eventList = {
        ...(eventFields === undefined ? {} : { fields: eventFields }),
        ...(e["filter"] === undefined ? {} : {
          filter: {
            ...(eventRange.from === undefined ? {} : { fromIngestTimestamp: eventRange.from.text }),
            ...(eventRange.to === undefined ? {} : { toIngestTimestamp: eventRange.to.text }),
          },
        }),
      };
    }

    // evaluationInfo
    let segmentation: boolean | undefined;
    if (body.evaluationInfo !== undefined) {
      const ev = objectAt(body.evaluationInfo, "evaluationInfo", ["segmentation"]);
      segmentation = booleanAt(ev["segmentation"], "evaluationInfo.segmentation");
      if (segmentation === undefined) throw bad("evaluationInfo.segmentation is required when evaluationInfo is given (true or false)");
    }

    let mergePolicyId: string | undefined;
    if (body.mergePolicy !== undefined) {
      if (!isObject(body.mergePolicy) || (body.mergePolicy["id"] !== undefined && typeof body.mergePolicy["id"] !== "string")) throw bad("mergePolicy must be an object with a string id");
      const version = body.mergePolicy["version"];
      if (version !== undefined && !(typeof version === "number" && Number.isInteger(version) && version >= 1)) throw bad("mergePolicy.version must be a positive integer");
      mergePolicyId = body.mergePolicy["id"] as string | undefined;
    }

    const dataset = await this.profiles.getDataset(scope, datasetId);
    if (dataset === null) throw bad(`Dataset ${datasetId} does not exist in this sandbox`);
    if (dataset.schemaClass !== "profile" || dataset.profileEnabled) {
      throw bad(`Dataset ${datasetId} cannot receive an export: it must be of class profile and not enabled for Profile`);
    }
    const found = await this.metadata.definitions.getMany(scopeOf(ctx), segments.map((s) => s.segmentId));
    const missing = segments.filter((s) => !found.has(s.segmentId)).map((s) => s.segmentId);
    if (missing.length > 0) throw badRequest(`Segment definitions not found: ${missing.join(", ")}`, BatchErrorCodes.unknownDefinition);
    if (segmentation === true && this.jobs === undefined) throw bad("evaluationInfo.segmentation is not available in this process");
    if (segments.length === 0) {
      if (qualification !== undefined) throw bad("filter.segmentQualificationTime needs filter.segments: without segments every profile is exported");
      if (segmentation === true) throw bad("evaluationInfo.segmentation needs filter.segments: the audiences to evaluate before exporting");
      if (mergePolicyId === undefined) {
        const fallback = await this.metadata.mergePolicies.getDefault(scopeOf(ctx), "_xdm.context.profile");
        if (fallback === undefined) throw bad("mergePolicy.id is required to export every profile: this sandbox has no default profile merge policy");
        mergePolicyId = fallback.policy.id;
      }
    }

    // The policy the export reads profiles under: the given one, else the first segment's. Its
    // current version is recorded (segmentd keeps no earlier versions of a policy to export under).
    const policyId = mergePolicyId ?? found.get(segments[0]!.segmentId)!.definition.mergePolicyId;
    const policyRecord = await this.metadata.mergePolicies.get(scopeOf(ctx), policyId);
    if (policyRecord === undefined) throw bad(`Merge policy ${policyId} does not exist in this sandbox`);

    const now = this.clock.now();
    // Last, so that a refused request starts nothing: the segment job (400 on an inSegment cycle).
    const segmentJobId = segmentation === true
      ? (await this.jobs!.create(ctx, { segmentIds: [...new Set(segments.map((s) => s.segmentId))], source: "api", requestId, profileInstanceId })).id
      : undefined;
    const filter: ExportJob["filter"] = { segments };
    if (qualification !== undefined) {
      filter.segmentQualificationTime = {
        ...(qualification.from === undefined ? {} : { startTime: qualification.from.text }),
        ...(qualification.to === undefined ? {} : { endTime: qualification.to.text }),
      };
    }
    if (updatedAfter !== undefined) filter.fromIngestTimestamp = updatedAfter.text;
    if (emptyProfiles !== undefined) filter.emptyProfiles = emptyProfiles;
    const job: ExportJob = {
      id: 0,
      jobType: "BATCH",
      destination: { datasetId, segmentPerBatch },
      ...(fields === undefined ? {} : { fields }),
      schema: { name: schemaName },
      imsOrgId: ctx.orgId,
      status: "NEW",
      filter,
      ...(eventList === undefined ? {} : { additionalFields: { eventList } }),
      ...(segmentation === undefined ? {} : { evaluationInfo: { segmentation, ...(segmentJobId === undefined ? {} : { segmentJobId }) } }),
      mergePolicy: { id: policyId, version: policyRecord.policy.version },
      profileInstanceId,
      metrics: { totalTime: {}, profileExportTime: {}, aCPDatasetWriteTime: {} },
      creationTime: now,
      updateTime: now,
      requestId,
    };
    const plan: RunPlan = {
      qualifiedFrom: qualification?.from?.ms ?? null,
      qualifiedTo: qualification?.to?.ms ?? null,
      updatedAfter: updatedAfter?.ms ?? null,
      emptyProfiles: emptyProfiles ?? false,
      fields: fieldList(fields),
      events: eventList === undefined ? null : { fields: fieldList(eventList.fields), after: eventRange.from?.ms ?? null, upTo: eventRange.to?.ms ?? null },
    };
    const k = await this.insert(scope, job);
    const id = job.id;
    // The runner works on its own copy: the response shows the job as created.
    const run = this.run(ctx, structuredClone(job), plan)
      .catch((err: unknown) => this.logger?.error({ err, exportJobId: id }, "export job failed"))
      .finally(() => {
        this.active.delete(k);
        this.cancelRequested.delete(k);
      });
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
    return job;
  }

  /**
   * Numbers the job (the sandbox's highest id + 1: ids are stored as text, so the newest
   * row is not necessarily the highest number) and stores it, one create at a time.
   * The job is active before it is stored: a DELETE never finds it stored but not running.
   */
  private insert(scope: TenantScope, job: ExportJob): Promise<string> {
    const run = this.inserting.then(async () => {
      // Several hubs may number a job at once: the one whose insert finds the id taken numbers again.
      for (let attempt = 0; ; attempt++) {
        const all = await this.repo.list<ExportJob>(KIND, scope, { direction: "desc", offset: 0, limit: Number.MAX_SAFE_INTEGER });
        job.id = all.items.reduce((max, r) => Math.max(max, r.doc.id), 0) + 1;
        const k = key(scope, job.id);
        this.active.add(k);
        try {
          await this.repo.insert(KIND, { scope, id: String(job.id), status: "NEW", creationTime: job.creationTime, doc: this.stored(job) });
          return k;
        } catch (e) {
          this.active.delete(k);
          if (attempt >= 20 || (await this.repo.get(KIND, scope, String(job.id))) === null) throw e;
        }
      }
    });
    this.inserting = run.catch(() => undefined);
    return run;
  }

  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }

  /** Shutdown: exports waiting for their segment job give up (FAILED); the others finish. */
  async close(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }

  /**
   * Start-up: jobs of an earlier process that were still active cannot resume (their
   * records were staged by a run that is gone). Their loading batches are aborted;
   * CANCELLING ends CANCELLED, NEW / PROCESSING end FAILED.
   */
  async recover(liveRunners?: ReadonlySet<string>): Promise<void> {
    for (const r of await this.repo.listAllByStatus<StoredExport>(KIND, ACTIVE)) {
      // Several hubs: what another live hub runs is its own (the schedules holder's pass looks again).
      if (this.active.has(key(r.scope, r.id)) || this.runsElsewhere(r.doc, liveRunners)) continue;
      await this.abandon(r, r.status === "CANCELLING" ? "CANCELLED" : "FAILED");
    }
  }

  /** Ends a job nobody runs: aborts its loading batches and stores the final status. */
  private async abandon(r: StoredResource<ExportJob>, status: "CANCELLED" | "FAILED"): Promise<boolean> {
    const job = r.doc;
    await this.abortOpened(r.scope, this.batchIds(job));
    const now = this.clock.now();
    job.status = status;
    if (status === "FAILED") {
      job.errors = [...(job.errors ?? []), { code: "SEGMENTD-EXPORT-INTERRUPTED", msg: "The service stopped while the export job was active; its unfinished batches were aborted" }];
    }
    const t = job.metrics.totalTime;
    if (t.startTimeInMs !== undefined) job.metrics.totalTime = { startTimeInMs: t.startTimeInMs, endTimeInMs: now, totalTimeInMs: now - t.startTimeInMs };
    job.updateTime = now;
    return this.repo.updateIf(KIND, { ...r, status, doc: job }, [r.status]);
  }

  /** Stores the runner's copy of the job while the stored status is one of `from`. */
  private async write(scope: TenantScope, job: ExportJob, from: readonly ExportStatus[]): Promise<boolean> {
    job.updateTime = this.clock.now();
    return this.repo.updateIf(KIND, { scope, id: String(job.id), status: job.status, creationTime: job.creationTime, doc: this.stored(job) }, from);
  }

  /** Several hubs: a DELETE through another hub stored CANCELLING; this runner takes it as its own cancel. */
  private async noteStoredCancel(scope: TenantScope, k: string, id: number): Promise<void> {
    if (this.runners.liveRunners === undefined || this.cancelRequested.has(k)) return;
    const r = await this.repo.get<StoredExport>(KIND, scope, String(id));
    if (r === null || r.status === "CANCELLING" || !ACTIVE.includes(r.status as ExportStatus)) this.cancelRequested.add(k);
  }

  private async policy(ctx: BatchTenant, id: string): Promise<MergePolicySpec> {
    const p = (await this.metadata.mergePolicies.get(scopeOf(ctx), id))?.policy;
    return p === undefined ? NO_MERGE_POLICY : { id: p.id, identityGraph: p.identityGraph, attributeMerge: p.attributeMerge };
  }

  private batchIds(job: ExportJob): string[] {
    return job.destination.batches !== undefined ? job.destination.batches.map((b) => b.batchId) : job.destination.batchId === undefined ? [] : [job.destination.batchId];
  }

  /** Waits for the export's segment job; ExportFailure unless it SUCCEEDED. */
  private async awaitSegmentation(ctx: BatchTenant, segmentJobId: string, cancelled: () => boolean, look: () => Promise<void>): Promise<void> {
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      await look();
      const seg = await this.jobs!.get(ctx, segmentJobId);
      if (seg.status === "SUCCEEDED") return;
      if (FINISHED_SEGMENT_JOB.includes(seg.status)) {
        const why = seg.errors?.map((e) => e.msg).join("; ");
        throw new ExportFailure("SEGMENTD-EXPORT-SEGMENTATION-FAILED", `Segment job ${segmentJobId} ended ${seg.status}${why ? `: ${why}` : ""}; nothing was exported`);
      }
      if (cancelled()) throw new ExportCancelled();
      if (this.stopped) throw new ExportFailure("SEGMENTD-EXPORT-INTERRUPTED", `The service stopped before segment job ${segmentJobId} finished; nothing was exported`);
      await sleep(delay);
    }
  }

  /** Profile ids of one batch: the members of its segments by status and qualification time (no segments: every profile), ascending. */
  private async select(scope: TenantScope, segments: readonly ExportSegment[], plan: RunPlan): Promise<string[]> {
    const pids = new Set<string>();
    if (segments.length === 0) {
      // One id per identity graph, read from the store's profile list (nothing merged here: the
      // exported profiles are read one by one below, under the job's merge policy).
      for (let after = "0"; ;) {
        const page = await this.profiles.listProfileIds(scope, { afterProfileId: after, limit: PAGE });
        for (const pid of page) pids.add(pid);
        if (page.length < PAGE) break;
        after = page[page.length - 1]!;
      }
    }
    for (const s of segments) {
      const stored = new Set<MembershipStatus>(s.status.map((x) => (x === "exited" ? "exited" : "realized")));
      for (const status of stored) {
        for (let after = "0"; ;) {
          const page = await this.profiles.listMembers(scope, s.segmentId, { status, limit: PAGE, afterProfileId: after });
          for (const m of page) {
            if (plan.qualifiedFrom !== null || plan.qualifiedTo !== null) {
              const at = Date.parse(m.lastQualificationTime);
              if ((plan.qualifiedFrom !== null && !(at >= plan.qualifiedFrom)) || (plan.qualifiedTo !== null && !(at <= plan.qualifiedTo))) continue;
            }
            pids.add(m.profileId);
          }
          if (page.length < PAGE) break;
          after = page[page.length - 1]!.profileId;
        }
      }
    }
    return [...pids].sort((a, b) => Number(a) - Number(b));
  }

  private async eventsOf(scope: TenantScope, identity: Identity, policy: MergePolicySpec, spec: NonNullable<RunPlan["events"]>): Promise<JsonObject[]> {
    const out: JsonObject[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.profiles.getEvents(scope, identity, policy, {
        order: "asc",
        limit: EVENT_PAGE,
        // EventQuery: startTime inclusive, endTime exclusive.
        ...(spec.after === null ? {} : { startTime: spec.after + 1 }),
        ...(spec.upTo === null ? {} : { endTime: spec.upTo + 1 }),
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const e of page.events) {
        if (spec.fields === null) out.push(e.body);
        else out.push({ ...project(e.body, spec.fields), _id: e.body["_id"] ?? e.eventId, timestamp: e.body["timestamp"] ?? new Date(e.timestamp).toISOString() });
      }
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    return out;
  }

  private async run(ctx: BatchTenant, job: ExportJob, plan: RunPlan): Promise<void> {
    const scope = scopeOf(ctx);
    const k = key(scope, job.id);
    const cancelled = () => this.cancelRequested.has(k);
    const look = () => this.noteStoredCancel(scope, k, job.id);
    const start = this.clock.now();
    job.status = "PROCESSING";
    job.metrics.totalTime = { startTimeInMs: start };
    const opened: string[] = [];
    try {
      // Cancelled before it started.
      if (!(await this.write(scope, job, ["NEW"]))) throw new ExportCancelled();
      if (job.evaluationInfo?.segmentJobId !== undefined) await this.awaitSegmentation(ctx, job.evaluationInfo.segmentJobId, cancelled, look);
      const policy = await this.policy(ctx, job.mergePolicy.id);
      const exportStart = this.clock.now();
      // segmentPerBatch without segments: every profile goes to one batch (destination.batchId).
      const perSegment = job.destination.segmentPerBatch && job.filter.segments.length > 0;
      const groups = perSegment ? job.filter.segments.map((s) => [s]) : [job.filter.segments];
      const byNamespace: Record<string, number> = {};
      let exported = 0;
      for (const group of groups) {
        const pids = await this.select(scope, group, plan);
        const batch = await this.profiles.createBatch(scope, job.destination.datasetId, this.clock.now());
        opened.push(batch.id);
        let file = 0; // Each staged chunk is one file of the batch (export-files.ts: the Data Access API reads it back).
        if (perSegment) (job.destination.batches ??= []).push({ ...group[0]!, batchId: batch.id });
        else job.destination.batchId = batch.id;
        // The batch ids are stored before any record is staged (recovery aborts them); a failed
        // write means the status moved: DELETE made it CANCELLING.
        if (!(await this.write(scope, job, ["PROCESSING"]))) throw new ExportCancelled();
        for (let i = 0; i < pids.length; i += PAGE) {
          const page = pids.slice(i, i + PAGE);
          await look();
          const times = await this.profiles.profileDataTimes(scope, page);
          const records: ValidRecord[] = [];
          for (let j = 0; j < page.length; j++) {
            if (cancelled()) throw new ExportCancelled();
            const t = times[j]!;
            if (t.lastFragmentIngestedAt === null && (t.lastEventAt === null || !plan.emptyProfiles)) continue;
            if (plan.updatedAfter !== null && !((t.lastFragmentIngestedAt ?? -Infinity) > plan.updatedAfter || (t.lastEventAt ?? -Infinity) > plan.updatedAfter)) continue;
            const identities = await this.profiles.graphIdentities(scope, page[j]!);
            const primary = identities[0];
            if (primary === undefined) continue;
            const profile = await this.profiles.getProfile(scope, primary, policy);
            if (profile === null) continue;
            const body: JsonObject = { ...project(profile.entity, plan.fields), identityMap: profile.entity["identityMap"] ?? {}, segmentMembership: profile.entity["segmentMembership"] ?? {} };
            if (plan.events !== null) body["eventList"] = await this.eventsOf(scope, primary, policy, plan.events);
            const json = JSON.stringify(body);
            records.push({ index: exported + records.length, kind: "profile", body, primary, identities, timestamp: null, eventId: exportRecordId(batch.id, file, records.length), size: Buffer.byteLength(json), json });
            for (const ns of new Set(profile.identities.map((x) => x.namespace))) byNamespace[ns] = (byNamespace[ns] ?? 0) + 1;
          }
          if (records.length > 0) await this.profiles.stageBatchRecords(scope, batch.id, records, { read: records.length, failed: [], now: this.clock.now(), file: exportFileName(file++) });
          exported += records.length;
        }
      }
      // Last point where a cancel takes effect: after this the batches are completed.
      await look();
      if (cancelled()) throw new ExportCancelled();
      const writeStart = this.clock.now();
      job.metrics.profileExportTime = { startTimeInMs: exportStart, endTimeInMs: writeStart, totalTimeInMs: writeStart - exportStart };
      for (const id of opened) await this.profiles.completeBatch(scope, id, { ingestedAt: this.clock.now(), maxIdentitiesPerGraph: MAX_IDENTITIES_PER_GRAPH });
      const end = this.clock.now();
      job.metrics.aCPDatasetWriteTime = { startTimeInMs: writeStart, endTimeInMs: end, totalTimeInMs: end - writeStart };
      job.metrics.totalTime = { startTimeInMs: start, endTimeInMs: end, totalTimeInMs: end - start };
      job.metrics.totalExportedProfileCounter = exported;
      job.metrics.exportedProfileByNamespaceCounter = byNamespace;
      job.status = "SUCCEEDED";
    } catch (e) {
      await this.abortOpened(scope, opened);
      const end = this.clock.now();
      job.metrics.totalTime = { startTimeInMs: start, endTimeInMs: end, totalTimeInMs: end - start };
      if (e instanceof ExportCancelled) {
        job.status = "CANCELLED";
        // The segment job ran for this export only: stop it too (400 when it already finished).
        const sid = job.evaluationInfo?.segmentJobId;
        if (sid !== undefined) await this.jobs?.cancel(ctx, sid).catch(() => undefined);
      } else {
        job.status = "FAILED";
        job.errors = [e instanceof ExportFailure ? { code: e.code, msg: e.message } : { code: "SEGMENTD-EXPORT-FAILED", msg: e instanceof Error ? e.message : String(e) }];
      }
    }
    // CANCELLING too: a cancel that arrived while the batches were completed is too late.
    await this.write(scope, job, ["PROCESSING", "CANCELLING"]);
  }

  /** Aborts the batches that are still loading: none of their records becomes visible. */
  private async abortOpened(scope: TenantScope, ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      try {
        const b = await this.profiles.getBatch(scope, id);
        if (b?.status === "loading") await this.profiles.abortBatch(scope, id, this.clock.now());
      } catch (err) {
        this.logger?.error({ err, batchId: id }, "could not abort an export batch");
      }
    }
  }

  async get(ctx: BatchTenant, id: string): Promise<ExportJob> {
    const r = await this.repo.get<StoredExport>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Export job", id);
    return view(r.doc);
  }

  /**
   * DELETE: a NEW or PROCESSING job becomes CANCELLING and its runner stops at the next
   * profile (CANCELLED, batches aborted); CANCELLING stays so. A job no process runs
   * (left by a stop) is CANCELLED at once. A finished job (a status no job leaves) is deleted
   * (Adobe: "cancel or delete"); what it exported stays in its dataset.
   */
  async cancel(ctx: BatchTenant, id: string): Promise<{ status: true; message: string }> {
    const scope = scopeOf(ctx);
    for (;;) {
      const r = await this.repo.get<StoredExport>(KIND, scope, id);
      if (r === null) throw notFound("Export job", id);
      const status = r.status as ExportStatus;
      if (!ACTIVE.includes(status)) {
        await this.repo.delete(KIND, scope, id);
        return { status: true, message: DELETE_MESSAGE };
      }
      const k = key(scope, r.doc.id);
      // Run by another live hub: CANCELLING stored, which its runner reads at its next page.
      const elsewhere = !this.active.has(k) && this.runsElsewhere(r.doc);
      if (!this.active.has(k) && !elsewhere) {
        if (await this.abandon(r, "CANCELLED")) return { status: true, message: CANCEL_MESSAGE };
        continue;
      }
      if (status === "CANCELLING") return { status: true, message: CANCEL_MESSAGE };
      r.doc.status = "CANCELLING";
      r.doc.updateTime = this.clock.now();
      if (await this.repo.updateIf(KIND, { ...r, status: "CANCELLING" }, [status])) {
        if (!elsewhere) this.cancelRequested.add(k);
        return { status: true, message: CANCEL_MESSAGE };
      }
      // The status moved under us (NEW → PROCESSING, or the job finished): decide again.
    }
  }

  /** Newest first; `offset` is AEP's cursor `<creationTime>_<id>` of the last job of the previous page. */
  async list(ctx: BatchTenant, q: { limit: number; offset?: string; status?: string }): Promise<{ items: ExportJob[]; next: string | null }> {
    const all = await this.repo.list<StoredExport>(KIND, scopeOf(ctx), { direction: "desc", offset: 0, limit: Number.MAX_SAFE_INTEGER, ...(q.status === undefined ? {} : { status: q.status }) });
    let jobs = all.items.map((r) => view(r.doc)).sort((a, b) => b.creationTime - a.creationTime || b.id - a.id);
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
