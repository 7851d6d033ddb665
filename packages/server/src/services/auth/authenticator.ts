/**
 * Who is calling: verifies bearer tokens (static tokens, signed JWTs, operator
 * tokens) and API keys. Knows nothing of HTTP; the auth plugin maps its
 * verdicts to Adobe's gateway errors.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { AuthConfig } from "../../platform/config.js";
import type { Clock } from "../../platform/clock.js";
import { JwtError, JwtVerifier } from "./jwt.js";

export type Principal =
  | { kind: "org"; orgs: ReadonlySet<string>; subject: string }
  | { kind: "operator"; subject: string };

export type TokenVerdict = { ok: true; principal: Principal } | { ok: false; reason: string };

/** Hash before comparing so that lookups are constant-time in the token's content. */
function digest(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(digest(a));
  const y = Buffer.from(digest(b));
  return timingSafeEqual(x, y);
}

export class Authenticator {
  private readonly staticTokens: Map<string, Set<string>>;
  private readonly operatorTokens: string[];
  private readonly apiKeys: Set<string>;
  private readonly jwt: JwtVerifier;

  constructor(
    private readonly config: AuthConfig,
    private readonly clock: Clock,
  ) {
    this.staticTokens = new Map(config.staticTokens.map((t) => [digest(t.token), new Set(t.orgs)]));
    this.operatorTokens = [...config.operatorTokens];
    // Adobe's clients send their OAuth client id as x-api-key.
    this.apiKeys = new Set([...config.apiKeys, ...(config.clients ?? []).map((c) => c.clientId)].map(digest));
    this.jwt = new JwtVerifier({
      hs256Secret: config.jwtHs256Secret,
      rs256PublicKey: config.jwtRs256PublicKey,
      jwks: config.jwtJwks,
      jwksUrl: config.jwtJwksUrl,
      issuer: config.jwtIssuer,
      audience: config.jwtAudience,
    });
  }

  isRegisteredApiKey(key: string): boolean {
    return this.apiKeys.has(digest(key));
  }

  async verifyToken(token: string): Promise<TokenVerdict> {
    if (token.length === 0 || token.length > 16_384) return { ok: false, reason: "empty or oversized token" };
    if (this.operatorTokens.some((t) => safeEqual(t, token))) return { ok: true, principal: { kind: "operator", subject: "operator" } };
    const orgs = this.staticTokens.get(digest(token));
    if (orgs) return { ok: true, principal: { kind: "org", orgs, subject: "static-token" } };
    if (!this.jwt.enabled) return { ok: false, reason: "unknown token" };
    try {
      const claims = await this.jwt.verify(token, this.clock.now());
      const raw = claims[this.config.jwtOrgClaim];
      const list = typeof raw === "string" ? [raw] : Array.isArray(raw) ? raw.filter((x): x is string => typeof x === "string") : [];
      if (list.length === 0) return { ok: false, reason: `token has no "${this.config.jwtOrgClaim}" claim` };
      const sub = typeof claims.sub === "string" ? claims.sub : "jwt";
      return { ok: true, principal: { kind: "org", orgs: new Set(list), subject: sub } };
    } catch (err) {
      if (err instanceof JwtError) return { ok: false, reason: err.message };
      return { ok: false, reason: "malformed token" };
    }
  }
}
