/**
 * The audience builder's server side (issue #29, segmentd extensions): GET
 * /segment/builder/fields (the palette from the sandbox's data) and POST
 * /segment/builder/estimate (live sizes of an audience and its rules). Handlers translate HTTP
 * to BuilderFields / BuilderEstimator and back; nothing is stored.
 */
import type { FastifyInstance } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses } from "../../http/schemas.js";
import { MAX_ESTIMATE_EXPRESSIONS, type BuilderEstimateInput, type BuilderEstimator } from "../builder/estimates.js";
import type { BuilderFields } from "../builder/fields.js";

export interface BuilderRoutesOptions extends AuthDeps {
  fields: BuilderFields;
  estimator: BuilderEstimator;
}

const tags = ["Audience builder"];
// Enums and required fields as complete as the answers: the web client's types are generated from these schemas.
const fieldType = { type: "string", enum: ["string", "number", "integer", "boolean", "date", "date-time", "array", "object"] } as const;
const field = {
  type: "object",
  properties: {
    path: { type: "string" },
    type: fieldType,
    items: fieldType,
    count: { type: "integer" },
    examples: { type: "array", items: { anyOf: [{ type: "string" }, { type: "number" }, { type: "boolean" }] } },
  },
  required: ["path", "type", "count", "examples"],
} as const;
const fields = { type: "array", items: field } as const;

const paletteSchema = {
  type: "object",
  properties: {
    computedAt: { type: "string" },
    profile: { type: "object", properties: { sampled: { type: "integer" }, fields }, required: ["sampled", "fields"] },
    events: {
      type: "object",
      properties: {
        sampled: { type: "integer" },
        eventTypes: { type: "array", items: { type: "object", properties: { eventType: { type: "string" }, count: { type: "integer" }, fields }, required: ["eventType", "count", "fields"] } },
        fields,
      },
      required: ["sampled", "eventTypes", "fields"],
    },
    identities: {
      type: "object",
      properties: {
        namespaces: { type: "array", items: { type: "string" } },
        descriptors: {
          type: "array",
          items: { type: "object", properties: { path: { type: "string" }, namespace: { type: "string" }, primary: { type: "boolean" } }, required: ["path", "namespace", "primary"] },
        },
      },
      required: ["namespaces", "descriptors"],
    },
  },
  required: ["computedAt", "profile", "events", "identities"],
} as const;

const estimateSchema = {
  type: "object",
  properties: {
    evaluatedAt: { type: "string" },
    totalRows: { type: "integer" },
    numRowsToRead: { type: "integer" },
    confidenceInterval: { type: "string" },
    estimates: {
      type: "array",
      items: {
        type: "object",
        properties: {
          estimatedSize: { type: "integer" },
          standardError: { type: "number" },
          estimatedSizeRange: { type: "object", properties: { low: { type: "integer" }, high: { type: "integer" } }, required: ["low", "high"] },
          profilesReadSoFar: { type: "integer" },
          profilesMatchedSoFar: { type: "integer" },
        },
        required: ["estimatedSize", "standardError", "estimatedSizeRange", "profilesReadSoFar", "profilesMatchedSoFar"],
      },
    },
    tookMs: { type: "integer" },
  },
  required: ["evaluatedAt", "totalRows", "numRowsToRead", "confidenceInterval", "estimates", "tookMs"],
} as const;

export async function builderRoutes(app: FastifyInstance, opts: BuilderRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  app.get<{ Querystring: { refresh?: boolean } }>("/segment/builder/fields", {
    schema: {
      tags,
      summary: "The profile attributes, event types and their fields found in the sandbox's data, with types and examples (segmentd extension)",
      headers: authHeaders,
      querystring: { type: "object", properties: { refresh: { type: "boolean", description: "Sample again instead of the answer cached for a minute" } }, additionalProperties: false },
      response: { 200: paletteSchema, ...commonErrorResponses },
    },
  }, async (request) => opts.fields.palette(tenantOf(request), request.query.refresh === true));

  app.post<{ Body: BuilderEstimateInput }>("/segment/builder/estimate", {
    schema: {
      tags,
      summary: "Estimated sizes of several expressions at once (an audience and its rules), as POST /preview + GET /estimate count them (segmentd extension)",
      headers: authHeaders,
      body: {
        type: "object",
        additionalProperties: false,
        properties: {
          expressions: { type: "array", minItems: 1, maxItems: MAX_ESTIMATE_EXPRESSIONS, items: { type: "string", minLength: 1 } },
          graphType: { type: "string", enum: ["none", "pdg"] },
        },
        required: ["expressions"],
      },
      response: { 200: estimateSchema, ...commonErrorResponses },
    },
  }, async (request) => opts.estimator.estimate(tenantOf(request), request.body));
}
