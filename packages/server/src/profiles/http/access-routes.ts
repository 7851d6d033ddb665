// Profile access (/data/core/ups/access/entities, profile.yaml): a merged
// profile by identity under a merge policy, and the experience events of a
// profile (time range, order, paging).
import type { FastifyInstance } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { badRequest, notFound } from "../../services/errors.js";
import { normalizeNamespace } from "../validate.js";
import type { JsonObject } from "../types.js";
import { getPath, setPath } from "../xdm-object.js";
import { mapStoreErrors, profileScope, type ProfileRoutesOptions } from "./context.js";

export const PROFILE_SCHEMA = "_xdm.context.profile";
export const EVENT_SCHEMA = "_xdm.context.experienceevent";
const DEFAULT_EVENT_LIMIT = 1000;

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
    startTime: { type: "integer", minimum: 0 },
    endTime: { type: "integer", minimum: 0 },
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

export async function accessRoutes(app: FastifyInstance, opts: ProfileRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Profile access"];

  app.get<{ Querystring: EntitiesQuery }>("/access/entities", { schema: { tags, summary: "A merged profile, or the events of a profile", querystring: querySchema } }, async (request) => {
    const q = request.query;
    const scope = profileScope(request);
    const policy = await opts.policies.resolve(tenantOf(request), q.mergePolicyId);
    const policyRef = policy.id === undefined ? {} : { mergePolicy: { id: policy.id } };
    if (q["schema.name"] === PROFILE_SCHEMA) {
      if (q.entityId === undefined || q.entityIdNS === undefined) throw badRequest("entityId and entityIdNS are required to look up a profile");
      const identity = { namespace: normalizeNamespace(q.entityIdNS), id: q.entityId };
      const p = await opts.profiles.getProfile(scope, identity, policy);
      if (p === null) throw notFound("Profile", `${q.entityIdNS}:${q.entityId}`);
      return {
        [p.profileId]: {
          entityId: p.profileId, ...policyRef, sources: p.sources,
          entity: pickFields({ identities: p.identities.map((i) => ({ id: i.id, namespace: { code: i.namespace } })), ...p.entity }, q.fields),
          ...(p.lastModifiedAt === null ? {} : { lastModifiedAt: new Date(p.lastModifiedAt).toISOString() }),
          optedOut: p.optedOut,
        },
      };
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
