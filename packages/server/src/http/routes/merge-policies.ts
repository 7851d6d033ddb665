/**
 * Merge policies API (segmentation-api.md §15, profile.yaml):
 * /config/mergePolicies list/create/get/PATCH (JSON Patch)/PUT/DELETE/bulk-get.
 */
import type { FastifyInstance } from "fastify";
import { ApiError, ErrorCodes, badRequest } from "../../services/errors.js";
import type { MergePolicyInput, MergePolicyService } from "../../services/merge-policies.js";
import type { PatchOperation } from "../../services/json-patch.js";
import { MERGE_POLICY_ORDER_FIELDS, type MergePolicyOrderField } from "../../stores/types.js";
import { registerTenantHooks, type AuthDeps } from "../auth.js";
import { bulkItemError } from "../errors.js";
import { tenantOf } from "../request-context.js";
import {
  authHeaders,
  bulkGetBodySchema,
  bulkItemErrorSchema,
  commonErrorResponses,
  idParam,
  jsonPatchSchema,
  mergePolicyInputSchema,
  mergePolicySchema,
} from "../schemas.js";
import { MAX_QUERY_INT32, MAX_QUERY_INTEGER, limitParam } from "./paging-params.js";

export const MERGE_POLICIES_PATH = "/data/core/ups/config/mergePolicies";
export const MERGE_POLICY_DEFAULT_LIMIT = 20;
export const MERGE_POLICY_MAX_LIMIT = 100;

export interface MergePolicyRoutesOptions extends AuthDeps {
  mergePolicies: MergePolicyService;
}

interface ListQuery {
  start?: string;
  limit?: number;
  orderBy?: string;
  orderby?: string;
  default?: boolean;
  isActiveOnEdge?: boolean;
  "schema.name"?: string;
  "identityGraph.type"?: string;
  "attributeMerge.type"?: string;
  version?: number;
}

function parseOrder(text: string | undefined): { field: MergePolicyOrderField; direction: "asc" | "desc" } {
  if (text === undefined || text === "") return { field: "name", direction: "asc" };
  const m = /^([+-]?)([A-Za-z]+)$/.exec(text.trim());
  const field = m?.[2] as MergePolicyOrderField | undefined;
  if (!m || !field || !(MERGE_POLICY_ORDER_FIELDS as readonly string[]).includes(field)) {
    throw badRequest(`Invalid orderBy "${text.slice(0, 100)}": use name, +name or -name (also updateEpoch, id)`);
  }
  return { field, direction: m[1] === "-" ? "desc" : "asc" };
}

const listQuerySchema = {
  type: "object",
  properties: {
    start: { type: "string", pattern: "^[0-9]{1,15}$", description: "Offset cursor (as returned in _links.next)" },
    limit: limitParam(MAX_QUERY_INTEGER, `Page size, default ${MERGE_POLICY_DEFAULT_LIMIT}, at most ${MERGE_POLICY_MAX_LIMIT} (larger values are clamped)`),
    orderBy: { type: "string", description: "name, +name or -name (also updateEpoch, id)" },
    orderby: { type: "string", description: "alias of orderBy (the spelling in Adobe's OpenAPI file)" },
    default: { type: "boolean" },
    isActiveOnEdge: { type: "boolean" },
    "schema.name": { type: "string" },
    "identityGraph.type": { type: "string", enum: ["none", "pdg"] },
    "attributeMerge.type": { type: "string", enum: ["timestampOrdered", "dataSetPrecedence"] },
    // Compared with an INTEGER column: PostgreSQL refuses a parameter beyond 32 bits.
    version: { type: "integer", minimum: 0, maximum: MAX_QUERY_INT32 },
  },
} as const;

export async function mergePolicyRoutes(app: FastifyInstance, opts: MergePolicyRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.mergePolicies;
  const tags = ["Merge policies"];
  const notFoundResponse = { 404: { ...commonErrorResponses[400], description: "Not found in this sandbox" } };

  app.get<{ Querystring: ListQuery }>("/config/mergePolicies", {
    schema: {
      tags,
      summary: "List merge policies",
      headers: authHeaders,
      querystring: listQuerySchema,
      response: {
        200: {
          type: "object",
          properties: {
            _page: {
              type: "object",
              properties: {
                totalCount: { type: "integer" },
                pageSize: { type: "integer" },
                count: { type: "integer", description: "merge policies in this page" },
                next: { type: "string", description: "start cursor of the next page; absent on the last page" },
              },
              required: ["totalCount", "pageSize", "count"],
            },
            children: { type: "array", items: mergePolicySchema },
            _links: { type: "object", properties: { next: { type: "object", properties: { href: { type: "string" } }, required: ["href"] } } },
          },
          required: ["_page", "children", "_links"],
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const q = request.query;
    const limit = Math.min(q.limit ?? MERGE_POLICY_DEFAULT_LIMIT, MERGE_POLICY_MAX_LIMIT);
    const offset = Number(q.start ?? "0");
    const orderText = q.orderBy ?? q.orderby;
    const order = parseOrder(orderText);
    const page = await svc.list(tenantOf(request), {
      filters: {
        default: q.default,
        isActiveOnEdge: q.isActiveOnEdge,
        schemaName: q["schema.name"],
        identityGraphType: q["identityGraph.type"],
        attributeMergeType: q["attributeMerge.type"],
        version: q.version,
      },
      order,
      offset,
      limit,
    });
    const nextStart = offset + page.items.length;
    const hasNext = nextStart < page.total;
    const params = new URLSearchParams({ start: String(nextStart), orderBy: orderText ?? "", limit: String(limit) });
    return {
      _page: { totalCount: page.total, pageSize: page.items.length, count: page.items.length, ...(hasNext ? { next: String(nextStart) } : {}) },
      children: page.items,
      _links: { next: { href: hasNext ? `@/mergePolicies?${params.toString()}` : "" } },
    };
  });

  app.post<{ Body: MergePolicyInput }>("/config/mergePolicies", {
    schema: {
      tags,
      summary: "Create a merge policy",
      description: "default: true unsets the previous default of the schema class. At most one policy per sandbox may be isActiveOnEdge.",
      headers: authHeaders,
      body: mergePolicyInputSchema,
      response: { 200: mergePolicySchema, ...commonErrorResponses },
    },
  }, async (request) => svc.create(tenantOf(request), request.body));

  app.get<{ Params: { mergePolicyId: string } }>("/config/mergePolicies/:mergePolicyId", {
    schema: {
      tags,
      summary: "Retrieve a merge policy",
      headers: authHeaders,
      params: idParam("mergePolicyId"),
      response: { 200: mergePolicySchema, ...commonErrorResponses, ...notFoundResponse },
    },
  }, async (request) => svc.get(tenantOf(request), request.params.mergePolicyId));

  app.put<{ Params: { mergePolicyId: string }; Body: MergePolicyInput }>("/config/mergePolicies/:mergePolicyId", {
    schema: {
      tags,
      summary: "Overwrite a merge policy",
      headers: authHeaders,
      params: idParam("mergePolicyId"),
      body: mergePolicyInputSchema,
      response: { 200: mergePolicySchema, ...commonErrorResponses, ...notFoundResponse },
    },
  }, async (request) => svc.replace(tenantOf(request), request.params.mergePolicyId, request.body));

  app.patch<{ Params: { mergePolicyId: string }; Body: PatchOperation[] | PatchOperation }>("/config/mergePolicies/:mergePolicyId", {
    schema: {
      tags,
      summary: "Update a merge policy with JSON Patch (RFC 6902)",
      description: "Operations add, remove, replace, move, copy, test. Paths: /name, /identityGraph/type, /attributeMerge/type, /attributeMerge/order, /schema/name, /default, /isActiveOnEdge; Adobe's dotted form (/identityGraph.type) is accepted too.",
      headers: authHeaders,
      params: idParam("mergePolicyId"),
      body: jsonPatchSchema,
      response: { 200: mergePolicySchema, ...commonErrorResponses, ...notFoundResponse },
    },
  }, async (request) => {
    const body = request.body;
    return svc.patch(tenantOf(request), request.params.mergePolicyId, Array.isArray(body) ? body : [body]);
  });

  app.delete<{ Params: { mergePolicyId: string } }>("/config/mergePolicies/:mergePolicyId", {
    schema: {
      tags,
      summary: "Delete a merge policy",
      description: "Refused while the policy is active on edge or used by segment definitions. 200 with an empty body.",
      headers: authHeaders,
      params: idParam("mergePolicyId"),
      response: { 200: { description: "Deleted (empty body)", type: "null" }, ...commonErrorResponses, ...notFoundResponse },
    },
  }, async (request, reply) => {
    await svc.delete(tenantOf(request), request.params.mergePolicyId);
    reply.code(200).removeHeader("content-type");
    return reply.send();
  });

  app.post<{ Body: { ids: { id: string }[] } }>("/config/mergePolicies/bulk-get", {
    schema: {
      tags,
      summary: "Retrieve several merge policies",
      headers: authHeaders,
      body: bulkGetBodySchema,
      response: {
        207: {
          type: "object",
          properties: { results: { type: "object", additionalProperties: { anyOf: [mergePolicySchema, bulkItemErrorSchema] } } },
          required: ["results"],
        },
        ...commonErrorResponses,
        ...notFoundResponse,
      },
    },
  }, async (request, reply) => {
    const ids = request.body.ids.map((x) => x.id);
    if (ids.length < 1 || ids.length > 100) {
      throw new ApiError(400, ErrorCodes.bulkIdCount, `The number of ids must be between 1 and 100 (got ${ids.length})`);
    }
    const { found, missing } = await svc.bulkGet(tenantOf(request), ids);
    if (found.size === 0) throw new ApiError(404, ErrorCodes.bulkNoneFound, `No merge policies found for ids: ${missing.join(",")}`);
    const results: Record<string, unknown> = {};
    for (const id of ids) results[id] = found.get(id) ?? bulkItemError(request.id);
    reply.code(207);
    return { results };
  });
}
