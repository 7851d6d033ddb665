/**
 * JWT verification with node:crypto: HS256 (shared secret) or RS256 (public
 * key). The algorithm is fixed by which key is configured, never taken on trust
 * from the token header, so `alg: none` and HS/RS confusion are rejected.
 */
import { createHmac, createPublicKey, createSign, createVerify, timingSafeEqual, type KeyObject } from "node:crypto";

export type JwtClaims = Record<string, unknown>;

export interface JwtKeys {
  hs256Secret?: string;
  rs256PublicKey?: string;
}

export class JwtError extends Error {}

function b64urlDecode(s: string): Buffer {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new JwtError("token segment is not base64url");
  return Buffer.from(s, "base64url");
}

function parseJson(buf: Buffer, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(buf.toString("utf8"));
  } catch {
    throw new JwtError(`token ${what} is not JSON`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new JwtError(`token ${what} is not an object`);
  return v as Record<string, unknown>;
}

export class JwtVerifier {
  private readonly rsKey?: KeyObject;

  constructor(private readonly keys: JwtKeys) {
    if (keys.rs256PublicKey) this.rsKey = createPublicKey(keys.rs256PublicKey);
  }

  get enabled(): boolean {
    return Boolean(this.keys.hs256Secret || this.rsKey);
  }

  /** Verify signature, `exp` (required) and `nbf` (seconds) against `nowMs`; returns the claims. */
  verify(token: string, nowMs: number): JwtClaims {
    const parts = token.split(".");
    if (parts.length !== 3) throw new JwtError("not a JWT");
    const [h, p, s] = parts as [string, string, string];
    const header = parseJson(b64urlDecode(h), "header");
    const signature = b64urlDecode(s);
    const signed = Buffer.from(`${h}.${p}`);
    let ok = false;
    if (header.alg === "HS256" && this.keys.hs256Secret) {
      const expected = createHmac("sha256", this.keys.hs256Secret).update(signed).digest();
      ok = expected.length === signature.length && timingSafeEqual(expected, signature);
    } else if (header.alg === "RS256" && this.rsKey) {
      ok = createVerify("RSA-SHA256").update(signed).verify(this.rsKey, signature);
    } else {
      throw new JwtError(`algorithm ${String(header.alg)} is not accepted`);
    }
    if (!ok) throw new JwtError("bad signature");
    const claims = parseJson(b64urlDecode(p), "payload");
    const now = Math.floor(nowMs / 1000);
    // A token that never expires is refused: a leaked one would be valid forever.
    if (typeof claims.exp !== "number") throw new JwtError("token has no exp claim");
    if (claims.exp <= now) throw new JwtError("token expired");
    if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || claims.nbf > now)) throw new JwtError("token not yet valid");
    return claims;
  }
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
