/**
 * Segment definitions API (segmentation-api.md §2): /segment/definitions,
 * bulk-get, conversion and the eligibility check. Handlers only translate
 * HTTP to DefinitionService calls and back.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { DefinitionService, DefinitionInput } from "../../services/definitions.js";
import { ApiError, ErrorCodes, badRequest } from "../../services/errors.js";
import { PROFILE_SCHEMA_CLASS } from "../../services/merge-policies.js";
import { DEFINITION_SORT_FIELDS, type DefinitionListQuery, type DefinitionSortField, type SortKey } from "../../stores/types.js";
import { registerTenantHooks, type AuthDeps } from "../auth.js";
import { bulkItemError } from "../errors.js";
import { actorOf, tenantOf } from "../request-context.js";
import {
  authHeaders,
  bulkGetBodySchema,
  bulkItemErrorSchema,
  classificationSchema,
  commonErrorResponses,
  definitionInputSchema,
  expressionSchema,
  idParam,
  sandboxSchema,
  segmentDefinitionSchema,
} from "../schemas.js";
import { MAX_QUERY_INTEGER, limitParam, offsetParam, pageParam } from "./paging-params.js";

export const DEFINITIONS_PATH = "/data/core/ups/segment/definitions";
/** AEP's observed page size maximum (segmentation-api.md §14); larger `limit`s are clamped. */
export const MAX_PAGE_LIMIT = 100;
export const MAX_BULK_IDS = 100;

export interface DefinitionRoutesOptions extends AuthDeps {
  definitions: DefinitionService;
}

interface ListQuery {
  start?: number;
  limit?: number;
  page?: number;
  sort?: string;
  "evaluationInfo.batch.enabled"?: boolean;
  "evaluationInfo.continuous.enabled"?: boolean;
  "evaluationInfo.synchronous.enabled"?: boolean;
}

export function parseSort(text: string | undefined): SortKey<DefinitionSortField>[] {
  if (text === undefined || text.trim() === "") return [{ field: "creationTime", direction: "desc" }];
  const keys: SortKey<DefinitionSortField>[] = [];
  for (const part of text.split(",")) {
    const m = /^\s*([A-Za-z]+)\s*(?::\s*(asc|desc)\s*)?$/i.exec(part);
    const field = m?.[1] as DefinitionSortField | undefined;
    if (!m || !field || !(DEFINITION_SORT_FIELDS as readonly string[]).includes(field)) {
      throw badRequest(`Invalid sort "${part.trim().slice(0, 100)}": use field:asc or field:desc, with field one of ${DEFINITION_SORT_FIELDS.join(", ")}`);
    }
    if (keys.some((k) => k.field === field)) throw badRequest(`Invalid sort: field "${field}" appears twice`);
    keys.push({ field, direction: (m[2]?.toLowerCase() ?? "asc") as "asc" | "desc" });
  }
  return keys;
}

function location(request: FastifyRequest, id: string): string {
  return `${request.protocol}://${request.host}${DEFINITIONS_PATH}/${encodeURIComponent(id)}`;
}

const listQuerySchema = {
  type: "object",
  properties: {
    start: offsetParam("Offset of the first definition returned (wins over page)"),
    limit: limitParam(MAX_QUERY_INTEGER, `Page size; at most ${MAX_PAGE_LIMIT} (larger values are clamped). Default ${MAX_PAGE_LIMIT}`),
    page: pageParam("0-based page number (offset = page × limit) when start is absent"),
    sort: { type: "string", maxLength: 200, description: `field:asc|desc[,field:asc|desc...]; fields: ${DEFINITION_SORT_FIELDS.join(", ")}. Default creationTime:desc` },
    "evaluationInfo.batch.enabled": { type: "boolean" },
    "evaluationInfo.continuous.enabled": { type: "boolean" },
    "evaluationInfo.synchronous.enabled": { type: "boolean" },
  },
} as const;

const listResponseSchema = {
  type: "object",
  properties: {
    segments: { type: "array", items: segmentDefinitionSchema },
    page: {
      type: "object",
      properties: {
        totalCount: { type: "integer" },
        totalPages: { type: "integer" },
        sortField: { type: "string" },
        sort: { type: "string" },
        pageSize: { type: "integer", description: "definitions in this page" },
        limit: { type: "integer", description: "the effective page size limit" },
        start: { type: "integer", description: "segmentd extension: offset of the first definition of this page" },
        pageNumber: { type: "integer", description: "segmentd extension: 0-based page number (start / limit)" },
      },
      required: ["totalCount", "totalPages", "sortField", "sort", "pageSize", "limit", "start", "pageNumber"],
    },
    link: { type: "object", properties: { next: { type: "string" } } },
  },
  required: ["segments", "page", "link"],
} as const;

const expressionInputSchema = {
  type: "object",
  properties: { type: { type: "string" }, format: { type: "string" }, value: { type: "string" } },
  required: ["type", "format", "value"],
} as const;

export async function definitionRoutes(app: FastifyInstance, opts: DefinitionRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.definitions;
  const tags = ["Segment definitions"];

  app.get<{ Querystring: ListQuery }>("/segment/definitions", {
    schema: {
      tags,
      summary: "List segment definitions",
      headers: authHeaders,
      querystring: listQuerySchema,
      response: { 200: listResponseSchema, ...commonErrorResponses },
    },
  }, async (request) => {
    const q = request.query;
    const limit = Math.min(q.limit ?? MAX_PAGE_LIMIT, MAX_PAGE_LIMIT);
    // The schema bounds page and limit, so the product is an exact integer.
    const offset = q.start ?? (q.page ?? 0) * limit;
    const sort = parseSort(q.sort);
    const query: DefinitionListQuery = {
      filters: {
        batch: q["evaluationInfo.batch.enabled"],
        continuous: q["evaluationInfo.continuous.enabled"],
        synchronous: q["evaluationInfo.synchronous.enabled"],
      },
      sort,
      offset,
      limit,
    };
    const page = await svc.list(tenantOf(request), query);
    const link: { next?: string } = {};
    if (offset + page.items.length < page.total) {
      const params = new URLSearchParams();
      params.set("start", String(offset + page.items.length));
      params.set("limit", String(limit));
      if (q.sort !== undefined) params.set("sort", sort.map((k) => `${k.field}:${k.direction}`).join(","));
      for (const key of ["evaluationInfo.batch.enabled", "evaluationInfo.continuous.enabled", "evaluationInfo.synchronous.enabled"] as const) {
        if (q[key] !== undefined) params.set(key, String(q[key]));
      }
      link.next = `${DEFINITIONS_PATH}?${params.toString()}`;
    }
    return {
      segments: page.items,
      page: {
        totalCount: page.total,
        totalPages: Math.ceil(page.total / limit),
        sortField: sort[0]!.field,
        sort: sort[0]!.direction,
        pageSize: page.items.length,
        limit,
        start: offset,
        pageNumber: Math.floor(offset / limit),
      },
      link,
    };
  });

  app.post<{ Body: DefinitionInput }>("/segment/definitions", {
    schema: {
      tags,
      summary: "Create a segment definition",
      description: "pql/text and pql/json are both accepted; the expression is returned as submitted. A missing evaluationInfo means batch only.",
      headers: authHeaders,
      body: definitionInputSchema,
      response: {
        200: { ...segmentDefinitionSchema, description: "Created; header X-Location carries the definition's URL" },
        ...commonErrorResponses,
        422: { ...commonErrorResponses[400], description: "A definition with this name already exists in the sandbox" },
      },
    },
  }, async (request, reply) => {
    const actor = actorOf(request);
    const def = await svc.create(tenantOf(request), request.body, actor === undefined ? {} : { createdBy: actor });
    reply.header("X-Location", location(request, def.id));
    return def;
  });

  app.get<{ Params: { SEGMENT_ID: string } }>("/segment/definitions/:SEGMENT_ID", {
    schema: {
      tags,
      summary: "Retrieve a segment definition",
      headers: authHeaders,
      params: idParam("SEGMENT_ID"),
      response: { 200: segmentDefinitionSchema, ...commonErrorResponses, 404: { ...commonErrorResponses[400], description: "Not found in this sandbox" } },
    },
  }, async (request) => svc.get(tenantOf(request), request.params.SEGMENT_ID));

  app.patch<{ Params: { SEGMENT_ID: string }; Body: DefinitionInput }>("/segment/definitions/:SEGMENT_ID", {
    schema: {
      tags,
      summary: "Overwrite a segment definition",
      description: "AEP semantics: the body is the whole definition. id, imsOrgId, sandbox and creationTime cannot change; updateTime/updateEpoch are set by the server.",
      headers: authHeaders,
      params: idParam("SEGMENT_ID"),
      body: definitionInputSchema,
      response: {
        200: segmentDefinitionSchema,
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "Not found in this sandbox" },
        422: { ...commonErrorResponses[400], description: "Another definition has this name" },
      },
    },
  }, async (request, reply) => {
    const actor = actorOf(request);
    const def = await svc.overwrite(tenantOf(request), request.params.SEGMENT_ID, request.body, actor === undefined ? {} : { lastModifiedBy: actor });
    reply.header("X-Location", location(request, def.id));
    return def;
  });

  app.delete<{ Params: { SEGMENT_ID: string } }>("/segment/definitions/:SEGMENT_ID", {
    schema: {
      tags,
      summary: "Delete a segment definition",
      description: "Refused (400, UPAPI-113631-403) while other definitions reference it through inSegment; the dependents are named.",
      headers: authHeaders,
      params: idParam("SEGMENT_ID"),
      response: {
        200: { type: "object", properties: { status: { type: "boolean" }, message: { type: "string" } }, required: ["status", "message"] },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "Not found in this sandbox" },
      },
    },
  }, async (request) => svc.delete(tenantOf(request), request.params.SEGMENT_ID));

  app.post<{ Body: { ids: { id: string }[] } }>("/segment/definitions/bulk-get", {
    config: { jsonWhateverType: true },
    schema: {
      tags,
      summary: "Retrieve several segment definitions",
      description: `1 to ${MAX_BULK_IDS} ids. Unknown ids appear as per-id 404 errors; when none is found the answer is 404 UPAPI-113000-404.`,
      headers: authHeaders,
      body: bulkGetBodySchema,
      response: {
        207: {
          type: "object",
          properties: { results: { type: "object", additionalProperties: { anyOf: [segmentDefinitionSchema, bulkItemErrorSchema] } } },
          required: ["results"],
        },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "None of the ids exist in this sandbox" },
      },
    },
  }, async (request, reply) => {
    const ids = request.body.ids.map((x) => x.id);
    if (ids.length < 1 || ids.length > MAX_BULK_IDS) {
      throw new ApiError(400, ErrorCodes.bulkIdCount, `The number of ids must be between 1 and ${MAX_BULK_IDS} (got ${ids.length})`);
    }
    const { found, missing } = await svc.bulkGet(tenantOf(request), ids);
    if (found.size === 0) {
      throw new ApiError(404, ErrorCodes.bulkNoneFound, `No segment definitions found for ids: ${missing.join(",")}`);
    }
    const results: Record<string, unknown> = {};
    for (const id of ids) results[id] = found.get(id) ?? bulkItemError(request.id);
    reply.code(207);
    return { results };
  });

  app.post<{ Body: DefinitionInput }>("/segment/conversion", {
    config: { jsonWhateverType: true },
    schema: {
      tags,
      summary: "Convert a definition's expression between pql/text and pql/json",
      description: "Nothing is stored. pql/text input returns pql/json, pql/json input returns canonical pql/text.",
      headers: authHeaders,
      body: {
        type: "object",
        properties: { ...definitionInputSchema.properties, expression: expressionInputSchema },
        required: ["expression"],
      },
      response: {
        200: {
          type: "object",
          properties: {
            name: { type: "string" },
            description: { type: "string" },
            schema: { type: "object", properties: { name: { type: "string" } } },
            profileInstanceId: { type: "string" },
            payloadSchema: { type: "string" },
            ttlInDays: { type: "integer" },
            expression: expressionSchema,
            imsOrgId: { type: "string" },
            sandbox: sandboxSchema,
          },
          required: ["expression", "imsOrgId", "sandbox"],
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const ctx = tenantOf(request);
    const b = request.body;
    const expression = svc.convert(ctx, b.expression);
    return {
      ...(b.name !== undefined ? { name: b.name } : {}),
      ...(b.description !== undefined ? { description: b.description } : {}),
      ...(b.schema !== undefined ? { schema: b.schema } : {}),
      profileInstanceId: b.profileInstanceId ?? "ups",
      ...(b.payloadSchema !== undefined ? { payloadSchema: b.payloadSchema } : {}),
      ...(b.ttlInDays !== undefined ? { ttlInDays: b.ttlInDays } : {}),
      expression,
      imsOrgId: ctx.orgId,
      sandbox: ctx.sandbox,
    };
  });

  app.post<{ Body: { expression: { type: string; format: string; value: string }; mergePolicyId?: string; schema?: { name: string } } }>("/segment/eligibility", {
    schema: {
      tags,
      summary: "Check an expression: diagnostics, classification and merge-policy verdict (segmentd extension)",
      description: "Nothing is stored. Invalid PQL is answered with 200, valid=false and the diagnostics.",
      headers: authHeaders,
      body: {
        type: "object",
        properties: {
          expression: expressionInputSchema,
          mergePolicyId: { type: "string", minLength: 1 },
          schema: { type: "object", properties: { name: { type: "string", minLength: 1 } }, required: ["name"] },
        },
        required: ["expression"],
      },
      response: {
        200: {
          type: "object",
          properties: {
            valid: { type: "boolean" },
            diagnostics: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  code: { type: "string" }, message: { type: "string" }, line: { type: "integer" }, column: { type: "integer" },
                  endLine: { type: "integer" }, endColumn: { type: "integer" },
                },
                required: ["code", "message"],
              },
            },
            classification: { ...classificationSchema, nullable: true },
            // Every field required that the server always sends: the web client's types are generated from this schema.
            mergePolicy: { type: "object", nullable: true, properties: { id: { type: "string" }, isActiveOnEdge: { type: "boolean" } }, required: ["id", "isActiveOnEdge"] },
            eligible: {
              type: "object",
              properties: { batch: { type: "boolean" }, continuous: { type: "boolean" }, synchronous: { type: "boolean" } },
              required: ["batch", "continuous", "synchronous"],
            },
            reasons: {
              type: "object",
              properties: { continuous: { type: "array", items: { type: "string" } }, synchronous: { type: "array", items: { type: "string" } } },
              required: ["continuous", "synchronous"],
            },
          },
          required: ["valid", "diagnostics", "classification", "mergePolicy", "eligible", "reasons"],
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const b = request.body;
    return svc.eligibility(tenantOf(request), b.expression, b.mergePolicyId, b.schema?.name ?? PROFILE_SCHEMA_CLASS);
  });
}
