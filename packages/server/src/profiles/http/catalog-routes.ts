// Catalog datasets and batch status, in AEP Catalog's shapes
// (/data/foundation/catalog): list and get return objects keyed by id, create
// returns ["@/dataSets/<id>"] with 201. A dataset created from a tenant schema
// (schemaRef.id its $id or meta:altId) takes the schema's class and, unless the
// body lists identityFields, its identity descriptors as identity fields.
import type { FastifyInstance } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { limitParam, offsetParam } from "../../http/routes/paging-params.js";
import { badRequest, notFound } from "../../services/errors.js";
import type { TenantContext } from "../../services/tenancy.js";
import { newCatalogId } from "../ids.js";
import type { DatasetCatalog, IngestBatch, IngestBatches } from "../store.js";
import { SCHEMA_CLASS_IDS, type Dataset, type IdentityFieldDescriptor, type SchemaClass } from "../types.js";
import { mapStoreErrors, profileScope, type DatasetSchema, type DatasetSchemas, type ProfileRoutesOptions } from "./context.js";

export const CATALOG_PREFIX = "/data/foundation/catalog";
const XED = "application/vnd.adobe.xed+json;version=1";

interface DatasetBody {
  name: string;
  description?: string;
  schemaRef?: { id?: string; contentType?: string };
  /** segmentd extension: the XDM class when schemaRef.id is a tenant schema. */
  schemaClass?: SchemaClass;
  tags?: Record<string, string[]>;
  /** segmentd extension: schema fields that carry identities. */
  identityFields?: IdentityFieldDescriptor[];
}

const datasetBodySchema = {
  type: "object",
  required: ["name"],
  properties: {
    name: { type: "string", minLength: 1, maxLength: 256 },
    description: { type: "string", maxLength: 4096 },
    schemaRef: { type: "object", properties: { id: { type: "string" }, contentType: { type: "string" } } },
    schemaClass: { type: "string", enum: ["profile", "experienceevent"] },
    tags: { type: "object", additionalProperties: { type: "array", items: { type: "string" } } },
    identityFields: {
      type: "array", maxItems: 50,
      items: { type: "object", required: ["path", "namespace"], properties: { path: { type: "string", minLength: 1 }, namespace: { type: "string", minLength: 1 }, primary: { type: "boolean" } } },
    },
  },
} as const;

/** The XDM class of a dataset from its schemaRef (class URIs) or the explicit schemaClass. */
export function schemaClassOf(body: DatasetBody): SchemaClass {
  if (body.schemaClass !== undefined) return body.schemaClass;
  const id = body.schemaRef?.id ?? "";
  if (/context\/experienceevent$/i.test(id) || /_xdm\.context\.experienceevent$/i.test(id)) return "experienceevent";
  if (/context\/profile$/i.test(id) || /_xdm\.context\.profile$/i.test(id)) return "profile";
  throw badRequest(`Cannot tell the XDM class of schemaRef.id ${JSON.stringify(id)}: use ${SCHEMA_CLASS_IDS.profile} or ${SCHEMA_CLASS_IDS.experienceevent}, or set schemaClass`);
}

/** A Schema Registry id: `https://ns.adobe.com/{TENANT_ID}/schemas/{id}` or `_{TENANT_ID}.schemas.{id}`. */
const TENANT_SCHEMA_ID = /^https?:\/\/ns\.adobe\.com\/[^/]+\/schemas\/[^/]+$|^_[^.]+\.schemas\.[^.]+$/i;

/** The tenant schema schemaRef.id names, if any. Unknown: a 400, unless schemaClass is given (the segmentd shortcut, which ignores the id). */
async function schemaOfBody(schemas: DatasetSchemas, tenant: TenantContext, body: DatasetBody): Promise<DatasetSchema | null> {
  const id = body.schemaRef?.id;
  if (id === undefined) return null;
  const s = await schemas.resolveForDataset(tenant, id);
  if (s === null) {
    if (body.schemaClass === undefined && TENANT_SCHEMA_ID.test(id)) {
      throw badRequest(`Unknown schema: schemaRef.id ${JSON.stringify(id)} is not a schema of this sandbox (GET /data/foundation/schemaregistry/tenant/schemas lists them)`);
    }
    return null;
  }
  if (body.schemaClass !== undefined && body.schemaClass !== s.schemaClass) throw badRequest(`schemaClass ${body.schemaClass} contradicts the class of schema ${s.id} (${s.schemaClass})`);
  return s;
}

/** `schemaId`: the tenant schema the dataset was created from; otherwise schemaRef names its class. */
export function renderDataset(d: Dataset, schemaId?: string): Record<string, unknown> {
  return {
    name: d.name,
    ...(d.description === undefined ? {} : { description: d.description }),
    imsOrg: d.imsOrg,
    sandboxName: d.sandboxName,
    schemaRef: { id: schemaId ?? SCHEMA_CLASS_IDS[d.schemaClass], contentType: XED },
    schemaClass: d.schemaClass,
    tags: { unifiedProfile: [`enabled:${d.profileEnabled}`], unifiedIdentity: [`enabled:${d.profileEnabled}`] },
    identityFields: d.identityFields,
    created: d.created,
    updated: d.updated,
    version: "1.0.0",
  };
}

export function renderBatch(b: IngestBatch, imsOrg: string): Record<string, unknown> {
  return {
    id: b.id,
    imsOrg,
    status: b.status,
    created: b.created,
    updated: b.updated,
    ...(b.completed === null ? {} : { completed: b.completed }),
    relatedObjects: [{ type: "dataSet", id: b.datasetId }],
    metrics: { recordsRead: b.recordsRead, recordsWritten: b.recordsWritten, failedRecordCount: b.recordsFailed },
    files: b.files,
    errors: b.errors.map((e) => ({ code: e.code, description: e.message, recordIndex: e.index, ...(e.path === undefined ? {} : { path: e.path }), ...(e.file === undefined ? {} : { file: e.file }) })),
  };
}

export async function catalogRoutes(app: FastifyInstance, opts: ProfileRoutesOptions<DatasetCatalog & IngestBatches>): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Catalog"];

  app.post<{ Body: DatasetBody }>("/dataSets", { schema: { tags, summary: "Create a dataset", body: datasetBodySchema } }, async (request, reply) => {
    const body = request.body;
    const enabled = (body.tags?.["unifiedProfile"] ?? []).some((t) => t.trim().toLowerCase() === "enabled:true");
    const tenant = tenantOf(request);
    const registry = opts.schemas;
    const schema = registry === undefined ? null : await schemaOfBody(registry, tenant, body);
    let id: string | undefined;
    if (registry !== undefined && schema !== null) {
      // Linked before the dataset exists, so the schema cannot be deleted in between.
      id = newCatalogId();
      if (!(await registry.linkDataset(tenant, id, schema.id))) throw badRequest(`Unknown schema: ${schema.id} was deleted`);
    }
    const identityFields = body.identityFields ?? schema?.identityFields;
    try {
      const d = await mapStoreErrors(() => opts.profiles.createDataset(profileScope(request), {
        ...(id === undefined ? {} : { id }),
        name: body.name, schemaClass: schema?.schemaClass ?? schemaClassOf(body), profileEnabled: enabled,
        ...(body.description === undefined ? {} : { description: body.description }),
        ...(identityFields === undefined ? {} : { identityFields }),
      }, opts.clock.now()));
      reply.code(201);
      return [`@/dataSets/${d.id}`];
    } catch (err) {
      if (id !== undefined) await registry?.unlinkDataset(tenant, id);
      throw err;
    }
  });

  app.get<{ Querystring: { limit?: number; start?: number } }>("/dataSets", {
    schema: { tags, summary: "List datasets", querystring: { type: "object", properties: { limit: limitParam(100), start: offsetParam() } } },
  }, async (request) => {
    const list = await opts.profiles.listDatasets(profileScope(request), { limit: request.query.limit ?? 50, start: request.query.start ?? 0 });
    const schemaIds = await opts.schemas?.schemasOfDatasets(tenantOf(request), list.map((d) => d.id));
    return Object.fromEntries(list.map((d) => [d.id, renderDataset(d, schemaIds?.get(d.id))]));
  });

  app.get<{ Params: { id: string } }>("/dataSets/:id", { schema: { tags, summary: "Get a dataset" } }, async (request) => {
    const d = await opts.profiles.getDataset(profileScope(request), request.params.id);
    if (d === null) throw notFound("Dataset", request.params.id);
    const schemaIds = await opts.schemas?.schemasOfDatasets(tenantOf(request), [d.id]);
    return { [d.id]: renderDataset(d, schemaIds?.get(d.id)) };
  });

  app.delete<{ Params: { id: string } }>("/dataSets/:id", { schema: { tags, summary: "Delete a dataset and its records" } }, async (request) => {
    const counts = await opts.profiles.deleteDataset(profileScope(request), request.params.id);
    if (counts === null) throw notFound("Dataset", request.params.id);
    await opts.schemas?.unlinkDataset(tenantOf(request), request.params.id);
    return [`@/dataSets/${request.params.id}`];
  });

  app.get<{ Params: { id: string } }>("/batches/:id", { schema: { tags, summary: "Batch status with record counts and per-record failures" } }, async (request) => {
    const b = await opts.profiles.getBatch(profileScope(request), request.params.id);
    if (b === null) throw notFound("Batch", request.params.id);
    return { [b.id]: renderBatch(b, profileScope(request).orgId) };
  });
}
