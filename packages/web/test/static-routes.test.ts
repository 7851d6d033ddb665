/**
 * The server side of the audience tool (packages/server/src/web): static files
 * with their content types, the SPA fallback for client routes, the "not
 * built" message, unknown API paths left alone, and the /ui/config.json rule
 * (dev credentials only for the local dev tenant, from loopback, unproxied).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Fastify, { type FastifyInstance } from "fastify";
import { installErrorHandling } from "../../server/src/http/errors.js";
import { defaultConfig, type Config } from "../../server/src/platform/config.js";
import { loadOrCreateDevCredentials, withDevTenant } from "../../server/src/services/dev-bootstrap.js";
import { webRoutes } from "../../server/src/web/routes.js";
import { devTenantCredentials, isLoopbackAddress, uiConfigFor } from "../../server/src/web/ui-config.js";

async function serve(config: Config, staticDir: string): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  await app.register(webRoutes, { config, staticDir });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url };
}

describe("static routes", () => {
  const root = mkdtempSync(path.join(tmpdir(), "segmentd-web-static-"));
  const built = path.join(root, "static");
  const empty = path.join(root, "empty");
  let withUi: { app: FastifyInstance; url: string };
  let withoutUi: { app: FastifyInstance; url: string };

  before(async () => {
    mkdirSync(built);
    mkdirSync(empty);
    writeFileSync(path.join(built, "index.html"), "<!doctype html><title>ui</title>");
    writeFileSync(path.join(built, "app.js"), "console.log(1)");
    writeFileSync(path.join(built, "app.css"), "body{}");
    writeFileSync(path.join(root, "secret.txt"), "nope");
    const config = defaultConfig();
    config.dataDir = path.join(root, "data");
    withUi = await serve(config, built);
    withoutUi = await serve(config, empty);
  });
  after(async () => {
    await withUi.app.close();
    await withoutUi.app.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("serves the bundle with its content types and a same-origin-only CSP", async () => {
    for (const [file, type] of [["app.js", "text/javascript"], ["app.css", "text/css"]]) {
      const r = await fetch(`${withUi.url}/ui/${file}`);
      assert.equal(r.status, 200);
      assert.match(r.headers.get("content-type") ?? "", new RegExp(`^${type}`));
      assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    }
    const r = await fetch(`${withUi.url}/`);
    assert.match(r.headers.get("content-security-policy") ?? "", /default-src 'self'/);
  });

  it("answers every client route with index.html (SPA fallback)", async () => {
    for (const p of ["/", "/signin", "/audiences", "/audiences/new", "/audiences/abc", "/audiences/abc/edit", "/lifecycle"]) {
      const r = await fetch(withUi.url + p);
      assert.equal(r.status, 200, p);
      assert.match(r.headers.get("content-type") ?? "", /^text\/html/);
      assert.equal(await r.text(), "<!doctype html><title>ui</title>");
    }
  });

  it("leaves other paths to the API's JSON 404 and never serves outside the directory", async () => {
    const api = await fetch(`${withUi.url}/data/core/ups/nothing`);
    assert.equal(api.status, 404);
    assert.match(api.headers.get("content-type") ?? "", /json/);
    for (const p of ["/ui/..%2Fsecret.txt", "/ui/%2E%2E%2Fsecret.txt", "/ui/secret.txt", "/ui/missing.js"]) {
      const r = await fetch(withUi.url + p);
      assert.equal(r.status, 404, p);
      assert.doesNotMatch(await r.text(), /nope/);
    }
  });

  it("says to run npm run build when the UI is not built", async () => {
    const r = await fetch(`${withoutUi.url}/audiences`);
    assert.equal(r.status, 503);
    assert.match(await r.text(), /npm run build/);
  });

  it("gives no credentials when the server does not run the dev tenant", async () => {
    const r = await fetch(`${withUi.url}/ui/config.json`);
    assert.deepEqual(await r.json(), { devTenant: false });
  });
});

describe("/ui/config.json rule", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "segmentd-web-dev-"));
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  const base = defaultConfig();
  base.dataDir = dataDir;
  const creds = loadOrCreateDevCredentials(dataDir).credentials;
  const devConfig = withDevTenant(base, creds);

  it("recognises the dev tenant only when it is the configured one", () => {
    assert.equal(devTenantCredentials(devConfig)?.token, creds.token);
    // Same data directory, but organizations configured by the operator: not the dev tenant.
    const configured: Config = { ...base, organizations: [{ id: "REAL@AdobeOrg", sandboxes: [{ name: "prod", type: "production", default: true }] }] };
    assert.equal(devTenantCredentials(configured), undefined);
    assert.equal(devTenantCredentials(base), undefined, "the token is not configured");
  });

  it("returns the org credentials (never the operator token) to loopback callers only", () => {
    const local = uiConfigFor(creds, { remoteAddress: "127.0.0.1", headers: {} });
    assert.deepEqual(local, { devTenant: true, credentials: { token: creds.token, apiKey: creds.apiKey, orgId: creds.orgId, sandboxName: creds.sandboxName } });
    assert.doesNotMatch(JSON.stringify(local), new RegExp(creds.operatorToken));
    assert.equal(uiConfigFor(creds, { remoteAddress: "::1", headers: {} }).devTenant, true);
    assert.equal(uiConfigFor(creds, { remoteAddress: "::ffff:127.0.0.1", headers: {} }).devTenant, true);
    assert.deepEqual(uiConfigFor(creds, { remoteAddress: "192.168.1.20", headers: {} }), { devTenant: false });
    assert.deepEqual(uiConfigFor(creds, { remoteAddress: "127.0.0.1", headers: { "x-forwarded-for": "203.0.113.9" } }), { devTenant: false });
    assert.deepEqual(uiConfigFor(creds, { remoteAddress: "127.0.0.1", headers: { forwarded: "for=203.0.113.9" } }), { devTenant: false });
    assert.deepEqual(uiConfigFor(undefined, { remoteAddress: "127.0.0.1", headers: {} }), { devTenant: false });
  });

  it("knows loopback addresses", () => {
    assert.equal(isLoopbackAddress("127.8.0.1"), true);
    assert.equal(isLoopbackAddress("128.0.0.1"), false);
    assert.equal(isLoopbackAddress("::2"), false);
    assert.equal(isLoopbackAddress(undefined), false);
  });

  it("serves the credentials over HTTP to this machine", async () => {
    const s = await serve(devConfig, dataDir);
    try {
      const body = (await (await fetch(`${s.url}/ui/config.json`)).json()) as { devTenant: boolean; credentials?: { token: string } };
      assert.equal(body.devTenant, true);
      assert.equal(body.credentials?.token, creds.token);
    } finally {
      await s.app.close();
    }
  });
});
