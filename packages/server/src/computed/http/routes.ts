/**
 * AEP's computed attributes API (profile.yaml, "Computed attributes"; its API guide):
 * /data/core/ca/attributes list/create, /data/core/ca/attributes/{id} get/PATCH/DELETE.
 * Same headers and tenancy as every other route (org + sandbox); errors in the UPS shape.
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { actorOf, tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam, upsErrorSchema } from "../../http/schemas.js";
import { offsetParam } from "../../http/routes/paging-params.js";
import type { Clock } from "../../platform/clock.js";
import type { ComputedAttributeRepository } from "../../stores/computed-attributes.js";
import { COMPUTED_ATTRIBUTE_STATUSES, DURATION_UNITS, MERGE_FUNCTIONS } from "../../stores/computed-attributes.js";
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from "../limits.js";
import { parseProperty, parseSortBy, parseStatus } from "../list-query.js";
import type { Logger } from "../../platform/logger.js";
import type { DependentsOf } from "../dependents.js";
import { AttributeProcessor, type ProfileEvaluator, type StoredProfileEvents } from "../processing.js";
import { ComputedAttributeService, type CreateBody, type PatchBody } from "../service.js";

export const COMPUTED_PREFIX = "/data/core/ca";
export const ATTRIBUTES_PATH = `${COMPUTED_PREFIX}/attributes`;

declare module "fastify" {
  interface FastifyInstance {
    /** The computed attributes service (set by computedAttributesPlugin). */
    computed?: ComputedAttributeService;
  }
}

const text = (max: number) => ({ type: "string", maxLength: max }) as const;

const expressionSchema = {
  type: "object",
  properties: { type: text(40), format: text(40), value: { type: "string", minLength: 1 } },
  required: ["type", "format", "value"],
  additionalProperties: false,
} as const;

const durationSchema = {
  type: "object",
  properties: { count: { type: "integer" }, unit: text(40) },
  required: ["count", "unit"],
  additionalProperties: false,
} as const;

const createSchema = {
  type: "object",
  properties: {
    name: text(200),
    displayName: text(1000),
    description: text(10_000),
    expression: expressionSchema,
    duration: durationSchema,
    status: text(40),
    keepCurrent: { type: "boolean" },
  },
  required: ["name", "displayName", "description", "expression", "duration", "status"],
  additionalProperties: false,
} as const;

const patchSchema = {
  type: "object",
  properties: {
    displayName: text(1000),
    description: text(10_000),
    expression: expressionSchema,
    duration: durationSchema,
    status: text(40),
    keepCurrent: { type: "boolean" },
  },
  additionalProperties: false,
} as const;

export const computedAttributeSchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    type: { type: "string", enum: ["ComputedAttribute"] },
    name: { type: "string" },
    displayName: { type: "string" },
    description: { type: "string" },
    imsOrgId: { type: "string" },
    sandbox: {
      type: "object",
      properties: { sandboxId: { type: "string" }, sandboxName: { type: "string" }, type: { type: "string" }, isDefault: { type: "boolean" } },
      required: ["sandboxId", "sandboxName", "type", "isDefault"],
    },
    path: { type: "string", description: "_{TENANT_ID}/ComputedAttributes: the field group the value lives in" },
    positionPath: { type: "array", items: { type: "string" } },
    keepCurrent: { type: "boolean" },
    expression: {
      type: "object",
      properties: { type: { type: "string" }, format: { type: "string" }, value: { type: "string" } },
      required: ["type", "format", "value"],
    },
    duration: {
      type: "object",
      properties: { count: { type: "integer" }, unit: { type: "string", enum: [...DURATION_UNITS] } },
      required: ["count", "unit"],
    },
    mergeFunction: { type: "object", properties: { value: { type: "string", enum: [...MERGE_FUNCTIONS] } }, required: ["value"] },
    status: { type: "string", enum: [...COMPUTED_ATTRIBUTE_STATUSES] },
    schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    returnSchema: { type: "object", properties: { "meta:xdmType": { type: "string" } }, required: ["meta:xdmType"] },
    // Items carry a "$ref" key (the union schema's URI): described loosely, since a "$ref" property
    // in a JSON schema reads as a reference to the OpenAPI generator.
    definedOn: { type: "array", items: { type: "object", additionalProperties: { type: "string" }, description: "meta:resourceType, meta:containerId and $ref of the profile union" } },
    createEpoch: { type: "integer", description: "milliseconds since the epoch" },
    updateEpoch: { type: "integer", description: "milliseconds since the epoch" },
    createdBy: { type: "string" },
    lastEvaluationTs: { type: "string", description: "When the last evaluation over the stored profiles finished (ISO 8601, UTC); absent until one has" },
    evaluation: {
      type: "object",
      description: "segmentd: the first evaluation's progress (PROCESSING) and outcome (PROCESSED, FAILED: error)",
      properties: {
        profilesEvaluated: { type: "integer" },
        profilesTotal: { type: "integer" },
        profilesWithValue: { type: "integer", description: "profiles with at least one event contributing to the value" },
        error: { type: "string" },
      },
      required: ["profilesEvaluated", "profilesTotal", "profilesWithValue"],
    },
  },
  required: ["id", "type", "name", "displayName", "description", "imsOrgId", "sandbox", "path", "positionPath", "keepCurrent", "expression", "duration", "mergeFunction", "status", "schema", "returnSchema", "definedOn", "createEpoch", "updateEpoch"],
} as const;

const linkSchema = { type: "object", properties: { href: { type: "string" } }, required: ["href"] } as const;

interface ListQuerystring {
  limit?: number;
  offset?: number;
  sortBy?: string;
  property?: string | string[];
  status?: string;
}

const listQuerySchema = {
  type: "object",
  properties: {
    limit: { type: "integer", minimum: 1, maximum: LIST_MAX_LIMIT, description: `Page size, from 1 to ${LIST_MAX_LIMIT}; default ${LIST_DEFAULT_LIMIT}` },
    offset: offsetParam("Items skipped before the page"),
    sortBy: { type: "string", description: "name, status, updateEpoch or createEpoch; a leading - sorts descending (default -updateEpoch)" },
    property: {
      anyOf: [{ type: "string" }, { type: "array", items: { type: "string" }, maxItems: 20 }],
      description: "Filters, repeatable: name, mergeFunction.value, status with =, !=, =contains(x), =!contains(x); createEpoch, updateEpoch with >= or <=",
    },
    status: { type: "string", description: "draft, new, processing, processed, failed or disabled (any case)" },
  },
  additionalProperties: false,
} as const;

const notFoundResponse = { 404: { ...upsErrorSchema, description: "No computed attribute with this id in this sandbox" } };

async function routes(app: FastifyInstance, opts: AuthDeps & { service: ComputedAttributeService }): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.service;
  const tags = ["Computed attributes"];

  app.get<{ Querystring: ListQuerystring }>("/attributes", {
    schema: {
      tags,
      summary: "List computed attributes",
      headers: authHeaders,
      querystring: listQuerySchema,
      response: {
        200: {
          type: "object",
          properties: {
            _links: { type: "object", properties: { self: linkSchema, next: linkSchema, prev: linkSchema }, required: ["self"] },
            computedAttributes: { type: "array", items: computedAttributeSchema },
            _page: {
              type: "object",
              properties: { offset: { type: "integer" }, limit: { type: "integer" }, count: { type: "integer" }, totalCount: { type: "integer" } },
              required: ["offset", "limit", "count", "totalCount"],
            },
          },
          required: ["_links", "computedAttributes", "_page"],
        },
        ...commonErrorResponses,
      },
    },
  }, async (request) => {
    const q = request.query;
    const limit = q.limit ?? LIST_DEFAULT_LIMIT;
    const offset = q.offset ?? 0;
    const props = q.property === undefined ? [] : Array.isArray(q.property) ? q.property : [q.property];
    const status = parseStatus(q.status);
    const page = await svc.list(tenantOf(request), {
      offset,
      limit,
      sort: parseSortBy(q.sortBy),
      filters: props.map(parseProperty),
      ...(status === undefined ? {} : { status }),
    });
    const href = (o: number): string => {
      const p = new URLSearchParams();
      p.set("offset", String(o));
      p.set("limit", String(limit));
      if (q.sortBy !== undefined) p.set("sortBy", q.sortBy);
      if (q.status !== undefined) p.set("status", q.status);
      for (const x of props) p.append("property", x);
      return `${ATTRIBUTES_PATH}?${p.toString()}`;
    };
    const links: Record<string, { href: string }> = { self: { href: href(offset) } };
    if (offset + page.items.length < page.total) links.next = { href: href(offset + limit) };
    if (offset > 0) links.prev = { href: href(Math.max(0, offset - limit)) };
    return { _links: links, computedAttributes: page.items, _page: { offset, limit, count: page.items.length, totalCount: page.total } };
  });

  app.post<{ Body: CreateBody }>("/attributes", {
    schema: {
      tags,
      summary: "Create a computed attribute",
      description: "status DRAFT or NEW; duration HOURS 1-24, DAYS 1-7, WEEKS 1-4, MONTHS 1-6; the expression is xEvent[condition] with SUM, COUNT, MIN, MAX, MOST_RECENT or LIST.",
      headers: authHeaders,
      body: createSchema,
      response: { 200: computedAttributeSchema, ...commonErrorResponses },
    },
  }, async (request) => svc.create(tenantOf(request), request.body, actorOf(request)));

  app.get<{ Params: { attributeId: string } }>("/attributes/:attributeId", {
    schema: {
      tags,
      summary: "Retrieve a computed attribute",
      headers: authHeaders,
      params: idParam("attributeId"),
      response: { 200: computedAttributeSchema, ...commonErrorResponses, ...notFoundResponse },
    },
  }, async (request) => svc.get(tenantOf(request), request.params.attributeId));

  app.patch<{ Params: { attributeId: string }; Body: PatchBody }>("/attributes/:attributeId", {
    schema: {
      tags,
      summary: "Update a computed attribute",
      description: "DRAFT: any field but the name, and status NEW. NEW: displayName, description, status DISABLED. PROCESSING, PROCESSED, FAILED: status DISABLED. Disabling is refused (422) while saved segment definitions read the attribute.",
      headers: authHeaders,
      params: idParam("attributeId"),
      body: patchSchema,
      response: {
        200: computedAttributeSchema,
        ...commonErrorResponses,
        ...notFoundResponse,
        409: { ...upsErrorSchema, description: "The attribute changed while it was being updated: send the request again" },
        422: { ...upsErrorSchema, description: "Disabling: saved segment definitions read the attribute (named in the message and the items)" },
      },
    },
  }, async (request) => svc.patch(tenantOf(request), request.params.attributeId, request.body));

  app.delete<{ Params: { attributeId: string } }>("/attributes/:attributeId", {
    schema: {
      tags,
      summary: "Delete a computed attribute (DRAFT only)",
      headers: authHeaders,
      params: idParam("attributeId"),
      response: { 202: computedAttributeSchema, ...commonErrorResponses, ...notFoundResponse, 422: { ...upsErrorSchema, description: "Not a DRAFT: disable it instead" } },
    },
  }, async (request, reply) => {
    const out = await svc.delete(tenantOf(request), request.params.attributeId);
    reply.code(202);
    return out;
  });
}

export interface ComputedAttributesPluginOptions extends AuthDeps {
  repo: ComputedAttributeRepository;
  clock: Clock;
  /** What a published attribute's first evaluation reads (the resident snapshot, or the stored profiles); none: it is PROCESSED over no profiles. */
  profiles?: ProfileEvaluator | StoredProfileEvents;
  /** The saved definitions that read an attribute (disabling it is refused while there are any). */
  dependents?: DependentsOf;
  logger?: Pick<Logger, "error">;
}

/**
 * The computed attributes capability: owns its service (decorates the app with `computed`) and
 * serves its routes under /data/core/ca in an encapsulated context. It needs only the metadata
 * store, so it depends on no other capability.
 */
export const computedAttributesPlugin = fp(
  async (app: FastifyInstance, opts: ComputedAttributesPluginOptions) => {
    const processor = new AttributeProcessor(opts.repo, opts.clock, opts.profiles, opts.logger);
    const service = new ComputedAttributeService(opts.repo, opts.clock, { processor, ...(opts.dependents === undefined ? {} : { dependents: opts.dependents }) });
    app.decorate("computed", service);
    // Evaluations under way finish before the stores close.
    app.addHook("onClose", async () => {
      processor.resume();
      await processor.idle();
    });
    await app.register(routes, { prefix: COMPUTED_PREFIX, authenticator: opts.authenticator, tenants: opts.tenants, service });
  },
  { name: "segmentd-computed-attributes", fastify: "5.x", dependencies: [] },
);
