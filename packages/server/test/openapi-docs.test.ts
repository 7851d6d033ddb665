/**
 * The OpenAPI document and /docs over HTTP (#39, item 6; the browser half is docs-page.e2e.test.ts):
 * one document at /openapi.json and /docs/json, security schemes for the four headers on every
 * route that needs them, the `<token>` placeholder in a code span (Markdown would swallow it as
 * HTML), and a CSP that lets the page's one inline style through by hash and nothing else inline.
 */
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { obj, startHarness, type Harness } from "./helpers/server-harness.js";

let h: Harness;
before(async () => {
  h = await startHarness("openapi-docs");
});
after(async () => h.close());

type Op = { security?: Array<Record<string, string[]>>; parameters?: Array<{ in: string; name: string }> };

test("/openapi.json and /docs/json are the same document, with security schemes on every authenticated route", async () => {
  const spec = obj(await (await fetch(`${h.url}/openapi.json`)).json());
  assert.deepEqual(await (await fetch(`${h.url}/docs/json`)).json(), spec);
  const schemes = obj(obj(spec.components).securitySchemes);
  assert.deepEqual(schemes.bearerAuth, { type: "http", scheme: "bearer", description: obj(schemes.bearerAuth).description });
  for (const [name, header] of [["apiKey", "x-api-key"], ["imsOrg", "x-gw-ims-org-id"], ["sandbox", "x-sandbox-name"]]) {
    assert.deepEqual({ type: obj(schemes[name!]).type, in: obj(schemes[name!]).in, name: obj(schemes[name!]).name }, { type: "apiKey", in: "header", name: header });
  }
  const paths = obj(spec.paths) as Record<string, Record<string, Op>>;
  const tenant = { bearerAuth: [], apiKey: [], imsOrg: [], sandbox: [] };
  let checked = 0;
  for (const [p, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const expected = p.startsWith("/data/core/hygiene/") ? [{ bearerAuth: [], apiKey: [], imsOrg: [] }]
        : p.startsWith("/admin/") ? [{ operatorToken: [] }]
        : p.startsWith("/data/") || p.startsWith("/collection/") ? [tenant]
        : undefined;
      assert.deepEqual(op.security, expected, `${method} ${p}`);
      // The headers a scheme covers are not asked for a second time as parameters.
      const headers = (op.parameters ?? []).filter((q) => q.in === "header").map((q) => q.name.toLowerCase());
      if (expected) for (const hdr of ["authorization", "x-api-key", "x-gw-ims-org-id"]) assert.ok(!headers.includes(hdr), `${method} ${p} ${hdr}`);
      checked++;
    }
  }
  assert.ok(checked > 80, String(checked));
  assert.deepEqual(paths["/data/core/ups/segment/definitions"]!.get!.security, [tenant]);
  assert.match(obj(spec.info).description as string, /`Authorization: Bearer <token>`/);
});

test("/docs: the page loads /openapi.json and its CSP allows exactly the inline styles swagger-ui renders", async () => {
  const page = await fetch(`${h.url}/docs`);
  assert.equal(page.status, 200);
  const csp = page.headers.get("content-security-policy") ?? "";
  assert.doesNotMatch(csp, /unsafe-inline|upgrade-insecure-requests/);
  const init = await (await fetch(`${h.url}/docs/static/swagger-initializer.js`)).text();
  assert.match(init, /"urls":\[\{"url":"\/openapi\.json","name":"segmentd"\}\]/);
  // The top bar's logo carries one <style> element: the policy names its hash.
  const preset = await (await fetch(`${h.url}/docs/static/swagger-ui-standalone-preset.js`)).text();
  const styles = [...preset.matchAll(/createElement\("style",null,("(?:[^"\\]|\\.)*")\)/g)].map((m) => JSON.parse(m[1]!) as string);
  assert.ok(styles.length > 0);
  const hashes = styles.map((s) => `'sha256-${createHash("sha256").update(s).digest("base64")}'`);
  assert.equal(/style-src ([^;]*)/.exec(csp)?.[1], `'self' ${hashes.join(" ")}`);
  assert.match(csp, /script-src 'self'; script-src-attr 'none'/);
});
