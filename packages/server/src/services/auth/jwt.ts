/**
 * JWT verification with `jose`: HS256 (shared secret), RS256 (a public key
 * PEM) and RS256/ES256 from a JSON Web Key Set, static (from config) or
 * remote (an identity provider's jwks_uri: fetched on first use, kept for
 * `jwksCacheMaxAgeMs`, fetched again when a token names a key id the set does
 * not hold — the provider rotated its keys — at most once per `jwksCooldownMs`).
 *
 * The accepted algorithms follow from which keys are configured, never from
 * the token header, so `alg: none` and HS/RS confusion are refused. `exp` is
 * required (a token that never expires would be valid forever once leaked).
 */
import { createHmac, createPublicKey, createSign, type KeyObject } from "node:crypto";
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type CompactJWSHeaderParameters,
  type JWTVerifyGetKey,
  type ProtectedHeaderParameters,
} from "jose";

export type JwtClaims = Record<string, unknown>;

export interface JwtKeys {
  hs256Secret?: string;
  rs256PublicKey?: string;
  /** A static key set (RS256 / ES256 public keys, chosen by the token's `kid`). */
  jwks?: JSONWebKeySet;
  /** An identity provider's key set URL. */
  jwksUrl?: string;
  /** When set, a token verified by a key-set key must have this `iss`. */
  issuer?: string;
  /** When set, a token verified by a key-set key must have this among its `aud`. */
  audience?: string;
  /** How long a fetched remote key set is used before it is fetched again (default 10 minutes). */
  jwksCacheMaxAgeMs?: number;
  /** The least time between two fetches of the remote key set (default 30 s). */
  jwksCooldownMs?: number;
  /** How long a fetch of the remote key set may take (default 5 s). */
  jwksTimeoutMs?: number;
}

export class JwtError extends Error {}

const KEY_SET_ALGORITHMS = ["RS256", "ES256"];

export class JwtVerifier {
  private readonly secret?: Uint8Array;
  private readonly rsKey?: KeyObject;
  private readonly local?: JWTVerifyGetKey;
  private readonly remote?: JWTVerifyGetKey;
  private readonly algorithms: string[];

  constructor(private readonly keys: JwtKeys) {
    const algs = new Set<string>();
    if (keys.hs256Secret) {
      this.secret = new TextEncoder().encode(keys.hs256Secret);
      algs.add("HS256");
    }
    if (keys.rs256PublicKey) {
      // Parsed here, so that a bad PEM (or key set, below) fails at start-up rather than refusing every token.
      this.rsKey = createPublicKey(keys.rs256PublicKey);
      algs.add("RS256");
    }
    if (keys.jwks) this.local = createLocalJWKSet(keys.jwks);
    if (keys.jwksUrl) {
      this.remote = createRemoteJWKSet(new URL(keys.jwksUrl), {
        cacheMaxAge: keys.jwksCacheMaxAgeMs ?? 600_000,
        cooldownDuration: keys.jwksCooldownMs ?? 30_000,
        timeoutDuration: keys.jwksTimeoutMs ?? 5_000,
      });
    }
    if (this.local || this.remote) for (const a of KEY_SET_ALGORITHMS) algs.add(a);
    this.algorithms = [...algs];
  }

  get enabled(): boolean {
    return this.algorithms.length > 0;
  }

  /** Verify signature, `exp` (required), `nbf`, and (key-set tokens) `iss`/`aud` when configured, against `nowMs`; returns the claims. */
  async verify(token: string, nowMs: number): Promise<JwtClaims> {
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(token);
    } catch (err) {
      throw new JwtError(`not a valid JWT: ${(err as Error).message}`);
    }
    try {
      // Issuer and audience are an identity provider's: /ims/token/v3's own HS256 tokens carry neither.
      const fromKeySet = this.keySource(header) === "set";
      const { payload } = await jwtVerify(token, (h, input) => this.keyFor(h, input), {
        algorithms: this.algorithms,
        currentDate: new Date(nowMs),
        requiredClaims: ["exp"],
        ...(fromKeySet && this.keys.issuer !== undefined ? { issuer: this.keys.issuer } : {}),
        ...(fromKeySet && this.keys.audience !== undefined ? { audience: this.keys.audience } : {}),
      });
      return payload;
    } catch (err) {
      if (err instanceof errors.JOSEAlgNotAllowed) throw new JwtError(`algorithm ${String(header.alg)} is not accepted`);
      throw reason(err);
    }
  }

  /** Which configured key answers a token: the shared secret, the PEM key (RS256 naming no key id, or no key set configured), or a key set. */
  private keySource(header: { alg?: string; kid?: string }): "secret" | "pem" | "set" {
    if (header.alg === "HS256" && this.secret) return "secret";
    if (header.alg === "RS256" && this.rsKey && (header.kid === undefined || (!this.local && !this.remote))) return "pem";
    return "set";
  }

  private async keyFor(header: CompactJWSHeaderParameters, input: FlattenedJWSInput): Promise<Awaited<ReturnType<JWTVerifyGetKey>>> {
    const source = this.keySource(header);
    if (source === "secret") return this.secret!;
    if (source === "pem") return this.rsKey!;
    if (this.local) {
      try {
        return await this.local(header, input);
      } catch (err) {
        if (!this.remote || !(err instanceof errors.JWKSNoMatchingKey)) throw err;
      }
    }
    if (this.remote) {
      try {
        return await this.remote(header, input);
      } catch (err) {
        if (err instanceof errors.JOSEError && !(err instanceof errors.JWKSTimeout)) throw err;
        throw new JwtError(`the key set at ${this.keys.jwksUrl} could not be fetched: ${(err as Error).message}`);
      }
    }
    throw new JwtError(`algorithm ${String(header.alg)} is not accepted`);
  }
}

/** jose's error as the reason the authenticator reports. */
function reason(err: unknown): Error {
  if (err instanceof JwtError) return err;
  if (err instanceof errors.JWTExpired) return new JwtError("token expired");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "exp") return new JwtError("token has no exp claim");
    if (err.claim === "nbf") return new JwtError("token not yet valid");
    return new JwtError(`token's ${err.claim} claim is not accepted`);
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return new JwtError("bad signature");
  if (err instanceof errors.JWKSNoMatchingKey) return new JwtError("no key of the key set matches the token");
  if (err instanceof errors.JOSEError) return new JwtError(`not a valid JWT: ${err.message}`);
  return err instanceof Error ? err : new Error(String(err));
}

/** Sign a token (HS256 or RS256 with a private key PEM). For tests, benches and the dev tooling. */
export function signJwt(claims: JwtClaims, key: { hs256Secret: string } | { rs256PrivateKey: string }): string {
  const alg = "hs256Secret" in key ? "HS256" : "RS256";
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const input = `${enc({ alg, typ: "JWT" })}.${enc(claims)}`;
  const sig =
    "hs256Secret" in key
      ? createHmac("sha256", key.hs256Secret).update(input).digest()
      : createSign("RSA-SHA256").update(input).sign(key.rs256PrivateKey);
  return `${input}.${sig.toString("base64url")}`;
}
