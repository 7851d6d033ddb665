/**
 * Edge HTTP API:
 *  - Edge Network interact (no Adobe IO credentials; the dataStreamId names the
 *    org, sandbox and dataset, as with Adobe's unauthenticated Edge Network):
 *      POST /ee/v2/interact?dataStreamId=…            (default location)
 *      POST /ee/{location}/v2/interact?dataStreamId=…
 *  - Datastreams, tenant-scoped like every Platform API:
 *      GET/POST /data/core/edge/datastreams, GET/PUT/DELETE /data/core/edge/datastreams/{id}
 */
import type { FastifyInstance } from "fastify";
import { registerOperatorHooks, registerTenantHooks, type AuthDeps } from "../http/auth.js";
import { tenantOf } from "../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam } from "../http/schemas.js";
import { ApiError } from "../services/errors.js";
import type { DatastreamInput, DatastreamService } from "./datastreams.js";
import type { DeadLetter } from "./hub-forwarder.js";
import type { EdgeInteractService, InteractResponse } from "./interact.js";

export const DATASTREAMS_PREFIX = "/data/core/edge";

const interactQuery = {
  type: "object",
  properties: { dataStreamId: { type: "string", maxLength: 256 } },
} as const;

/**
 * The 200 body, declared so that /openapi.json documents it. Handle payload
 * items are of two kinds (profileLookup, locationHint); one object schema lists
 * the fields of both.
 */
const interactResponse = {
  type: "object",
  properties: {
    requestId: { type: "string" },
    handle: {
      type: "array",
      items: {
        type: "object",
        properties: {
          type: { type: "string" },
          eventIndex: { type: "integer" },
          payload: {
            type: "array",
            items: {
              type: "object",
              properties: {
                type: { type: "string" },
                destinationId: { type: "string" },
                alias: { type: "string" },
                attributes: { type: "object", additionalProperties: true },
                segments: {
                  type: "array",
                  items: { type: "object", properties: { id: { type: "string" }, namespace: { type: "string" } }, required: ["id", "namespace"] },
                },
                scope: { type: "string" },
                hint: { type: "string" },
                ttlSeconds: { type: "integer" },
              },
            },
          },
        },
        required: ["type", "payload"],
      },
    },
  },
  required: ["requestId", "handle"],
} as const;

export async function interactRoutes(app: FastifyInstance, opts: { interact: EdgeInteractService }): Promise<void> {
  const tags = ["Edge"];
  type Req = { Querystring: { dataStreamId?: string }; Params: { location?: string }; Body: unknown };
  const response = { 200: interactResponse };
  // The answer is built by interact.ts with exactly the schema's fields in its order: JSON.stringify
  // writes the same bytes as the compiled serializer, at a fraction of its allocations (#42: the
  // compiled one built ~3.5 KB of intermediate strings per answer, a tenth of an edge node's).
  const serializerCompiler = () => (data: unknown) => JSON.stringify(data);
  // Per-request info logs ("incoming request", "request completed") are off on this hot path
  // when the app logs at info; errors are still logged, and a debug/trace level keeps them.
  const quiet = app.log.level === "info" ? { logLevel: "warn" as const } : {};
  // Backpressure: the hub forwarder's queue is full; the client may retry shortly.
  const retryAfter = (err: unknown, reply: { header(name: string, value: string): unknown }): void => {
    if (err instanceof ApiError && err.status === 503) reply.header("retry-after", "1");
  };
  // The answer as it comes (interactNow): a plain value in the common case, which Fastify sends
  // without a promise; a promise when something had to be awaited. Errors either way are Fastify's
  // to send, as from an async handler.
  const handle = (location: string | undefined, request: { query: { dataStreamId?: string }; body: unknown; id: string }, reply: { header(name: string, value: string): unknown }) => {
    let answer: InteractResponse | Promise<InteractResponse>;
    try {
      answer = opts.interact.interactNow(location, request.query.dataStreamId, request.body, request.id);
    } catch (err) {
      retryAfter(err, reply);
      throw err;
    }
    if (!(answer instanceof Promise)) return answer;
    return answer.catch((err: unknown) => {
      retryAfter(err, reply);
      throw err;
    });
  };
  app.post<Req>("/ee/v2/interact", {
    ...quiet,
    serializerCompiler,
    schema: { tags, summary: "Edge interact at the default location", querystring: interactQuery, response },
  }, (request, reply) => handle(undefined, request, reply));
  app.post<Req>("/ee/:location/v2/interact", {
    ...quiet,
    serializerCompiler,
    schema: { tags, summary: "Edge interact at a named location", querystring: interactQuery, params: idParam("location"), response },
  }, (request, reply) => handle(request.params.location, request, reply));
}

const datastreamSchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    imsOrgId: { type: "string" },
    sandboxName: { type: "string" },
    eventDatasetId: { type: "string" },
    edgeSegmentation: { type: "boolean" },
    creationTime: { type: "integer" },
    updateTime: { type: "integer" },
  },
  required: ["id", "name", "imsOrgId", "sandboxName", "eventDatasetId", "edgeSegmentation", "creationTime", "updateTime"],
} as const;

const datastreamInputSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 256 },
    eventDatasetId: { type: "string", minLength: 1, maxLength: 256 },
    edgeSegmentation: { type: "boolean" },
  },
  required: ["name", "eventDatasetId"],
  additionalProperties: false,
} as const;

export interface DatastreamRoutesOptions extends AuthDeps {
  datastreams: DatastreamService;
}

export async function datastreamRoutes(app: FastifyInstance, opts: DatastreamRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Datastreams"];
  const svc = opts.datastreams;
  const notFound = { 404: { ...commonErrorResponses[400], description: "No such datastream in this sandbox" } };
  app.get("/datastreams", {
    schema: { tags, summary: "List datastreams", headers: authHeaders, response: { 200: { type: "object", properties: { datastreams: { type: "array", items: datastreamSchema } }, required: ["datastreams"] }, ...commonErrorResponses } },
  }, async (request) => ({ datastreams: await svc.list(tenantOf(request)) }));
  app.post<{ Body: DatastreamInput }>("/datastreams", {
    schema: { tags, summary: "Create a datastream", headers: authHeaders, body: datastreamInputSchema, response: { 201: datastreamSchema, ...commonErrorResponses } },
  }, async (request, reply) => {
    const d = await svc.create(tenantOf(request), request.body);
    reply.code(201);
    return d;
  });
  app.get<{ Params: { id: string } }>("/datastreams/:id", {
    schema: { tags, summary: "Get a datastream", headers: authHeaders, params: idParam("id"), response: { 200: datastreamSchema, ...commonErrorResponses, ...notFound } },
  }, async (request) => svc.get(tenantOf(request), request.params.id));
  app.put<{ Params: { id: string }; Body: DatastreamInput }>("/datastreams/:id", {
    schema: { tags, summary: "Replace a datastream", headers: authHeaders, params: idParam("id"), body: datastreamInputSchema, response: { 200: datastreamSchema, ...commonErrorResponses, ...notFound } },
  }, async (request) => svc.replace(tenantOf(request), request.params.id, request.body));
  app.delete<{ Params: { id: string } }>("/datastreams/:id", {
    schema: { tags, summary: "Delete a datastream", headers: authHeaders, params: idParam("id"), response: { ...commonErrorResponses, ...notFound } },
  }, async (request, reply) => {
    await svc.delete(tenantOf(request), request.params.id);
    reply.code(204);
    return null;
  });
}

/** What an operator sees of the edge: the events the hub refused (GET /admin/edge/dead-letters). */
export async function edgeAdminRoutes(app: FastifyInstance, opts: AuthDeps & { deadLetters: () => readonly DeadLetter[] }): Promise<void> {
  registerOperatorHooks(app, opts);
  app.get<{ Querystring: { orgId?: string; limit?: number } }>("/dead-letters", {
    schema: {
      tags: ["Operator"],
      summary: "Edge events the hub refused, newest last (operator token only; kept in memory, 1,000 at most)",
      querystring: {
        type: "object",
        properties: { orgId: { type: "string", minLength: 1, maxLength: 256 }, limit: { type: "integer", minimum: 1, maximum: 1000, default: 100 } },
        additionalProperties: false,
      },
    },
  }, async (request) => {
    const { orgId, limit = 100 } = request.query;
    const all = opts.deadLetters().filter((l) => orgId === undefined || l.orgId === orgId);
    return { total: all.length, deadLetters: all.slice(-limit) };
  });
}
