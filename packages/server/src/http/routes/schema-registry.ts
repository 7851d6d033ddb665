/**
 * Schema Registry API (AEP's /data/foundation/schemaregistry, services/schema-registry.ts):
 * tenant schemas (create, list, get, delete) and identity descriptors (create, list, get,
 * delete). The Accept header picks a list's shape as in AEP; every answer is JSON.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { DescriptorInput, SchemaInput, SchemaRegistryService } from "../../services/schema-registry.js";
import { badRequest } from "../../services/errors.js";
import { registerTenantHooks, type AuthDeps } from "../auth.js";
import { tenantOf } from "../request-context.js";
import { authHeaders } from "../schemas.js";
import { MAX_QUERY_INTEGER, limitParam, offsetParam } from "./paging-params.js";

export const SCHEMA_REGISTRY_PREFIX = "/data/foundation/schemaregistry";
/** AEP's page size limit for Schema Registry lists. */
export const SCHEMA_LIST_MAX = 300;

export interface SchemaRegistryRoutesOptions extends AuthDeps {
  schemas: SchemaRegistryService;
}

const MAX_ID = 1024;
const text = (max: number) => ({ type: "string", minLength: 1, maxLength: max }) as const;

const schemaBodySchema = {
  type: "object",
  required: ["title", "type", "allOf"],
  additionalProperties: false,
  properties: {
    title: text(256),
    description: { type: "string", maxLength: 4096 },
    type: { type: "string", const: "object" },
    allOf: {
      type: "array",
      minItems: 1,
      maxItems: 50,
      description: "One class ($ref https://ns.adobe.com/xdm/context/profile or .../experienceevent) and field groups by $ref (kept by reference, not resolved).",
      items: {
        type: "object",
        required: ["$ref"],
        additionalProperties: false,
        // $ref as a pattern: a "$ref" key under properties is taken for a reference by the OpenAPI generator.
        patternProperties: { "^\\$ref$": { type: "string", minLength: 1, maxLength: MAX_ID, format: "uri" } },
        properties: { type: { type: "string", const: "object" }, "meta:xdmType": { type: "string", const: "object" } },
      },
    },
    "meta:class": { type: "string", minLength: 1, maxLength: MAX_ID },
    "meta:immutableTags": { type: "array", maxItems: 10, items: text(64) },
  },
} as const;

const descriptorBodySchema = {
  type: "object",
  required: ["@type"],
  maxProperties: 32,
  description: "Only xdm:descriptorIdentity is supported.",
  properties: {
    "@type": text(128),
    "@id": { type: "string", maxLength: 128 },
    "meta:containerId": { type: "string", maxLength: 64 },
    "xdm:sourceSchema": text(MAX_ID),
    "xdm:sourceVersion": { type: "integer", minimum: 0, maximum: 1_000_000 },
    "xdm:sourceProperty": { type: "string", minLength: 2, maxLength: 1024, pattern: "^(/[^/]+)+$", description: "JSON pointer to the identity field, e.g. /personalEmail/address" },
    "xdm:namespace": text(256),
    "xdm:property": text(64),
    "xdm:isPrimary": { type: "boolean" },
  },
} as const;

const idParams = (name: string) => ({ type: "object", required: [name], properties: { [name]: text(MAX_ID) } }) as const;

function accept(request: FastifyRequest): string {
  const a = request.headers.accept;
  return (Array.isArray(a) ? a.join(",") : (a ?? "")).toLowerCase();
}

/** Full objects for any xed Accept variant but xed-id (the default, as AEP's lists answer). */
const FULL_SCHEMAS = /application\/vnd\.adobe\.xed(-full|-notext|-full-notext|-full-desc|-deprecatefield)?\+json/;

function parseOrder(orderby: string | undefined): "asc" | "desc" {
  if (orderby === undefined || orderby === "title" || orderby === "+title") return "asc";
  if (orderby === "-title") return "desc";
  throw badRequest(`orderby ${JSON.stringify(orderby.slice(0, 100))} is not supported: use title or -title`);
}

export async function schemaRegistryRoutes(app: FastifyInstance, opts: SchemaRegistryRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const svc = opts.schemas;
  const tags = ["Schema Registry"];

  app.post<{ Body: SchemaInput }>("/tenant/schemas", {
    schema: { tags, summary: "Create a tenant schema (profile or experience-event class, field groups by reference)", headers: authHeaders, body: schemaBodySchema },
  }, async (request, reply) => {
    const clientId = String(request.headers["x-api-key"] ?? "");
    const doc = await svc.createSchema(tenantOf(request), request.body, clientId);
    reply.code(201);
    return doc;
  });

  app.get<{ Querystring: { start?: number; limit?: number; orderby?: string } }>("/tenant/schemas", {
    schema: {
      tags,
      summary: "List tenant schemas",
      description: `Accept application/vnd.adobe.xed-id+json (default): $id, meta:altId, version, title; application/vnd.adobe.xed+json: whole schemas. Ordered by title; start is the offset _page.next returns; limit at most ${SCHEMA_LIST_MAX}.`,
      headers: authHeaders,
      querystring: { type: "object", properties: { start: offsetParam(), limit: limitParam(MAX_QUERY_INTEGER), orderby: { type: "string", maxLength: 64 } } },
    },
  }, async (request) => {
    const q = request.query;
    const direction = parseOrder(q.orderby);
    const limit = Math.min(q.limit ?? SCHEMA_LIST_MAX, SCHEMA_LIST_MAX);
    const offset = q.start ?? 0;
    const page = await svc.listSchemas(tenantOf(request), { offset, limit, direction });
    const full = FULL_SCHEMAS.test(accept(request));
    const next = offset + page.items.length < page.total ? String(offset + page.items.length) : null;
    const orderby = direction === "desc" ? "-title" : "title";
    return {
      results: page.items.map((s) => (full ? s : { $id: s.$id, "meta:altId": s["meta:altId"], version: s.version, title: s.title })),
      _page: { orderby, next, count: page.items.length },
      _links: next === null ? {} : { next: { href: `${SCHEMA_REGISTRY_PREFIX}/tenant/schemas?${new URLSearchParams({ orderby, start: next, limit: String(limit) }).toString()}` } },
    };
  });

  app.get<{ Params: { schemaId: string } }>("/tenant/schemas/:schemaId", {
    schema: { tags, summary: "Look up a tenant schema by meta:altId or URL-encoded $id", headers: authHeaders, params: idParams("schemaId") },
  }, async (request) => svc.getSchema(tenantOf(request), request.params.schemaId));

  app.delete<{ Params: { schemaId: string } }>("/tenant/schemas/:schemaId", {
    schema: { tags, summary: "Delete a tenant schema and its descriptors (refused while a dataset created from it exists)", headers: authHeaders, params: idParams("schemaId") },
  }, async (request, reply) => {
    await svc.deleteSchema(tenantOf(request), request.params.schemaId);
    return reply.code(204).send();
  });

  app.post<{ Body: DescriptorInput }>("/tenant/descriptors", {
    schema: { tags, summary: "Create an identity descriptor (xdm:descriptorIdentity)", headers: authHeaders, body: descriptorBodySchema },
  }, async (request, reply) => {
    const doc = await svc.createDescriptor(tenantOf(request), request.body);
    reply.code(201);
    return doc;
  });

  app.get("/tenant/descriptors", {
    schema: {
      tags,
      summary: "List descriptors",
      description: 'Accept application/vnd.adobe.xdm-link+json (default): {"xdm:descriptorIdentity": ["/descriptors/<@id>", ...]}; application/vnd.adobe.xdm+json: the descriptors; application/vnd.adobe.xdm-id+json: their @ids.',
      headers: authHeaders,
    },
  }, async (request) => {
    const list = await svc.listDescriptors(tenantOf(request));
    const a = accept(request);
    if (a.includes("application/vnd.adobe.xdm+json")) return list;
    if (a.includes("application/vnd.adobe.xdm-id+json")) return list.map((d) => d["@id"]);
    return list.length === 0 ? {} : { "xdm:descriptorIdentity": list.map((d) => `/descriptors/${String(d["@id"])}`) };
  });

  app.get<{ Params: { descriptorId: string } }>("/tenant/descriptors/:descriptorId", {
    schema: { tags, summary: "Look up a descriptor", headers: authHeaders, params: idParams("descriptorId") },
  }, async (request) => svc.getDescriptor(tenantOf(request), request.params.descriptorId));

  app.delete<{ Params: { descriptorId: string } }>("/tenant/descriptors/:descriptorId", {
    schema: { tags, summary: "Delete a descriptor", headers: authHeaders, params: idParams("descriptorId") },
  }, async (request, reply) => {
    await svc.deleteDescriptor(tenantOf(request), request.params.descriptorId);
    return reply.code(204).send();
  });
}
