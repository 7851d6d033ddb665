// Streaming collection (AEP's Data Collection Core Service shapes):
//   POST /collection/{connectionId}[?syncValidation=true]   one XDM message
//   POST /collection/batch/{connectionId}                   {messages: [...]}
// A message is acknowledged (200/207 entry without error) only after its record
// was committed durably. The connection id is accepted and echoed as inletId;
// the target dataset comes from each message's header.datasetId.
import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { registerTenantHooks } from "../../http/auth.js";
import "../../http/body-parsing.js"; // the recordsBody route option
import { tenantOf } from "../../http/request-context.js";
import { unstorableReason } from "../../platform/limits.js";
import { ApiError, badRequest } from "../../services/errors.js";
import { ingestRecords, type IngestStore } from "../ingest.js";
import type { RecordError, SchemaClass, TenantScope, ValidRecord } from "../types.js";
import { ERROR_CODES as RECORD_ERROR_CODES } from "../validate.js";
import { isPlainObject } from "../xdm-object.js";
import { profileScope, toApiError, type ProfileRoutesOptions } from "./context.js";

export const COLLECTION_PREFIX = "/collection";
export const MAX_BATCH_MESSAGES = 1000;

interface Message {
  header?: { datasetId?: unknown; schemaRef?: { id?: unknown } };
  body?: { xdmEntity?: unknown };
}

/** The XDM class a message declares through its schemaRef, when it names a class. */
function declaredClass(m: Message): SchemaClass | undefined {
  const id = m.header?.schemaRef?.id;
  if (typeof id !== "string") return undefined;
  if (/context\/experienceevent$/i.test(id)) return "experienceevent";
  if (/context\/profile$/i.test(id)) return "profile";
  return undefined;
}

interface Outcome { xactionId: string; status?: number; message?: string; errors?: RecordError[] }
/** An outcome's error code (the single-record route reports it; the batch's items have none). */
const codes = new WeakMap<Outcome, string>();
/** Outcomes refused for their envelope (not their record): a 400 even without syncValidation. */
const envelopeRefused = new WeakSet<Outcome>();

function envelopeError(i: number): string | null {
  return `message ${i} must be {header: {datasetId, schemaRef}, body: {xdmEntity}}`;
}

async function ingestMessages(opts: ProfileRoutesOptions<IngestStore>, request: FastifyRequest, messages: unknown[]): Promise<Outcome[]> {
  const scope: TenantScope = profileScope(request);
  const outcomes: Outcome[] = messages.map(() => ({ xactionId: randomUUID() }));
  // Group by dataset and declared class so that each group is one durable append.
  const groups = new Map<string, { datasetId: string; declared: SchemaClass | undefined; items: Array<{ index: number; value: unknown }> }>();
  messages.forEach((raw, i) => {
    const m = raw as Message;
    const datasetId = isPlainObject(raw) ? m.header?.datasetId : undefined;
    if (typeof datasetId !== "string" || datasetId === "" || !isPlainObject(m.body) || m.body.xdmEntity === undefined) {
      Object.assign(outcomes[i]!, { status: 400, message: envelopeError(i) });
      return;
    }
    // The dataset id reaches the store's lookup: a string no store can hold is refused here, as the
    // record's own strings are, so both stores answer alike (PostgreSQL failed on NUL with a 500).
    const why = unstorableReason(datasetId);
    if (why !== null) {
      const message = `message ${i}: The string at header.datasetId ${why} and cannot be stored`;
      Object.assign(outcomes[i]!, { status: 400, message, errors: [{ index: i, code: RECORD_ERROR_CODES.unstorableString, path: "header.datasetId", message }] });
      envelopeRefused.add(outcomes[i]!);
      return;
    }
    const declared = declaredClass(m);
    const key = `${datasetId}\u0000${declared ?? ""}`;
    let g = groups.get(key);
    if (g === undefined) groups.set(key, g = { datasetId, declared, items: [] });
    g.items.push({ index: i, value: m.body.xdmEntity });
  });
  for (const g of groups.values()) {
    try {
      const decideAhead = opts.decideAhead;
      const r = await ingestRecords(opts.profiles, scope, g.datasetId, g.items, {
        now: opts.clock.now(), ...(g.declared === undefined ? {} : { declaredClass: g.declared }), ...(opts.limits === undefined ? {} : { limits: opts.limits }),
        ...(decideAhead === undefined ? {} : { decideAhead: (records: readonly ValidRecord[]) => decideAhead(tenantOf(request), records) }),
      });
      if (opts.onStored && r.stored.length > 0) {
        // The records are durable: evaluation trouble is logged, not reported as a failed ingestion,
        // unless it is the client's to act on (an ApiError: the streaming workers' feed did not take
        // them, 503, and the client sends them again).
        await opts.onStored(tenantOf(request), r).catch((err: unknown) => {
          if (err instanceof ApiError) throw err;
          request.log.error({ err }, "streaming evaluation after ingestion failed");
        });
      }
      const byIndex = new Map<number, RecordError[]>();
      for (const e of r.failed) byIndex.set(e.index, [...(byIndex.get(e.index) ?? []), e]);
      for (const [i, errors] of byIndex) Object.assign(outcomes[i]!, { status: 400, message: errors.map((e) => e.message).join("; "), errors });
    } catch (err) {
      const api = toApiError(err);
      const status = api instanceof ApiError ? api.status : 500;
      const message = api instanceof ApiError ? api.message : "internal error";
      for (const item of g.items) {
        Object.assign(outcomes[item.index]!, { status, message });
        if (api instanceof ApiError) codes.set(outcomes[item.index]!, api.code);
      }
      if (!(api instanceof ApiError)) throw err;
    }
  }
  return outcomes;
}

export async function streamingRoutes(app: FastifyInstance, opts: ProfileRoutesOptions<IngestStore>): Promise<void> {
  registerTenantHooks(app, opts);
  const tags = ["Streaming ingestion"];

  app.post<{ Params: { connectionId: string }; Querystring: { syncValidation?: boolean }; Body: unknown }>("/:connectionId", {
    config: { recordsBody: true },
    schema: { tags, summary: "Stream one XDM record", querystring: { type: "object", properties: { syncValidation: { type: "boolean" } } } },
  }, async (request, reply) => {
    const receivedTimeMs = opts.clock.now();
    const [outcome] = await ingestMessages(opts, request, [request.body]);
    const o = outcome!;
    const base = { inletId: request.params.connectionId, xactionId: o.xactionId, receivedTimeMs };
    if (o.status === undefined) return { ...base, syncValidation: { skipped: request.query.syncValidation !== true } };
    if (o.status >= 500) throw new ApiError(o.status, codes.get(o) ?? "SEGMENTD-INTERNAL-500", o.message ?? "internal error");
    if (o.errors === undefined || envelopeRefused.has(o) || request.query.syncValidation === true) {
      reply.code(o.status);
      return { type: "http://ns.adobe.com/aep/errors/XDM-1000-400", status: o.status, title: o.message, report: { message: o.message, errors: o.errors ?? [] } };
    }
    // Without syncValidation AEP answers 200 and reports the record's errors later;
    // segmentd has them already, so they are returned, but the status stays 200.
    return { ...base, syncValidation: { skipped: true }, errors: o.errors };
  });

  app.post<{ Params: { connectionId: string }; Body: { messages?: unknown } }>("/batch/:connectionId", {
    config: { recordsBody: true },
    schema: { tags, summary: "Stream several XDM records" },
  }, async (request, reply) => {
    const receivedTimeMs = opts.clock.now();
    const messages = isPlainObject(request.body) ? request.body["messages"] : undefined;
    if (!Array.isArray(messages) || messages.length === 0) throw badRequest("Body must be {messages: [...]} with at least one message");
    if (messages.length > MAX_BATCH_MESSAGES) throw badRequest(`A batch holds at most ${MAX_BATCH_MESSAGES} messages; got ${messages.length}`);
    const responses = await ingestMessages(opts, request, messages);
    reply.code(207);
    return { inletId: request.params.connectionId, batchId: randomUUID(), receivedTimeMs, responses };
  });
}
