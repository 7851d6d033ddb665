/**
 * Schedules (segmentation-api.md §5): `/config/schedules`. A
 * `batch_segmentation` schedule runs a segment job over its definitions
 * (`["*"]` = every batch-enabled definition) at each firing of its Quartz cron
 * expression, in UTC. At most one batch segmentation schedule per sandbox.
 *
 * The scheduler (`tick`) is driven by a timer in production and called
 * directly by tests with a ManualClock. Each schedule remembers the instant it
 * last fired (`lastFiredAt`, internal), so a restart does not fire twice; a
 * firing missed while the service was down fires once at the next tick.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../../platform/clock.js";
import type { Logger } from "../../platform/logger.js";
import { ApiError, badRequest, notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import { BatchErrorCodes } from "../errors.js";
import type { BatchTenant, JobService } from "../jobs/job-service.js";
import type { BatchRepository } from "../store/types.js";
import { CronError, parseCron } from "./cron.js";
import type { SandboxRef } from "../../stores/records.js";

const KIND = "schedule" as const;
export const SCHEDULE_TYPES = ["batch_segmentation"] as const;
/** AEP: when `schedule` is omitted the system picks one; segmentd picks daily at midnight UTC. */
export const DEFAULT_CRON = "0 0 0 * * ?";

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

interface StoredSchedule {
  schedule: Schedule;
  /** Epoch ms of the last firing (or of activation): the next firing is after it. */
  lastFiredAt: number;
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
  constructor(
    private readonly repo: BatchRepository,
    private readonly jobs: JobService,
    private readonly clock: Clock,
    private readonly logger?: Pick<Logger, "error">,
  ) {}

  async create(ctx: BatchTenant, input: ScheduleInput): Promise<Schedule> {
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
    const existing = await this.repo.list<StoredSchedule>(KIND, scope, { direction: "asc", offset: 0, limit: 1 });
    if (existing.total > 0) {
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
    await this.repo.insert(KIND, { scope, id: schedule.id, status: state, creationTime: now, doc: { schedule, lastFiredAt: now } satisfies StoredSchedule });
    return schedule;
  }

  async get(ctx: BatchTenant, id: string): Promise<Schedule> {
    const r = await this.repo.get<StoredSchedule>(KIND, scopeOf(ctx), id);
    if (r === null) throw notFound("Schedule", id);
    return r.doc.schedule;
  }

  async list(ctx: BatchTenant, start: number, limit: number): Promise<{ items: Schedule[]; total: number }> {
    const page = await this.repo.list<StoredSchedule>(KIND, scopeOf(ctx), { direction: "asc", offset: start, limit });
    return { items: page.items.map((r) => r.doc.schedule), total: page.total };
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
    await this.repo.update(KIND, { ...r, status: s.state, doc: { schedule: s, lastFiredAt } satisfies StoredSchedule });
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
    const now = this.clock.now();
    const created: string[] = [];
    for (const r of await this.repo.listAllByStatus<StoredSchedule>(KIND, ["active"])) {
      const s = r.doc.schedule;
      const due = parseCron(s.schedule).next(r.doc.lastFiredAt);
      if (due === null || due > now) continue;
      // Record the firing first: a crash after it loses one run rather than running twice.
      await this.repo.update(KIND, { ...r, doc: { schedule: s, lastFiredAt: now } satisfies StoredSchedule });
      try {
        const job = await this.jobs.create({ orgId: s.imsOrgId, sandbox: s.sandbox }, {
          segmentIds: s.properties.segments,
          source: "scheduler",
          requestId: randomUUID(),
          properties: { scheduleId: s.id, runId: randomUUID() },
        });
        created.push(job.id);
      } catch (err) {
        // E.g. the schedule names definitions deleted since: this firing is skipped, the next one retries.
        this.logger?.error({ err, scheduleId: s.id }, "scheduled segment job could not be created");
      }
    }
    return created;
  }
}
