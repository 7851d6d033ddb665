/**
 * Audiences API (segmentation-api.md §3.1): /audiences, /audiences/{id},
 * /audiences/bulk-get. Create, PUT and PATCH answer 201 (Adobe's OpenAPI file;
 * the guides show 200), DELETE 204, bulk-get 207.
 */
import type { FastifyInstance } from "fastify";
import type { AudienceBody, AudienceService } from "../../services/audiences.js";
import { MAX_EXTERNAL_AUDIENCES } from "../../services/audiences.js";
import { AUDIENCE_SORT_FIELDS, parseAudienceSort, parseProperty } from "../../services/audience-view.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import type { PatchOperation } from "../../services/json-patch.js";
import { registerTenantHooks, type AuthDeps } from "../auth.js";
import { bulkItemError } from "../errors.js";
import { actorOf, tenantOf } from "../request-context.js";
import {
  authHeaders, bulkGetBodySchema, bulkItemErrorSchema, commonErrorResponses, evaluationInfoInputSchema, expressionSchema, idParam, jsonPatchSchema,
} from "../schemas.js";
import { MAX_QUERY_INTEGER, limitParam, offsetParam } from "./paging-params.js";
import { MAX_BULK_IDS } from "./definitions.js";

export const AUDIENCES_PATH = "/data/core/ups/audiences";
const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

export interface AudienceRoutesOptions extends AuthDeps {
  audiences: AudienceService;
}

interface ListQuery {
  start?: number;
  limit?: number;
  sort?: string;
  property?: string | string[];
  name?: string;
  description?: string;
  entityType?: string;
}

const text = (max: number) => ({ type: "string", maxLength: max }) as const;
const labelsSchema = { type: "array", maxItems: 100, items: { type: "string", minLength: 1, maxLength: 256 } } as const;
const stringMap = { type: "object", maxProperties: 20, additionalProperties: { type: "string", maxLength: 1024 } } as const;

/** Create and PUT bodies: Platform (expression) or external (audienceId, namespace, originName) fields. */
const audienceBodySchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 1024 },
    description: text(8192),
    type: text(64),
    expression: { type: "object", properties: { type: text(16), format: text(16), value: { type: "string" } }, required: ["type", "format", "value"] },
    schema: { type: "object", properties: { name: { type: "string", minLength: 1, maxLength: 256 } }, required: ["name"] },
    labels: labelsSchema,
    lifecycleState: text(64),
    profileInstanceId: text(256),
    mergePolicyId: { type: "string", minLength: 1, maxLength: 256 },
    evaluationInfo: evaluationInfoInputSchema,
    dataGovernancePolicy: { type: "object", properties: { excludeOptOut: { type: "boolean" } } },
    // aepp's external audience sample sends it as a string of digits.
    ttlInDays: { anyOf: [{ type: "integer", minimum: 1, maximum: 3650 }, { type: "string", pattern: "^[1-9][0-9]{0,3}$" }] },
    audienceId: { type: "string", minLength: 1, maxLength: 256 },
    namespace: { type: "string", minLength: 1, maxLength: 256 },
    originName: text(64),
    datasetId: { type: "string", minLength: 1, maxLength: 256 },
    sourceId: text(256),
    linkedAudienceRef: stringMap,
    audienceMeta: { type: "object", maxProperties: 50 },
  },
} as const;

/** Both kinds of audience: the common fields, and whatever else the kind carries. */
const audienceSchema = {
  type: "object",
  additionalProperties: true,
  properties: {
    id: { type: "string" },
    audienceId: { type: "string" },
    name: { type: "string" },
    namespace: { type: "string" },
    type: { type: "string", enum: ["SegmentDefinition", "ExternalSegment"] },
    originName: { type: "string" },
    lifecycleState: { type: "string" },
    labels: { type: "array", items: { type: "string" } },
    expression: expressionSchema,
    creationTime: { type: "integer" },
    updateTime: { type: "integer" },
  },
  required: ["id", "audienceId", "name", "namespace", "type", "originName", "lifecycleState", "labels", "creationTime", "updateTime"],
} as const;

const notFoundResponse = { ...commonErrorResponses[400], description: "No audience with this id in the sandbox (UPAPI-113430-404)" };

export async function audienceRoutes(app: FastifyInstance, opts: AudienceRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.audiences;
  const tags = ["Audiences"];

  app.get<{ Querystring: ListQuery }>("/audiences", {
    schema: {
      tags,
      summary: "List audiences: every segment definition (Platform audience) and every external audience of the sandbox",
      headers: authHeaders,
      querystring: {
        type: "object",
        properties: {
          start: offsetParam("Offset of the first audience returned"),
          limit: limitParam(MAX_QUERY_INTEGER, `Page size; at most ${MAX_LIMIT} (larger values are clamped). Default ${DEFAULT_LIMIT}`),
          sort: { type: "string", maxLength: 100, description: `field:asc|desc; fields: ${AUDIENCE_SORT_FIELDS.join(", ")}. Default creationTime:desc` },
          property: {
            anyOf: [{ type: "string", maxLength: 1024 }, { type: "array", maxItems: 20, items: { type: "string", maxLength: 1024 } }],
            description: "attribute==value, exact match (repeatable; all must match)",
          },
          name: { type: "string", maxLength: 1024, description: "case-insensitive substring of the name" },
          description: { type: "string", maxLength: 1024, description: "case-insensitive substring of the description" },
          entityType: { type: "string", maxLength: 256, description: "_xdm.context.profile (the only entity segmentd segments)" },
        },
      },
      response: {
        200: {
          type: "object",
          properties: {
            children: { type: "array", items: audienceSchema },
            _page: {
              type: "object",
              properties: {
                totalCount: { type: "integer" }, totalPages: { type: "integer" }, sortField: { type: "string" }, sort: { type: "string" },
                pageSize: { type: "integer" }, limit: { type: "integer" }, start: { type: "integer" }, next: { type: "integer" },
              },
              required: ["totalCount", "totalPages", "sortField", "sort", "pageSize", "limit", "start"],
            },
            _links: { type: "object", properties: { next: { type: "object", properties: { href: { type: "string" } } } } },
          },
          required: ["children", "_page", "_links"],
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const q = request.query;
    const limit = Math.min(q.limit ?? DEFAULT_LIMIT, MAX_LIMIT);
    const start = q.start ?? 0;
    const sort = parseAudienceSort(q.sort);
    const properties = (q.property === undefined ? [] : Array.isArray(q.property) ? q.property : [q.property]).map(parseProperty);
    const page = await svc.list(tenantOf(request), {
      start, limit, sort, properties,
      ...(q.name !== undefined ? { name: q.name } : {}),
      ...(q.description !== undefined ? { description: q.description } : {}),
      ...(q.entityType !== undefined ? { entityType: q.entityType } : {}),
    });
    const next = start + page.items.length;
    const more = next < page.total;
    const params = new URLSearchParams({ start: String(next), limit: String(limit) });
    for (const [k, v] of Object.entries({ sort: q.sort, name: q.name, description: q.description, entityType: q.entityType })) if (v !== undefined) params.set(k, v);
    for (const p of properties) params.append("property", `${p.attr}==${p.value}`);
    params.set("totalCount", String(page.total));
    return {
      children: page.items,
      _page: {
        totalCount: page.total, totalPages: Math.ceil(page.total / limit), sortField: sort.field, sort: sort.direction,
        pageSize: page.items.length, limit, start, ...(more ? { next } : {}),
      },
      _links: more ? { next: { href: `@/audiences?${params.toString()}` } } : {},
    };
  });

  app.post<{ Body: AudienceBody }>("/audiences", {
    schema: {
      tags,
      summary: "Create an audience",
      description: `A Platform audience (a PQL expression; it is a segment definition too) or an external one (type ExternalSegment or an external originName; at most ${MAX_EXTERNAL_AUDIENCES} per sandbox). External audiences are published on creation; their members are set by ingestion.`,
      headers: authHeaders,
      body: audienceBodySchema,
      response: { 201: audienceSchema, ...commonErrorResponses, 409: { ...commonErrorResponses[400], description: "namespace and audienceId already used in the sandbox" } },
    },
  }, async (request, reply) => {
    const a = await svc.create(tenantOf(request), request.body, actorOf(request));
    reply.code(201);
    return a;
  });

  app.post<{ Body: { ids: { id: string }[] } }>("/audiences/bulk-get", {
    config: { jsonWhateverType: true },
    schema: {
      tags,
      summary: "Retrieve several audiences",
      description: `1 to ${MAX_BULK_IDS} ids. Unknown ids appear as per-id 404 errors; when none is found the answer is 404 UPAPI-113000-404.`,
      headers: authHeaders,
      body: bulkGetBodySchema,
      response: {
        207: { type: "object", properties: { results: { type: "object", additionalProperties: { anyOf: [audienceSchema, bulkItemErrorSchema] } } }, required: ["results"] },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "None of the ids exist in this sandbox" },
      },
    },
  }, async (request, reply) => {
    const ids = request.body.ids.map((x) => x.id);
    if (ids.length < 1 || ids.length > MAX_BULK_IDS) {
      throw new ApiError(400, ErrorCodes.bulkIdCount, `The number of requested IDs is invalid. Cannot be 0 or exceed ${MAX_BULK_IDS}.`);
    }
    const found = await svc.bulkGet(tenantOf(request), ids);
    if (found.size === 0) throw new ApiError(404, ErrorCodes.bulkNoneFound, `The entity ${[...new Set(ids)].join(",")} is not found.`);
    const results: Record<string, unknown> = {};
    for (const id of ids) results[id] = found.get(id) ?? bulkItemError(request.id);
    reply.code(207);
    return { results };
  });

  const params = idParam("AUDIENCE_ID");

  app.get<{ Params: { AUDIENCE_ID: string } }>("/audiences/:AUDIENCE_ID", {
    schema: { tags, summary: "Retrieve an audience by its id (not its audienceId)", headers: authHeaders, params, response: { 200: audienceSchema, ...commonErrorResponses, 404: notFoundResponse } },
  }, async (request) => svc.get(tenantOf(request), request.params.AUDIENCE_ID));

  app.put<{ Params: { AUDIENCE_ID: string }; Body: AudienceBody }>("/audiences/:AUDIENCE_ID", {
    schema: {
      tags,
      summary: "Replace an audience",
      description: "The body replaces the audience (fields left out are removed; a Platform audience keeps its evaluation methods and merge policy unless given). namespace, audienceId, type and originName cannot change.",
      headers: authHeaders,
      params,
      body: audienceBodySchema,
      response: { 201: audienceSchema, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    const a = await svc.replace(tenantOf(request), request.params.AUDIENCE_ID, request.body, actorOf(request), "put");
    reply.code(201);
    return a;
  });

  app.patch<{ Params: { AUDIENCE_ID: string }; Body: PatchOperation[] | PatchOperation }>("/audiences/:AUDIENCE_ID", {
    schema: {
      tags,
      summary: "Update an audience with JSON Patch operations",
      description: "Adobe's clients send op add, e.g. [{\"op\":\"add\",\"path\":\"/expression\",\"value\":{...}}]; every RFC 6902 operation works. The result is checked like a PUT.",
      headers: authHeaders,
      params,
      body: jsonPatchSchema,
      response: { 201: audienceSchema, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    const ops = Array.isArray(request.body) ? request.body : [request.body];
    const a = await svc.patch(tenantOf(request), request.params.AUDIENCE_ID, ops, actorOf(request));
    reply.code(201);
    return a;
  });

  app.delete<{ Params: { AUDIENCE_ID: string } }>("/audiences/:AUDIENCE_ID", {
    schema: {
      tags,
      summary: "Delete an audience",
      description: "Refused (400, UPAPI-113631-403) while other audiences reference it through inSegment. Deleting a Platform audience deletes its segment definition.",
      headers: authHeaders,
      params,
      response: { 204: { type: "null", description: "Deleted" }, ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    await svc.delete(tenantOf(request), request.params.AUDIENCE_ID);
    reply.code(204);
    return null;
  });
}
