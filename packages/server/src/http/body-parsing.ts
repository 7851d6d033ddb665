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
import { ContentTypeError } from "./errors.js";

function isJsonish(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === "application/json") return true;
  const t = contentType.split(";")[0]!.trim().toLowerCase();
  return t === "" || t === "application/json" || t.endsWith("+json") || t === "*/*" || t === "text/json";
}

const ESCAPED_NUL = /\\u0000/i;

function parseBody(request: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  if (!isJsonish(request.headers["content-type"])) {
    done(new ContentTypeError("unsupported content type"), undefined);
    return;
  }
  const text = body as string;
  if (text.trim() === "") {
    done(null, undefined);
    return;
  }
  // NUL cannot be stored in PostgreSQL text and has no business in any field. The escaped
  // form needs a backslash: most bodies have none, and skip the (case-insensitive) regex.
  if (text.includes("\u0000") || (text.includes("\\") && ESCAPED_NUL.test(text))) {
    done(new ApiError(400, ErrorCodes.badJson, "Request body must not contain NUL (\\u0000) characters"), undefined);
    return;
  }
  try {
    done(null, JSON.parse(text));
  } catch (err) {
    done(new ApiError(400, ErrorCodes.badJson, `Malformed JSON in request body: ${(err as Error).message}`), undefined);
  }
}

export function installBodyParsing(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // One parser for every content type. It is also registered under application/json, the
  // content type of nearly every request: Fastify caches the parser it finds for a content
  // type, but not the catch-all, which it looks up again (parsing the header) on every request.
  app.addContentTypeParser("*", { parseAs: "string" }, parseBody);
  app.addContentTypeParser("application/json", { parseAs: "string" }, parseBody);

  const strict = new Ajv.default({ allErrors: true, coerceTypes: false, useDefaults: false, removeAdditional: false, strict: false });
  const lenient = new Ajv.default({ allErrors: true, coerceTypes: "array", useDefaults: true, removeAdditional: false, strict: false });
  addFormats.default(strict);
  addFormats.default(lenient);
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === "body" ? strict : lenient).compile(schema));
}
