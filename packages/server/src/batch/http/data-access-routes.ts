/**
 * AEP's Data Access API for the batches export jobs write (under /data/foundation/export):
 *
 *   GET /batches/{batchId}/files   the batch's files: `{data: [{dataSetFileId, …, _links}], _page}`
 *   GET /files/{fileId}            the file's entries: `{data: [{name, length, _links}], _page}`
 *   GET /files/{fileId}?path=NAME  the file itself (JSON Lines), with `Range: bytes=…` (206) and
 *                                  Content-Disposition; HEAD answers its headers only
 *
 * The files are read back from the destination dataset (batch/exports/export-files.ts). Another
 * sandbox's batch or file is a 404 that reads nothing of it.
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import { registerTenantHooks, type AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import { commonErrorResponses } from "../../http/schemas.js";
import { notFound } from "../../services/errors.js";
import { scopeOf } from "../../services/tenancy.js";
import { ExportFiles, type ExportFileStore } from "../exports/export-files.js";

export const DATA_ACCESS_PREFIX = "/data/foundation/export";

export interface DataAccessRoutesOptions extends AuthDeps {
  profiles: ExportFileStore;
}

const tags = ["Data Access"];
const notFoundResponse = { ...commonErrorResponses[400], description: "Not found in this sandbox" };
const links = { type: "object", properties: { self: { type: "object", properties: { href: { type: "string" } } } } } as const;
const page = { type: "object", properties: { limit: { type: "integer" }, count: { type: "integer" } } } as const;

/** A single `bytes=` range of a `size`-byte file: [start, end] inclusive, "unsatisfiable", or null to send it whole. */
export function byteRange(header: string | undefined, size: number): { start: number; end: number } | "unsatisfiable" | null {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Several ranges, other units or nonsense: RFC 9110 lets a server ignore the header.
  if (m === null || (m[1] === "" && m[2] === "")) return null;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return "unsatisfiable";
  if (end < start) return null;
  return { start, end };
}

function send(reply: FastifyReply, name: string, content: Buffer, range: string | undefined): Buffer | string {
  reply
    .header("content-type", "application/x-ndjson; charset=utf-8")
    .header("content-disposition", `attachment; filename="${name}"`)
    .header("accept-ranges", "bytes");
  const r = byteRange(range, content.length);
  if (r === "unsatisfiable") {
    reply.code(416).header("content-range", `bytes */${content.length}`).header("content-type", "text/plain; charset=utf-8");
    return "";
  }
  if (r === null) return content;
  reply.code(206).header("content-range", `bytes ${r.start}-${r.end}/${content.length}`);
  return content.subarray(r.start, r.end + 1);
}

export async function dataAccessRoutes(app: FastifyInstance, opts: DataAccessRoutesOptions): Promise<void> {
  registerTenantHooks(app, opts);
  const files = new ExportFiles(opts.profiles);
  const base = (request: { protocol: string; host: string }) => `${request.protocol}://${request.host}${DATA_ACCESS_PREFIX}`;

  app.get<{ Params: { batchId: string } }>("/batches/:batchId/files", {
    schema: {
      tags,
      summary: "List the files of an export batch (Data Access API)",
      description: "The files an export job wrote to its batch (`destination.batchId`, or each of `destination.batches`), once the batch succeeded. Each is one chunk of the exported records as JSON Lines.",
      params: { type: "object", properties: { batchId: { type: "string", minLength: 1, maxLength: 200 } }, required: ["batchId"] },
      response: {
        200: {
          type: "object",
          properties: {
            data: {
              type: "array",
              items: {
                type: "object",
                properties: {
                  dataSetFileId: { type: "string" }, dataSetViewId: { type: "string" }, version: { type: "string" },
                  created: { type: "string" }, updated: { type: "string" }, isValid: { type: "boolean" }, _links: links,
                },
              },
            },
            _page: page,
          },
        },
        ...commonErrorResponses,
        404: notFoundResponse,
      },
    },
  }, async (request) => {
    const list = await files.list(scopeOf(tenantOf(request)), request.params.batchId);
    if (list === null) throw notFound("Batch", request.params.batchId);
    return {
      data: list.map((f) => ({
        dataSetFileId: f.id,
        dataSetViewId: f.datasetId,
        version: "1.0.0",
        created: String(f.created),
        updated: String(f.created),
        isValid: true,
        _links: { self: { href: `${base(request)}/files/${encodeURIComponent(f.id)}` } },
      })),
      _page: { limit: list.length, count: list.length },
    };
  });

  app.get<{ Params: { fileId: string }; Querystring: { path?: string } }>("/files/:fileId", {
    schema: {
      tags,
      summary: "A file's entries, or with ?path= the file (Data Access API)",
      description: "Without `path`: the file's entries (one) with their length and download link. With `path` (an entry's name): the file as JSON Lines (`application/x-ndjson`); `Range: bytes=start-end` answers 206 with that part (416 past the end).",
      params: { type: "object", properties: { fileId: { type: "string", minLength: 1, maxLength: 220 } }, required: ["fileId"] },
      querystring: { type: "object", properties: { path: { type: "string", maxLength: 200 } } },
      headers: { type: "object", properties: { range: { type: "string", description: "bytes=start-end, bytes=start- or bytes=-suffix" } } },
      response: { ...commonErrorResponses, 404: notFoundResponse },
    },
  }, async (request, reply) => {
    const { fileId } = request.params;
    const file = await files.read(scopeOf(tenantOf(request)), fileId);
    if (file === null) throw notFound("File", fileId);
    const path = request.query.path;
    if (path === undefined) {
      return {
        data: [{ name: file.name, length: String(file.content.length), _links: { self: { href: `${base(request)}/files/${encodeURIComponent(fileId)}?path=${encodeURIComponent(file.name)}` } } }],
        _page: { limit: 1, count: 1 },
      };
    }
    if (path !== file.name) throw notFound("File", `${fileId}?path=${path.slice(0, 100)}`);
    return send(reply, file.name, file.content, request.headers.range);
  });
}
