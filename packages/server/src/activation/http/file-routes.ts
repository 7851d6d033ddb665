/**
 * File destination routes (a segmentd extension of the Flow Service, docs/activation.md "File
 * export"), under /data/foundation/flowservice:
 *
 *   GET  /flows/{id}/exports                       the flow's export runs, newest first, each with its manifest
 *   GET  /flows/{id}/exports/{runId}               one run
 *   GET  /flows/{id}/exports/{runId}/files/{name}  one file of a successful run, streamed
 *   POST /flows/{id}/exports                       "export now": 202 {runId}
 *
 * Another organization's or sandbox's flow is 404 and nothing is read; a file name that is not a
 * plain name (a path, `..`, a leading dot) is 400; only files a successful run's manifest lists
 * are served. A gzip file goes out as stored, with `Content-Encoding: gzip`, to a client that
 * accepts gzip, and decompressed to one that does not.
 */
import { createGunzip } from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { authHeaders, commonErrorResponses } from "../../http/schemas.js";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import type { ExportRunRow } from "../delivery/file-export-store.js";
import type { FileExportReports } from "../delivery/file-export.js";
import { isSafeFileName } from "../delivery/file-writer.js";
import type { DeliveryCommands } from "../delivery-commands.js";
import type { ExportFile, ExportFileAccess } from "../export-file-access.js";
import { invalid } from "../inputs.js";
import { NOT_FOUND_CODE, type ActivationService } from "../service.js";
import type { DeliveryReports } from "../types.js";
import { FLOWSERVICE_PREFIX } from "./routes.js";

export interface FileRoutesOptions extends AuthDeps {
  service: ActivationService;
  reports: () => DeliveryReports | undefined;
  /** Export now: here, or on the hub that exports the flow. */
  commands: DeliveryCommands;
  /** Export runs' files: here, or on the hub that wrote them. */
  exportFiles: ExportFileAccess;
}

const MAX_LIMIT = 100;
const anyObject = { type: "object", additionalProperties: true } as const;
const idParams = { type: "object", properties: { id: { type: "string", minLength: 1, maxLength: 256 } }, required: ["id"] } as const;
const runParams = { type: "object", properties: { id: { type: "string", minLength: 1, maxLength: 256 }, runId: { type: "string", minLength: 1, maxLength: 256 } }, required: ["id", "runId"] } as const;
const fileParams = { type: "object", properties: { ...runParams.properties, name: { type: "string", minLength: 1, maxLength: 1024 } }, required: ["id", "runId", "name"] } as const;
const notFound = { ...commonErrorResponses[400], description: "No such flow, run or file in this sandbox (SEGMENTD-DESTINATION-404)" };
const unavailable = { ...commonErrorResponses[400], description: "File export is not running here (another server holds the flow's lease, or no deliverer runs)" };
const errors = { ...commonErrorResponses, 404: notFound };
const manifestFile = {
  type: "object",
  properties: { name: { type: "string" }, audienceId: { type: "string" }, mode: { type: "string", enum: ["full", "incremental"] }, part: { type: "integer" },
    rows: { type: "integer" }, bytes: { type: "integer" }, sha256: { type: "string" } },
  additionalProperties: true,
} as const;
const runSchema = {
  type: "object",
  properties: {
    runId: { type: "string" }, flowId: { type: "string" }, status: { type: "string", enum: ["queued", "running", "success", "failed", "expired"] },
    trigger: { type: "string", enum: ["schedule", "manual"] }, scheduledFor: { type: ["string", "null"] },
    createdAt: { type: "integer" }, startedAt: { type: ["integer", "null"] }, finishedAt: { type: ["integer", "null"] },
    rows: { type: "integer" }, bytes: { type: "integer" }, error: { type: ["string", "null"] },
    manifest: { anyOf: [{ type: "null" }, { type: "object", properties: { files: { type: "array", items: manifestFile } }, additionalProperties: true }] },
  },
  additionalProperties: true,
} as const;
const runsList = { type: "object", properties: { items: { type: "array", items: runSchema }, _page: anyObject }, required: ["items"], additionalProperties: true } as const;

function render(r: ExportRunRow): Record<string, unknown> {
  return {
    runId: r.runId, flowId: r.flowId, status: r.status, trigger: r.trigger, scheduledFor: r.dueAt === null ? null : new Date(r.dueAt).toISOString(),
    createdAt: r.createdAt, startedAt: r.startedAt, finishedAt: r.finishedAt, rows: r.rows, bytes: r.bytes, error: r.error, manifest: r.manifest,
  };
}

/** Whether the client takes gzip as a content coding (RFC 9110 Accept-Encoding, q=0 refuses). */
function acceptsGzip(header: string | string[] | undefined): boolean {
  const v = Array.isArray(header) ? header.join(",") : header ?? "";
  for (const part of v.split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (name !== "gzip" && name !== "x-gzip" && name !== "*") continue;
    const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((x) => x !== undefined);
    if (q === undefined || Number(q) > 0) return true;
  }
  return false;
}

export async function fileExportRoutes(app: FastifyInstance, o: FileRoutesOptions): Promise<void> {
  registerTenantHooks(app, o);
  const svc = o.service;
  const tags = ["Destinations"];

  /** The tenant's file flow (404 for another tenant's, 400 for another kind) and the exporter's reports. */
  const fileFlow = async (request: FastifyRequest, id: string) => {
    const r = await svc.getFlowRecord(scopeOf(tenantOf(request)), id);
    if ((r.doc as { destKind?: string }).destKind !== "file") throw invalid(`Flow '${r.id}' is not a file export flow`);
    const files = (o.reports() as (DeliveryReports & { files?: FileExportReports }) | undefined)?.files;
    if (files === undefined) throw new ApiError(503, ErrorCodes.unavailable, "File export is not running in this server");
    return { flow: r, files };
  };

  const runOf = async (request: FastifyRequest, id: string, runId: string) => {
    const { flow, files } = await fileFlow(request, id);
    const run = await files.exportRun(flow.scope, flow.id, runId);
    if (run === null) throw new ApiError(404, NOT_FOUND_CODE, `Export run with id '${runId.slice(0, 256)}' was not found for flow '${flow.id}'`);
    return { flow, files, run };
  };

  app.get<{ Params: { id: string }; Querystring: { limit?: number; start?: number } }>("/flows/:id/exports", {
    schema: {
      tags, summary: "A file flow's export runs, newest first, each with its manifest (segmentd extension)",
      description: "Each run: {runId, status (queued, running, success, failed; expired: succeeded, its files since removed), trigger (schedule, manual), scheduledFor, rows, bytes, error, manifest}. The manifest (successful runs) lists the files with name, audienceId, mode, rows, bytes and sha256 of the stored bytes.",
      headers: authHeaders, params: idParams,
      querystring: { type: "object", properties: { limit: { type: "integer", minimum: 1, maximum: 1_000_000 }, start: { type: "integer", minimum: 0, maximum: 1_000_000 } } },
      response: { 200: runsList, ...errors, 503: unavailable },
    },
  }, async (request) => {
    const { flow, files } = await fileFlow(request, request.params.id);
    const p = { offset: request.query.start ?? 0, limit: Math.min(request.query.limit ?? MAX_LIMIT, MAX_LIMIT) };
    const r = await files.exportRuns(flow.scope, flow.id, p);
    const next = p.offset + r.items.length;
    return {
      items: r.items.map(render),
      _page: { count: r.items.length, total: r.total, start: p.offset, limit: p.limit },
      _links: next < r.total ? { next: { href: `${FLOWSERVICE_PREFIX}/flows/${flow.id}/exports?start=${next}&limit=${p.limit}` } } : {},
    };
  });

  app.get<{ Params: { id: string; runId: string } }>("/flows/:id/exports/:runId", {
    schema: { tags, summary: "One export run with its manifest (segmentd extension)", headers: authHeaders, params: runParams, response: { 200: { type: "object", properties: { items: { type: "array", items: runSchema } }, required: ["items"] }, ...errors, 503: unavailable } },
  }, async (request) => ({ items: [render((await runOf(request, request.params.id, request.params.runId)).run)] }));

  app.get<{ Params: { id: string; runId: string; name: string } }>("/flows/:id/exports/:runId/files/:name", {
    schema: {
      tags, summary: "Download one file of a successful export run, or its manifest.json (segmentd extension)",
      description: "NDJSON as application/x-ndjson, CSV as text/csv. A .gz file is sent as stored with Content-Encoding: gzip when the request accepts gzip (its bytes are those the manifest's sha256 covers), else decompressed.",
      headers: authHeaders, params: fileParams,
      response: {
        200: {
          description: "The file's content (Content-Encoding: gzip for a stored .gz file when the request accepts gzip)",
          content: {
            "application/x-ndjson": { schema: { type: "string", description: "one JSON object per line" } },
            "text/csv": { schema: { type: "string", description: "a header line, then one row per line (RFC 4180)" } },
            "application/json": { schema: { type: "object", description: "manifest.json", additionalProperties: true } },
          },
        },
        ...errors, 503: unavailable,
      },
    },
  }, async (request, reply) => {
    const { name } = request.params;
    if (!isSafeFileName(name)) throw invalid(`File name '${name.slice(0, 256)}' is not a file name: letters, digits, '.', '_' and '-' only, not starting with '.' and without '..'`);
    const { flow, run } = await runOf(request, request.params.id, request.params.runId);
    const listed = run.status === "success" && run.manifest !== null && (name === "manifest.json" || run.manifest.files.some((f) => f.name === name));
    if (!listed) throw new ApiError(404, NOT_FOUND_CODE, `File '${name}' is not a file of export run '${run.runId}'`);
    const file = await o.exportFiles.find(flow.scope, flow.id, run.runId, name);
    if (file === null) throw new ApiError(404, NOT_FOUND_CODE, `File '${name}' of export run '${run.runId}' is not on the disk of this server or of any server that answered (the server that exported it is gone)`);
    return send(request, reply, file, name);
  });

  app.post<{ Params: { id: string } }>("/flows/:id/exports", {
    schema: {
      tags, summary: "Export now: queue a file export run of this flow (segmentd extension)",
      description: "Runs at once (after a run in progress), outside the schedule: full mode writes every member; incremental mode writes what changed since the last run. Answers 202 {runId}; follow it at GET /flows/{id}/exports/{runId}.",
      headers: authHeaders, params: idParams,
      response: { 202: { type: "object", properties: { runId: { type: "string" } }, required: ["runId"] }, ...errors, 409: { ...commonErrorResponses[400], description: "The flow is disabled" }, 503: unavailable },
    },
  }, async (request, reply) => {
    const { flow } = await fileFlow(request, request.params.id);
    if (flow.state !== "enabled") throw new ApiError(409, "SEGMENTD-DESTINATION-STATE-409", `Flow '${flow.id}' is disabled; enable it before exporting`);
    const out = await o.commands.run(flow.scope, flow.id, { op: "exportNow" });
    reply.code(202);
    return out;
  });
}

function send(request: FastifyRequest, reply: FastifyReply, file: ExportFile, name: string): FastifyReply {
  const size = file.size;
  const gz = name.endsWith(".gz");
  const inner = gz ? name.slice(0, -3) : name;
  const type = inner.endsWith(".csv") ? "text/csv; charset=utf-8; header=present" : inner.endsWith(".ndjson") ? "application/x-ndjson; charset=utf-8" : "application/json; charset=utf-8";
  reply.header("content-type", type);
  reply.header("content-disposition", `attachment; filename="${inner}"`);
  reply.header("cache-control", "private, no-store");
  if (!gz) {
    reply.header("content-length", String(size));
    return reply.send(file.open());
  }
  reply.header("vary", "Accept-Encoding");
  if (acceptsGzip(request.headers["accept-encoding"])) {
    reply.header("content-encoding", "gzip");
    reply.header("content-length", String(size));
    return reply.send(file.open());
  }
  const src = file.open();
  const gunzip = createGunzip();
  src.on("error", (err) => gunzip.destroy(err));
  return reply.send(src.pipe(gunzip));
}
