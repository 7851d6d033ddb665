/**
 * Credentials and headers on every endpoint: Adobe's gateway errors, the UPS
 * error for an unknown sandbox, JWT verification (HS256 and RS256, expiry, not
 * before, org claims), the operator guard, and that a refused write stores nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { signJwt } from "../src/index.js";
import {
  API_KEY, DEFS, JWT_SECRET, MPS, OPERATOR_TOKEN, ORG_A, ORG_B, TOKEN_A, TOKEN_B,
  arr, client, definitionBody, obj, startHarness, type Caller, type Harness,
} from "./helpers/server-harness.js";

const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const RS_PUBLIC = publicKey.export({ type: "spki", format: "pem" }).toString();
const RS_PRIVATE = privateKey.export({ type: "pkcs8", format: "pem" }).toString();

let h: Harness;
before(async () => {
  h = await startHarness("auth", { patch: (c) => { c.auth.jwtRs256PublicKey = RS_PUBLIC; } });
});
after(async () => h.close());

const now = () => Math.floor(Date.now() / 1000);

/** Every authenticated endpoint, with a body where it takes one. */
const ENDPOINTS: [string, string, unknown?][] = [
  ["GET", DEFS],
  ["POST", DEFS, definitionBody("never-stored")],
  ["GET", `${DEFS}/some-id`],
  ["PATCH", `${DEFS}/some-id`, definitionBody("never-stored")],
  ["DELETE", `${DEFS}/some-id`],
  ["POST", `${DEFS}/bulk-get`, { ids: [{ id: "x" }] }],
  ["POST", "/data/core/ups/segment/conversion", definitionBody("c")],
  ["POST", "/data/core/ups/segment/eligibility", { expression: { type: "PQL", format: "pql/text", value: "a = 1" } }],
  ["GET", MPS],
  ["POST", MPS, { schema: { name: "_xdm.context.profile" }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } }],
  ["GET", `${MPS}/x`],
  ["PUT", `${MPS}/x`, { schema: { name: "_xdm.context.profile" }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" } }],
  ["PATCH", `${MPS}/x`, [{ op: "add", path: "/name", value: "n" }]],
  ["DELETE", `${MPS}/x`],
  ["POST", `${MPS}/bulk-get`, { ids: [{ id: "x" }] }],
];

async function expectGateway(who: Caller, status: number, code: string, message: string) {
  for (const [method, path, body] of ENDPOINTS) {
    const r = await client(h.url, who).call(method, path, body);
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
    assert.deepEqual(r.json, { error_code: code, message }, `${method} ${path}`);
  }
}

async function definitionCount(): Promise<number> {
  const r = await client(h.url).get(`${DEFS}?limit=1`);
  return obj(obj(r.json).page).totalCount as number;
}

describe("gateway errors on every endpoint", () => {
  test("missing Authorization → 403 403010", () => expectGateway({ token: null }, 403, "403010", "Oauth token is missing"));
  test("unknown token → 401 401013", () => expectGateway({ token: "nope" }, 401, "401013", "Oauth token is not valid"));
  test("missing x-api-key → 403 403000", () => expectGateway({ apiKey: null }, 403, "403000", "Api Key is required"));
  test("unregistered x-api-key → 403 403003", () => expectGateway({ apiKey: "stolen" }, 403, "403003", "Api Key is invalid"));
  test("missing org header → 400 400003", () => expectGateway({ org: null }, 400, "400003", "Missing header: x-gw-ims-org-id"));
  test("org not granted by the token → 403 403025", () => expectGateway({ token: TOKEN_B, org: ORG_A }, 403, "403025", "Profile is not valid"));
  test("missing sandbox header → 400 400003", () => expectGateway({ sandbox: null }, 400, "400003", "Missing header: x-sandbox-name"));
  test("operator token on an org API → 401", () => expectGateway({ token: OPERATOR_TOKEN }, 401, "401013", "Oauth token is not valid"));

  test("unknown sandbox → 403 in the UPS shape", async () => {
    for (const [method, path, body] of ENDPOINTS) {
      const r = await client(h.url, { sandbox: "staging" }).call(method, path, body);
      assert.equal(r.status, 403, `${method} ${path}`);
      const b = obj(r.json);
      assert.equal(b.type, "https://ns.adobe.com/aep/errors/SEGMENTD-SANDBOX-403");
      assert.equal(b.title, `Sandbox 'staging' does not exist in organization '${ORG_A}'`);
    }
  });

  test("refused creates store nothing", async () => {
    const n = await definitionCount();
    for (const who of [{ token: null }, { token: "x" }, { apiKey: null }, { org: ORG_B }, { sandbox: "staging" }] as Caller[]) {
      await client(h.url, who).post(DEFS, definitionBody(`refused-${JSON.stringify(who)}`));
    }
    assert.equal(await definitionCount(), n);
  });

  test("a malformed Authorization header is 401", async () => {
    const r = await client(h.url, { token: null }).get(DEFS, { authorization: "Basic dXNlcjpwYXNz" });
    assert.equal(r.status, 401);
    assert.deepEqual(r.json, { error_code: "401013", message: "Oauth token is not valid" });
  });
});

describe("JWT", () => {
  const list = (token: string, org = ORG_A) => client(h.url, { token, org }).get(DEFS);

  test("a valid HS256 token for the org is accepted; a list of orgs works too", async () => {
    assert.equal((await list(signJwt({ org: ORG_A, exp: now() + 60 }, { hs256Secret: JWT_SECRET }))).status, 200);
    const both = signJwt({ org: [ORG_B, ORG_A], exp: now() + 60 }, { hs256Secret: JWT_SECRET });
    assert.equal((await list(both, ORG_A)).status, 200);
    assert.equal((await client(h.url, { token: both, org: ORG_B }).get(DEFS)).status, 200);
  });

  test("a valid RS256 token is accepted", async () => {
    assert.equal((await list(signJwt({ org: ORG_A, exp: now() + 60 }, { rs256PrivateKey: RS_PRIVATE }))).status, 200);
  });

  test("bad signature, expired, not yet valid, no or malformed exp, alg none, no org claim → 401 401013", async () => {
    const bad = [
      signJwt({ org: ORG_A, exp: now() + 60 }, { hs256Secret: "wrong-secret" }),
      signJwt({ org: ORG_A, exp: now() - 1 }, { hs256Secret: JWT_SECRET }),
      signJwt({ org: ORG_A, exp: now() + 7200, nbf: now() + 3600 }, { hs256Secret: JWT_SECRET }),
      signJwt({ org: ORG_A }, { hs256Secret: JWT_SECRET }), // no exp
      signJwt({ org: ORG_A, exp: String(now() + 60) }, { hs256Secret: JWT_SECRET }),
      signJwt({ tenant: ORG_A, exp: now() + 60 }, { hs256Secret: JWT_SECRET }),
      // HS/RS confusion: an HS256 token "signed" with the public key.
      signJwt({ org: ORG_A, exp: now() + 60 }, { hs256Secret: RS_PUBLIC }),
      `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify({ org: ORG_A })).toString("base64url")}.`,
      "a.b.c",
    ];
    // Tamper: valid signature over other claims.
    const good = signJwt({ org: ORG_B, exp: now() + 60 }, { hs256Secret: JWT_SECRET }).split(".");
    bad.push(`${good[0]}.${Buffer.from(JSON.stringify({ org: ORG_A, exp: now() + 60 })).toString("base64url")}.${good[2]}`);
    for (const t of bad) {
      const r = await list(t);
      assert.equal(r.status, 401, t);
      assert.deepEqual(r.json, { error_code: "401013", message: "Oauth token is not valid" });
    }
  });

  test("wrong org claim → 403 403025; an org the server does not know → 403 403027", async () => {
    const r = await list(signJwt({ org: ORG_B, exp: now() + 60 }, { hs256Secret: JWT_SECRET }), ORG_A);
    assert.deepEqual([r.status, r.json], [403, { error_code: "403025", message: "Profile is not valid" }]);
    const unknown = "ZZZZ@AdobeOrg";
    const u = await list(signJwt({ org: unknown, exp: now() + 60 }, { hs256Secret: JWT_SECRET }), unknown);
    assert.deepEqual([u.status, u.json], [403, { error_code: "403027", message: "User region is missing" }]);
  });
});

describe("operator guard", () => {
  test("only operator tokens reach /admin", async () => {
    const op = await fetch(`${h.url}/admin/tenants`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    assert.equal(op.status, 200);
    const orgs = arr(obj(await op.json()).organizations).map((o) => obj(o).orgId).sort();
    assert.deepEqual(orgs, [ORG_A, ORG_B]);
    const org = await fetch(`${h.url}/admin/tenants`, { headers: { authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A } });
    assert.equal(org.status, 403);
    assert.equal(obj(await org.json()).type, "https://ns.adobe.com/aep/errors/SEGMENTD-OPERATOR-403");
    const none = await fetch(`${h.url}/admin/tenants`);
    assert.deepEqual([none.status, await none.json()], [403, { error_code: "403010", message: "Oauth token is missing" }]);
  });
});

describe("platform endpoints", () => {
  test("x-request-id is echoed when sent and generated when absent, also on errors", async () => {
    const r = await client(h.url).get(DEFS, { "x-request-id": "my-trace-123" });
    assert.equal(r.headers.get("x-request-id"), "my-trace-123");
    const e = await client(h.url, { sandbox: "nope" }).get(DEFS, { "x-request-id": "trace-err" });
    assert.equal(e.headers.get("x-request-id"), "trace-err");
    assert.equal(obj(e.json).requestId, "trace-err");
    const g = await client(h.url).get(DEFS);
    assert.match(g.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
    const hostile = await client(h.url).get(DEFS, { "x-request-id": "<script>" });
    assert.match(hostile.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
  });

  test("healthz, readyz and metrics by route and status", async () => {
    assert.deepEqual(await (await fetch(`${h.url}/healthz`)).json(), { status: "ok" });
    const ready = await fetch(`${h.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(obj(await ready.json()).status, "ready");
    await client(h.url).get(DEFS);
    const m = await (await fetch(`${h.url}/metrics`)).text();
    assert.match(m, /segmentd_http_requests_total\{method="GET",route="\/data\/core\/ups\/segment\/definitions",status_code="200"\} \d+/);
    assert.match(m, /segmentd_http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/data\/core\/ups\/segment\/definitions",status_code="200"\}/);
  });

  test("unknown routes are 404 in the UPS shape", async () => {
    const r = await fetch(`${h.url}/data/core/ups/nothing`);
    assert.equal(r.status, 404);
    assert.equal(obj(await r.json()).title, "Route GET /data/core/ups/nothing not found");
  });

  test("/openapi.json documents every route; /docs serves its page and assets locally", async () => {
    const doc = obj(await (await fetch(`${h.url}/openapi.json`)).json());
    assert.equal(doc.openapi, "3.0.3");
    const paths = obj(doc.paths);
    for (const p of [
      "/data/core/ups/segment/definitions", "/data/core/ups/segment/definitions/{SEGMENT_ID}", "/data/core/ups/segment/definitions/bulk-get",
      "/data/core/ups/segment/conversion", "/data/core/ups/segment/eligibility", "/data/core/ups/config/mergePolicies",
      "/data/core/ups/config/mergePolicies/{mergePolicyId}", "/data/core/ups/config/mergePolicies/bulk-get", "/healthz", "/readyz", "/metrics", "/admin/tenants",
    ]) assert.ok(paths[p], `missing ${p}`);
    const create = obj(obj(paths["/data/core/ups/segment/definitions"]).post);
    assert.ok(obj(create.requestBody), "create has a request body schema");
    assert.ok(obj(obj(create.responses)["200"]), "create has a 200 schema");
    // Export jobs: every CreateExportJobRequest option and the cancel route are documented.
    const exportBody = obj(obj(obj(obj(obj(obj(paths["/data/core/ups/export/jobs"]).post).requestBody).content)["application/json"]).schema);
    const props = obj(exportBody.properties);
    assert.deepEqual(Object.keys(obj(obj(props.filter).properties)).sort(), ["emptyProfiles", "fromIngestTimestamp", "segmentQualificationTime", "segments"]);
    assert.deepEqual(Object.keys(obj(obj(obj(obj(props.additionalFields).properties).eventList).properties)).sort(), ["fields", "filter"]);
    assert.ok(obj(obj(props.destination).properties).segmentPerBatch);
    assert.ok(obj(obj(props.evaluationInfo).properties).segmentation);
    const cancel = obj(obj(paths["/data/core/ups/export/jobs/{EXPORT_JOB_ID}"]).delete);
    assert.deepEqual(Object.keys(obj(obj(obj(obj(obj(obj(cancel.responses)["200"]).content)["application/json"]).schema).properties)).sort(), ["message", "status"]);
    const page = await fetch(`${h.url}/docs/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /swagger-ui/);
    assert.doesNotMatch(html, /https?:\/\/(?!localhost|127\.0\.0\.1)[a-z0-9.-]+\.[a-z]{2,}\/[^"]*\.(js|css)/i, "no assets from outside hosts");
    const bundle = await fetch(`${h.url}/docs/static/swagger-ui-bundle.js`);
    assert.equal(bundle.status, 200);
    assert.ok((await bundle.arrayBuffer()).byteLength > 100_000);
  });
});
