/**
 * Flow Service's source side for destinations (docs/aep-compatibility.md): `GET /flowSpecs`
 * and `/sourceConnections` to the Profile store, as AEP's activation tutorials call them
 * before creating a flow. Same headers, shapes and tenancy as routes.ts.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { actorOf, tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses } from "../../http/schemas.js";
import { ApiError } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import { flowSpecs, matchesProperties, type SourceConnections } from "../source-connections.js";
import { ACTIVATION_BODY_LIMIT, FLOWSERVICE_PREFIX } from "./routes.js";

export interface SourceRoutesOptions extends AuthDeps {
  sources: SourceConnections;
}

const MAX_LIMIT = 100;
const anyObject = { type: "object", additionalProperties: true } as const;
const itemsOf = { type: "object", properties: { items: { type: "array", items: anyObject } }, required: ["items"], additionalProperties: true } as const;
const created = { type: "object", properties: { id: { type: "string" }, etag: { type: "string" } }, required: ["id", "etag"], additionalProperties: true } as const;
const idParams = { type: "object", properties: { id: { type: "string", minLength: 1, maxLength: 256 } }, required: ["id"] } as const;
const property = { anyOf: [{ type: "string", maxLength: 300 }, { type: "array", maxItems: 5, items: { type: "string", maxLength: 300 } }] } as const;
const errors = { ...commonErrorResponses, 404: { ...commonErrorResponses[400], description: "No such resource in this sandbox (SEGMENTD-DESTINATION-404)" } };

interface ListQ { limit?: number; start?: number; property?: string | string[] }

export async function sourceRoutes(app: FastifyInstance, o: SourceRoutesOptions): Promise<void> {
  registerTenantHooks(app, o);
  const tags = ["Destinations"];
  const tenant = (request: FastifyRequest) => scopeOf(tenantOf(request));
  const props = (q: ListQ) => (q.property === undefined ? [] : Array.isArray(q.property) ? q.property : [q.property]);

  app.get<{ Querystring: ListQ }>("/flowSpecs", {
    schema: { tags, summary: "Flow specs (segmentd's one: profile-based destinations); property=name==… or id==… filters", headers: authHeaders, querystring: { type: "object", properties: { property } }, response: { 200: itemsOf, ...commonErrorResponses } },
  }, async (request) => ({ items: flowSpecs().filter((f) => matchesProperties(f, props(request.query))) }));

  app.get<{ Params: { id: string } }>("/flowSpecs/:id", {
    schema: { tags, summary: "One flow spec", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => {
    const spec = flowSpecs().find((f) => f.id === request.params.id);
    if (spec === undefined) throw new ApiError(404, "SEGMENTD-DESTINATION-404", `Flow spec with id '${request.params.id}' was not found`);
    return { items: [spec] };
  });

  app.post<{ Body: Record<string, unknown> }>("/sourceConnections", {
    bodyLimit: ACTIVATION_BODY_LIMIT,
    schema: {
      tags, summary: "Create a source connection to the Profile store (a flow's sourceConnectionIds)",
      description: `Body: {name, description?, connectionSpec: {id: "8a9c3494-9708-43d7-ae3f-cda01e5030e1", version: "1.0"}}. Answers 201 {id, etag}.`,
      headers: authHeaders, body: { type: "object", maxProperties: 10, additionalProperties: true }, response: { 201: created, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    reply.code(201);
    return o.sources.create(tenant(request), request.body ?? {}, actorOf(request));
  });

  app.get<{ Querystring: ListQ }>("/sourceConnections", {
    schema: {
      tags, summary: "List source connections", headers: authHeaders,
      querystring: { type: "object", properties: { limit: { type: "integer", minimum: 1, maximum: 1_000_000 }, start: { type: "integer", minimum: 0, maximum: 1_000_000 } } },
      response: { 200: itemsOf, ...commonErrorResponses },
    },
  }, async (request) => {
    const p = { offset: request.query.start ?? 0, limit: Math.min(request.query.limit ?? MAX_LIMIT, MAX_LIMIT) };
    const r = await o.sources.list(tenant(request), p);
    const next = p.offset + r.items.length;
    return {
      items: r.items,
      _page: { count: r.items.length, total: r.total, start: p.offset, limit: p.limit },
      _links: next < r.total ? { next: { href: `${FLOWSERVICE_PREFIX}/sourceConnections?start=${next}&limit=${p.limit}` } } : {},
    };
  });

  app.get<{ Params: { id: string } }>("/sourceConnections/:id", {
    schema: { tags, summary: "One source connection", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => ({ items: [await o.sources.get(tenant(request), request.params.id)] }));

  app.delete<{ Params: { id: string } }>("/sourceConnections/:id", {
    schema: { tags, summary: "Delete a source connection no flow uses", headers: authHeaders, params: idParams, response: { 204: { type: "null" }, ...errors, 409: { ...commonErrorResponses[400], description: "Used by a flow (SEGMENTD-DESTINATION-IN-USE-409)" } } },
  }, async (request, reply) => {
    await o.sources.delete(tenant(request), request.params.id);
    reply.code(204);
    return null;
  });
}
