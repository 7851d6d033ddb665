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
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { AuthDeps } from "../../http/auth.js";
import { SnapshotCache, type SnapshotCacheOptions } from "../columnar/cache.js";
import { JobRunner, type JobRunnerOptions, type JobRunnerStore } from "../jobs/job-runner.js";
import { JobService } from "../jobs/job-service.js";
import { ScheduleService } from "../schedules/schedule-service.js";
import { PreviewService, type PreviewStore } from "../previews/preview-service.js";
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

/** What the area's services call on the profile store: jobs, previews and exports together. */
export type BatchProfileStore = JobRunnerStore & PreviewStore & ExportStore;

/** The job runner's settings (stores, clock, logger, back end, chunk size), plus the plugin's own. */
export interface BatchPluginOptions
  extends AuthDeps,
    Pick<JobRunnerOptions, "metadata" | "repo" | "clock" | "logger" | "backend" | "chunkSize"> {
  profiles: BatchProfileStore;
  /** How often the scheduler looks for due schedules (ms). Default 60 000; 0 disables the timer. */
  scheduleTickMs?: number;
  /** Every sandbox's default daily schedule: its cron (`batch.defaultSchedule`), or false/absent for none. */
  defaultSchedule?: string | false;
  /** Keeps snapshots on disk (`dir`, `storeIdentity`, `onWarning`): the first job after a restart loads one instead of scanning. */
  snapshotFiles?: Pick<SnapshotCacheOptions, "dir" | "storeIdentity" | "onWarning">;
  /** Worker threads that evaluate over the snapshots (batch/pool/); 0 or absent: on the main thread. */
  evaluationWorkers?: number;
  /** The eligibility answer (services/definitions.ts) edit impact reports for the edited expression. */
  eligibility: EligibilityOf;
  /** The sandbox's identity descriptors (Schema Registry) the builder's palette names; default none. */
  descriptors?: DescriptorsOf;
  /** Receives the area's services (tests and the CLI wait on `runner.idle()`, tick the scheduler). */
  expose?: (handles: BatchHandles) => void;
}

export interface BatchHandles {
  runner: JobRunner;
  jobs: JobService;
  schedules: ScheduleService;
  previews: PreviewService;
  exports: ExportService;
}

async function batchArea(app: FastifyInstance, opts: BatchPluginOptions): Promise<void> {
  const { metadata, profiles, repo, clock, logger, backend, chunkSize } = opts;
  // Resident columnar snapshots shared by jobs and previews (kept between jobs, refreshed from the change feed).
  const snapshots = new SnapshotCache({ ...opts.snapshotFiles, evaluationWorkers: opts.evaluationWorkers ?? 0 });
  const limits = (scope: TenantScope) => opts.tenants.resolve(scope.orgId, scope.sandboxName)?.limits;
  const runner = new JobRunner({ metadata, profiles, repo, clock, logger, backend, chunkSize, snapshots, limits });
  const jobs = new JobService(opts.metadata, opts.repo, runner, opts.clock);
  const schedules = new ScheduleService(opts.repo, jobs, opts.clock, opts.logger, {
    defaultCron: opts.defaultSchedule ?? false,
    sandboxes: () => opts.tenants.all(),
  });
  const previews = new PreviewService(opts.profiles, opts.repo, opts.clock, opts.logger, snapshots);
  const exports = new ExportService(opts.metadata, opts.profiles, opts.repo, opts.clock, opts.logger, jobs);
  const impact = new ImpactService(metadata, profiles, snapshots, clock, opts.eligibility);
  opts.expose?.({ runner, jobs, schedules, previews, exports });
  const auth = { authenticator: opts.authenticator, tenants: opts.tenants };
  await app.register(jobRoutes, { ...auth, jobs });
  await app.register(scheduleRoutes, { ...auth, schedules });
  await app.register(previewRoutes, { ...auth, previews });
  await app.register(exportRoutes, { ...auth, exports });
  await app.register(impactRoutes, { ...auth, impact });
  const fields = new BuilderFields(profiles, clock, opts.descriptors ?? (async () => []));
  await app.register(builderRoutes, { ...auth, fields, estimator: new BuilderEstimator(profiles, snapshots, clock) });
  let timer: NodeJS.Timeout | undefined;
  app.addHook("onReady", async () => {
    await runner.recover();
    await exports.recover();
    // Every sandbox has its daily schedule from the start (not only once someone lists schedules).
    await schedules.ensureDefaults();
    const every = opts.scheduleTickMs ?? 60_000;
    if (every > 0) {
      timer = setInterval(() => {
        schedules.tick().catch((err: unknown) => opts.logger?.error({ err }, "scheduler tick failed"));
      }, every);
      timer.unref();
    }
  });
  app.addHook("onClose", async () => {
    if (timer !== undefined) clearInterval(timer);
    // Exports first: one waiting for its segment job gives up (FAILED) rather than wait on a stopped runner.
    await exports.close();
    await runner.stop();
    await previews.idle();
    // A snapshot file being written is finished (it is renamed into place only when complete).
    await snapshots.close();
    await opts.repo.close();
  });
}

export const BATCH_PLUGIN = "segmentd-batch";

/** Uses nothing another plugin decorates: its stores and services come in its options. */
export const batchPlugin = fp(batchArea, { name: BATCH_PLUGIN, fastify: "5.x", encapsulate: true });
