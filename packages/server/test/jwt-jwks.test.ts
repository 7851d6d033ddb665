/**
 * JWT verification by `jose`: RS256 and ES256 keys from a static key set and
 * from a JSON Web Key Set served by a real local HTTP server (cached, fetched
 * again when the provider rotates its keys), the reasons a token is refused,
 * and the same over the service's HTTP API (401013 / 403025 as before).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { KeyObject } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT, exportJWK, generateKeyPair, type JWK } from "jose";
import { JwtError, JwtVerifier, signJwt } from "../src/services/auth/jwt.js";
import { ConfigError, applyConfigFile, applyEnv, defaultConfig } from "../src/platform/config.js";
import { DEFS, ORG_A, ORG_B, client, obj, startHarness, type Harness } from "./helpers/server-harness.js";

const NOW = Date.parse("2026-11-21T12:00:00Z");
const S = Math.floor(NOW / 1000);

interface Key {
  kid: string;
  alg: "RS256" | "ES256";
  privateKey: CryptoKey;
  jwk: JWK;
}

async function key(kid: string, alg: "RS256" | "ES256"): Promise<Key> {
  const pair = await generateKeyPair(alg, { extractable: true });
  return { kid, alg, privateKey: pair.privateKey, jwk: { ...(await exportJWK(pair.publicKey)), kid, alg, use: "sig" } };
}

function sign(k: Key, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: k.alg, kid: k.kid, typ: "JWT", ...header }).sign(k.privateKey);
}

/** A JWKS endpoint whose key set the test changes, counting its fetches. */
class JwksServer {
  keys: JWK[] = [];
  fetches = 0;
  private server?: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.fetches++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: this.keys }));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/.well-known/jwks.json`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

async function refused(v: JwtVerifier, token: string, message: string, nowMs = NOW): Promise<void> {
  await assert.rejects(v.verify(token, nowMs), (e: unknown) => e instanceof JwtError && e.message === message, message);
}

let rsa1: Key, rsa2: Key, ec1: Key;
before(async () => {
  [rsa1, rsa2, ec1] = await Promise.all([key("rsa-1", "RS256"), key("rsa-2", "RS256"), key("ec-1", "ES256")]);
});

describe("a static key set", () => {
  test("RS256 and ES256 tokens verify by kid; an unknown kid or key is refused", async () => {
    const v = new JwtVerifier({ jwks: { keys: [rsa1.jwk, ec1.jwk] } });
    assert.deepEqual(await v.verify(await sign(rsa1, { org: ORG_A, exp: S + 60 }), NOW), { org: ORG_A, exp: S + 60 });
    assert.deepEqual(await v.verify(await sign(ec1, { org: ORG_A, sub: "u1", exp: S + 60 }), NOW), { org: ORG_A, sub: "u1", exp: S + 60 });
    await refused(v, await sign(rsa2, { org: ORG_A, exp: S + 60 }), "no key of the key set matches the token");
    // rsa-2's signature under rsa-1's kid.
    await refused(v, await sign({ ...rsa2, kid: "rsa-1" }, { org: ORG_A, exp: S + 60 }), "bad signature");
  });

  test("expired, not yet valid, no or malformed exp, a refused algorithm, alg none, issuer and audience → the existing reasons", async () => {
    const v = new JwtVerifier({ jwks: { keys: [ec1.jwk] }, issuer: "https://idp.example", audience: "segmentd" });
    const ok = { org: ORG_A, iss: "https://idp.example", aud: ["other", "segmentd"] };
    assert.equal((await v.verify(await sign(ec1, { ...ok, exp: S + 1 }), NOW)).org, ORG_A);
    await refused(v, await sign(ec1, { ...ok, exp: S }), "token expired");
    await refused(v, await sign(ec1, { ...ok, exp: S + 7200, nbf: S + 1 }), "token not yet valid");
    await refused(v, await sign(ec1, ok), "token has no exp claim");
    await refused(v, await sign(ec1, { ...ok, exp: String(S + 60) }), "token has no exp claim");
    await refused(v, await sign(ec1, { ...ok, exp: S + 60, iss: "https://evil.example" }), "token's iss claim is not accepted");
    await refused(v, await sign(ec1, { ...ok, exp: S + 60, aud: "other" }), "token's aud claim is not accepted");
    // HS256 is not configured here, whatever the token says; nor is none.
    await refused(v, signJwt({ ...ok, exp: S + 60 }, { hs256Secret: "s" }), "algorithm HS256 is not accepted");
    const none = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify({ ...ok, exp: S + 60 })).toString("base64url")}.`;
    await refused(v, none, "algorithm none is not accepted");
    await assert.rejects(v.verify("a.b.c", NOW), (e: unknown) => e instanceof JwtError && e.message.startsWith("not a valid JWT"));
  });

  test("issuer and audience bind the provider's tokens, not the shared secret's (/ims/token/v3's carry neither)", async () => {
    const v = new JwtVerifier({ hs256Secret: "secret", jwks: { keys: [ec1.jwk] }, issuer: "https://idp.example", audience: "segmentd" });
    assert.equal((await v.verify(signJwt({ org: ORG_A, exp: S + 60 }, { hs256Secret: "secret" }), NOW)).org, ORG_A);
    await refused(v, await sign(ec1, { org: ORG_A, exp: S + 60 }), "token's iss claim is not accepted");
    await refused(v, await sign(ec1, { org: ORG_A, iss: "https://idp.example", exp: S + 60 }), "token's aud claim is not accepted");
  });

  test("HS256 and a PEM key keep working beside a key set, without HS/RS confusion", async () => {
    const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
    const pem = KeyObject.from(publicKey).export({ format: "pem", type: "spki" }).toString();
    const privPem = KeyObject.from(privateKey).export({ format: "pem", type: "pkcs8" }).toString();
    const v = new JwtVerifier({ hs256Secret: "secret", rs256PublicKey: pem, jwks: { keys: [ec1.jwk] } });
    assert.equal((await v.verify(signJwt({ org: ORG_A, exp: S + 60 }, { hs256Secret: "secret" }), NOW)).org, ORG_A);
    assert.equal((await v.verify(signJwt({ org: ORG_A, exp: S + 60 }, { rs256PrivateKey: privPem }), NOW)).org, ORG_A);
    assert.equal((await v.verify(await sign(ec1, { org: ORG_A, exp: S + 60 }), NOW)).org, ORG_A);
    await refused(v, signJwt({ org: ORG_A, exp: S + 60 }, { hs256Secret: pem }), "bad signature");
  });

  test("a malformed key set or PEM fails at construction, not on every token", () => {
    assert.throws(() => new JwtVerifier({ jwks: { keys: "nope" } as never }));
    assert.throws(() => new JwtVerifier({ rs256PublicKey: "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n" }));
  });
});

describe("a remote key set (jwks_uri) over HTTP", () => {
  const idp = new JwksServer();
  before(() => idp.start());
  after(() => idp.stop());

  test("fetched once and cached; a rotated key is fetched again after the cooldown; the retired key is refused", async () => {
    idp.keys = [rsa1.jwk, ec1.jwk];
    idp.fetches = 0;
    // Signed beforehand, so that a slow machine does not stretch the steps below past the cooldown.
    const [t1, tEc, t2] = [await sign(rsa1, { org: ORG_A, exp: S + 60 }), await sign(ec1, { org: ORG_B, exp: S + 60 }), await sign(rsa2, { org: ORG_A, exp: S + 60 })];
    const v = new JwtVerifier({ jwksUrl: idp.url, jwksCooldownMs: 1000 });
    for (let i = 0; i < 3; i++) assert.equal((await v.verify(t1, NOW)).org, ORG_A);
    assert.equal((await v.verify(tEc, NOW)).org, ORG_B);
    assert.equal(idp.fetches, 1, "one fetch serves every token");

    // The provider rotates: rsa-2 replaces rsa-1.
    idp.keys = [rsa2.jwk, ec1.jwk];
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await v.verify(t2, NOW)).org, ORG_A);
    assert.equal(idp.fetches, 2, "the unknown kid fetched the set again");
    await refused(v, t1, "no key of the key set matches the token");
    assert.equal(idp.fetches, 2, "within the cooldown an unknown kid does not fetch again");
  });

  test("an unknown kid within the cooldown is refused without a fetch (no fetch storm from forged kids)", async () => {
    idp.keys = [ec1.jwk];
    idp.fetches = 0;
    const v = new JwtVerifier({ jwksUrl: idp.url, jwksCooldownMs: 60_000 });
    assert.equal((await v.verify(await sign(ec1, { org: ORG_A, exp: S + 60 }), NOW)).org, ORG_A);
    for (let i = 0; i < 5; i++) await refused(v, await sign({ ...rsa2, kid: `forged-${i}` }, { org: ORG_A, exp: S + 60 }), "no key of the key set matches the token");
    assert.equal(idp.fetches, 1);
  });

  test("an unreachable key set refuses the token with the reason", async () => {
    const v = new JwtVerifier({ jwksUrl: "http://127.0.0.1:9/jwks.json", jwksTimeoutMs: 2000 });
    await assert.rejects(v.verify(await sign(ec1, { org: ORG_A, exp: S + 60 }), NOW), (e: unknown) => e instanceof JwtError && e.message.startsWith("the key set at http://127.0.0.1:9/jwks.json could not be fetched"));
  });
});

describe("the HTTP API with auth.jwtJwksUrl", () => {
  const idp = new JwksServer();
  let h: Harness;
  before(async () => {
    await idp.start();
    idp.keys = [ec1.jwk, rsa1.jwk];
    h = await startHarness("jwks", { patch: (c) => { c.auth.jwtJwksUrl = idp.url; c.auth.jwtAudience = "segmentd"; } });
  });
  after(async () => {
    await h.close();
    await idp.stop();
  });
  const now = () => Math.floor(Date.now() / 1000);
  const list = (token: string, org = ORG_A) => client(h.url, { token, org }).get(DEFS);

  test("ES256 and RS256 tokens from the provider are accepted; their org claim still decides", async () => {
    const es = await list(await sign(ec1, { org: ORG_A, aud: "segmentd", exp: now() + 60 }));
    assert.equal(es.status, 200, es.text);
    assert.ok(Array.isArray(obj(es.json).segments));
    assert.equal((await list(await sign(rsa1, { org: [ORG_B, ORG_A], aud: "segmentd", exp: now() + 60 }))).status, 200);
    const other = await list(await sign(ec1, { org: ORG_B, aud: "segmentd", exp: now() + 60 }), ORG_A);
    assert.deepEqual([other.status, other.json], [403, { error_code: "403025", message: "Profile is not valid" }]);
  });

  test("expired, not yet valid, wrong audience, unknown key, HS256 → 401 401013 as before", async () => {
    const bad = [
      await sign(ec1, { org: ORG_A, aud: "segmentd", exp: now() - 1 }),
      await sign(ec1, { org: ORG_A, aud: "segmentd", exp: now() + 7200, nbf: now() + 3600 }),
      await sign(ec1, { org: ORG_A, aud: "someone-else", exp: now() + 60 }),
      await sign(rsa2, { org: ORG_A, aud: "segmentd", exp: now() + 60 }),
      signJwt({ org: ORG_A, aud: "segmentd", exp: now() + 60 }, { hs256Secret: "guess" }),
    ];
    for (const t of bad) {
      const r = await list(t);
      assert.deepEqual([r.status, r.json], [401, { error_code: "401013", message: "Oauth token is not valid" }], t);
    }
  });
});

test("config: auth.jwtJwks, jwtJwksUrl, jwtIssuer, jwtAudience and SEGMENTD_JWT_JWKS_URL", () => {
  const c = applyConfigFile(defaultConfig(), { auth: { jwtJwks: { keys: [{ kty: "EC" }] }, jwtJwksUrl: "https://idp.example/jwks", jwtIssuer: "https://idp.example", jwtAudience: "segmentd" } }, "f.json");
  assert.deepEqual([c.auth.jwtJwks, c.auth.jwtJwksUrl, c.auth.jwtIssuer, c.auth.jwtAudience], [{ keys: [{ kty: "EC" }] }, "https://idp.example/jwks", "https://idp.example", "segmentd"]);
  assert.equal(applyEnv(defaultConfig(), { SEGMENTD_JWT_JWKS_URL: "https://idp.example/k" }).auth.jwtJwksUrl, "https://idp.example/k");
  for (const jwtJwks of [[], { keys: "x" }, { keys: [1] }]) {
    assert.throws(() => applyConfigFile(defaultConfig(), { auth: { jwtJwks } }, "f.json"),
      (e: unknown) => e instanceof ConfigError && e.message === 'f.json: auth.jwtJwks must be a JSON Web Key Set ({ "keys": [ … ] })');
  }
});
