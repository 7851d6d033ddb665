/**
 * Schedules (segmentation-api.md §5): `/config/schedules`. A
 * `batch_segmentation` schedule runs a segment job over its definitions
 * (`["*"]` = every batch-enabled definition) at each firing of its Quartz cron
 * expression, in UTC. At most one batch segmentation schedule per sandbox.
 *
 * The scheduler (`tick`) is driven by a timer in production and called
 * directly by tests with a ManualClock. Each schedule remembers the instant it
 * last fired (`lastFiredAt`, internal), so a restart does not fire twice; a
 * firing missed while the service was down fires once at the next tick. A
 * firing's job id is derived from the schedule and its due time: two hubs'
 * passes, or a pass after a crash between the job and `lastFiredAt`, create
 * one job per due time (issue #43; the hubs' scheduler runs under a lease).
 *
 * The daily job (#39): in AEP every batch audience is evaluated by a daily
 * scheduled job. Every sandbox gets one default schedule (`profile-default`,
 * `["*"]`, active, `batch.defaultSchedule`'s cron) the first time the service
 * looks at it — at start-up, before each scheduler pass, on a list or read —
 * so a sandbox nobody listed still gets its daily run. It is an ordinary
 * schedule (PATCH turns it off or moves it; DELETE removes it), except that an
 * explicit POST replaces it (one batch schedule per sandbox). Created once per
 * sandbox, ever: its id is derived from the sandbox and a marker records that
 * it was made, so restarts, two hubs racing, or a deletion never bring back a
 * second one.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Clock } from "../../platform/clock.js";
import type { Logger } from "../../platform/logger.js";
import { ApiError, badRequest, notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import { BatchErrorCodes } from "../errors.js";
import { DuplicateJobError, type BatchTenant, type JobService } from "../jobs/job-service.js";
import type { BatchRepository, StoredResource } from "../store/types.js";
import { CronError, parseCron } from "./cron.js";
import type { SandboxRef } from "../../stores/records.js";

const KIND = "schedule" as const;
export const SCHEDULE_TYPES = ["batch_segmentation"] as const;
/** AEP: when `schedule` is omitted the system picks one; segmentd picks daily at midnight UTC. */
export const DEFAULT_CRON = "0 0 0 * * ?";
/** The daily job's default time and name: those of Adobe's own schedule example (01:00 UTC, `profile-default`). */
export const DEFAULT_DAILY_CRON = "0 0 1 * * ?";
export const DEFAULT_SCHEDULE_NAME = "profile-default";
const MARKER_KIND = "schedule-default" as const;
const MARKER_ID = "default-schedule";

export interface Schedule {
  id: string;
  imsOrgId: string;
  sandbox: SandboxRef;
  name: string;
  description?: string;
  type: "batch_segmentation";
  properties: { segments: string[] };
  schedule: string;
  state: "active" | "inactive";
  createEpoch: number;
  updateEpoch: number;
}

/** A schedule as the API answers it: with its next firing (segmentd's field; AEP's shape has none). */
export interface ScheduleView extends Schedule {
  /** ISO 8601 UTC instant of the next run, or null while inactive (or when the cron never fires again). */
  nextRunTime: string | null;
}

interface StoredSchedule {
  schedule: Schedule;
  /** Epoch ms of the last firing (or of activation): the next firing is after it. */
  lastFiredAt: number;
  /** The sandbox's default daily schedule (an explicit POST replaces it). */
  isDefault?: boolean;
}

export interface ScheduleServiceOptions {
  /** The default daily schedule's cron (`batch.defaultSchedule`), or false for none. Default: none. */
  defaultCron?: string | false;
  /** Every sandbox the scheduler serves (each gets its default schedule before a pass). */
  sandboxes?: () => BatchTenant[];
}

/** A UUID-shaped id (version 5's layout) derived from `parts`: the same on every process. */
function derivedId(...parts: string[]): string {
  const h = createHash("sha256").update(parts.join("\u0000")).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The default schedule's id: the same for a sandbox on every process. */
function defaultScheduleId(orgId: string, sandboxName: string): string {
  return derivedId("segmentd-default-schedule", orgId, sandboxName);
}

/** A firing's segment job id: the same for a schedule's due time on every process. */
export function firingJobId(scheduleId: string, due: number): string {
  return derivedId("segmentd-schedule-firing", scheduleId, String(due));
}

function view(r: StoredSchedule): ScheduleView {
  return { ...r.schedule, nextRunTime: nextRun(r) };
}

function nextRun(r: StoredSchedule): string | null {
  if (r.schedule.state !== "active") return null;
  try {
    const next = parseCron(r.schedule.schedule).next(r.lastFiredAt);
    return next === null ? null : new Date(next).toISOString();
  } catch {
    // A cron stored under an older grammar still lists; the scheduler's pass logs it.
    return null;
  }
}

export interface ScheduleInput {
  name?: unknown;
  description?: unknown;
  type?: unknown;
  properties?: unknown;
  schedule?: unknown;
  state?: unknown;
}

export interface PatchOp {
  op: string;
  path: string;
  value?: unknown;
}

function validCron(text: unknown): string {
  if (typeof text !== "string") throw badRequest("schedule must be a Quartz cron expression string", BatchErrorCodes.badSchedule);
  try {
    parseCron(text);
  } catch (e) {
    if (e instanceof CronError) throw badRequest(`Invalid schedule "${text.slice(0, 100)}": ${e.message}`, BatchErrorCodes.badSchedule);
    throw e;
  }
  return text.trim();
}

function validState(v: unknown): "active" | "inactive" {
  if (v !== "active" && v !== "inactive") throw badRequest('state must be "active" or "inactive"', BatchErrorCodes.badSchedule);
  return v;
}

export class ScheduleService {
  private readonly defaultCron: string | false;
  /** Sandboxes whose default schedule this process has seen to (org NUL sandbox). */
  private readonly ensured = new Set<string>();
  /** Firings found already made (another process's pass, or a pass after a crash): no second job. */
  readonly stats = { alreadyFired: 0 };

  constructor(
    private readonly repo: BatchRepository,
    private readonly jobs: JobService,
    private readonly clock: Clock,
    private readonly logger?: Pick<Logger, "error">,
    private readonly options: ScheduleServiceOptions = {},
  ) {
    const cron = options.defaultCron ?? false;
    if (cron !== false) {
      try {
        parseCron(cron);
      } catch (e) {
        if (e instanceof CronError) throw new Error(`batch.defaultSchedule "${cron}": ${e.message}`);
        throw e;
      }
    }
    this.defaultCron = cron === false ? false : cron.trim();
  }

  /**
   * Creates the sandbox's default daily schedule unless it was made before (by any process) or
   * the sandbox already has a schedule. Cheap after the first call: the answer is remembered.
   */
  async ensureDefault(ctx: BatchTenant): Promise<void> {
    if (this.defaultCron === false) return;
    const scope = scopeOf(ctx);
    const key = `${scope.orgId}\u0000${scope.sandboxName}`;
    if (this.ensured.has(key)) return;
    if ((await this.repo.get(MARKER_KIND, scope, MARKER_ID)) === null) {
      const now = this.clock.now();
      const existing = await this.repo.list<StoredSchedule>(KIND, scope, { direction: "asc", offset: 0, limit: 1 });
      if (existing.total === 0) {
        const schedule: Schedule = {
          id: defaultScheduleId(scope.orgId, scope.sandboxName),
          imsOrgId: ctx.orgId,
          sandbox: ctx.sandbox,
          name: DEFAULT_SCHEDULE_NAME,
          description: "The daily evaluation of every batch audience (segmentd's default schedule)",
          type: "batch_segmentation",
          properties: { segments: ["*"] },
          schedule: this.defaultCron,
          state: "active",
          createEpoch: Math.floor(now / 1000),
          updateEpoch: Math.floor(now / 1000),
        };
        await this.insertOnce(KIND, { scope, id: schedule.id, status: "active", creationTime: now, doc: { schedule, lastFiredAt: now, isDefault: true } satisfies StoredSchedule });
      }
      await this.insertOnce(MARKER_KIND, { scope, id: MARKER_ID, status: "done", creationTime: now, doc: { at: now } });
    }
    this.ensured.add(key);
  }

  /** Inserts, or finds the row another process inserted first (the primary key refuses a second). */
  private async insertOnce<T>(kind: typeof KIND | typeof MARKER_KIND, r: StoredResource<T>): Promise<void> {
    try {
      await this.repo.insert(kind, r);
    } catch (err) {
      if ((await this.repo.get(kind, r.scope, r.id)) === null) throw err;
    }
  }

  async create(ctx: BatchTenant, input: ScheduleInput): Promise<ScheduleView> {
    if (typeof input.name !== "string" || input.name.trim() === "") throw badRequest("name is required", BatchErrorCodes.badSchedule);
    if (input.type !== "batch_segmentation") throw badRequest(`type must be one of ${SCHEDULE_TYPES.join(", ")}`, BatchErrorCodes.badSchedule);
    const props = input.properties as { segments?: unknown } | undefined;
    const segments = props?.segments;
    if (!Array.isArray(segments) || segments.length === 0 || !segments.every((s) => typeof s === "string" && s !== "")) {
      throw badRequest('properties.segments is required: a non-empty array of definition ids, or ["*"]', BatchErrorCodes.badSchedule);
    }
    const cron = input.schedule === undefined ? DEFAULT_CRON : validCron(input.schedule);
    const state = input.state === undefined ? "inactive" : validState(input.state);
    const scope = scopeOf(ctx);
    await this.ensureDefault(ctx);
    const existing = await this.repo.list<StoredSchedule>(KIND, scope, { direction: "asc", offset: 0, limit: 1 });
    // An explicit schedule replaces the default one (AEP's clients create theirs with POST).
    if (existing.total === 1 && existing.items[0]!.doc.isDefault === true) await this.repo.delete(KIND, scope, existing.items[0]!.id);
    else if (existing.total > 0) {
      throw new ApiError(400, BatchErrorCodes.scheduleExists, `This sandbox already has a batch segmentation schedule (${existing.items[0]!.id}); update or delete it`);
    }
    const now = this.clock.now();
    const schedule: Schedule = {
      id: randomUUID(),
      imsOrgId: ctx.orgId,
      sandbox: ctx.sandbox,
      name: input.name,
      ...(typeof input.description === "string" ? { description: input.description } : {}),
      type: "batch_segmentation",
      properties: { segments: segments as string[] },
      schedule: cron,
      state,
      createEpoch: Math.floor(now / 1000),
      updateEpoch: Math.floor(now / 1000),
    };
    const stored: StoredSchedule = { schedule, lastFiredAt: now };
    await this.repo.insert(KIND, { scope, id: schedule.id, status: state, creationTime: now, doc: stored });
    return view(stored);
  }

  async get(ctx: BatchTenant, id: string): Promise<ScheduleView> {
    await this.ensureDefault(ctx);
    const r = await this.repo.get<StoredSchedule>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Schedule", id);
    return view(r.doc);
  }

  async list(ctx: BatchTenant, start: number, limit: number): Promise<{ items: ScheduleView[]; total: number }> {
    await this.ensureDefault(ctx);
    const page = await this.repo.list<StoredSchedule>(KIND, scopeOf(ctx), { direction: "asc", offset: start, limit });
    return { items: page.items.map((r) => view(r.doc)), total: page.total };
  }

  /** AEP's PATCH: JSON Patch ops on /state or /schedule only. */
  async patch(ctx: BatchTenant, id: string, ops: readonly PatchOp[]): Promise<void> {
    const r = await this.repo.get<StoredSchedule>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Schedule", id);
    if (ops.length === 0) throw badRequest("The patch must contain at least one operation", BatchErrorCodes.badSchedule);
    const s = { ...r.doc.schedule };
    let lastFiredAt = r.doc.lastFiredAt;
    const now = this.clock.now();
    for (const op of ops) {
      if (op.op !== "add" && op.op !== "replace") throw badRequest(`Unsupported patch operation "${op.op}": use add (or replace)`, BatchErrorCodes.badSchedule);
      if (op.path === "/state") {
        const next = validState(op.value);
        // Activation starts counting from now: no catch-up firing for the inactive period.
        if (next === "active" && s.state === "inactive") lastFiredAt = now;
        s.state = next;
      } else if (op.path === "/schedule") {
        s.schedule = validCron(op.value);
        lastFiredAt = now;
      } else {
        throw badRequest(`Unsupported patch path "${op.path}": only /state and /schedule can change`, BatchErrorCodes.badSchedule);
      }
    }
    s.updateEpoch = Math.floor(now / 1000);
    await this.repo.update(KIND, { ...r, status: s.state, doc: { ...r.doc, schedule: s, lastFiredAt } satisfies StoredSchedule });
  }

  async delete(ctx: BatchTenant, id: string): Promise<void> {
    if (!(await this.repo.delete(KIND, scopeOf(ctx), id))) throw notFound("Schedule", id);
  }

  /**
   * Fires every active schedule whose next cron instant after its last firing
   * is due, creating one segment job each (source "scheduler"). Returns the
   * ids of the jobs created.
   */
  async tick(): Promise<string[]> {
    await this.ensureDefaults();
    const now = this.clock.now();
    const created: string[] = [];
    for (const r of await this.repo.listAllByStatus<StoredSchedule>(KIND, ["active"])) {
      const s = r.doc.schedule;
      let due: number | null;
      try {
        due = parseCron(s.schedule).next(r.doc.lastFiredAt);
      } catch (err) {
        // One schedule whose stored cron no longer parses does not stop the others.
        this.logger?.error({ err, scheduleId: s.id }, "schedule has an invalid cron expression");
        continue;
      }
      if (due === null || due > now) continue;
      // Exactly once per due time, across processes and crashes: the firing's job id is derived
      // from the schedule and the due time, so a second creation (another hub's pass, or a pass
      // after a crash between the job and the record below) finds it there and creates nothing.
      try {
        const job = await this.jobs.create({ orgId: s.imsOrgId, sandbox: s.sandbox }, {
          id: firingJobId(s.id, due),
          segmentIds: s.properties.segments,
          source: "scheduler",
          requestId: randomUUID(),
          properties: { scheduleId: s.id, runId: randomUUID() },
        });
        created.push(job.id);
      } catch (err) {
        if (err instanceof DuplicateJobError) {
          this.stats.alreadyFired++;
        } else {
          // E.g. the schedule names definitions deleted since: this firing is skipped, the next one retries.
          this.logger?.error({ err, scheduleId: s.id }, "scheduled segment job could not be created");
        }
      }
      // Only if nobody moved it meanwhile (a PATCH of its cron or state resets lastFiredAt itself).
      const latest = await this.repo.get<StoredSchedule>(KIND, r.scope, s.id);
      if (latest !== null && latest.doc.lastFiredAt === r.doc.lastFiredAt) {
        await this.repo.update(KIND, { ...latest, doc: { ...latest.doc, lastFiredAt: now } satisfies StoredSchedule });
      }
    }
    return created;
  }

  /** The default schedule of every sandbox served (one failing sandbox does not stop the others). */
  async ensureDefaults(): Promise<void> {
    for (const t of this.options.sandboxes?.() ?? []) {
      try {
        await this.ensureDefault(t);
      } catch (err) {
        this.logger?.error({ err, orgId: t.orgId, sandbox: t.sandbox.sandboxName }, "default schedule could not be created");
      }
    }
  }
}
