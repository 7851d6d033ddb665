/**
 * A definition's backfill (segmentd extension, issue #40):
 *   GET  /data/core/ups/segment/definitions/{id}/backfill  its state and progress
 *   POST /data/core/ups/segment/definitions/{id}/backfill  runs one again (queued behind the sandbox's others)
 * A backfill runs by itself when a continuous or edge definition is created, enabled or edited;
 * these routes show it and ask for one. 404 for a definition this sandbox does not have, or one
 * that never had a backfill (GET); 400 for one that is not evaluated live (POST). On a hub whose
 * streaming workers evaluate, the workers write it, fenced against each partition's position
 * (cluster/partition-backfill.ts): the same routes, the same answers.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam } from "../../http/schemas.js";
import { ApiError, ErrorCodes, badRequest, notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import type { MetadataStore } from "../../stores/types.js";
import { isLiveDefinition, type BackfillRunner } from "../backfill/backfill-runner.js";

export interface BackfillRoutesOptions extends AuthDeps {
  runner: BackfillRunner;
  metadata: MetadataStore;
}

const time = { type: "string", nullable: true, description: "ISO-8601" } as const;
const backfillSchema = {
  type: "object",
  properties: {
    definitionId: { type: "string" },
    state: { type: "string", enum: ["queued", "running", "succeeded", "failed"] },
    phase: { type: "string", enum: ["queued", "evaluating", "writing", "fencing", "done"] },
    reason: { type: "string", enum: ["created", "updated", "requested", "restarted", "referenced", "mergePolicy"] },
    definitionVersion: { type: "integer", description: "updateTime (epoch ms) of the definition version evaluated" },
    fence: { type: "number", nullable: true, description: "The change feed's position the evaluation read through (with streaming workers, each partition's owner decides the profiles changed after it on its live state)" },
    total: { type: "integer", description: "Membership changes to decide: the net change, plus the profiles changed after the fence" },
    processed: { type: "integer" },
    entered: { type: "integer", description: "Transitions to realized written (source backfill)" },
    exited: { type: "integer", description: "Transitions to exited written (source backfill)" },
    fenced: { type: "integer", description: "Profiles changed after the fence, decided on the live engine's current state (in process, or by the partition's streaming worker)" },
    queuedAt: { type: "string" },
    startedAt: time,
    evaluatedAt: { ...time, description: "When the evaluation was done and the writes began (ISO-8601)" },
    finishedAt: time,
    attempts: { type: "integer" },
    error: { type: "string", nullable: true },
  },
  required: ["definitionId", "state", "phase", "reason", "definitionVersion", "fence", "total", "processed", "entered", "exited", "fenced", "queuedAt", "startedAt", "evaluatedAt", "finishedAt", "attempts", "error"],
} as const;

const notFoundResponse = { ...commonErrorResponses[400], description: "No such definition in this sandbox (or, GET, no backfill of it)" };

export async function backfillRoutes(app: FastifyInstance, opts: BackfillRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  app.get<{ Params: { id: string } }>("/segment/definitions/:id/backfill", {
    schema: {
      tags: ["Segment definitions"],
      summary: "The state and progress of a continuous or edge definition's backfill (segmentd extension)",
      headers: authHeaders,
      params: idParam("id"),
      response: { 200: backfillSchema, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request) => {
    const ctx = tenantOf(request);
    const id = request.params.id;
    if ((await opts.metadata.definitions.get(scopeOf(ctx), id)) === undefined) throw notFound("Segment definition", id);
    const view = await opts.runner.get(scopeOf(ctx), id);
    if (view === null) throw new ApiError(404, ErrorCodes.notFound, `Segment definition '${id}' has had no backfill: only continuous and edge definitions have one`);
    return view;
  });
  app.post<{ Params: { id: string } }>("/segment/definitions/:id/backfill", {
    schema: {
      tags: ["Segment definitions"],
      summary: "Runs a continuous or edge definition's backfill again: writes the net change of its memberships (segmentd extension)",
      headers: authHeaders,
      params: idParam("id"),
      response: { 202: backfillSchema, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    const ctx = tenantOf(request);
    const id = request.params.id;
    const rec = await opts.metadata.definitions.get(scopeOf(ctx), id);
    if (rec === undefined) throw notFound("Segment definition", id);
    if (!isLiveDefinition(rec.definition)) throw badRequest(`Segment definition '${id}' is not evaluated live (continuous or edge, published): a batch job computes its memberships`);
    reply.code(202);
    return opts.runner.request(ctx, rec);
  });
}
