/**
 * The batch area as ONE Fastify plugin: segment jobs, schedules, exports,
 * previews, edit impact, the audience builder's palette and estimates. It owns its job runner and the resident columnar snapshots: on ready it recovers
 * segment and export jobs interrupted by a crash, on close it lets the running jobs finish
 * (an export still waiting for its segment job fails) and closes the repository. It is
 * encapsulated (its hooks and routes stay under its prefix) and named `segmentd-batch`.
 *
 *   await app.register(batchPlugin, { prefix: "/data/core/ups", authenticator, tenants,
 *     metadata: store, profiles, clock, logger, repo: openBatchRepository(config) });
 */
import type { QueryExpander } from "../../services/definition-analysis.js";
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { AuthDeps } from "../../http/auth.js";
import { SnapshotCache, type SnapshotCacheOptions } from "../columnar/cache.js";
import { JobRunner, type JobFanOut, type JobRunnerOptions, type JobRunnerStore } from "../jobs/job-runner.js";
import { JobService } from "../jobs/job-service.js";
import { BatchEdgeProjection } from "../jobs/edge-projection.js";
import { ScheduleService } from "../schedules/schedule-service.js";
import { PreviewService, type PreviewStore } from "../previews/preview-service.js";
import type { FleetReads } from "../previews/fleet-reads.js";
import { ExportService, type ExportStore } from "../exports/export-service.js";
import { exportRoutes } from "./exports-routes.js";
import { jobRoutes } from "./jobs-routes.js";
import { previewRoutes } from "./previews-routes.js";
import { scheduleRoutes } from "./schedules-routes.js";
import { ImpactService, type EligibilityOf } from "../previews/impact-service.js";
import { impactRoutes } from "./impact-routes.js";
import { BuilderEstimator } from "../builder/estimates.js";
import { BuilderFields, type DescriptorsOf } from "../builder/fields.js";
import type { TenantScope } from "../../profiles/types.js";
import { builderRoutes } from "./builder-routes.js";
import type { Registry } from "prom-client";
import { BackfillRunner } from "../backfill/backfill-runner.js";
import { registerBackfillMetrics } from "../backfill/backfill-metrics.js";
import type { LiveGate, PartitionedBackfill } from "../backfill/backfill-types.js";
import { backfillRoutes } from "./backfill-routes.js";
import { followMergePolicies } from "../backfill/merge-policy-backfills.js";
import type { EventBus } from "../../platform/bus.js";
import { ALL_ROLES, RECENT_CLAIM_MS } from "../../platform/roles.js";
import { SnapshotCounts } from "../engine/snapshot-counts.js";

declare module "fastify" {
  interface FastifyInstance {
    /**
     * Segment jobs on the worker fleet (#44): decorated by cluster/partition-feed-plugin.ts before
     * this plugin on a hub with `--workers` and `batch.onWorkers`; absent: jobs run in process.
     */
    batchFanOut?: JobFanOut;
    /** Previews, builder estimates and edit impact over the workers' shards (#44), decorated beside batchFanOut. */
    batchFleetReads?: FleetReads;
  }
}

/** What the area's services call on the profile store: jobs, previews and exports together. */
export type BatchProfileStore = JobRunnerStore & PreviewStore & ExportStore;

/** The job runner's settings (stores, clock, logger, back end, chunk size), plus the plugin's own. */
export interface BatchPluginOptions
  extends AuthDeps,
    Pick<JobRunnerOptions, "metadata" | "repo" | "clock" | "logger" | "backend" | "chunkSize"> {
  profiles: BatchProfileStore;
  /** How often the scheduler looks for due schedules (ms). Default 60 000; 0 disables the timer. */
  scheduleTickMs?: number;
  /** Profiles a backfill writes at a time (config `batch.backfillChunk`; default 2,000). */
  backfillChunk?: number;
  /** Every sandbox's default daily schedule: its cron (`batch.defaultSchedule`), or false/absent for none. */
  defaultSchedule?: string | false;
  /** Keeps snapshots on disk (`dir`, `storeIdentity`, `onWarning`): the first job after a restart loads one instead of scanning. */
  snapshotFiles?: Pick<SnapshotCacheOptions, "dir" | "storeIdentity" | "onWarning">;
  /** Worker threads that evaluate over the snapshots (batch/pool/); 0 or absent: on the main thread. */
  evaluationWorkers?: number;
  /** The eligibility answer (services/definitions.ts) edit impact reports for the edited expression. */
  eligibility: EligibilityOf;
  /** Drafts (previews, builder estimates, edit impact) read computed attributes as saved definitions do (app.ts: computed/expand.ts). */
  expand?: QueryExpander;
  /** The sandbox's identity descriptors (Schema Registry) the builder's palette names; default none. */
  descriptors?: DescriptorsOf;
  /** Receives the area's services (tests and the CLI wait on `runner.idle()`, tick the scheduler). */
  expose?: (handles: BatchHandles) => void;
  /** The app's Prometheus registry: the backfills' gauges and counters (absent: none). */
  metrics?: Registry;
  /** The app's bus: a merge policy's content change backfills the live definitions using it (absent: none does). */
  bus?: EventBus;
}

export interface BatchHandles {
  runner: JobRunner;
  jobs: JobService;
  schedules: ScheduleService;
  previews: PreviewService;
  exports: ExportService;
  backfills: BackfillRunner;
  /** The projection of jobs' changes to the edge locations (absent without the edge plugin). */
  edgeProjection?: BatchEdgeProjection;
  /** Profiles qualifying for a query over the resident snapshot (a computed attribute's first evaluation, wired in app.ts). */
  counts: SnapshotCounts;
}

async function batchArea(app: FastifyInstance, opts: BatchPluginOptions): Promise<void> {
  const { metadata, profiles, repo, clock, logger, backend, chunkSize } = opts;
  // Resident columnar snapshots shared by jobs and previews (kept between jobs, refreshed from the change feed).
  const snapshots = new SnapshotCache({ ...opts.snapshotFiles, evaluationWorkers: opts.evaluationWorkers ?? 0 });
  const limits = (scope: TenantScope) => opts.tenants.resolve(scope.orgId, scope.sandboxName)?.limits;
  // A job's changes to audiences edge definitions read are projected to the edge locations holding those profiles (app.edge, when registered before this plugin).
  const edge = app.edge;
  const edgeProjection = edge === undefined ? undefined : new BatchEdgeProjection({ metadata, logger, edge: edge.projector, transitions: profiles, tenantOf: (scope) => opts.tenants.resolve(scope.orgId, scope.sandboxName) });
  const runner = new JobRunner({ ...(app.hubLeases === undefined ? {} : { runnerId: app.hubLeases.hubId }), metadata, profiles, repo, clock, logger, backend, chunkSize, snapshots, limits, ...(edgeProjection === undefined ? {} : { onWritten: (scope, sets) => edgeProjection.jobWritten(scope, sets), onFleetWritten: (scope, ids, at) => edgeProjection.fleetJobWritten(scope, ids, at) }), ...(app.batchFanOut === undefined ? {} : { fanOut: app.batchFanOut }) });
  const jobs = new JobService(opts.metadata, opts.repo, runner, opts.clock);
  const schedules = new ScheduleService(opts.repo, jobs, opts.clock, opts.logger, {
    defaultCron: opts.defaultSchedule ?? false,
    sandboxes: () => opts.tenants.all(),
  });
  const expand = opts.expand;
  const fleet = app.batchFleetReads;
  const previews = new PreviewService(opts.profiles, opts.repo, opts.clock, opts.logger, snapshots, expand, fleet);
  // Several hubs: each export records its hub; another hub cancels it through the store and fails it only once that hub is gone.
  const exports = new ExportService(opts.metadata, opts.profiles, opts.repo, opts.clock, opts.logger, jobs, app.hubLeases === undefined ? {} : { runnerId: app.hubLeases.hubId, liveRunners: () => app.hubLeases?.liveHubs() });
  const impact = new ImpactService(metadata, profiles, snapshots, clock, opts.eligibility, expand, fleet);
  // Backfills (issue #40) follow the live definition catalog of the streaming capability registered
  // before this plugin (app.streaming; none: no backfill runs by itself). The in-process engine
  // fences them (holdIdle); on a hub whose workers evaluate, the workers write them (streaming.backfill).
  const streaming = app.streaming;
  const engine = streaming?.engine;
  const live: LiveGate | undefined = engine?.holdIdle === undefined || engine.settled === undefined ? undefined
    : { settled: engine.settled.bind(engine), holdIdle: engine.holdIdle.bind(engine), ...(engine.recheck === undefined ? {} : { recheck: engine.recheck.bind(engine) }) };
  const partitioned: PartitionedBackfill | undefined = streaming?.backfill;
  const backfills: BackfillRunner = new BackfillRunner({
    metadata, profiles, repo, clock, snapshots, limits, logger,
    ...(opts.backfillChunk === undefined ? {} : { chunkSize: opts.backfillChunk }),
    ...(app.hubLeases === undefined ? {} : { runnerId: app.hubLeases.hubId }),
    tenantOf: (scope) => opts.tenants.resolve(scope.orgId, scope.sandboxName),
    ...(live === undefined ? {} : { live }),
    ...(partitioned === undefined ? {} : { partitioned }),
    ...(app.edge === undefined ? {} : { project: (tenant, ids) => app.edge!.projector.project(tenant, ids) }),
    onWritten: (entered, exited) => counters.written(entered, exited),
    onFinished: (view) => counters.finished(view),
  });
  const counters = registerBackfillMetrics(opts.metrics, () => backfills);
  const fenced = live !== undefined || partitioned !== undefined;
  const unfollow = !fenced ? undefined : streaming?.catalog.follow((e) => {
    const tenant = opts.tenants.bySandboxId(e.tenant.sandboxId);
    if (tenant === undefined || tenant.orgId !== e.tenant.orgId) return;
    backfills.definitionChanged(tenant, e.definitionId, e.change).catch((err: unknown) => opts.logger?.error({ err, definitionId: e.definitionId }, "backfill not queued"));
  });
  const policies = !fenced || opts.bus === undefined ? undefined : followMergePolicies({
    bus: opts.bus, metadata, runner: backfills, ...(logger === undefined ? {} : { logger }),
    tenantOf: (orgId, sandboxId) => {
      const t = opts.tenants.bySandboxId(sandboxId);
      return t !== undefined && t.orgId === orgId ? t : undefined;
    },
  });
  const counts = new SnapshotCounts(profiles, metadata.mergePolicies, snapshots, fleet);
  opts.expose?.({ runner, jobs, schedules, previews, exports, backfills, counts, ...(edgeProjection === undefined ? {} : { edgeProjection }) });
  const auth = { authenticator: opts.authenticator, tenants: opts.tenants };
  await app.register(jobRoutes, { ...auth, jobs });
  await app.register(scheduleRoutes, { ...auth, schedules });
  await app.register(previewRoutes, { ...auth, previews });
  await app.register(exportRoutes, { ...auth, exports });
  await app.register(impactRoutes, { ...auth, impact });
  await app.register(backfillRoutes, { ...auth, runner: backfills, metadata });
  const fields = new BuilderFields(profiles, clock, opts.descriptors ?? (async () => []));
  await app.register(builderRoutes, { ...auth, fields, estimator: new BuilderEstimator(profiles, snapshots, clock, expand, fleet) });
  let timer: NodeJS.Timeout | undefined;
  let again: NodeJS.Timeout | undefined;
  app.addHook("onReady", async () => {
    // Several hubs: interrupted jobs are those of hubs no longer alive (and the schedules holder looks again at each pass).
    const recoverJobs = async () => {
      await runner.recover(app.hubLeases?.liveHubs());
      // A dead hub's backfills are taken over (a live one's left to it); its exports end FAILED.
      await backfills.recover(app.hubLeases?.liveHubs());
      await exports.recover(app.hubLeases?.liveHubs());
    };
    await recoverJobs();
    // Several hubs: a job of a hub that died moments ago still reads as claimed (its heartbeat, its
    // recent update); looked at again once that has passed rather than at the next tick.
    if (app.hubLeases !== undefined) {
      again = setTimeout(() => void recoverJobs().catch((err: unknown) => opts.logger?.error({ err }, "segment job, backfill and export recovery failed")), RECENT_CLAIM_MS + 2_000);
      again.unref();
    }
    // Every sandbox has its daily schedule from the start (not only once someone lists schedules).
    await schedules.ensureDefaults();
    const every = opts.scheduleTickMs ?? 60_000;
    // Several hubs (app.hubLeases): only the holder of the schedules lease ticks, and a new holder at once (what was due and not fired).
    const roles = app.hubLeases ?? ALL_ROLES;
    let ticking: Promise<unknown> | undefined;
    const tick = () => {
      const recovered = app.hubLeases === undefined ? Promise.resolve() : recoverJobs().catch((err: unknown) => opts.logger?.error({ err }, "segment job, backfill and export recovery failed"));
      ticking ??= recovered.then(() => schedules.tick()).catch((err: unknown) => opts.logger?.error({ err }, "scheduler tick failed")).finally(() => (ticking = undefined));
    };
    if (every > 0) {
      timer = setInterval(() => roles.holds("schedules") && tick(), every);
      timer.unref();
      roles.onGained?.("schedules", tick);
    }
  });
  app.addHook("onClose", async () => {
    if (timer !== undefined) clearInterval(timer);
    if (again !== undefined) clearTimeout(again);
    // Exports first: one waiting for its segment job gives up (FAILED) rather than wait on a stopped runner.
    await exports.close();
    unfollow?.();
    policies?.stop();
    await policies?.settled();
    await backfills.stop();
    await runner.stop();
    // A computed attribute's evaluation under way finishes over the snapshot; later ones read the store (computed/processing.ts).
    await counts.close();
    await edgeProjection?.idle();
    await previews.idle();
    // A snapshot file being written is finished (it is renamed into place only when complete).
    await snapshots.close();
    await opts.repo.close();
  });
}

export const BATCH_PLUGIN = "segmentd-batch";

/** Its stores and services come in its options; backfills read `app.streaming` and `app.edge` when those plugins run (no import of theirs). */
export const batchPlugin = fp(batchArea, { name: BATCH_PLUGIN, fastify: "5.x", encapsulate: true });
