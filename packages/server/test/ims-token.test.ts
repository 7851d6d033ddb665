/**
 * `POST /ims/token/v3` (#27): the form request Adobe's OAuth server-to-server clients (aepp, the
 * SDKs) send to IMS, answered with a token the API then accepts for the client's organizations,
 * over real HTTP; and every refusal in IMS's `{error, error_description}` shape.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ManualClock } from "../src/platform/clock.js";
import { loadConfig, ConfigError } from "../src/platform/config.js";
import { DEFS, ORG_A, ORG_B, obj, startHarness, type Harness } from "./helpers/server-harness.js";

const CLIENT_ID = "0123456789abcdef0123456789abcdef";
const CLIENT_SECRET = "p8e-not-a-real-secret-0123456789";
const SCOPES = "openid,AdobeID,read_organizations,additional_info.projectedProductContext,session";
const T0 = Date.UTC(2026, 10, 27, 12);

let h: Harness;
const clock = new ManualClock(T0);

/** As python-requests sends `requests.post(url, data={...})`, aepp's call. */
async function tokenRequest(fields: Array<[string, string]> | string, contentType = "application/x-www-form-urlencoded"): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const body = typeof fields === "string" ? fields : new URLSearchParams(fields).toString();
  const r = await fetch(`${h.url}/ims/token/v3`, {
    method: "POST",
    headers: { "User-Agent": "python-requests/2.31.0", "Accept-Encoding": "gzip, deflate", Accept: "*/*", Connection: "keep-alive", "Content-Type": contentType },
    body,
  });
  return { status: r.status, headers: r.headers, json: obj(await r.json()) };
}

const GRANT: Array<[string, string]> = [["grant_type", "client_credentials"], ["client_id", CLIENT_ID], ["client_secret", CLIENT_SECRET], ["scope", SCOPES]];

function api(token: string, org = ORG_A): Promise<Response> {
  return fetch(`${h.url}${DEFS}?limit=1`, { headers: { Authorization: `Bearer ${token}`, "x-api-key": CLIENT_ID, "x-gw-ims-org-id": org, "x-sandbox-name": "prod" } });
}

before(async () => {
  h = await startHarness("ims", { clock, patch: (c) => { c.auth.clients = [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, orgs: [ORG_A] }]; } });
});
after(async () => h.close());

describe("POST /ims/token/v3", () => {
  test("client credentials get a 24-hour bearer token the API accepts for the client's organizations only", async () => {
    const r = await tokenRequest(GRANT);
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.json).sort(), ["access_token", "expires_in", "token_type"]);
    assert.equal(r.json.token_type, "bearer");
    assert.equal(r.json.expires_in, 86399);
    assert.equal(r.headers.get("cache-control"), "no-store");
    const token = r.json.access_token as string;
    const ok = await api(token);
    assert.equal(ok.status, 200);
    const other = await api(token, ORG_B);
    assert.equal(other.status, 403);
    assert.deepEqual(await other.json(), { error_code: "403025", message: "Profile is not valid" });
    clock.set(T0 + 86_400_000);
    const expired = await api(token);
    assert.equal(expired.status, 401);
    assert.deepEqual(await expired.json(), { error_code: "401013", message: "Oauth token is not valid" });
    clock.set(T0);
  });

  test("a wrong secret or an unknown client: 401 invalid_client, the same answer for both", async () => {
    for (const fields of [
      GRANT.map(([k, v]): [string, string] => [k, k === "client_secret" ? "wrong" : v]),
      GRANT.map(([k, v]): [string, string] => [k, k === "client_id" ? "someone-else" : v]),
    ]) {
      const r = await tokenRequest(fields);
      assert.equal(r.status, 401);
      assert.deepEqual(r.json, { error: "invalid_client", error_description: "invalid client_id or client_secret parameter" });
    }
  });

  test("bad requests: 400 with IMS's error and description", async () => {
    const cases: Array<[Array<[string, string]> | string, string, Record<string, string>]> = [
      [GRANT.filter(([k]) => k !== "grant_type"), "application/x-www-form-urlencoded", { error: "invalid_request", error_description: "missing grant_type parameter" }],
      [GRANT.map(([k, v]): [string, string] => [k, k === "grant_type" ? "password" : v]), "application/x-www-form-urlencoded", { error: "unsupported_grant_type", error_description: "grant_type password is not supported: use client_credentials" }],
      [GRANT.filter(([k]) => k !== "client_secret"), "application/x-www-form-urlencoded", { error: "invalid_request", error_description: "missing client_secret parameter" }],
      [[...GRANT, ["client_id", "again"]], "application/x-www-form-urlencoded", { error: "invalid_request", error_description: "parameter client_id is repeated" }],
      [JSON.stringify(Object.fromEntries(GRANT)), "application/json", { error: "invalid_request", error_description: "the body must be an application/x-www-form-urlencoded form" }],
      ["<x/>", "text/xml", { error: "invalid_request", error_description: "the body must be an application/x-www-form-urlencoded form" }],
    ];
    for (const [fields, type, expected] of cases) {
      const r = await tokenRequest(fields, type);
      assert.equal(r.status, 400, JSON.stringify(expected));
      assert.deepEqual(r.json, expected);
    }
    const huge = await tokenRequest(`scope=${"x".repeat(20_000)}&${new URLSearchParams(GRANT).toString()}`);
    assert.equal(huge.status, 413);
    assert.deepEqual(huge.json, { error: "invalid_request", error_description: "request body too large" });
  });
});

test("clients without an HS256 secret are a configuration error", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-ims-"));
  try {
    const file = path.join(dir, "segmentd.config.json");
    writeFileSync(file, JSON.stringify({ auth: { clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, orgs: [ORG_A] }] } }));
    assert.throws(() => loadConfig({ cwd: dir, env: {} }), new ConfigError("auth.clients need auth.jwtHs256Secret (or SEGMENTD_JWT_HS256_SECRET): the tokens /ims/token/v3 issues are signed with it"));
    assert.equal(loadConfig({ cwd: dir, env: { SEGMENTD_JWT_HS256_SECRET: "s3cret-s3cret-s3cret" } }).auth.clients?.[0]?.clientId, CLIENT_ID);
    writeFileSync(file, JSON.stringify({ auth: { clients: [{ clientId: CLIENT_ID, orgs: [ORG_A] }] } }));
    assert.throws(() => loadConfig({ cwd: dir, env: {} }), new ConfigError(`${file}: auth.clients[0] needs "clientId", "clientSecret" and "orgs"`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
