/**
 * Request bodies: one JSON parser for every content type (Adobe's own Postman
 * collection omits Content-Type on several POSTs, so a missing header is read
 * as JSON), a clear UPS 400 for malformed JSON instead of Fastify's default,
 * and two Ajv instances: bodies are validated strictly (no type coercion, so a
 * number where a string belongs is a 400 naming the field), query strings and
 * params with coercion ("true" → true, "10" → 10).
 */
import Ajv from "ajv";
import addFormats from "ajv-formats";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError, ErrorCodes } from "../services/errors.js";
import { BODY_LIMITS, findViolation, LIMIT_CODES, MAX_QUERY_VALUE_LENGTH, textNestsDeeperThan, unstorableReason } from "../platform/limits.js";
import { ContentTypeError } from "./errors.js";

function isJsonish(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === "application/json") return true;
  const t = contentType.split(";")[0]!.trim().toLowerCase();
  return t === "" || t === "application/json" || t.endsWith("+json") || t === "*/*" || t === "text/json";
}

const ESCAPED_NUL = /\\u0000/i;

/**
 * Route option (`config: { recordsBody: true }`) of the routes whose body carries
 * XDM records that are validated one by one: a string no store can hold is refused
 * for its record there (the other records still apply), not for the whole body.
 */
declare module "fastify" {
  interface FastifyContextConfig {
    recordsBody?: boolean;
    /**
     * The body is JSON whatever its labelled content type: the operations Adobe's Postman
     * collection sends without Content-Type, which Postman then labels text/plain
     * (docs/aep-compatibility.md).
     */
    jsonWhateverType?: boolean;
  }
}

const RECORDS_BODY_LIMITS = { ...BODY_LIMITS, allowUnstorable: true };

function recordsBody(request: FastifyRequest): boolean {
  return request.routeOptions.config?.recordsBody === true;
}

function parseBody(request: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  if (!isJsonish(request.headers["content-type"]) && request.routeOptions.config?.jsonWhateverType !== true) {
    done(new ContentTypeError("unsupported content type"), undefined);
    return;
  }
  try {
    done(null, parseJsonBody(body as string, recordsBody(request)));
  } catch (err) {
    done(err as Error, undefined);
  }
}

/**
 * A JSON request body's text → its value, held to the body limits (platform/limits.ts); throws
 * the 400 to answer. `perRecord`: NUL and lone surrogates are left to the per-record validation.
 * Exported for bench:limits, which measures what it adds to JSON.parse.
 */
export function parseJsonBody(text: string, perRecord: boolean): unknown {
  if (text.trim() === "") return undefined;
  // Measured on the text first: JSON.parse itself spends ~0.3 s on 400,000 levels.
  if (textNestsDeeperThan(text, BODY_LIMITS.maxDepth)) {
    throw new ApiError(400, LIMIT_CODES.depth, `Request body nests deeper than the limit of ${BODY_LIMITS.maxDepth} levels`);
  }
  // NUL cannot be stored in PostgreSQL text and has no business in any field. The escaped
  // form needs a backslash: most bodies have none, and skip the (case-insensitive) regex.
  const escapes = text.includes("\\");
  if (!perRecord && (text.includes("\u0000") || (escapes && ESCAPED_NUL.test(text)))) {
    throw new ApiError(400, ErrorCodes.badJson, "Request body must not contain NUL (\\u0000) characters");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, ErrorCodes.badJson, `Malformed JSON in request body: ${(err as Error).message}`);
  }
  // A string can hold NUL or a lone surrogate only through a \u escape (raw NUL is not JSON, and
  // the UTF-8 decoding of the body never makes a lone surrogate): without one, no string is checked.
  const violation = findViolation(value, perRecord || !escapes ? RECORDS_BODY_LIMITS : BODY_LIMITS);
  if (violation !== null) throw new ApiError(400, violation.code, `Request body: ${violation.message}`);
  return value;
}

/** The first query-string or path value over the length limit or holding a string no store can hold. */
function parameterViolation(query: unknown, kind: "Query parameter" | "Path parameter"): ApiError | null {
  if (query === null || typeof query !== "object") return null;
  for (const [name, raw] of Object.entries(query as Record<string, unknown>)) {
    for (const v of Array.isArray(raw) ? raw : [raw]) {
      if (typeof v !== "string") continue;
      if (v.length > MAX_QUERY_VALUE_LENGTH) {
        return new ApiError(400, LIMIT_CODES.query, `${kind} '${name.slice(0, 64)}' is ${v.length} characters long, over the limit of ${MAX_QUERY_VALUE_LENGTH}`);
      }
      const why = unstorableReason(v) ?? unstorableReason(name);
      if (why !== null) return new ApiError(400, LIMIT_CODES.unstorable, `${kind} '${JSON.stringify(name.slice(0, 64)).slice(1, -1)}' ${why}`);
    }
  }
  return null;
}

export function installBodyParsing(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // One parser for every content type. It is also registered under application/json, the
  // content type of nearly every request: Fastify caches the parser it finds for a content
  // type, but not the catch-all, which it looks up again (parsing the header) on every request.
  app.addContentTypeParser("*", { parseAs: "string" }, parseBody);
  app.addContentTypeParser("application/json", { parseAs: "string" }, parseBody);

  // Query strings and path parameters: every route, after authentication, before the route's own validation.
  // Callback hooks (not async): they run on every request, the edge's hot path included.
  app.addHook("preValidation", (request, _reply, done) => {
    done(parameterViolation(request.query, "Query parameter") ?? parameterViolation(request.params, "Path parameter") ?? undefined);
  });
  // After the route's schema coerced the query: a number no schema bounded ("1e309" → Infinity) never reaches a store.
  app.addHook("preHandler", (request, _reply, done) => {
    const q = request.query;
    if (q !== null && typeof q === "object") {
      for (const [name, v] of Object.entries(q as Record<string, unknown>)) {
        if (typeof v === "number" && !Number.isFinite(v)) {
          done(new ApiError(400, LIMIT_CODES.number, `Query parameter '${name.slice(0, 64)}' is outside the range of a double-precision number`));
          return;
        }
      }
    }
    done();
  });

  // Not strictNumbers: with coercion Ajv 8 then accepts a query's "1e309" as Infinity without the
  // range checks (measured); numeric query parameters carry a maximum instead (http/routes/paging-params.ts).
  const strict = new Ajv.default({ allErrors: true, coerceTypes: false, useDefaults: false, removeAdditional: false, strict: false });
  const lenient = new Ajv.default({ allErrors: true, coerceTypes: "array", useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(strict);
  addFormats.default(lenient);
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? strict : lenient).compile(schema));
}
