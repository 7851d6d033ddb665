/**
 * POST /data/core/ups/segment/definitions/{id}/impact (segmentd extension, issue #28): what an
 * edit would do to the audience before it is saved. The handler translates HTTP to
 * ImpactService and back; nothing is stored.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses, evaluationInfoInputSchema, expressionSchema, idParam } from "../../http/schemas.js";
import { IMPACT_MAX_SAMPLE, type ImpactInput, type ImpactService } from "../previews/impact-service.js";

export interface ImpactRoutesOptions extends AuthDeps {
  impact: ImpactService;
}

const identities = { type: "array", items: { type: "object", properties: { namespace: { type: "string" }, id: { type: "string" } }, required: ["namespace", "id"] } } as const;
const group = {
  type: "object",
  properties: {
    count: { type: "integer" },
    sample: { type: "array", items: { type: "object", properties: { profileId: { type: "string" }, identities }, required: ["profileId", "identities"] } },
  },
  required: ["count", "sample"],
} as const;
const side = {
  type: "object",
  properties: {
    qualified: { type: "integer" }, expression: { type: "string" }, mergePolicyId: { type: "string" }, excludeOptOut: { type: "boolean" },
    evaluationInfo: { type: "object", additionalProperties: true },
  },
  required: ["qualified", "expression", "mergePolicyId", "excludeOptOut", "evaluationInfo"],
} as const;

const impactSchema = {
  type: "object",
  properties: {
    segmentId: { type: "string" },
    evaluatedAt: { type: "string" },
    exact: { type: "boolean", description: "Every profile was evaluated both ways on the current data (no sample, no interval)" },
    profiles: { type: "integer", description: "Profiles evaluated" },
    before: side,
    after: side,
    enter: group,
    leave: group,
    stay: group,
    eligibility: { type: "object", additionalProperties: true, description: "The edited expression's answer from POST /segment/eligibility" },
    refused: {
      type: "array",
      description: "Methods the edit enables that the edited definition is not eligible for: saving it would be refused",
      items: { type: "object", properties: { method: { type: "string" }, message: { type: "string" } }, required: ["method", "message"] },
    },
    tookMs: { type: "integer" },
  },
  required: ["segmentId", "evaluatedAt", "exact", "profiles", "before", "after", "enter", "leave", "stay", "eligibility", "refused", "tookMs"],
} as const;

export async function impactRoutes(app: FastifyInstance, opts: ImpactRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  app.post<{ Params: { id: string }; Body: ImpactInput }>("/segment/definitions/:id/impact", {
    schema: {
      tags: ["Explain"],
      summary: "What an edit would do to an audience: profiles entering, leaving and staying, exact on the current data (segmentd extension)",
      headers: authHeaders,
      params: idParam("id"),
      body: {
        type: "object",
        additionalProperties: false,
        properties: {
          expression: expressionSchema,
          mergePolicyId: { type: "string", minLength: 1, maxLength: 256 },
          dataGovernancePolicy: { type: "object", properties: { excludeOptOut: { type: "boolean" } }, required: ["excludeOptOut"], additionalProperties: false },
          evaluationInfo: evaluationInfoInputSchema,
          sampleSize: { type: "integer", minimum: 0, maximum: IMPACT_MAX_SAMPLE },
        },
      },
      response: { 200: impactSchema, ...commonErrorResponses, 404: { ...commonErrorResponses[400], description: "No such definition in this sandbox" } },
    },
  }, async (request) => opts.impact.impact(tenantOf(request), request.params.id, request.body));
}
