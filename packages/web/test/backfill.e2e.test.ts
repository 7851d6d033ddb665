/**
 * A streaming audience is filled when it is saved (issue #40), in Debian's Chromium against a
 * real segmentd (the development tenant, its own server):
 *
 *   40 profiles stored over HTTP → a streaming audience "older than 40" created in the builder →
 *   its page's Backfill card follows the run to Complete, with what it wrote (the count computed
 *   here from the fixture) and why it ran → the members and a profile's history name `backfill`
 *   as the source → "Run the backfill again" runs and writes nothing more.
 *
 * The test fails if the browser requested another host or a page threw.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { signIn, watchedBrowser, type WatchedBrowser } from "./helpers/browser.js";
import { startE2eServer, type E2eServer } from "./helpers/e2e-server.js";
import { tenantApi, type TenantApi } from "./helpers/e2e-api.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const TIMEOUT = 20_000;
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
const DEFS = "/data/core/ups/segment/definitions";
const PROFILES = 40;
const ageOf = (i: number) => 20 + i;
const MEMBERS = Array.from({ length: PROFILES }, (_, i) => i).filter((i) => ageOf(i) > 40).length;

describe("a streaming audience's backfill in a real browser", { timeout: 240_000 }, () => {
  let server: E2eServer;
  let browser: WatchedBrowser;
  let page: Page;
  let http: TenantApi;
  let audienceId = "";

  const stateIs = (text: string) => page.waitForFunction((t) => document.querySelector("[data-testid=backfill-state]")?.textContent === t, text, { timeout: TIMEOUT });

  before(async () => {
    // Test the UI as it is in the sources now, not a bundle left by an older build.
    execFileSync(process.execPath, [path.join(ROOT, "packages", "web", "build.mjs")], { stdio: "inherit" });
    server = await startE2eServer();
    http = tenantApi(server);
    const crm = await http.dataset("crm", PROFILE_CLASS);
    for (let i = 0; i < PROFILES; i++) {
      await http.ingest(crm, PROFILE_CLASS, { identityMap: { Email: [{ id: `p${i}@example.com`, primary: true }] }, person: { age: ageOf(i) } });
    }
    browser = await watchedBrowser(server.url);
    page = browser.page;
    await signIn(page, server.url);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("creates a streaming audience over stored profiles and follows its backfill to Complete", async () => {
    await page.getByRole("link", { name: "Create audience" }).first().click();
    await page.waitForURL(/\/audiences\/new$/);
    await page.getByLabel("Name").fill("Older than 40");
    const editor = page.getByLabel("Expression (PQL)");
    await editor.fill("");
    await editor.pressSequentially("person.age > 40", { delay: 2 });
    await page.getByText("Checked with the server.").waitFor({ timeout: TIMEOUT });
    await page.getByRole("radio", { name: "Streaming" }).check();
    await page.getByRole("button", { name: "Save audience" }).click();
    await page.waitForURL(/\/audiences\/(?!new$)[^/]+$/);
    audienceId = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]!);

    const card = page.locator("section[aria-labelledby=backfill-title]");
    await card.waitFor({ timeout: TIMEOUT });
    await stateIs("Complete");
    assert.equal(await card.locator("progress").evaluate((p) => (p as HTMLProgressElement).value), 100);
    assert.equal(await page.getByTestId("backfill-counts").innerText(), `${MEMBERS} of ${MEMBERS} changes decided · ${MEMBERS} entered, 0 exited`);
    assert.match(await card.innerText(), /Ran because the audience was created\. Finished /);
    // What the card shows is what the server stored.
    const members = await http.call("GET", `${DEFS}/${encodeURIComponent(audienceId)}/members?status=realized&limit=100`);
    assert.equal(members.status, 200);
    assert.equal((members.json as { _page: { totalCount: number } })._page.totalCount, MEMBERS);
  });

  it("names backfill as the source in the members and in a profile's history", async () => {
    await page.getByRole("tab", { name: "Members" }).click();
    await page.getByTestId("members-status").waitFor({ timeout: TIMEOUT });
    const rows = page.locator(".members-table tbody tr");
    assert.equal(await rows.count(), Math.min(20, MEMBERS));
    for (const text of await rows.allInnerTexts()) assert.match(text, /backfill \(filled when saved\), /);

    await page.getByRole("tab", { name: "Check a profile" }).click();
    await page.getByLabel("Identity value").fill("p30@example.com");
    await page.getByRole("button", { name: "Check", exact: true }).click();
    const history = page.locator("section[aria-labelledby=check-history] tbody tr");
    await history.first().waitFor({ timeout: TIMEOUT });
    assert.equal(await history.count(), 1);
    assert.match(await history.innerText(), /none → realized\s+backfill \(filled when saved\)/);
  });

  it("runs the backfill again on request: complete, nothing more written", async () => {
    await page.getByRole("tab", { name: "Overview" }).click();
    await page.getByRole("button", { name: "Run the backfill again" }).click();
    await page.waitForFunction(() => /it was asked for again/.test(document.querySelector("section[aria-labelledby=backfill-title]")?.textContent ?? ""), undefined, { timeout: TIMEOUT });
    await stateIs("Complete");
    assert.equal(await page.getByTestId("backfill-counts").innerText(), "0 of 0 changes decided · 0 entered, 0 exited");
    assert.equal(await page.getByRole("button", { name: "Run the backfill again" }).isDisabled(), false);
    assert.deepEqual(browser.foreignRequests, []);
    assert.deepEqual(browser.pageErrors, []);
  });
});
