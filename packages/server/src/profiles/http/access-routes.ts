// Profile access (/data/core/ups/access/entities, profile.yaml): a merged
// profile by identity under a merge policy, and the experience events of a
// profile (time range, order, paging); several profiles in one request (POST);
// deleting an entity by identity (DELETE).
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import { epochMsParam } from "../../http/routes/paging-params.js";
import { tenantOf } from "../../http/request-context.js";
import { ApiError, badRequest, ErrorCodes, notFound } from "../../services/errors.js";
import { normalizeNamespace } from "../validate.js";
import type { IdentityGraph, LifecycleWrites, ProfileReads } from "../store.js";
import type { Identity, JsonObject, MergedProfile, MergePolicySpec } from "../types.js";
import { getPath, setPath } from "../xdm-object.js";
import { mapStoreErrors, profileScope, type ProfileRoutesOptions } from "./context.js";

export const PROFILE_SCHEMA = "_xdm.context.profile";
export const EVENT_SCHEMA = "_xdm.context.experienceevent";
const DEFAULT_EVENT_LIMIT = 1000;
/** Identities per POST /access/entities request. */
export const MAX_BULK_ENTITIES = 100;

interface EntitiesBody {
  schema: { name: string };
  identities: Array<{ entityId: string; entityIdNS: { code: string } }>;
  fields?: string[];
  mergePolicyId?: string;
  timeFilter?: { startTime?: number; endTime?: number };
  limit?: number;
  orderBy?: string;
}

const bodySchema = {
  type: "object",
  required: ["schema", "identities"],
  properties: {
    schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
    identities: {
      type: "array",
      description: `The identities to look up (1 to ${MAX_BULK_ENTITIES}); each found profile appears once, keyed by its entity id, with the requestedIdentity that found it.`,
      items: {
        type: "object",
        required: ["entityId", "entityIdNS"],
        properties: {
          entityId: { type: "string", minLength: 1 },
          entityIdNS: { type: "object", required: ["code"], properties: { code: { type: "string", minLength: 1 } } },
        },
      },
    },
    fields: { type: "array", items: { type: "string" } },
    mergePolicyId: { type: "string", minLength: 1 },
    timeFilter: { type: "object", description: "For time-series objects only: accepted and ignored for profiles.", properties: { startTime: { type: "number", minimum: 0 }, endTime: { type: "number", minimum: 0 } } },
    limit: { type: "number", minimum: 1, maximum: 1000, description: "For ExperienceEvents only: accepted and ignored for profiles." },
    orderBy: { type: "string", enum: ["timestamp", "+timestamp", "-timestamp"], description: "For ExperienceEvents only: accepted and ignored for profiles." },
  },
} as const;

interface DeleteQuery {
  "schema.name": string;
  entityId: string;
  entityIdNS?: string;
  mergePolicyId?: string;
}

const deleteQuerySchema = {
  type: "object",
  required: ["schema.name", "entityId"],
  properties: {
    "schema.name": { type: "string" },
    entityId: { type: "string", minLength: 1 },
    entityIdNS: { type: "string", minLength: 1 },
    mergePolicyId: { type: "string", minLength: 1 },
  },
} as const;

interface EntitiesQuery {
  "schema.name": string;
  entityId?: string;
  entityIdNS?: string;
  "relatedSchema.name"?: string;
  relatedEntityId?: string;
  relatedEntityIdNS?: string;
  mergePolicyId?: string;
  fields?: string;
  startTime?: number;
  endTime?: number;
  limit?: number;
  orderby?: string;
  start?: string;
}

const querySchema = {
  type: "object",
  required: ["schema.name"],
  properties: {
    "schema.name": { type: "string" },
    entityId: { type: "string", minLength: 1 },
    entityIdNS: { type: "string", minLength: 1 },
    "relatedSchema.name": { type: "string" },
    relatedEntityId: { type: "string", minLength: 1 },
    relatedEntityIdNS: { type: "string", minLength: 1 },
    mergePolicyId: { type: "string", minLength: 1 },
    fields: { type: "string" },
    startTime: epochMsParam(),
    endTime: epochMsParam(),
    limit: { type: "integer", minimum: 1, maximum: 1000 },
    orderby: { type: "string", enum: ["timestamp", "+timestamp", "-timestamp"] },
    start: { type: "string" },
  },
} as const;

/** Keeps only the listed dotted paths (the `fields` parameter). */
export function pickFields(entity: JsonObject, fields: string | undefined): JsonObject {
  if (fields === undefined || fields.trim() === "") return entity;
  let out: JsonObject = {};
  for (const f of fields.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const v = getPath(entity, f);
    if (v !== undefined) out = setPath(out, f, v);
  }
  return out;
}

/**
 * The merged profile with the fields computed from its events (opts.computedValues: computed
 * attributes under the tenant's field group), merged one level down beside the profile's own.
 */
async function withComputedValues(opts: ProfileRoutesOptions<ProfileReads & IdentityGraph & LifecycleWrites>, request: FastifyRequest, identity: Identity, policy: MergePolicySpec, p: MergedProfile): Promise<MergedProfile> {
  const compute = opts.computedValues;
  if (compute === undefined) return p;
  const scope = profileScope(request);
  const readEvents = async (since: number, until: number): Promise<Record<string, unknown>[]> => {
    const out: Record<string, unknown>[] = [];
    let cursor: string | undefined;
    do {
      const page = await opts.profiles.getEvents(scope, identity, policy, { startTime: since, endTime: until, order: "asc", ...(cursor === undefined ? {} : { cursor }) });
      for (const e of page.events) out.push(e.body);
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    return out;
  };
  const extra = await compute(tenantOf(request), readEvents, opts.clock.now());
  if (extra === null) return p;
  const entity: JsonObject = { ...p.entity };
  for (const [k, v] of Object.entries(extra)) {
    const mine = entity[k];
    entity[k] = mine !== null && typeof mine === "object" && !Array.isArray(mine) && v !== null && typeof v === "object" && !Array.isArray(v) ? { ...mine, ...v } : v;
  }
  return { ...p, entity };
}

/** A merged profile as the entities API shows it (GET and POST). */
function entityView(p: MergedProfile, policyId: string | undefined, fields: string | undefined): JsonObject {
  const view: JsonObject = { entityId: p.profileId };
  if (policyId !== undefined) view["mergePolicy"] = { id: policyId };
  view["sources"] = p.sources;
  view["entity"] = pickFields({ identities: p.identities.map((i) => ({ id: i.id, namespace: { code: i.namespace } })), ...p.entity }, fields);
  if (p.lastModifiedAt !== null) view["lastModifiedAt"] = new Date(p.lastModifiedAt).toISOString();
  view["optedOut"] = p.optedOut;
  return view;
}

export async function accessRoutes(app: FastifyInstance, opts: ProfileRoutesOptions<ProfileReads & IdentityGraph & LifecycleWrites>): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Profile access"];

  app.post<{ Body: EntitiesBody }>("/access/entities", {
    schema: { tags, summary: `Several merged profiles in one request (at most ${MAX_BULK_ENTITIES} identities)`, body: bodySchema },
  }, async (request) => {
    const b = request.body;
    if (b.schema.name !== PROFILE_SCHEMA) throw badRequest(`schema.name must be ${PROFILE_SCHEMA}: only profiles can be read in bulk`);
    if (b.identities.length === 0) throw badRequest("identities must list at least one identity");
    if (b.identities.length > MAX_BULK_ENTITIES) {
      throw new ApiError(400, ErrorCodes.limit, `At most ${MAX_BULK_ENTITIES} identities can be read in one request; got ${b.identities.length}`);
    }
    const t = b.timeFilter;
    if (t?.startTime !== undefined && t.endTime !== undefined && t.startTime > t.endTime) throw badRequest("timeFilter.startTime must not be after timeFilter.endTime");
    const scope = profileScope(request);
    const policy = await opts.policies.resolve(tenantOf(request), b.mergePolicyId);
    const fields = b.fields === undefined ? undefined : b.fields.join(",");
    const out: Record<string, JsonObject> = {};
    const asked = new Set<string>();
    for (const item of b.identities) {
      const identity: Identity = { namespace: normalizeNamespace(item.entityIdNS.code), id: item.entityId };
      // An identity listed twice is looked up (and answered) once.
      const ik = `${identity.namespace}\u0000${identity.id}`;
      if (asked.has(ik)) continue;
      asked.add(ik);
      const p = await opts.profiles.getProfile(scope, identity, policy);
      if (p === null) continue;
      // Under a pdg policy two identities of one graph are one entity (listed once, for the
      // first identity that found it); without stitching each identity is its own entity.
      const key = out[p.profileId] === undefined || policy.identityGraph.type === "pdg" ? p.profileId : `${p.profileId}:${identity.namespace}:${identity.id}`;
      if (out[key] !== undefined) continue;
      out[key] = { requestedIdentity: { entityId: item.entityId, entityIdNS: { code: item.entityIdNS.code } }, ...entityView(await withComputedValues(opts, request, identity, policy, p), policy.id, fields) };
    }
    return out;
  });

  app.delete<{ Querystring: DeleteQuery }>("/access/entities", {
    schema: { tags, summary: "Delete an entity by identity: its records in every dataset, and the identity from its graph", querystring: deleteQuerySchema },
  }, async (request, reply) => {
    const q = request.query;
    if (q["schema.name"] !== PROFILE_SCHEMA) throw badRequest(`schema.name must be ${PROFILE_SCHEMA} to delete an entity`);
    if (q.entityIdNS === undefined) throw badRequest("entityIdNS is required: entities are deleted by identity (ID:NS)");
    const scope = profileScope(request);
    // An unknown merge policy is refused before anything is deleted.
    if (q.mergePolicyId !== undefined) await opts.policies.resolve(tenantOf(request), q.mergePolicyId);
    const identity: Identity = { namespace: normalizeNamespace(q.entityIdNS), id: q.entityId };
    if ((await opts.profiles.findProfileId(scope, identity)) === null) throw notFound("Profile", `${q.entityIdNS}:${q.entityId}`);
    await mapStoreErrors(() => opts.profiles.deleteByIdentities(scope, [identity], "ALL"));
    return reply.code(202).send();
  });

  app.get<{ Querystring: EntitiesQuery }>("/access/entities", { schema: { tags, summary: "A merged profile, or the events of a profile", querystring: querySchema } }, async (request) => {
    const q = request.query;
    const scope = profileScope(request);
    const policy = await opts.policies.resolve(tenantOf(request), q.mergePolicyId);
    if (q["schema.name"] === PROFILE_SCHEMA) {
      if (q.entityId === undefined || q.entityIdNS === undefined) throw badRequest("entityId and entityIdNS are required to look up a profile");
      const identity = { namespace: normalizeNamespace(q.entityIdNS), id: q.entityId };
      const p = await opts.profiles.getProfile(scope, identity, policy);
      if (p === null) throw notFound("Profile", `${q.entityIdNS}:${q.entityId}`);
      return { [p.profileId]: entityView(await withComputedValues(opts, request, identity, policy, p), policy.id, q.fields) };
    }
    if (q["schema.name"] === EVENT_SCHEMA) {
      const id = q.relatedEntityId ?? q.entityId;
      const ns = q.relatedEntityIdNS ?? q.entityIdNS;
      if (id === undefined || ns === undefined) throw badRequest("relatedEntityId and relatedEntityIdNS (the profile's identity) are required to list events");
      if (q["relatedSchema.name"] !== undefined && q["relatedSchema.name"] !== PROFILE_SCHEMA) throw badRequest(`relatedSchema.name must be ${PROFILE_SCHEMA}`);
      const limit = q.limit ?? DEFAULT_EVENT_LIMIT;
      const order = q.orderby === "-timestamp" ? "desc" : "asc";
      const page = await mapStoreErrors(() => opts.profiles.getEvents(scope, { namespace: normalizeNamespace(ns), id }, policy, {
        limit, order, ...(q.startTime === undefined ? {} : { startTime: q.startTime }), ...(q.endTime === undefined ? {} : { endTime: q.endTime }),
        ...(q.start === undefined ? {} : { cursor: q.start }),
      }));
      const params = new URLSearchParams({ "schema.name": EVENT_SCHEMA, "relatedSchema.name": PROFILE_SCHEMA, relatedEntityId: id, relatedEntityIdNS: ns, limit: String(limit), orderby: order === "desc" ? "-timestamp" : "+timestamp" });
      if (q.startTime !== undefined) params.set("startTime", String(q.startTime));
      if (q.endTime !== undefined) params.set("endTime", String(q.endTime));
      if (q.mergePolicyId !== undefined) params.set("mergePolicyId", q.mergePolicyId);
      if (page.next !== null) params.set("start", page.next);
      return {
        _page: { orderby: order === "desc" ? "-timestamp" : "+timestamp", start: q.start ?? "", count: page.events.length, next: page.next ?? "" },
        children: page.events.map((e) => ({ relatedEntityId: id, entityId: e.eventId, timestamp: e.timestamp, datasetId: e.datasetId, entity: pickFields(e.body, q.fields) })),
        _links: { next: { href: page.next === null ? "" : `/entities?${params.toString()}` } },
      };
    }
    throw badRequest(`schema.name must be ${PROFILE_SCHEMA} or ${EVENT_SCHEMA}`);
  });
}
