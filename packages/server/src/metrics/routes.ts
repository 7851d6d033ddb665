/**
 * GET /data/core/ups/segment/definitions/{id}/metrics?window=24h|7d|30d —
 * the "Profiles over time" card of the audience tool (total qualified, new
 * audience updated and its chart buckets). See docs/streaming-and-edge.md.
 * With it, #28's explain, members and a profile's memberships (docs/explain.md).
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { registerTenantHooks, type AuthDeps } from "../http/auth.js";
import { tenantOf } from "../http/request-context.js";
import { authHeaders, commonErrorResponses, idParam } from "../http/schemas.js";
import type { Clock } from "../platform/clock.js";
import type { MetadataStore } from "../stores/types.js";
import type { ProfileReads } from "../profiles/store.js";
import type { ExpressionInput } from "../services/definition-analysis.js";
import { AudienceMetricsService, type MetricWindow } from "./audience-metrics.js";
import { AudienceExplainer, type ExplainComputedAttributes } from "./explain.js";
import { AudienceMembers, MEMBERS_DEFAULT_LIMIT, MEMBERS_MAX_LIMIT, type MembersHub } from "./members.js";
import { ProfileMembershipsService, type ProfileMembershipsHub } from "./profile-memberships.js";
import type { MembershipStatus } from "../profiles/types.js";

export interface MetricsRoutesOptions extends AuthDeps {
  metrics: AudienceMetricsService;
  explainer: AudienceExplainer;
  members: AudienceMembers;
  profileMemberships: ProfileMembershipsService;
}

const identityQuery = {
  type: "object",
  properties: {
    entityId: { type: "string", minLength: 1, maxLength: 1024, description: "The profile's identity value" },
    entityIdNS: { type: "string", minLength: 1, maxLength: 256, description: "Its namespace code (Email, ECID, ...)" },
  },
  required: ["entityId", "entityIdNS"],
} as const;

// The statuses are enums and every field the server always sends is required: the web client's
// types are generated from these schemas (scripts/gen-web-types.mjs).
const statusSchema = { type: "string", enum: ["realized", "exited"] } as const;
const statusOrNullSchema = { type: "string", nullable: true, enum: ["realized", "exited", null] } as const;

const identitySchema = { type: "object", properties: { namespace: { type: "string" }, id: { type: "string" } }, required: ["namespace", "id"] } as const;

const transitionSchema = {
  type: "object",
  properties: { from: statusOrNullSchema, to: statusSchema, source: { type: "string", enum: ["batch", "streaming", "edge", "backfill"] }, at: { type: "string" } },
  required: ["from", "to", "source", "at"],
} as const;

/** A computed attribute the expression reads (computed/explain-values.ts). */
const computedAttributeExplanationSchema = {
  type: "object",
  description: "A computed attribute the expression reads: its value now and the events that contribute to it, latest first",
  properties: {
    name: { type: "string" },
    path: { type: "string" },
    status: { type: "string" },
    function: { type: "string" },
    duration: { type: "object", properties: { count: { type: "integer" }, unit: { type: "string" } }, required: ["count", "unit"] },
    value: { description: "The value now, from the events the trace reads" },
    contributing: { type: "integer", description: "How many events contribute; events lists the latest 50" },
    events: {
      type: "array",
      items: {
        type: "object",
        properties: {
          _id: {},
          eventType: {},
          timestamp: { type: "string" },
          value: { description: "The field the function reads (null for COUNT)" },
          leavesAt: { type: "string", description: "The first instant the event is outside the lookback" },
        },
        required: ["_id", "eventType", "timestamp", "value", "leavesAt"],
      },
    },
    oldestLeavesAt: { type: "string", nullable: true, description: "When the oldest contributing event leaves the lookback" },
  },
  required: ["name", "path", "status", "function", "duration", "value", "contributing", "events", "oldestLeavesAt"],
} as const;

const attributeSchema = {
  type: "object",
  description: "A profile attribute the expression reads, with the fragment and merge-policy rule that supplied its value",
  properties: {
    path: { type: "string" },
    value: { description: "The merged profile's value, shown as the trace shows values (through an array, each item's)" },
    source: {
      type: "object",
      nullable: true,
      description: "The fragment whose value the merge kept; null when no fragment has one",
      properties: { datasetId: { type: "string" }, recordId: { type: "string", description: "namespace:id of the fragment's primary identity" }, timestamp: { type: "string" } },
      required: ["datasetId", "recordId", "timestamp"],
    },
    rule: { type: "string", enum: ["timestampOrdered", "dataSetPrecedence", "identityGraph", "none"] },
    rank: { type: "integer", nullable: true, description: "dataSetPrecedence: the source's dataset's place in the policy's order (1 = first); null when unlisted" },
  },
  required: ["path", "value", "source", "rule"],
} as const;

const traceNodeSchema = {
  type: "object",
  description: "A node of the expression with its value; `items` on nodes that test items (filters, exists, quantifiers, chain); `bounds` on occurs",
  additionalProperties: true,
  properties: { kind: { type: "string" }, text: { type: "string" }, value: {}, children: { type: "array", items: { type: "object", additionalProperties: true } } },
  required: ["kind", "text", "value", "children"],
} as const;

const explanationSchema = {
  type: "object",
  properties: {
    segmentId: { type: "string", nullable: true },
    entityId: { type: "string" },
    entityIdNS: { type: "string" },
    profileId: { type: "string" },
    evaluatedAt: { type: "string" },
    mergePolicyId: { type: "string", nullable: true },
    result: { type: "boolean" },
    excludedByConsent: { type: "boolean" },
    exitsAt: { type: "string", nullable: true },
    membership: {
      type: "object",
      properties: {
        status: statusOrNullSchema,
        lastQualificationTime: { type: "string", nullable: true },
        history: { type: "array", items: transitionSchema },
      },
      required: ["status", "lastQualificationTime", "history"],
    },
    references: { type: "array", items: { type: "object", properties: { id: { type: "string" }, status: statusOrNullSchema }, required: ["id", "status"] } },
    attributes: { type: "array", items: attributeSchema },
    events: { type: "object", properties: { read: { type: "integer" }, truncated: { type: "boolean" } }, required: ["read", "truncated"] },
    computedAttributes: { type: "array", items: computedAttributeExplanationSchema },
    trace: traceNodeSchema,
  },
  required: ["segmentId", "entityId", "entityIdNS", "profileId", "evaluatedAt", "mergePolicyId", "result", "excludedByConsent", "exitsAt", "membership", "references", "attributes", "events", "computedAttributes", "trace"],
} as const;

const bucketSchema = {
  type: "object",
  properties: {
    start: { type: "string" },
    end: { type: "string" },
    qualified: { type: "integer" },
    disqualified: { type: "integer" },
    net: { type: "integer" },
  },
  required: ["start", "end", "qualified", "disqualified", "net"],
} as const;

export async function metricsRoutes(app: FastifyInstance, opts: MetricsRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  app.get<{ Params: { id: string }; Querystring: { window: MetricWindow } }>("/segment/definitions/:id/metrics", {
    schema: {
      tags: ["Audience metrics"],
      summary: "Total qualified and new audience updated (streaming + edge) over the last 24 hours, 7 days or 30 days",
      headers: authHeaders,
      params: idParam("id"),
      querystring: {
        type: "object",
        properties: { window: { type: "string", enum: ["24h", "7d", "30d"], default: "24h" } },
      },
      response: {
        200: {
          type: "object",
          properties: {
            segmentId: { type: "string" },
            window: { type: "string", enum: ["24h", "7d", "30d"] },
            from: { type: "string" },
            to: { type: "string" },
            totalQualified: { type: "integer" },
            newAudienceUpdated: { type: "integer" },
            qualified: { type: "integer" },
            disqualified: { type: "integer" },
            bucketSizeMs: { type: "integer" },
            buckets: { type: "array", items: bucketSchema },
          },
          required: ["segmentId", "window", "from", "to", "totalQualified", "newAudienceUpdated", "qualified", "disqualified", "bucketSizeMs", "buckets"],
        },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "No such definition in this sandbox" },
      },
    },
  }, async (request) => opts.metrics.metrics(tenantOf(request), request.params.id, request.query.window));

  app.get<{ Params: { id: string }; Querystring: { status?: MembershipStatus; limit?: number; start?: string } }>("/segment/definitions/:id/members", {
    schema: {
      tags: ["Explain"],
      summary: "An audience's members, a page at a time: identities, status, last qualification time and the transition that set it (segmentd extension)",
      headers: authHeaders,
      params: idParam("id"),
      querystring: {
        type: "object",
        properties: {
          status: { type: "string", enum: ["realized", "exited"], default: "realized" },
          limit: { type: "integer", minimum: 1, maximum: MEMBERS_MAX_LIMIT, default: MEMBERS_DEFAULT_LIMIT },
          start: { type: "string", pattern: "^[0-9]{1,18}$", description: "_page.next of the previous page" },
        },
      },
      response: {
        200: {
          type: "object",
          properties: {
            segmentId: { type: "string" },
            status: statusSchema,
            children: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  profileId: { type: "string" },
                  identities: { type: "array", items: identitySchema },
                  status: statusSchema,
                  lastQualificationTime: { type: "string" },
                  since: { type: "object", nullable: true, properties: { source: { type: "string" }, at: { type: "string" } }, required: ["source", "at"] },
                },
                required: ["profileId", "identities", "status", "lastQualificationTime", "since"],
              },
            },
            _page: {
              type: "object",
              properties: { count: { type: "integer" }, limit: { type: "integer" }, totalCount: { type: "integer" }, next: { type: "string", nullable: true } },
              required: ["count", "limit", "totalCount", "next"],
            },
          },
          required: ["segmentId", "status", "children", "_page"],
        },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "No such definition in this sandbox" },
      },
    },
  }, async (request) => {
    const q = request.query;
    return opts.members.page(tenantOf(request), request.params.id, {
      status: q.status ?? "realized", limit: q.limit ?? MEMBERS_DEFAULT_LIMIT, ...(q.start === undefined ? {} : { after: q.start }),
    });
  });

  const explainTags = ["Explain"];
  app.get<{ Params: { id: string }; Querystring: { entityId: string; entityIdNS: string } }>("/segment/definitions/:id/explain", {
    schema: {
      tags: explainTags,
      summary: "Why a profile is in or out of an audience: its status and history, and the traced evaluation of the expression now (segmentd extension)",
      headers: authHeaders,
      params: idParam("id"),
      querystring: identityQuery,
      response: { 200: explanationSchema, ...commonErrorResponses, 404: { ...commonErrorResponses[400], description: "No such definition or profile in this sandbox" } },
    },
  }, async (request) => opts.explainer.explain(tenantOf(request), {
    definitionId: request.params.id, identity: { id: request.query.entityId, namespace: request.query.entityIdNS },
  }));

  app.post<{ Body: { expression: ExpressionInput; mergePolicyId?: string; entityId: string; entityIdNS: string } }>("/segment/definitions/explain", {
    schema: {
      tags: explainTags,
      summary: "Explain a draft expression for a profile without saving it (segmentd extension)",
      headers: authHeaders,
      body: {
        type: "object",
        properties: {
          expression: { type: "object", properties: { type: { type: "string" }, format: { type: "string" }, value: { type: "string" } }, required: ["type", "format", "value"] },
          mergePolicyId: { type: "string", minLength: 1, maxLength: 256 },
          ...identityQuery.properties,
        },
        required: ["expression", "entityId", "entityIdNS"],
      },
      response: { 200: explanationSchema, ...commonErrorResponses, 404: { ...commonErrorResponses[400], description: "No such profile in this sandbox" } },
    },
  }, async (request) => {
    const b = request.body;
    return opts.explainer.explain(tenantOf(request), {
      draft: { expression: b.expression, ...(b.mergePolicyId === undefined ? {} : { mergePolicyId: b.mergePolicyId }) },
      identity: { id: b.entityId, namespace: b.entityIdNS },
    });
  });

  app.get<{ Querystring: { entityId: string; entityIdNS: string } }>("/segment/memberships", {
    schema: {
      tags: explainTags,
      summary: "A profile's memberships across every audience, each with its status and most recent transitions (segmentd extension)",
      headers: authHeaders,
      querystring: identityQuery,
      response: {
        200: {
          type: "object",
          properties: {
            entityId: { type: "string" },
            entityIdNS: { type: "string" },
            profileId: { type: "string" },
            memberships: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  segmentId: { type: "string" },
                  name: { type: "string", nullable: true },
                  status: { type: "string", enum: ["realized", "exited"] },
                  lastQualificationTime: { type: "string" },
                  transitions: { type: "array", description: "Oldest first: the most recent 100", items: transitionSchema },
                },
                required: ["segmentId", "name", "status", "lastQualificationTime", "transitions"],
              },
            },
          },
          required: ["entityId", "entityIdNS", "profileId", "memberships"],
        },
        ...commonErrorResponses,
        404: { ...commonErrorResponses[400], description: "No such profile in this sandbox" },
      },
    },
  }, async (request) => opts.profileMemberships.get(tenantOf(request), { id: request.query.entityId, namespace: request.query.entityIdNS }));
}

export interface AudienceMetricsPluginOptions extends AuthDeps {
  meta: MetadataStore;
  /** The membership transitions the engines recorded; profiles and events for explain. */
  hub: ProfileReads & MembersHub & ProfileMembershipsHub;
  clock: Clock;
  /** Computed attributes for explain (drafts read them as saves do; their contributing events shown); none: neither. */
  computed?: ExplainComputedAttributes;
}

/**
 * The audience-metrics capability: owns its AudienceMetricsService (it reads the transitions the
 * streaming and edge engines record, nothing of theirs in memory) and serves `metricsRoutes` in
 * an encapsulated context under the prefix it is registered with.
 */
export const audienceMetricsPlugin = fp(
  async (app: FastifyInstance, opts: AudienceMetricsPluginOptions) => {
    const metrics = new AudienceMetricsService(opts.meta, opts.hub, opts.clock);
    const explainer = new AudienceExplainer(opts.meta, opts.hub, opts.clock, opts.computed);
    const members = new AudienceMembers(opts.meta, opts.hub);
    const profileMemberships = new ProfileMembershipsService(opts.meta, opts.hub);
    await metricsRoutes(app, { authenticator: opts.authenticator, tenants: opts.tenants, metrics, explainer, members, profileMemberships });
  },
  { name: "segmentd-audience-metrics", fastify: "5.x", encapsulate: true },
);
