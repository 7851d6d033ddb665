/**
 * Runs segment jobs one at a time (AEP: on-demand and scheduled jobs do not
 * run concurrently; they queue). A job goes QUEUED → PROCESSING → SUCCEEDED |
 * FAILED, or CANCELLING → CANCELLED.
 *
 * Atomic results: the engine computes every change first; they are written
 * with ONE `applyMembershipSets` call (typed arrays of profile ids per
 * definition, no per-change objects), which both profile stores commit as
 * one transaction. A cancel or a crash before that call leaves the previous
 * job's memberships untouched; after it, the job's results are complete.
 *
 * Evaluation runs on the columnar back end by default, over snapshots kept
 * resident between jobs in the runner's `SnapshotCache` (refreshed from the
 * store's change feed before each job; shared with previews).
 *
 * Start-up recovery (`recover`): a job found PROCESSING was interrupted (kill
 * -9) before or during its single write transaction, so its memberships were
 * never written: it is marked FAILED. CANCELLING becomes CANCELLED. NEW and
 * QUEUED jobs are queued again.
 *
 * On the worker fleet (`fanOut`, #44) each partition is written on its own by the worker holding
 * it, once: a job interrupted there may have written some partitions (each complete as of the
 * job's instant); recovery withdraws it from the workers before failing it, and the next job
 * brings the others to the same point.
 */
import { parse } from "@segmentd/pql";
import type { Logger } from "../../platform/logger.js";
import type { Clock } from "../../platform/clock.js";
import { claimedElsewhere } from "../../platform/roles.js";
import type { MembershipWrites } from "../../profiles/store.js";
import type { MembershipSet } from "../../profiles/membership-sets.js";
import { NO_MERGE_POLICY, type MergePolicySpec, type TenantScope } from "../../profiles/types.js";
import type { MetadataStore } from "../../stores/types.js";
import { SnapshotCache } from "../columnar/cache.js";
import { evaluateJob, JobCancelledError, type Backend, type DefinitionCounters, type EvaluationStore, type JobDefinition } from "../engine/evaluate-job.js";
import type { BatchRepository, StoredResource } from "../store/types.js";
import type { JobStatus, StoredJob } from "./segment-job.js";
import type { EvaluationLimits } from "../../services/evaluation-budget.js";

/** The engine's reads, and the job's results written in one applyMembershipSets. */
export type JobRunnerStore = EvaluationStore & MembershipWrites;

export interface JobRunnerOptions {
  /** Recorded on the jobs this runner processes (several hubs: `recover` leaves a live runner's jobs alone). */
  runnerId?: string;
  metadata: MetadataStore;
  profiles: JobRunnerStore;
  repo: BatchRepository;
  clock: Clock;
  logger?: Pick<Logger, "info" | "error">;
  /** Default "columnar". */
  backend?: Backend;
  /** Resident snapshots (shared with previews); the runner makes its own when not given. */
  snapshots?: SnapshotCache;
  chunkSize?: number;
  /** Minimum interval between progress writes (ms). Default 1000. */
  progressIntervalMs?: number;
  /** Called after every chunk of every job (the CLI's progress bar). */
  onProgress?: (jobId: string, profilesProcessed: number) => void;
  /** The sandbox's evaluation budgets (per profile: units and time); the defaults when absent. */
  limits?: (scope: TenantScope) => EvaluationLimits | undefined;
  /** Told of a job's sets once they are written (the edge projection follows them); must not throw or wait. */
  onWritten?: (scope: TenantScope, sets: readonly MembershipSet[]) => void;
  /**
   * Jobs evaluated and written by the worker fleet (config `batch.onWorkers` on a hub with
   * `--workers`: cluster/fleet-jobs.ts) instead of this process. Not told to `onWritten`, but to
   * `onFleetWritten`.
   */
  fanOut?: JobFanOut;
  /** Told of a fleet job once every partition is written: its definitions and instant (the edge projection reads its changes back); must not throw or wait. */
  onFleetWritten?: (scope: TenantScope, definitionIds: readonly string[], at: number) => void;
}

/**
 * A job evaluated and written by the worker fleet (#44, cluster/fleet-jobs.ts): each partition is
 * written by its owner as it is done, so a cancel stops the partitions not yet written and leaves
 * those written (each complete as of the job's instant).
 */
export interface FanOutJob {
  scope: TenantScope;
  jobId: string;
  /** The evaluation instant: the memberships' qualification time. */
  at: number;
  definitions: readonly JobDefinition[];
  isCancelled: () => boolean;
  /** Profiles of the partitions written so far. */
  onProgress: (profiles: number) => void;
}

export interface FanOutOutcome {
  counters: Map<string, DefinitionCounters>;
  totalProfiles: number;
  /** Entries per merge policy id, summed over the partitions. */
  profilesByPolicy: Record<string, number>;
  /** Transitions written. */
  writes: number;
}

/** Evaluates and writes a job across the fleet; resolves once every partition is written. */
export interface JobFanOut {
  run(job: FanOutJob): Promise<FanOutOutcome>;
  /** A job whose runner died (recovery fails it): the workers write none of its partitions from now on. */
  withdraw(scope: TenantScope, jobId: string): Promise<void>;
}

/** What a job's metrics are made of, whoever evaluated it. */
interface JobResult {
  counters: Map<string, DefinitionCounters>;
  totalProfiles: number;
  profilesByPolicy: Record<string, number>;
  writes: number;
  /** Per definition: how it was evaluated. */
  evaluation: Record<string, string>;
}

const KIND = "segment-job" as const;

function key(scope: TenantScope, id: string): string {
  return `${scope.orgId}\u0000${scope.sandboxName}\u0000${id}`;
}

export class JobRunner {
  private readonly queue: Array<{ scope: TenantScope; id: string }> = [];
  private readonly cancelRequested = new Set<string>();
  private running: Promise<void> | null = null;
  private idleWaiters: Array<() => void> = [];
  private stopped = false;
  /** Resident columnar snapshots, kept between jobs. */
  readonly snapshots: SnapshotCache;

  constructor(private readonly o: JobRunnerOptions) {
    this.snapshots = o.snapshots ?? new SnapshotCache();
  }

  /** Marks a NEW job QUEUED and schedules it. */
  async enqueue(scope: TenantScope, id: string): Promise<void> {
    await this.transition(scope, id, ["NEW"], "QUEUED");
    this.queue.push({ scope, id });
    this.pump();
  }

  /** Asks a PROCESSING job to stop at its next chunk boundary. */
  requestCancel(scope: TenantScope, id: string): void {
    this.cancelRequested.add(key(scope, id));
  }

  /**
   * After a crash: PROCESSING jobs fail (interrupted), CANCELLING ones are cancelled, NEW and QUEUED
   * ones are queued here. `liveRunners` (several hubs): PROCESSING jobs those runners process are left alone.
   */
  async recover(liveRunners?: ReadonlySet<string>): Promise<void> {
    for (const r of await this.o.repo.listAllByStatus<StoredJob>(KIND, ["PROCESSING"])) {
      // Several hubs: a job another live hub (or this one) processes is not interrupted.
      // (Nor one that started moments ago: its hub may have joined after the heartbeats were read.)
      // (This hub's own jobs too: it is among the live ones.)
      if (liveRunners !== undefined && claimedElsewhere({ by: r.doc.runBy, live: liveRunners, at: r.doc.job.updateTime, now: this.o.clock.now() })) continue;
      if (this.o.fanOut === undefined) {
        await this.finish(r, "FAILED", { code: "SEGMENTD-JOB-INTERRUPTED", msg: "The service stopped while the job was processing; no membership of this job was written" }, ["PROCESSING"]);
        continue;
      }
      // On the fleet: withdrawn first, so that no worker writes a partition of it after it is failed.
      await this.o.fanOut.withdraw(r.scope, r.id);
      await this.finish(r, "FAILED", { code: "SEGMENTD-JOB-INTERRUPTED", msg: "The service stopped while the job was processing on the workers; the partitions they had written stay (each complete as of the job's instant), the others were not written" }, ["PROCESSING"]);
    }
    for (const r of await this.o.repo.listAllByStatus<StoredJob>(KIND, ["CANCELLING"])) await this.finish(r, "CANCELLED", undefined, ["CANCELLING"]);
    for (const r of await this.o.repo.listAllByStatus<StoredJob>(KIND, ["NEW"])) await this.transition(r.scope, r.id, ["NEW"], "QUEUED");
    // (Run again by the hub holding the schedules lease: what is queued here already is not queued twice.)
    const queued = new Set(this.queue.map((q) => key(q.scope, q.id)));
    for (const r of await this.o.repo.listAllByStatus<StoredJob>(KIND, ["QUEUED"])) if (!queued.has(key(r.scope, r.id))) this.queue.push({ scope: r.scope, id: r.id });
    this.pump();
  }

  /** Resolves when the queue is empty and nothing runs (tests, CLI, shutdown). */
  idle(): Promise<void> {
    if (this.running === null && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking jobs from the queue; the running job, if any, finishes. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private pump(): void {
    if (this.running !== null || this.stopped) return;
    const next = this.queue.shift();
    if (next === undefined) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
      return;
    }
    this.running = this.run(next.scope, next.id)
      .catch((e: unknown) => this.o.logger?.error({ err: e, jobId: next.id }, "segment job runner error"))
      .finally(() => {
        this.running = null;
        this.pump();
      });
  }

  private async transition(scope: TenantScope, id: string, from: readonly JobStatus[], to: JobStatus, edit?: (s: StoredJob) => void): Promise<StoredResource<StoredJob> | null> {
    const r = await this.o.repo.get<StoredJob>(KIND, scope, id);
    if (r === null || !from.includes(r.status as JobStatus)) return null;
    const now = this.o.clock.now();
    r.doc.job.status = to;
    r.doc.job.updateTime = now;
    r.doc.job.updateEpoch = Math.floor(now / 1000);
    edit?.(r.doc);
    r.status = to;
    return (await this.o.repo.updateIf(KIND, r, from)) ? r : null;
  }

  private async finish(r: StoredResource<StoredJob>, status: JobStatus, error: { code: string; msg: string } | undefined, from: readonly JobStatus[]): Promise<void> {
    const now = this.o.clock.now();
    await this.transition(r.scope, r.id, from, status, (s) => {
      const t = s.job.metrics.totalTime;
      if (t.startTimeInMs !== undefined) {
        t.endTimeInMs = now;
        t.totalTimeInMs = now - t.startTimeInMs;
      }
      if (error !== undefined) s.job.errors = [...(s.job.errors ?? []), error];
    });
  }

  private async definitionsOf(stored: StoredJob): Promise<JobDefinition[]> {
    const job = stored.job;
    const mscope = { orgId: job.imsOrgId, sandboxId: job.sandbox.sandboxId };
    const records = await this.o.metadata.definitions.getMany(mscope, stored.definitionIds);
    const policyIds = [...new Set([...records.values()].map((r) => r.definition.mergePolicyId))];
    const policies = await this.o.metadata.mergePolicies.getMany(mscope, policyIds);
    const out: JobDefinition[] = [];
    for (const id of stored.definitionIds) {
      const rec = records.get(id);
      // A definition deleted after the job was created is skipped (it has no audience any more).
      if (rec === undefined) continue;
      const p = policies.get(rec.definition.mergePolicyId)?.policy;
      const policy = p === undefined ? { ...NO_MERGE_POLICY, id: rec.definition.mergePolicyId || "none" } : { id: p.id, ...evaluatedPolicy(p) };
      out.push({ id, query: parse(rec.canonicalText), references: rec.references, excludeOptOut: rec.definition.dataGovernancePolicy.excludeOptOut, policy });
    }
    return out;
  }

  /** In this process: evaluated over the resident snapshots, then written in one transaction. */
  private async evaluateHere(scope: TenantScope, defs: JobDefinition[], segStart: number, cancelled: () => boolean, onProgress: (n: number) => void, progressWritten: () => Promise<unknown>): Promise<JobResult> {
    const outcome = await evaluateJob(this.o.profiles, scope, defs, {
      now: segStart,
      ...(this.o.backend === undefined ? {} : { backend: this.o.backend }),
      ...(this.o.chunkSize === undefined ? {} : { chunkSize: this.o.chunkSize }),
      snapshots: this.snapshots,
      isCancelled: cancelled,
      ...budgetOf(this.o.limits?.(scope)),
      onProgress,
    });
    await progressWritten();
    // Last point where a cancel takes effect: after this the single write transaction runs.
    if (cancelled()) throw new JobCancelledError();
    // Copied first: a store in a worker thread takes the sets' buffers (they are empty afterwards).
    const written = this.o.onWritten === undefined ? undefined : outcome.memberships.map((s) => ({ definitionId: s.definitionId, entered: s.entered.slice(), reentered: s.reentered.slice(), exited: s.exited.slice() }));
    await this.o.profiles.applyMembershipSets(scope, outcome.memberships, { source: "batch", at: segStart });
    if (written !== undefined) this.o.onWritten?.(scope, written);
    const evaluation: Record<string, string> = {};
    for (const defId of outcome.counters.keys()) {
      const fallback = outcome.inMemoryDefinitions[defId];
      evaluation[defId] = fallback !== undefined ? `in-memory: ${fallback}` : outcome.columnarDefinitions?.includes(defId) ? "columnar" : "sql";
    }
    return { counters: outcome.counters, totalProfiles: outcome.totalProfiles, profilesByPolicy: outcome.profilesByPolicy, writes: outcome.writes, evaluation };
  }

  /** By the worker fleet: each partition evaluated over its owner's shard and written by it. */
  private async evaluateOnFleet(scope: TenantScope, jobId: string, defs: JobDefinition[], segStart: number, cancelled: () => boolean, onProgress: (n: number) => void): Promise<JobResult> {
    const r = await this.o.fanOut!.run({ scope, jobId, at: segStart, definitions: defs, isCancelled: cancelled, onProgress });
    if (r.writes > 0) this.o.onFleetWritten?.(scope, defs.map((d) => d.id), segStart);
    return { ...r, evaluation: Object.fromEntries(defs.map((d) => [d.id, "columnar, on the worker fleet"])) };
  }

  private async run(scope: TenantScope, id: string): Promise<void> {
    const k = key(scope, id);
    const startedAt = this.o.clock.now();
    const started = await this.transition(scope, id, ["QUEUED"], "PROCESSING", (s) => {
      s.job.metrics.totalTime = { startTimeInMs: startedAt };
      s.job.metrics.profileSegmentationTime = {};
      s.job.metrics.profilesProcessed = 0;
      if (this.o.runnerId !== undefined) s.runBy = this.o.runnerId;
    });
    // Cancelled (or removed) while queued.
    if (started === null) return;
    const stored = started.doc;
    const cancelled = () => this.cancelRequested.has(k);
    try {
      const defs = await this.definitionsOf(stored);
      const segStart = this.o.clock.now();
      let lastWrite = 0;
      let pendingProgress: Promise<unknown> = Promise.resolve();
      const onProgress = (n: number) => {
        this.o.onProgress?.(id, n);
        const t = this.o.clock.now();
        if (t - lastWrite < (this.o.progressIntervalMs ?? 1000)) return;
        lastWrite = t;
        pendingProgress = pendingProgress.then(() => this.transition(scope, id, ["PROCESSING"], "PROCESSING", (s) => {
          s.job.metrics.profilesProcessed = n;
        }));
      };
      const outcome = this.o.fanOut === undefined
        ? await this.evaluateHere(scope, defs, segStart, cancelled, onProgress, () => pendingProgress)
        : await this.evaluateOnFleet(scope, id, defs, segStart, cancelled, onProgress);
      await pendingProgress;
      const segEnd = this.o.clock.now();
      const r = await this.o.repo.get<StoredJob>("segment-job", scope, id);
      if (r === null) return;
      const m = r.doc.job.metrics;
      m.profileSegmentationTime = { startTimeInMs: segStart, endTimeInMs: segEnd, totalTimeInMs: segEnd - segStart };
      m.totalProfiles = outcome.totalProfiles;
      m.profilesProcessed = outcome.totalProfiles;
      m.totalProfilesByMergePolicy = outcome.profilesByPolicy;
      m.segmentedProfileCounter = {};
      m.segmentedProfileByNamespaceCounter = {};
      m.segmentedProfileByStatusCounter = {};
      m.evaluation = outcome.evaluation;
      for (const [defId, c] of outcome.counters) {
        m.segmentedProfileCounter[defId] = c.qualified;
        m.segmentedProfileByNamespaceCounter[defId] = c.byNamespace;
        m.segmentedProfileByStatusCounter[defId] = { realized: c.realized, existing: c.existing, exited: c.exited };
      }
      // PROCESSING or CANCELLING: a cancel that arrives during the write is too late; the job completed.
      await this.o.repo.update("segment-job", r);
      await this.finish(r, "SUCCEEDED", undefined, ["PROCESSING", "CANCELLING"]);
      this.o.logger?.info({ jobId: id, profiles: outcome.totalProfiles, changes: outcome.writes }, "segment job succeeded");
    } catch (e) {
      const r = await this.o.repo.get<StoredJob>("segment-job", scope, id);
      if (r === null) return;
      if (e instanceof JobCancelledError) await this.finish(r, "CANCELLED", undefined, ["PROCESSING", "CANCELLING"]);
      else await this.finish(r, "FAILED", { code: "SEGMENTD-JOB-FAILED", msg: e instanceof Error ? e.message : String(e) }, ["PROCESSING", "CANCELLING"]);
    } finally {
      this.cancelRequested.delete(k);
    }
  }
}

/**
 * What of a stored merge policy evaluation depends on (jobs, edit impact): the identity graph and
 * the attribute merge, the order only when it has one — policies that differ in nothing else
 * share a snapshot.
 */
export function evaluatedPolicy(p: MergePolicySpec): MergePolicySpec {
  return { identityGraph: p.identityGraph, attributeMerge: p.attributeMerge.order === undefined ? { type: p.attributeMerge.type } : { type: p.attributeMerge.type, order: p.attributeMerge.order } };
}

function budgetOf(limits: EvaluationLimits | undefined): { limits?: EvaluationLimits } {
  return limits === undefined ? {} : { limits };
}
