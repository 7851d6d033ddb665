/**
 * `POST /ims/token/v3`: IMS's token endpoint for OAuth server-to-server credentials, so that
 * Adobe's SDKs and aepp log in unchanged when their IMS endpoint is pointed at segmentd. The form
 * body (`application/x-www-form-urlencoded`) is parsed in this plugin's own context; no bearer
 * token is asked for (this is where one is obtained). Errors are IMS's `{error, error_description}`.
 */
import type { FastifyInstance } from "fastify";
import { OAuthError, type TokenIssuer } from "../../services/auth/token-issuer.js";
import { ApiError } from "../../services/errors.js";
import { ContentTypeError } from "../errors.js";

export interface ImsTokenRoutesOptions {
  issuer: TokenIssuer;
}

const FORM = "application/x-www-form-urlencoded";

/** A form's fields; a field given twice is refused (RFC 6749 §3.2: parameters MUST NOT repeat). */
export function parseForm(text: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of new URLSearchParams(text)) {
    if (k in out) throw new OAuthError(400, "invalid_request", `parameter ${k.slice(0, 64)} is repeated`);
    out[k] = v;
  }
  return out;
}

const tokenSchema = {
  type: "object",
  properties: { access_token: { type: "string" }, token_type: { type: "string" }, expires_in: { type: "integer" } },
  required: ["access_token", "token_type", "expires_in"],
} as const;
const errorSchema = {
  type: "object",
  properties: { error: { type: "string" }, error_description: { type: "string" } },
  required: ["error", "error_description"],
} as const;

export async function imsTokenRoutes(app: FastifyInstance, opts: ImsTokenRoutesOptions): Promise<void> {
  // This context reads form bodies as text (the API's JSON parser would refuse them).
  app.addContentTypeParser(FORM, { parseAs: "string" }, (_request, body, done) => done(null, body));
  app.setErrorHandler((error, _request, reply) => {
    if (error instanceof OAuthError) {
      if (error.retryAfterS !== undefined) void reply.header("retry-after", String(error.retryAfterS));
      return reply.code(error.status).send({ error: error.error, error_description: error.message });
    }
    // Anything else refused before the handler (the API's JSON parser on another content type, a body too large).
    const status = error instanceof ApiError ? error.status : (error as { statusCode?: number }).statusCode;
    if (status === 413) return reply.code(413).send({ error: "invalid_request", error_description: "request body too large" });
    if (error instanceof ContentTypeError || (status !== undefined && status >= 400 && status < 500)) {
      return reply.code(400).send({ error: "invalid_request", error_description: `the body must be an ${FORM} form` });
    }
    throw error;
  });

  app.post("/ims/token/v3", {
    bodyLimit: 16 * 1024,
    schema: {
      tags: ["Authentication"],
      summary: "Obtain an access token with OAuth server-to-server credentials (IMS client_credentials grant)",
      description: "Form fields grant_type=client_credentials, client_id, client_secret, scope (recorded, not enforced). " +
        "The token is valid 24 hours for the organizations configured for the client (auth.clients). " +
        "Failed attempts are throttled per client_id and per remote address (auth.tokenThrottle): 429 too_many_requests with Retry-After.",
      consumes: [FORM],
      response: { 200: tokenSchema, 400: errorSchema, 401: errorSchema, 429: errorSchema },
    },
  }, async (request, reply) => {
    if (request.headers["content-type"]?.split(";")[0]!.trim().toLowerCase() !== FORM || typeof request.body !== "string") {
      throw new OAuthError(400, "invalid_request", `the body must be an ${FORM} form`);
    }
    // Throttled per client id and per remote address (the socket's: no proxy header is trusted).
    const token = opts.issuer.grant(parseForm(request.body), request.ip);
    void reply.header("cache-control", "no-store");
    return token;
  });
}
