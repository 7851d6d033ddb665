// An organization's own quarantined records (segmentd extension): stored records of
// the caller's sandbox that the profile store skips at read because they cannot be
// served safely (quarantine.ts). Operators see every tenant's at GET /admin/quarantine.
import type { FastifyInstance } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import type { StoreHealth } from "../store.js";
import { profileScope, type ProfileRoutesOptions } from "./context.js";

export const quarantinedSchema = {
  type: "object",
  properties: {
    seq: { type: "integer", description: "Position in the quarantine list (page with ?after=)" },
    orgId: { type: "string" },
    sandboxName: { type: "string" },
    datasetId: { type: "string" },
    kind: { type: "string", enum: ["profile", "event", "lake"], description: "profile fragment, experience event, or record of a dataset not enabled for profile" },
    recordId: { type: "string", description: "Event/record _id; for a profile fragment <namespace>:<id> of its primary identity" },
    identity: { type: "object", properties: { namespace: { type: "string" }, id: { type: "string" } }, required: ["namespace", "id"] },
    profileId: { type: ["string", "null"] },
    reason: { type: "string" },
    quarantinedAt: { type: "string", format: "date-time" },
    lastSeenAt: { type: "string", format: "date-time" },
  },
  required: ["seq", "orgId", "sandboxName", "datasetId", "kind", "recordId", "identity", "profileId", "reason", "quarantinedAt", "lastSeenAt"],
} as const;

/** One page of quarantined records (this route and GET /admin/quarantine). */
export const quarantinePageSchema = {
  type: "object",
  properties: { records: { type: "array", items: quarantinedSchema }, next: { type: ["integer", "null"], description: "Pass as ?after= for the next page; null on the last" } },
  required: ["records", "next"],
} as const;

interface PageQuery { limit?: number; after?: number }

export async function quarantineRoutes(app: FastifyInstance, opts: ProfileRoutesOptions<StoreHealth>): Promise<void> {
  registerTenantHooks(app, opts);
  app.get<{ Querystring: PageQuery }>("/quarantine", {
    schema: {
      tags: ["Profile access"],
      summary: "This sandbox's quarantined records: stored records skipped at read because they cannot be served safely (segmentd extension)",
      description: "Such a record (nested deeper than the record limit, stored before the limit was enforced) is skipped wherever it would be read; the rest of its profile is served. Delete its identity or dataset to remove it.",
      querystring: {
        type: "object",
        properties: {
          limit: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
          after: { type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: "The `next` of the previous page" },
        },
        additionalProperties: false,
      },
      response: { 200: quarantinePageSchema },
    },
  }, async (request) => {
    const { limit = 100, after } = request.query;
    const records = await opts.profiles.listQuarantined({ scope: profileScope(request), limit, ...(after === undefined ? {} : { afterSeq: after }) });
    return { records, next: records.length === limit ? records[records.length - 1]!.seq : null };
  });
}
