/**
 * Flow Service API for destinations (docs/activation.md), under
 * /data/foundation/flowservice: connection specs, base connections, target connections,
 * flows (JSON Patch under If-Match, enable/disable actions, resend) and flow runs.
 * Single resources come back as AEP does, `{items: [resource]}`; creates answer 201
 * `{id, etag}`; deletes 204. Another sandbox's or organization's ids are 404.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { actorOf, tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses, jsonPatchSchema } from "../../http/schemas.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import type { PatchOperation } from "../../services/json-patch.js";
import { scopeOf } from "../../services/tenancy.js";
import { connectionSpecs } from "../connection-specs.js";
import { invalid } from "../inputs.js";
import { NOT_FOUND_CODE, type ActivationService } from "../service.js";
import type { DeliveryReports } from "../types.js";
import type { DeliveryCommands } from "../delivery-commands.js";

export const FLOWSERVICE_PREFIX = "/data/foundation/flowservice";
/** Largest request body of these routes. */
export const ACTIVATION_BODY_LIMIT = 64 * 1024;
const MAX_LIMIT = 100;
/** Longest wait of a create/enable for the deliverer to take the flow. */
const START_WAIT_MS = 10_000;

export interface ActivationRoutesOptions extends AuthDeps {
  service: ActivationService;
  /** The deliverer's reports, once it runs. */
  reports: () => DeliveryReports | undefined;
  /** Resend and replay: here, or on the hub that delivers the flow. */
  commands: DeliveryCommands;
}

type Obj = Record<string, unknown>;
const anyObject = { type: "object", additionalProperties: true } as const;
const itemsOf = { type: "object", properties: { items: { type: "array", items: anyObject } }, required: ["items"], additionalProperties: true } as const;
const created = { type: "object", properties: { id: { type: "string" }, etag: { type: "string" } }, required: ["id", "etag"], additionalProperties: true } as const;
const idParams = { type: "object", properties: { id: { type: "string", minLength: 1, maxLength: 256 } }, required: ["id"] } as const;
const pageQuery = {
  type: "object",
  properties: {
    limit: { type: "integer", minimum: 1, maximum: 1_000_000, description: `Page size, at most ${MAX_LIMIT} (default ${MAX_LIMIT})` },
    start: { type: "integer", minimum: 0, maximum: 1_000_000, description: "Offset of the first item" },
  },
} as const;
const notFound = { ...commonErrorResponses[400], description: "No such resource in this sandbox (SEGMENTD-DESTINATION-404)" };
const conflict = { ...commonErrorResponses[400], description: "Still referenced (SEGMENTD-DESTINATION-IN-USE-409)" };
const errors = { ...commonErrorResponses, 404: notFound };
const IF_MATCH_HEADERS = { ...authHeaders, properties: { ...authHeaders.properties, "if-match": { type: "string", description: "the resource's etag (quoted as returned)" } } } as const;
const bodySchema = (description: string) => ({ type: "object", maxProperties: 20, description, additionalProperties: true }) as const;

interface PageQ { limit?: number; start?: number }

function page(q: PageQ): { offset: number; limit: number } {
  return { offset: q.start ?? 0, limit: Math.min(q.limit ?? MAX_LIMIT, MAX_LIMIT) };
}

function listing(request: FastifyRequest, path: string, p: { offset: number; limit: number }, r: { items: unknown[]; total: number }): Obj {
  const next = p.offset + r.items.length;
  return {
    items: r.items,
    _page: { count: r.items.length, total: r.total, start: p.offset, limit: p.limit },
    _links: next < r.total ? { next: { href: `${FLOWSERVICE_PREFIX}${path}?start=${next}&limit=${p.limit}` } } : {},
  };
}

export async function activationRoutes(app: FastifyInstance, o: ActivationRoutesOptions): Promise<void> {
  registerTenantHooks(app, o);
  const svc = o.service;
  const tags = ["Destinations"];
  const ref = (request: FastifyRequest) => scopeOf(tenantOf(request));
  const actor = (request: FastifyRequest) => actorOf(request);
  const config = { bodyLimit: ACTIVATION_BODY_LIMIT };
  // The exact 413 before the body is read (the route's bodyLimit still caps a chunked one).
  app.addHook("onRequest", async (request) => {
    const n = Number(request.headers["content-length"] ?? 0);
    if (n > ACTIVATION_BODY_LIMIT) throw new ApiError(413, ErrorCodes.bodyTooLarge, `Request body is larger than the limit of ${ACTIVATION_BODY_LIMIT} bytes`);
  });

  // A created or enabled flow is answered once this server delivers it from a fixed log position
  // (what is written after the answer arrives as transitions); bounded, so a slow store never holds the answer long.
  const startedHere = async (t: { orgId: string; sandboxName: string }, flowId: string): Promise<void> => {
    const started = o.reports()?.delivering?.({ orgId: t.orgId, sandboxName: t.sandboxName }, flowId);
    if (started === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([started.catch(() => false), new Promise((r) => (timer = setTimeout(r, START_WAIT_MS)))]);
    clearTimeout(timer);
  };

  // ---- connection specs --------------------------------------------------------------

  app.get("/connectionSpecs", {
    schema: { tags, summary: "List the destinations segmentd offers (HTTP API, NATS JetStream subject, file export)", headers: authHeaders, response: { 200: itemsOf, ...commonErrorResponses } },
  }, async () => ({ items: connectionSpecs() }));

  app.get<{ Params: { id: string } }>("/connectionSpecs/:id", {
    schema: { tags, summary: "One connection spec", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => {
    const spec = connectionSpecs().find((s) => s.id === request.params.id);
    if (!spec) throw new ApiError(404, NOT_FOUND_CODE, `Connection spec with id '${request.params.id}' was not found`);
    return { items: [spec] };
  });

  // ---- base connections --------------------------------------------------------------

  app.post<{ Body: Obj }>("/connections", {
    ...config,
    schema: {
      tags, summary: "Create a base connection (a destination's auth)",
      description: "Body: {name, description?, connectionSpec: {id, version}, auth?: {specName: None | Bearer Token | OAuth2 Client Credentials, params}}. Secrets are stored encrypted and never returned.",
      headers: authHeaders, body: bodySchema("Base connection"), response: { 201: created, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    reply.code(201);
    return svc.createConnection(ref(request), request.body ?? {}, actor(request));
  });

  app.get<{ Querystring: PageQ }>("/connections", {
    schema: { tags, summary: "List base connections", headers: authHeaders, querystring: pageQuery, response: { 200: itemsOf, ...commonErrorResponses } },
  }, async (request) => {
    const p = page(request.query);
    return listing(request, "/connections", p, await svc.listConnections(ref(request), p));
  });

  app.get<{ Params: { id: string } }>("/connections/:id", {
    schema: { tags, summary: "One base connection (secrets shown as ***)", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => ({ items: [await svc.getConnection(ref(request), request.params.id)] }));

  const precondition = {
    412: { ...commonErrorResponses[400], description: "If-Match does not match the current etag" },
    428: { ...commonErrorResponses[400], description: "If-Match is missing" },
  };
  const ifMatchOf = (request: FastifyRequest) => {
    const h = request.headers["if-match"];
    return Array.isArray(h) ? h[0] : h;
  };

  app.patch<{ Params: { id: string }; Body: PatchOperation[] | PatchOperation }>("/connections/:id", {
    ...config,
    schema: {
      tags, summary: "Update a base connection with JSON Patch (If-Match: its etag)",
      description: "Editable: /name, /description, /auth (specName, params). A secret left as \"***\" keeps its stored value. Answers {id, etag}.",
      headers: IF_MATCH_HEADERS, params: idParams, body: jsonPatchSchema, response: { 200: created, ...errors, ...precondition },
    },
  }, async (request) => svc.patchConnection(ref(request), request.params.id, Array.isArray(request.body) ? request.body : [request.body], ifMatchOf(request), actor(request)));

  app.delete<{ Params: { id: string } }>("/connections/:id", {
    schema: { tags, summary: "Delete a base connection (refused while a target connection uses it)", headers: authHeaders, params: idParams, response: { 204: { type: "null" }, ...errors, 409: conflict } },
  }, async (request, reply) => {
    await svc.deleteConnection(ref(request), request.params.id);
    reply.code(204);
    return null;
  });

  // ---- target connections ------------------------------------------------------------

  app.post<{ Body: Obj }>("/targetConnections", {
    ...config,
    schema: {
      tags, summary: "Create a target connection (where and how data is sent)",
      description: "Body: {name, description?, baseConnectionId, connectionSpec: {id, version}, data?: {format: json}, params}. params by spec: HTTP API {httpEndpoint, headers?}; NATS {subject, serverUrl?} (nats:// or tls://; default: the server's natsUrl); file {format, compression, exportMode, frequency}. Webhook and NATS server URLs are checked (form and every resolved address).",
      headers: authHeaders, body: bodySchema("Target connection"), response: { 201: created, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    reply.code(201);
    return svc.createTarget(ref(request), request.body ?? {}, actor(request));
  });

  app.get<{ Querystring: PageQ }>("/targetConnections", {
    schema: { tags, summary: "List target connections", headers: authHeaders, querystring: pageQuery, response: { 200: itemsOf, ...commonErrorResponses } },
  }, async (request) => {
    const p = page(request.query);
    return listing(request, "/targetConnections", p, await svc.listTargets(ref(request), p));
  });

  app.get<{ Params: { id: string } }>("/targetConnections/:id", {
    schema: { tags, summary: "One target connection (header values shown as ***)", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => ({ items: [await svc.getTarget(ref(request), request.params.id)] }));

  app.patch<{ Params: { id: string }; Body: PatchOperation[] | PatchOperation }>("/targetConnections/:id", {
    ...config,
    schema: {
      tags, summary: "Update a target connection with JSON Patch (If-Match: its etag)",
      description: "Editable: /name, /description, /params (e.g. /params/httpEndpoint, /params/headers/X-Name). A header value left as \"***\" keeps its stored value; the URL is checked again. Answers {id, etag}.",
      headers: IF_MATCH_HEADERS, params: idParams, body: jsonPatchSchema, response: { 200: created, ...errors, ...precondition },
    },
  }, async (request) => svc.patchTarget(ref(request), request.params.id, Array.isArray(request.body) ? request.body : [request.body], ifMatchOf(request), actor(request)));

  app.delete<{ Params: { id: string } }>("/targetConnections/:id", {
    schema: { tags, summary: "Delete a target connection (refused while a flow uses it)", headers: authHeaders, params: idParams, response: { 204: { type: "null" }, ...errors, 409: conflict } },
  }, async (request, reply) => {
    await svc.deleteTarget(ref(request), request.params.id);
    reply.code(204);
    return null;
  });

  // ---- flows ---------------------------------------------------------------------------

  app.post<{ Body: Obj }>("/flows", {
    ...config,
    schema: {
      tags, summary: "Create a dataflow",
      description: "Body: {name, description?, flowSpec?, sourceConnectionIds?, targetConnectionIds: [id], transformations?: [{name: GeneralTransform, params: {segmentSelectors: {selectors}, profileSelectors: {selectors}}}], delivery?, state?}. A webhook flow's response carries its signing secret (whsec_…) once; it is never shown again.",
      headers: authHeaders, body: bodySchema("Flow"), response: { 201: created, ...commonErrorResponses },
    },
  }, async (request, reply) => {
    const t = ref(request);
    const out = await svc.createFlow(t, request.body ?? {}, actor(request));
    await startedHere(t, String(out.id));
    reply.code(201);
    return out;
  });

  app.get<{ Querystring: PageQ }>("/flows", {
    schema: { tags, summary: "List dataflows, each with its delivery statistics (deliveryStats)", headers: authHeaders, querystring: pageQuery, response: { 200: itemsOf, ...commonErrorResponses } },
  }, async (request) => {
    const p = page(request.query);
    const t = ref(request);
    const r = await svc.listFlows(t, p);
    const reports = o.reports();
    const items = await Promise.all(r.items.map(async (f) => ({ ...svc.renderFlow(f, t), ...(reports ? { deliveryStats: await reports.stats(f.scope, f.id) } : {}) })));
    return listing(request, "/flows", p, { items, total: r.total });
  });

  app.get<{ Params: { id: string } }>("/flows/:id", {
    schema: { tags, summary: "One dataflow, with its delivery statistics (segmentd extension deliveryStats)", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => {
    const t = ref(request);
    const r = await svc.getFlowRecord(t, request.params.id);
    const reports = o.reports();
    const stats = reports ? await reports.stats(r.scope, r.id) : null;
    return { items: [{ ...svc.renderFlow(r, t), ...(stats ? { deliveryStats: stats } : {}) }] };
  });

  app.patch<{ Params: { id: string }; Body: PatchOperation[] | PatchOperation }>("/flows/:id", {
    ...config,
    schema: {
      tags, summary: "Update a dataflow with JSON Patch (If-Match: its etag)",
      description: "Editable: /name, /description, /state, /transformations/0/params/segmentSelectors/selectors, /transformations/0/params/profileSelectors/selectors, /delivery. Without If-Match: 428; with a stale etag: 412. Answers {id, etag}.",
      headers: IF_MATCH_HEADERS, params: idParams, body: jsonPatchSchema, response: { 200: created, ...errors, ...precondition },
    },
  }, async (request) => svc.patchFlow(ref(request), request.params.id, Array.isArray(request.body) ? request.body : [request.body], ifMatchOf(request), actor(request)));

  app.post<{ Params: { id: string }; Querystring: { op: "enable" | "disable" } }>("/flows/:id/action", {
    schema: {
      tags, summary: "Enable or disable a dataflow (AEP's action endpoint)", headers: authHeaders, params: idParams,
      querystring: { type: "object", properties: { op: { type: "string", enum: ["enable", "disable"] } }, required: ["op"] },
      response: { 200: created, ...errors },
    },
  }, async (request) => {
    const t = ref(request);
    const out = await svc.setFlowState(t, request.params.id, request.query.op === "enable" ? "enabled" : "disabled", actor(request));
    if (request.query.op === "enable") await startedHere(t, request.params.id);
    return out;
  });

  app.post<{ Params: { id: string } }>("/flows/:id/signingSecret", {
    schema: {
      tags, summary: "Replace a webhook flow's signing secret (segmentd extension)",
      description: "Answers {id, etag, signingSecret}; the new secret is shown this once and signs every delivery from now on.",
      headers: authHeaders, params: idParams, response: { 200: created, ...errors },
    },
  }, async (request) => svc.rotateSigningSecret(ref(request), request.params.id, actor(request)));

  app.delete<{ Params: { id: string } }>("/flows/:id", {
    schema: { tags, summary: "Delete a dataflow (its deliveries stop)", headers: authHeaders, params: idParams, response: { 204: { type: "null" }, ...errors } },
  }, async (request, reply) => {
    await svc.deleteFlow(ref(request), request.params.id);
    reply.code(204);
    return null;
  });

  app.post<{ Params: { id: string }; Body: { audienceIds?: string[] } | undefined }>("/flows/:id/resend", {
    ...config,
    // No body means every audience of the flow.
    preValidation: async (request) => {
      request.body ??= {};
    },
    schema: {
      tags, summary: "Send the selected audiences' current members again (segmentd extension; AEP's \"Activate now\")",
      description: "Body (optional): {audienceIds: [...]}, a subset of the flow's audiences; default all. Answers 202 {runId}.",
      headers: authHeaders, params: idParams,
      body: { type: "object", properties: { audienceIds: { type: "array", maxItems: 100, items: { type: "string", minLength: 1, maxLength: 256 } } }, additionalProperties: false },
      response: { 202: { type: "object", properties: { runId: { type: "string" } }, required: ["runId"] }, ...errors, 409: { ...commonErrorResponses[400], description: "The flow is disabled" }, 503: { ...commonErrorResponses[400], description: "Delivery is not running" } },
    },
  }, async (request, reply) => {
    const t = ref(request);
    const r = await svc.getFlowRecord(t, request.params.id);
    const selected = svc.selectedAudiences(r);
    const wanted = request.body?.audienceIds;
    if (wanted !== undefined) {
      const i = wanted.findIndex((a) => !selected.includes(a));
      if (i >= 0) throw invalid(`audienceIds[${i}] '${wanted[i]!}' is not an audience of this flow`);
    }
    if (r.state !== "enabled") throw new ApiError(409, "SEGMENTD-DESTINATION-STATE-409", `Flow '${r.id}' is disabled; enable it before resending`);
    const out = await o.commands.run(r.scope, r.id, { op: "resend", ...(wanted === undefined ? {} : { audienceIds: wanted }) });
    reply.code(202);
    return out;
  });

  const running = (): DeliveryReports => {
    const reports = o.reports();
    if (!reports) throw new ApiError(503, ErrorCodes.unavailable, "Delivery is not running in this server");
    return reports;
  };

  app.get<{ Params: { id: string } }>("/flows/:id/deadLetters", {
    schema: {
      tags, summary: "Deliveries that ran out of retries (segmentd extension)",
      description: "Answers {items: [{unitId, webhookId, items, attempts, lastError}]}: each a delivery (one request's transitions) retried for the flow's retry period without success.",
      headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors, 503: { ...commonErrorResponses[400], description: "Delivery is not running" } },
    },
  }, async (request) => {
    const r = await svc.getFlowRecord(ref(request), request.params.id);
    return { items: await running().deadLetters(r.scope, r.id) };
  });

  app.post<{ Params: { id: string }; Body: { unitIds?: string[] } | undefined }>("/flows/:id/deadLetters/replay", {
    ...config,
    preValidation: async (request) => {
      request.body ??= {};
    },
    schema: {
      tags, summary: "Send dead letters again (segmentd extension)",
      description: "Body (optional): {unitIds: [...]}; default every dead letter of the flow. They go back to the flow's queue with a fresh retry period, under the same webhook-id. Answers 202 {replayed}.",
      headers: authHeaders, params: idParams,
      body: { type: "object", properties: { unitIds: { type: "array", maxItems: 1000, items: { type: "string", minLength: 1, maxLength: 256 } } }, additionalProperties: false },
      response: { 202: { type: "object", properties: { replayed: { type: "integer" } }, required: ["replayed"] }, ...errors, 409: { ...commonErrorResponses[400], description: "The flow is disabled" }, 503: { ...commonErrorResponses[400], description: "Delivery is not running here" } },
    },
  }, async (request, reply) => {
    const r = await svc.getFlowRecord(ref(request), request.params.id);
    if (r.state !== "enabled") throw new ApiError(409, "SEGMENTD-DESTINATION-STATE-409", `Flow '${r.id}' is disabled; enable it before replaying`);
    const unitIds = request.body?.unitIds;
    const out = await o.commands.run(r.scope, r.id, { op: "replayDead", ...(unitIds === undefined ? {} : { unitIds }) });
    reply.code(202);
    return out;
  });

  // ---- runs ----------------------------------------------------------------------------

  app.get<{ Querystring: PageQ & { property?: string | string[] } }>("/runs", {
    schema: {
      tags, summary: "Flow runs of a dataflow (property=flowId==<id>)", headers: authHeaders,
      querystring: { type: "object", properties: { ...pageQuery.properties, property: { anyOf: [{ type: "string", maxLength: 300 }, { type: "array", maxItems: 5, items: { type: "string", maxLength: 300 } }] } } },
      response: { 200: itemsOf, ...commonErrorResponses },
    },
  }, async (request) => {
    const props = request.query.property === undefined ? [] : Array.isArray(request.query.property) ? request.query.property : [request.query.property];
    const flowIds = props.map((p) => /^flowId==(.+)$/.exec(p)?.[1]).filter((x): x is string => x !== undefined);
    if (flowIds.length !== 1) throw invalid("GET /runs needs one property=flowId==<flow id>");
    const p = page(request.query);
    const t = ref(request);
    const flow = await svc.findFlow(t, flowIds[0]!);
    const reports = o.reports();
    // Another sandbox's flow, or none: an empty list, nothing read.
    if (!flow || !reports) return listing(request, "/runs", p, { items: [], total: 0 });
    return listing(request, "/runs", p, await reports.runs(flow.scope, flow.id, p));
  });

  app.get<{ Params: { id: string } }>("/runs/:id", {
    schema: { tags, summary: "One flow run", headers: authHeaders, params: idParams, response: { 200: itemsOf, ...errors } },
  }, async (request) => {
    const t = ref(request);
    const reports = o.reports();
    const id = request.params.id;
    let run: unknown = null;
    if (reports?.run) run = await reports.run({ orgId: t.orgId, sandboxName: t.sandboxName }, id);
    else if (reports) {
      for (const f of (await svc.listFlows(t, { offset: 0, limit: 200 })).items) {
        const runs = await reports.runs(f.scope, f.id, { offset: 0, limit: 1000 });
        run = runs.items.find((x) => typeof x === "object" && x !== null && (x as Obj).id === id) ?? null;
        if (run) break;
      }
    }
    if (run === null) throw new ApiError(404, NOT_FOUND_CODE, `Run with id '${id.slice(0, 256)}' was not found`);
    return { items: [run] };
  });
}
