/**
 * /docs in Debian's Chromium (#39, item 6): the page loads the document the README names
 * (/openapi.json) with no CSP violation, its description shows the `<token>` placeholder, and the
 * Authorize button takes the four headers once so that "Try it out" answers 200.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { Page } from "playwright-core";
import { watchedBrowser, type WatchedBrowser } from "../../web/test/helpers/browser.js";
import { startE2eServer, type E2eServer } from "../../web/test/helpers/e2e-server.js";

const TIMEOUT = 15_000;
let server: E2eServer;
let browser: WatchedBrowser;
let page: Page;
const consoleErrors: string[] = [];
const specRequests: string[] = [];

before(async () => {
  server = await startE2eServer();
  browser = await watchedBrowser(server.url);
  page = browser.page;
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("request", (r) => {
    if (/\/(openapi\.json|docs\/json)$/.test(r.url())) specRequests.push(new URL(r.url()).pathname);
  });
  // The violations the page itself sees (a console message is only one way Chromium reports them).
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { cspViolations: string[] }).cspViolations = seen;
    document.addEventListener("securitypolicyviolation", (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
});
after(async () => {
  await browser?.close();
  await server?.close();
});

test("the page names and loads /openapi.json, shows <token>, and violates no CSP", { timeout: 60_000 }, async () => {
  const res = await page.goto(`${server.url}/docs`);
  assert.equal(res?.status(), 200);
  assert.match(res?.headers()["content-security-policy"] ?? "", /style-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
  const info = page.locator(".information-container");
  await info.waitFor({ timeout: TIMEOUT });
  await page.locator(".opblock").first().waitFor({ timeout: TIMEOUT });
  const text = await info.innerText();
  assert.match(text, /Authorization: Bearer <token>, x-api-key, x-gw-ims-org-id/);
  assert.equal(await info.locator("a.link", { hasText: "/openapi.json" }).count(), 1);
  assert.deepEqual(specRequests, ["/openapi.json"]);
  assert.deepEqual(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations), []);
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(browser.pageErrors, []);
  assert.deepEqual(browser.foreignRequests, []);
});

test("Authorize fills the four headers; Try it out on a tenant route answers 200", { timeout: 60_000 }, async () => {
  const { token, apiKey, orgId, sandboxName } = server.creds;
  await page.locator(".auth-wrapper .btn.authorize").click();
  for (const [scheme, value] of [["bearerAuth", token], ["apiKey", apiKey], ["imsOrg", orgId], ["sandbox", sandboxName]] as const) {
    const form = page.locator(".auth-container").filter({ has: page.locator("h4 code", { hasText: new RegExp(`^${scheme}$`) }) });
    await form.locator("input").fill(value);
    await form.getByRole("button", { name: "Apply credentials" }).click();
  }
  await page.locator(".modal-ux .close-modal").click();
  const op = page.locator(".opblock-get").filter({ has: page.locator('.opblock-summary-path[data-path="/data/core/ups/segment/definitions"]') });
  await op.locator(".opblock-summary").click();
  await op.getByRole("button", { name: "Try it out" }).click();
  await op.getByRole("button", { name: "Execute" }).click();
  const status = op.locator(".live-responses-table .response .response-col_status");
  await status.waitFor({ timeout: TIMEOUT });
  assert.equal((await status.innerText()).trim(), "200");
  // The curl line the page shows carries the headers it was given once.
  const curl = await op.locator(".curl-command").innerText();
  for (const h of [`Authorization: Bearer ${token}`, `x-api-key: ${apiKey}`, `x-gw-ims-org-id: ${orgId}`, `x-sandbox-name: ${sandboxName}`]) assert.ok(curl.includes(h), `${h} in ${curl}`);
  assert.deepEqual(consoleErrors, []);
});
