/**
 * IMS's OAuth server-to-server grant (`client_credentials`), as Adobe's SDKs and aepp request it:
 * a configured client id and secret get a bearer token that the authenticator already verifies —
 * an HS256 JWT naming the client's organizations, valid 24 hours as IMS's are. Knows nothing of
 * HTTP: the route (http/routes/ims-token.ts) maps its errors to IMS's error bodies.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { AuthConfig, ClientCredentialsConfig } from "../../platform/config.js";
import type { Clock } from "../../platform/clock.js";
import { signJwt } from "./jwt.js";
import { TokenThrottle } from "./token-throttle.js";

/** IMS's lifetime for these tokens (its responses say 86399 seconds). */
export const TOKEN_LIFETIME_S = 86_400;

/** An OAuth error (RFC 6749 §5.2) in IMS's shape: `{error, error_description}`. */
export class OAuthError extends Error {
  constructor(
    readonly status: 400 | 401 | 429,
    readonly error: "invalid_request" | "invalid_client" | "unsupported_grant_type" | "too_many_requests",
    description: string,
    /** With a 429: the Retry-After header, in seconds. */
    readonly retryAfterS?: number,
  ) {
    super(description);
  }
}

export interface IssuedToken {
  access_token: string;
  token_type: "bearer";
  expires_in: number;
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

export class TokenIssuer {
  private readonly clients: ReadonlyMap<string, ClientCredentialsConfig>;
  readonly throttle: TokenThrottle;

  constructor(
    private readonly auth: AuthConfig,
    private readonly clock: Clock,
  ) {
    this.clients = new Map((auth.clients ?? []).map((c) => [c.clientId, c]));
    this.throttle = new TokenThrottle(clock, new Set(this.clients.keys()), auth.tokenThrottle);
  }

  /**
   * A token request from a remote address: refused with 429 while its client id or its address
   * has used up its failed attempts (before the secret is compared); a wrong client_id or
   * client_secret counts against both.
   */
  grant(form: Readonly<Record<string, string>>, address: string): IssuedToken {
    const verdict = this.throttle.check(form.client_id, address);
    if (verdict !== null) {
      const who = verdict.by === "client" ? "for this client_id" : "from this address";
      throw new OAuthError(429, "too_many_requests", `too many failed attempts ${who}; retry after ${verdict.retryAfterS} seconds`, verdict.retryAfterS);
    }
    try {
      if (!this.enabled) throw new OAuthError(401, "invalid_client", "invalid client_id or client_secret parameter");
      return this.issue(form);
    } catch (err) {
      if (err instanceof OAuthError && err.error === "invalid_client") this.throttle.failed(form.client_id ?? "", address);
      throw err;
    }
  }

  get enabled(): boolean {
    return this.clients.size > 0 && Boolean(this.auth.jwtHs256Secret);
  }

  /** Whether `id` is a configured client's id (Adobe's clients send it as x-api-key). */
  isClientId(id: string): boolean {
    return this.clients.has(id);
  }

  /** The grant for a token request's form fields (each present at most once). */
  issue(form: Readonly<Record<string, string>>): IssuedToken {
    const grant = form.grant_type;
    if (grant === undefined) throw new OAuthError(400, "invalid_request", "missing grant_type parameter");
    if (grant !== "client_credentials") throw new OAuthError(400, "unsupported_grant_type", `grant_type ${grant.slice(0, 64)} is not supported: use client_credentials`);
    const id = form.client_id;
    if (id === undefined) throw new OAuthError(400, "invalid_request", "missing client_id parameter");
    if (form.client_secret === undefined) throw new OAuthError(400, "invalid_request", "missing client_secret parameter");
    const client = this.clients.get(id);
    // The same answer for an unknown client and a wrong secret, and a comparison whose time does not depend on the secret.
    const expected = digest(client?.clientSecret ?? "\u0000no client");
    if (client === undefined || !timingSafeEqual(expected, digest(form.client_secret))) {
      throw new OAuthError(401, "invalid_client", "invalid client_id or client_secret parameter");
    }
    const now = Math.floor(this.clock.now() / 1000);
    const claims = {
      sub: `${client.clientId}@clients.segmentd`,
      client_id: client.clientId,
      [this.auth.jwtOrgClaim]: client.orgs,
      scope: form.scope ?? "",
      type: "access_token",
      iat: now,
      exp: now + TOKEN_LIFETIME_S,
    };
    return { access_token: signJwt(claims, { hs256Secret: this.auth.jwtHs256Secret! }), token_type: "bearer", expires_in: TOKEN_LIFETIME_S - 1 };
  }
}
