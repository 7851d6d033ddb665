/**
 * JSON Schemas of the API, shared by request validation, response
 * serialization and the OpenAPI document. Response schemas list every field
 * the service returns (the serializer drops anything not listed).
 */

export const sandboxSchema = {
  type: "object",
  properties: {
    sandboxId: { type: "string" },
    sandboxName: { type: "string" },
    type: { type: "string", enum: ["production", "development"] },
    default: { type: "boolean" },
  },
  required: ["sandboxId", "sandboxName", "type", "default"],
} as const;

const methodFlag = {
  type: "object",
  properties: { enabled: { type: "boolean" } },
  additionalProperties: false,
} as const;

export const evaluationInfoInputSchema = {
  type: "object",
  properties: { batch: methodFlag, continuous: methodFlag, synchronous: methodFlag },
  additionalProperties: false,
} as const;

const methodFlagOut = { type: "object", properties: { enabled: { type: "boolean" } }, required: ["enabled"] } as const;

export const expressionSchema = {
  type: "object",
  properties: {
    type: { type: "string", description: "PQL" },
    format: { type: "string", enum: ["pql/text", "pql/json"] },
    value: { type: "string", description: "PQL text, or the pql/json tree serialised as a JSON string" },
  },
  required: ["type", "format", "value"],
} as const;

export const classificationSchema = {
  type: "object",
  description:
    "segmentd extension (not an AEP field): how the expression classifies under the edge/streaming rules, and whether its merge policy is active on edge.",
  properties: {
    queryType: {
      type: "string",
      nullable: true,
      enum: ["single-event", "profile-only", "single-event-with-profile", "segment-of-segments", "multiple-events", null],
    },
    batch: { type: "boolean" },
    continuous: { type: "boolean" },
    synchronous: { type: "boolean" },
    reasons: { type: "array", items: { type: "string" } },
    mergePolicyActiveOnEdge: { type: "boolean" },
  },
  required: ["queryType", "batch", "continuous", "synchronous", "reasons", "mergePolicyActiveOnEdge"],
} as const;

export const segmentDefinitionSchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    imsOrgId: { type: "string" },
    sandbox: sandboxSchema,
    name: { type: "string" },
    description: { type: "string" },
    profileInstanceId: { type: "string" },
    schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    expression: expressionSchema,
    mergePolicyId: { type: "string" },
    evaluationInfo: {
      type: "object",
      properties: { batch: methodFlagOut, continuous: methodFlagOut, synchronous: methodFlagOut },
      required: ["batch", "continuous", "synchronous"],
    },
    dataGovernancePolicy: { type: "object", properties: { excludeOptOut: { type: "boolean" } }, required: ["excludeOptOut"] },
    payloadSchema: { type: "string" },
    ttlInDays: { type: "integer" },
    creationTime: { type: "integer", description: "epoch milliseconds" },
    updateEpoch: { type: "integer", description: "epoch seconds" },
    updateTime: { type: "integer", description: "epoch milliseconds" },
    classification: classificationSchema,
  },
  required: [
    "id", "imsOrgId", "sandbox", "name", "profileInstanceId", "schema", "expression", "mergePolicyId",
    "evaluationInfo", "dataGovernancePolicy", "creationTime", "updateEpoch", "updateTime", "classification",
  ],
} as const;

const nonEmpty = { type: "string", minLength: 1 } as const;

/** Body of POST /segment/definitions (AEP CreateSegmentDefinition) and of PATCH (a whole SegmentDefinition). */
export const definitionInputSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 1024 },
    description: { type: "string", maxLength: 8192 },
    schema: { type: "object", properties: { name: nonEmpty }, required: ["name"] },
    expression: {
      type: "object",
      properties: { type: { type: "string" }, format: { type: "string" }, value: { type: "string" } },
      required: ["type", "format", "value"],
    },
    evaluationInfo: evaluationInfoInputSchema,
    mergePolicyId: nonEmpty,
    profileInstanceId: { type: "string" },
    payloadSchema: { type: "string" },
    ttlInDays: { type: "integer", minimum: 1, maximum: 3650 },
    dataGovernancePolicy: { type: "object", properties: { excludeOptOut: { type: "boolean" } } },
    id: { type: "string" },
    imsOrgId: { type: "string" },
    sandbox: { type: "object", properties: { sandboxId: { type: "string" }, sandboxName: { type: "string" } } },
    creationTime: { type: "integer" },
    updateTime: { type: "integer" },
    updateEpoch: { type: "integer" },
    classification: { type: "object", description: "ignored on input (server-computed)" },
  },
  required: ["name", "schema", "expression"],
} as const;

export const upsErrorSchema = {
  type: "object",
  description: "UPS service error",
  properties: {
    requestId: { type: "string" },
    errors: {
      type: "object",
      additionalProperties: {
        type: "array",
        items: { type: "object", properties: { code: {}, message: { type: "string" } }, additionalProperties: true },
      },
    },
    type: { type: "string" },
    title: { type: "string" },
    status: { type: "integer" },
  },
} as const;

export const gatewayErrorSchema = {
  type: "object",
  description: "Gateway error (credentials and headers)",
  properties: { error_code: { type: "string" }, message: { type: "string" } },
} as const;

/** Error responses every authenticated route documents. */
export const commonErrorResponses = {
  400: { ...upsErrorSchema, description: "Invalid request (UPS error), or a missing header (gateway error)" },
  401: { ...gatewayErrorSchema, description: "Invalid or expired token (gateway error 401013)" },
  403: { ...upsErrorSchema, description: "Missing token or API key, org not granted (gateway errors), unknown sandbox (UPS error)" },
  413: { ...upsErrorSchema, description: "Request body too large" },
} as const;

export const bulkGetBodySchema = {
  type: "object",
  properties: {
    ids: {
      type: "array",
      items: { type: "object", properties: { id: { type: "string", minLength: 1, maxLength: 256 } }, required: ["id"] },
    },
  },
  required: ["ids"],
} as const;

export const bulkItemErrorSchema = {
  type: "object",
  properties: {
    requestId: { type: "string" },
    errors: { type: "object", additionalProperties: { type: "array", items: { type: "object", properties: { code: { type: "integer" }, message: { type: "string" } } } } },
  },
  required: ["requestId", "errors"],
} as const;

export const idParam = (name: string) =>
  ({ type: "object", properties: { [name]: { type: "string", minLength: 1, maxLength: 256 } }, required: [name] }) as const;

export const authHeaders = {
  type: "object",
  properties: {
    authorization: { type: "string", description: "Bearer <ACCESS_TOKEN>" },
    "x-api-key": { type: "string" },
    "x-gw-ims-org-id": { type: "string" },
    "x-sandbox-name": { type: "string" },
    "x-request-id": { type: "string" },
  },
} as const;

export const mergePolicySchema = {
  type: "object",
  properties: {
    id: { type: "string" },
    name: { type: "string" },
    imsOrgId: { type: "string" },
    sandbox: sandboxSchema,
    schema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    version: { type: "integer" },
    identityGraph: { type: "object", properties: { type: { type: "string", enum: ["none", "pdg"] } }, required: ["type"] },
    attributeMerge: {
      type: "object",
      properties: { type: { type: "string", enum: ["timestampOrdered", "dataSetPrecedence"] }, order: { type: "array", items: { type: "string" } } },
      required: ["type"],
    },
    isActiveOnEdge: { type: "boolean" },
    default: { type: "boolean" },
    updateEpoch: { type: "integer", description: "epoch seconds" },
  },
  required: ["id", "name", "imsOrgId", "sandbox", "schema", "version", "identityGraph", "attributeMerge", "isActiveOnEdge", "default", "updateEpoch"],
} as const;

export const mergePolicyInputSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 1024 },
    schema: { type: "object", properties: { name: nonEmpty }, required: ["name"] },
    identityGraph: { type: "object", properties: { type: { type: "string", enum: ["none", "pdg"] } }, required: ["type"] },
    attributeMerge: {
      type: "object",
      properties: {
        type: { type: "string", enum: ["timestampOrdered", "dataSetPrecedence"] },
        order: { type: "array", items: { type: "string" }, maxItems: 1000 },
      },
      required: ["type"],
    },
    isActiveOnEdge: { type: "boolean" },
    default: { type: "boolean" },
    id: { type: "string" },
    imsOrgId: { type: "string" },
    version: { type: "integer" },
    sandbox: { type: "object" },
    updateEpoch: { type: "integer" },
  },
  required: ["schema", "identityGraph", "attributeMerge"],
} as const;

const patchOpSchema = {
  type: "object",
  properties: {
    op: { type: "string", enum: ["add", "remove", "replace", "move", "copy", "test"] },
    path: { type: "string" },
    from: { type: "string" },
    value: {},
  },
  required: ["op", "path"],
} as const;

export const jsonPatchSchema = {
  description: "RFC 6902 JSON Patch: an array of operations (a single operation object is accepted too)",
  oneOf: [{ type: "array", items: patchOpSchema, minItems: 1, maxItems: 100 }, patchOpSchema],
} as const;
