/**
 * A minimal Schema Registry (AEP's /data/foundation/schemaregistry, docs/aep-compatibility.md):
 * tenant schemas of the profile or experience-event class with field groups kept by reference
 * (never resolved), and identity descriptors on them. A dataset created from a schema takes its
 * class and identity fields from it (profiles/http/catalog-routes.ts).
 */
import { createHash, randomBytes } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { MetadataStore } from "../stores/types.js";
import {
  DescriptorConflictError,
  DescriptorLimitError,
  MAX_DESCRIPTORS_PER_SCHEMA,
  SchemaInUseError,
  SchemaNotFoundError,
  type StoredDescriptor,
  type XdmClass,
} from "../stores/schema-registry.js";
import { ApiError, badRequest, notFound } from "./errors.js";
import { scopeOf, type TenantContext } from "./tenancy.js";

export const XDM_CLASS_IDS: Readonly<Record<XdmClass, string>> = {
  profile: "https://ns.adobe.com/xdm/context/profile",
  experienceevent: "https://ns.adobe.com/xdm/context/experienceevent",
};
export const IDENTITY_DESCRIPTOR = "xdm:descriptorIdentity";
/** The status and code of a schema still used by a dataset (the profile plane's conflict code). */
export const SCHEMA_IN_USE_CODE = "SEGMENTD-CONFLICT-409";

const SUPPORTED_CLASSES = `${XDM_CLASS_IDS.profile} and ${XDM_CLASS_IDS.experienceevent}`;
const CLASS_OF = new Map<string, XdmClass>(Object.entries(XDM_CLASS_IDS).map(([k, v]) => [v, k as XdmClass]));
/** Adobe's class URIs other than the two segmentd supports: `.../classes/...` (global and tenant). */
const OTHER_CLASS = /\/classes\//;
/** The fields an identity descriptor may carry (`@id` and `meta:containerId` are accepted and ignored). */
const IDENTITY_FIELDS = new Set(["@type", "@id", "meta:containerId", "xdm:sourceSchema", "xdm:sourceVersion", "xdm:sourceProperty", "xdm:namespace", "xdm:property", "xdm:isPrimary"]);

export interface SchemaInput {
  title: string;
  description?: string;
  type: "object";
  allOf: Array<{ $ref: string }>;
  "meta:class"?: string;
  "meta:immutableTags"?: string[];
}

export type DescriptorInput = Record<string, unknown> & { "@type": string };

/** What a dataset created from a schema takes from it. */
export interface DatasetSchema {
  id: string;
  schemaClass: XdmClass;
  identityFields: Array<{ path: string; namespace: string; primary: boolean }>;
}

/**
 * The TENANT_ID of an organization, which names its schemas: the lower-cased letters and digits
 * of the org id before "@" (AEP derives it from the org's name; segmentd has only the id).
 */
export function tenantIdOf(orgId: string): string {
  const id = (orgId.split("@")[0] ?? "").toLowerCase().replace(/[^a-z0-9]/g, "");
  return id !== "" ? id : `t${createHash("sha256").update(orgId).digest("hex").slice(0, 16)}`;
}

/** A descriptor's JSON pointer ("/personalEmail/address") as the dotted path identity fields use. */
export function pointerToPath(pointer: string): string {
  const parts = pointer.split("/").slice(1).map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  const bad = parts.find((p) => p === "" || p.includes("."));
  if (parts.length === 0 || bad !== undefined) {
    throw badRequest(`xdm:sourceProperty ${JSON.stringify(pointer)} must be a JSON pointer to a field (e.g. /personalEmail/address) whose names are not empty and hold no "."`);
  }
  return parts.join(".");
}

/** The class of a schema body: exactly one supported class among the allOf refs (and meta:class, when given). */
function classOf(input: SchemaInput): { schemaClass: XdmClass; fieldGroups: string[] } {
  const refs = input.allOf.map((r) => r.$ref);
  const dup = refs.find((r, i) => refs.indexOf(r) !== i);
  if (dup !== undefined) throw badRequest(`allOf references ${dup} twice`);
  const classes = refs.filter((r) => CLASS_OF.has(r) || OTHER_CLASS.test(r));
  const declared = input["meta:class"];
  const unsupported = [...classes, ...(declared === undefined ? [] : [declared])].find((c) => !CLASS_OF.has(c));
  if (unsupported !== undefined) throw badRequest(`Class ${unsupported} is not supported: segmentd's Schema Registry supports the classes ${SUPPORTED_CLASSES}`);
  if (classes.length !== 1) {
    throw badRequest(`allOf must reference exactly one class (it references ${classes.length === 0 ? "none" : classes.join(", ")}): ${SUPPORTED_CLASSES} are supported, beside field groups`);
  }
  const cls = classes[0]!;
  if (declared !== undefined && declared !== cls) throw badRequest(`meta:class ${declared} differs from the class allOf references (${cls})`);
  return { schemaClass: CLASS_OF.get(cls)!, fieldGroups: refs.filter((r) => r !== cls) };
}

function hex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}

export class SchemaRegistryService {
  constructor(
    private readonly store: MetadataStore,
    private readonly clock: Clock,
    /** Whether a dataset still exists (the profile plane's catalog); absent without one. */
    private readonly datasetExists?: (tenant: TenantContext, datasetId: string) => Promise<boolean>,
  ) {}

  async createSchema(tenant: TenantContext, input: SchemaInput, clientId: string): Promise<Record<string, unknown>> {
    if (input.title.trim() === "") throw badRequest("title must not be empty");
    const { schemaClass, fieldGroups } = classOf(input);
    const tenantId = tenantIdOf(tenant.orgId);
    const key = hex(16);
    const classId = XDM_CLASS_IDS[schemaClass];
    const now = this.clock.now();
    const body: Record<string, unknown> = {
      $id: `https://ns.adobe.com/${tenantId}/schemas/${key}`,
      "meta:altId": `_${tenantId}.schemas.${key}`,
      "meta:resourceType": "schemas",
      version: "1.0",
      title: input.title,
      ...(input.description === undefined ? {} : { description: input.description }),
      type: "object",
      allOf: input.allOf.map((r) => ({ $ref: r.$ref, type: "object", "meta:xdmType": "object" })),
      refs: [classId, ...fieldGroups],
      imsOrg: tenant.orgId,
      "meta:extensible": false,
      "meta:abstract": false,
      "meta:extends": [classId, ...fieldGroups],
      "meta:xdmType": "object",
      ...(input["meta:immutableTags"] === undefined ? {} : { "meta:immutableTags": input["meta:immutableTags"] }),
      "meta:class": classId,
      "meta:containerId": "tenant",
      "meta:sandboxId": tenant.sandbox.sandboxId,
      "meta:sandboxType": tenant.sandbox.type,
      "meta:tenantNamespace": `_${tenantId}`,
    };
    const eTag = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    const doc = {
      ...body,
      "meta:registryMetadata": { "repo:createdDate": now, "repo:lastModifiedDate": now, "xdm:createdClientId": clientId, "xdm:lastModifiedClientId": clientId, eTag },
    };
    await this.store.schemas.insertSchema(scopeOf(tenant), { id: String(body.$id), altId: String(body["meta:altId"]), title: input.title, schemaClass, created: now, doc });
    return doc;
  }

  async listSchemas(tenant: TenantContext, query: { offset: number; limit: number; direction: "asc" | "desc" }): Promise<{ items: Record<string, unknown>[]; total: number }> {
    const page = await this.store.schemas.listSchemas(scopeOf(tenant), query);
    return { items: page.items.map((s) => s.doc), total: page.total };
  }

  async getSchema(tenant: TenantContext, id: string): Promise<Record<string, unknown>> {
    const s = await this.store.schemas.getSchema(scopeOf(tenant), id);
    if (s === undefined) throw notFound("Schema", id);
    return s.doc;
  }

  /** Deletes the schema and its descriptors; refused (409) while a dataset created from it exists. */
  async deleteSchema(tenant: TenantContext, id: string): Promise<void> {
    const scope = scopeOf(tenant);
    const s = await this.store.schemas.getSchema(scope, id);
    if (s === undefined) throw notFound("Schema", id);
    // A dataset deleted without the catalog route (a dataset expiration) leaves its link behind.
    if (this.datasetExists !== undefined) {
      for (const d of await this.store.schemas.datasetsOfSchema(scope, s.id)) {
        if (!(await this.datasetExists(tenant, d))) await this.store.schemas.unlinkDataset(scope, d);
      }
    }
    try {
      if (!(await this.store.schemas.deleteSchema(scope, s.id))) throw notFound("Schema", id);
    } catch (err) {
      if (!(err instanceof SchemaInUseError)) throw err;
      throw new ApiError(409, SCHEMA_IN_USE_CODE, `Schema ${s.id} is used by dataset(s) ${err.datasetIds.join(", ")}: delete them before the schema`);
    }
  }

  async createDescriptor(tenant: TenantContext, input: DescriptorInput): Promise<Record<string, unknown>> {
    const type = input["@type"];
    if (type !== IDENTITY_DESCRIPTOR) throw badRequest(`Descriptor type ${type} is not supported: segmentd's Schema Registry supports ${IDENTITY_DESCRIPTOR} only`);
    const extra = Object.keys(input).find((k) => !IDENTITY_FIELDS.has(k));
    if (extra !== undefined) throw badRequest(`${extra} is not a field of an ${IDENTITY_DESCRIPTOR}`);
    const missing = ["xdm:sourceSchema", "xdm:sourceProperty", "xdm:namespace"].filter((k) => input[k] === undefined);
    if (missing.length > 0) throw badRequest(`An ${IDENTITY_DESCRIPTOR} needs ${missing.join(", ")}`);
    const sourceVersion = input["xdm:sourceVersion"] ?? 1;
    if (sourceVersion !== 1) throw badRequest("xdm:sourceVersion must be 1: schemas are not versioned");
    const property = input["xdm:property"] ?? "xdm:code";
    if (property !== "xdm:code") throw badRequest(`xdm:property ${String(property)} is not supported: identity namespaces are named by code (xdm:code)`);
    const sourceProperty = String(input["xdm:sourceProperty"]);
    pointerToPath(sourceProperty);
    const scope = scopeOf(tenant);
    const sourceSchema = String(input["xdm:sourceSchema"]);
    const schema = await this.store.schemas.getSchema(scope, sourceSchema);
    if (schema === undefined) throw badRequest(`xdm:sourceSchema ${sourceSchema} is not a schema of this sandbox`);
    const primary = input["xdm:isPrimary"] === true;
    const id = hex(20);
    const doc = {
      "@type": IDENTITY_DESCRIPTOR,
      "xdm:sourceSchema": schema.id,
      "xdm:sourceVersion": 1,
      "xdm:sourceProperty": sourceProperty,
      "xdm:namespace": String(input["xdm:namespace"]),
      "xdm:property": "xdm:code",
      "xdm:isPrimary": primary,
      "meta:containerId": "tenant",
      "@id": id,
    };
    const record: StoredDescriptor = { id, schemaId: schema.id, sourceProperty, namespace: doc["xdm:namespace"], primary, created: this.clock.now(), doc };
    try {
      await this.store.schemas.insertDescriptor(scope, record);
    } catch (err) {
      if (err instanceof SchemaNotFoundError) throw badRequest(`xdm:sourceSchema ${sourceSchema} is not a schema of this sandbox`);
      if (err instanceof DescriptorConflictError) {
        throw badRequest(err.reason === "primary"
          ? `Schema ${schema.id} has a primary identity descriptor already (${err.existingId}): a schema has at most one`
          : `Schema ${schema.id} has an identity descriptor on ${sourceProperty} already (${err.existingId})`);
      }
      if (err instanceof DescriptorLimitError) throw badRequest(`Schema ${schema.id} has ${MAX_DESCRIPTORS_PER_SCHEMA} identity descriptors, the most it may have`);
      throw err;
    }
    return doc;
  }

  async listDescriptors(tenant: TenantContext): Promise<Record<string, unknown>[]> {
    return (await this.store.schemas.listDescriptors(scopeOf(tenant))).map((d) => d.doc);
  }

  async getDescriptor(tenant: TenantContext, id: string): Promise<Record<string, unknown>> {
    const d = await this.store.schemas.getDescriptor(scopeOf(tenant), id);
    if (d === undefined) throw notFound("Descriptor", id);
    return d.doc;
  }

  async deleteDescriptor(tenant: TenantContext, id: string): Promise<void> {
    if (!(await this.store.schemas.deleteDescriptor(scopeOf(tenant), id))) throw notFound("Descriptor", id);
  }

  // The catalog's view (profiles/http/context.ts DatasetSchemas).

  /** The tenant schema with this `$id` or `meta:altId`, with its identity descriptors as identity fields; null when there is none. */
  async resolveForDataset(tenant: TenantContext, id: string): Promise<DatasetSchema | null> {
    const scope = scopeOf(tenant);
    const s = await this.store.schemas.getSchema(scope, id);
    if (s === undefined) return null;
    const descriptors = await this.store.schemas.listDescriptors(scope, s.id);
    return { id: s.id, schemaClass: s.schemaClass, identityFields: descriptors.map((d) => ({ path: pointerToPath(d.sourceProperty), namespace: d.namespace, primary: d.primary })) };
  }

  /** False when the schema is gone (deleted since it was resolved). */
  linkDataset(tenant: TenantContext, datasetId: string, schemaId: string): Promise<boolean> {
    return this.store.schemas.linkDataset(scopeOf(tenant), datasetId, schemaId);
  }

  unlinkDataset(tenant: TenantContext, datasetId: string): Promise<void> {
    return this.store.schemas.unlinkDataset(scopeOf(tenant), datasetId);
  }

  schemasOfDatasets(tenant: TenantContext, datasetIds: readonly string[]): Promise<Map<string, string>> {
    return this.store.schemas.schemasOfDatasets(scopeOf(tenant), datasetIds);
  }
}
