/**
 * Schedules API (segmentation-api.md §5): /config/schedules. Handlers only
 * translate HTTP to ScheduleService calls and back.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { limitParam, offsetParam } from "../../http/routes/paging-params.js";
import { authHeaders, commonErrorResponses, idParam } from "../../http/schemas.js";
import type { PatchOp, ScheduleInput, ScheduleService } from "../schedules/schedule-service.js";

export interface ScheduleRoutesOptions extends AuthDeps {
  schedules: ScheduleService;
}

const tags = ["Schedules"];
const MAX_LIMIT = 100;
const SCHEDULES_PATH = "/data/core/ups/config/schedules";

const scheduleSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    type: { type: "string" },
    schedule: { type: "string" },
    state: { type: "string", enum: ["active", "inactive"] },
    nextRunTime: { type: "string", format: "date-time", nullable: true, description: "segmentd: the next run (ISO 8601, UTC); null while inactive" },
  },
} as const;

const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };

export async function scheduleRoutes(app: FastifyInstance, opts: ScheduleRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.schedules;

  app.get<{ Querystring: { start?: number; limit?: number } }>("/config/schedules", {
    schema: {
      tags,
      summary: "List schedules",
      description: "Every sandbox has a default daily schedule (profile-default, all batch audiences, active; `batch.defaultSchedule` sets its time or turns it off): turn it off or move it with PATCH.",
      headers: authHeaders,
      querystring: { type: "object", properties: { start: offsetParam(), limit: limitParam() } },
      response: {
        200: {
          type: "object",
          properties: {
            _page: { type: "object", additionalProperties: true },
            children: { type: "array", items: scheduleSchema },
            _links: { type: "object", additionalProperties: true },
          },
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const start = request.query.start ?? 0;
    const limit = Math.min(request.query.limit ?? MAX_LIMIT, MAX_LIMIT);
    const page = await svc.list(tenantOf(request), start, limit);
    const more = start + page.items.length < page.total;
    const next = more ? `${SCHEDULES_PATH}?start=${start + page.items.length}&limit=${limit}` : undefined;
    return {
      _page: { totalCount: page.total, pageSize: page.items.length, ...(next === undefined ? {} : { next: String(start + page.items.length) }) },
      children: page.items,
      _links: { next: next === undefined ? {} : { href: next } },
    };
  });

  app.post<{ Body: ScheduleInput }>("/config/schedules", {
    schema: {
      tags,
      summary: "Create a schedule",
      description: "type batch_segmentation; properties.segments lists definition ids or [\"*\"]; schedule is a Quartz cron expression in UTC (default daily at 00:00); state defaults to inactive. At most one per sandbox: a new one replaces the sandbox's default daily schedule.",
      headers: authHeaders,
      body: { type: "object" },
      response: { 200: scheduleSchema, ...commonErrorResponses },
    },
  }, async (request) => svc.create(tenantOf(request), request.body));

  app.get<{ Params: { SCHEDULE_ID: string } }>("/config/schedules/:SCHEDULE_ID", {
    schema: { tags, summary: "Retrieve a schedule", headers: authHeaders, params: idParam("SCHEDULE_ID"), response: { 200: scheduleSchema, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.get(tenantOf(request), request.params.SCHEDULE_ID));

  app.patch<{ Params: { SCHEDULE_ID: string }; Body: PatchOp[] }>("/config/schedules/:SCHEDULE_ID", {
    config: { jsonWhateverType: true },
    schema: {
      tags,
      summary: "Update a schedule's state or cron expression",
      headers: authHeaders,
      params: idParam("SCHEDULE_ID"),
      body: { type: "array", items: { type: "object", properties: { op: { type: "string" }, path: { type: "string" }, value: {} }, required: ["op", "path"] } },
      response: { 204: { type: "null" }, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    await svc.patch(tenantOf(request), request.params.SCHEDULE_ID, request.body);
    reply.code(204);
    return null;
  });

  app.delete<{ Params: { SCHEDULE_ID: string } }>("/config/schedules/:SCHEDULE_ID", {
    schema: { tags, summary: "Delete a schedule", headers: authHeaders, params: idParam("SCHEDULE_ID"), response: { 204: { type: "null" }, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request, reply) => {
    await svc.delete(tenantOf(request), request.params.SCHEDULE_ID);
    reply.code(204);
    return null;
  });
}
