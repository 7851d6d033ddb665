/**
 * Adobe's three error families (segmentation-api.md §1.4):
 *  A. gateway errors `{error_code, message}` for missing/invalid credentials
 *     and headers (before any service code runs);
 *  B. UPS service errors `{requestId, errors: {"<status>": [{code, message}]}, type, title, status}`;
 *  C. per-item errors inside 207 bulk responses (see bulkItemError).
 * plus the RFC 7807-like body Adobe returns for a bad Content-Type.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ApiError, ErrorCodes, type ErrorItem } from "../services/errors.js";

/** Family A. The codes and messages are Adobe's gateway's. */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}

export const Gateway = {
  tokenMissing: () => new GatewayError(403, "403010", "Oauth token is missing"),
  tokenInvalid: () => new GatewayError(401, "401013", "Oauth token is not valid"),
  apiKeyMissing: () => new GatewayError(403, "403000", "Api Key is required"),
  apiKeyInvalid: () => new GatewayError(403, "403003", "Api Key is invalid"),
  missingHeader: (name: string) => new GatewayError(400, "400003", `Missing header: ${name}`),
  orgNotEntitled: () => new GatewayError(403, "403025", "Profile is not valid"),
  orgUnknown: () => new GatewayError(403, "403027", "User region is missing"),
};

/** A Content-Type the service cannot parse. */
export class ContentTypeError extends Error {}

export interface UpsErrorBody {
  requestId: string;
  errors: Record<string, ErrorItem[]>;
  type: string;
  title: string;
  status: number;
}

const MAX_ITEMS = 100;

export function upsErrorBody(requestId: string, status: number, code: string, message: string, items?: ErrorItem[]): UpsErrorBody {
  const list = (items ?? [{ code, message }]).slice(0, MAX_ITEMS);
  return {
    requestId,
    errors: { [String(status)]: list },
    type: `https://ns.adobe.com/aep/errors/${code}`,
    title: message,
    status,
  };
}

/** Family C: the entry for an id a bulk-get did not find. */
export function bulkItemError(requestId: string): { requestId: string; errors: { "404": { code: number; message: string }[] } } {
  return { requestId, errors: { "404": [{ code: 404, message: "Not found." }] } };
}

interface AjvLikeError {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
  keyword?: string;
}

/** Name the field an Ajv error is about: `expression.value`, `name`, ... */
function fieldOf(e: AjvLikeError): string {
  const base = (e.instancePath ?? "").replace(/^\//, "").replace(/\//g, ".");
  const missing = e.params?.missingProperty;
  if (typeof missing === "string") return base ? `${base}.${missing}` : missing;
  const extra = e.params?.additionalProperty;
  if (typeof extra === "string") return base ? `${base}.${extra}` : extra;
  return base;
}

function validationItems(context: string, errors: AjvLikeError[]): ErrorItem[] {
  return errors.map((e) => {
    const field = fieldOf(e);
    const where = context === "body" ? (field || "body") : `${context} ${field}`.trim();
    const text = e.keyword === "required" ? "is required" : e.keyword === "additionalProperties" ? "is not allowed" : (e.message ?? "is invalid");
    return { code: ErrorCodes.badJson, message: `${where} ${text}`, field: field || context };
  });
}

function send(reply: FastifyReply, status: number, body: unknown): void {
  // Error bodies bypass the route's response serializer: their shape depends
  // on the family, not on the route.
  reply.code(status).type("application/json; charset=utf-8").serializer((x) => JSON.stringify(x)).send(body);
}

export function sendApiError(request: FastifyRequest, reply: FastifyReply, err: ApiError): void {
  send(reply, err.status, upsErrorBody(request.id, err.status, err.code, err.message, err.items));
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    if (error instanceof GatewayError) {
      send(reply, error.status, { error_code: error.errorCode, message: error.message });
      return;
    }
    if (error instanceof ApiError) {
      sendApiError(request, reply, error);
      return;
    }
    if (error instanceof ContentTypeError) {
      send(reply, 400, { type: "/placeholder/type/uri", status: 400, title: "BadRequestError", detail: "A valid content-type must be specified" });
      return;
    }
    const fe = error as FastifyError & { validation?: AjvLikeError[]; validationContext?: string };
    if (fe.validation) {
      const items = validationItems(fe.validationContext ?? "body", fe.validation);
      const msg = `Invalid request: ${items.map((i) => i.message).join("; ")}`;
      send(reply, 400, upsErrorBody(request.id, 400, ErrorCodes.badJson, msg.length > 2000 ? msg.slice(0, 2000) + "..." : msg, items));
      return;
    }
    if (fe.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      send(reply, 413, upsErrorBody(request.id, 413, ErrorCodes.bodyTooLarge, `Request body is larger than the limit of ${app.initialConfig.bodyLimit} bytes`));
      return;
    }
    if (fe.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") {
      send(reply, 400, { type: "/placeholder/type/uri", status: 400, title: "BadRequestError", detail: "A valid content-type must be specified" });
      return;
    }
    const status = typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 600 ? fe.statusCode : 500;
    if (status >= 500) {
      request.log.error({ err: error }, "request failed");
      send(reply, status, upsErrorBody(request.id, status, ErrorCodes.internal, "Internal server error"));
      return;
    }
    send(reply, status, upsErrorBody(request.id, status, ErrorCodes.badRequest, error.message));
  });

  app.setNotFoundHandler((request, reply) => {
    send(reply, 404, upsErrorBody(request.id, 404, ErrorCodes.notFound, `Route ${request.method} ${request.url.split("?")[0]} not found`));
  });
}
