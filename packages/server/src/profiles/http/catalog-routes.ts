// Catalog datasets and batch status, in AEP Catalog's shapes
// (/data/foundation/catalog): list and get return objects keyed by id, create
// returns ["@/dataSets/<id>"] with 201.
import type { FastifyInstance } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import { limitParam, offsetParam } from "../../http/routes/paging-params.js";
import { badRequest, notFound } from "../../services/errors.js";
import type { DatasetCatalog, IngestBatch, IngestBatches } from "../store.js";
import { SCHEMA_CLASS_IDS, type Dataset, type IdentityFieldDescriptor, type SchemaClass } from "../types.js";
import { mapStoreErrors, profileScope, type ProfileRoutesOptions } from "./context.js";

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

export function renderDataset(d: Dataset): Record<string, unknown> {
  return {
    name: d.name,
    ...(d.description === undefined ? {} : { description: d.description }),
    imsOrg: d.imsOrg,
    sandboxName: d.sandboxName,
    schemaRef: { id: SCHEMA_CLASS_IDS[d.schemaClass], contentType: XED },
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
    const d = await mapStoreErrors(() => opts.profiles.createDataset(profileScope(request), {
      name: body.name, schemaClass: schemaClassOf(body), profileEnabled: enabled,
      ...(body.description === undefined ? {} : { description: body.description }),
      ...(body.identityFields === undefined ? {} : { identityFields: body.identityFields }),
    }, opts.clock.now()));
    reply.code(201);
    return [`@/dataSets/${d.id}`];
  });

  app.get<{ Querystring: { limit?: number; start?: number } }>("/dataSets", {
    schema: { tags, summary: "List datasets", querystring: { type: "object", properties: { limit: limitParam(100), start: offsetParam() } } },
  }, async (request) => {
    const list = await opts.profiles.listDatasets(profileScope(request), { limit: request.query.limit ?? 50, start: request.query.start ?? 0 });
    return Object.fromEntries(list.map((d) => [d.id, renderDataset(d)]));
  });

  app.get<{ Params: { id: string } }>("/dataSets/:id", { schema: { tags, summary: "Get a dataset" } }, async (request) => {
    const d = await opts.profiles.getDataset(profileScope(request), request.params.id);
    if (d === null) throw notFound("Dataset", request.params.id);
    return { [d.id]: renderDataset(d) };
  });

  app.delete<{ Params: { id: string } }>("/dataSets/:id", { schema: { tags, summary: "Delete a dataset and its records" } }, async (request) => {
    const counts = await opts.profiles.deleteDataset(profileScope(request), request.params.id);
    if (counts === null) throw notFound("Dataset", request.params.id);
    return [`@/dataSets/${request.params.id}`];
  });

  app.get<{ Params: { id: string } }>("/batches/:id", { schema: { tags, summary: "Batch status with record counts and per-record failures" } }, async (request) => {
    const b = await opts.profiles.getBatch(profileScope(request), request.params.id);
    if (b === null) throw notFound("Batch", request.params.id);
    return { [b.id]: renderBatch(b, profileScope(request).orgId) };
  });
}
