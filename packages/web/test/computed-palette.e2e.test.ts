/**
 * Computed attributes in the visual builder's palette (#41), in Debian's Chromium against a real
 * segmentd: a SUM attribute created over the API is listed under "Computed attributes" (a
 * disabled one is not); clicked, it becomes a number rule on
 * `_<TENANT_ID>.ComputedAttributes.<name>`; with a value typed, the audience saves with that
 * PQL and a batch job's members are the profiles whose spend is over it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { signIn, watchedBrowser, type WatchedBrowser } from "./helpers/browser.js";
import { tenantApi, type TenantApi } from "./helpers/e2e-api.js";
import { startE2eServer, type E2eServer } from "./helpers/e2e-server.js";

const TIMEOUT = 15_000;
const HOUR = 3_600_000;
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
const EVENT_CLASS = "https://ns.adobe.com/xdm/context/experienceevent";
const CA = "/data/core/ca/attributes";
const DEFS = "/data/core/ups/segment/definitions";

/** Purchases in the last 12 hours (price each); ann and cat spend over 100. */
const PEOPLE: Record<string, number[]> = { "ann@example.com": [80, 40], "bob@example.com": [30], "cat@example.com": [150] };

const spend = (name: string, status: string) => ({
  name,
  displayName: `Spend ${name}`,
  description: "",
  expression: { type: "PQL", format: "pql/text", value: 'xEvent[eventType = "commerce.purchases"].sum(commerce.order.priceTotal)' },
  duration: { count: 12, unit: "HOURS" },
  status,
});

describe("computed attributes in the builder's palette", { timeout: 120_000 }, () => {
  let server: E2eServer;
  let browser: WatchedBrowser;
  let page: Page;
  let http: TenantApi;
  let path = "";

  before(async () => {
    server = await startE2eServer();
    http = tenantApi(server);
    const profiles = await http.dataset("crm", PROFILE_CLASS);
    const events = await http.dataset("web", EVENT_CLASS);
    const now = Date.now();
    for (const [email, prices] of Object.entries(PEOPLE)) {
      const identityMap = { Email: [{ id: email, primary: true }] };
      await http.ingest(profiles, PROFILE_CLASS, { identityMap, person: { name: { firstName: email } } });
      for (const [i, price] of prices.entries()) {
        await http.ingest(events, EVENT_CLASS, { _id: `${email}-${i}`, eventType: "commerce.purchases", commerce: { order: { priceTotal: price } }, timestamp: new Date(now - (i + 1) * HOUR).toISOString(), identityMap });
      }
    }
    const live = await http.call("POST", CA, spend("spend12h", "NEW"));
    assert.equal(live.status, 200, JSON.stringify(live.json));
    const ca = live.json as { positionPath: string[] };
    path = `${ca.positionPath.join(".")}.spend12h`;
    const off = await http.call("POST", CA, spend("spendOff", "NEW"));
    assert.equal(off.status, 200, JSON.stringify(off.json));
    const disabled = await http.call("PATCH", `${CA}/${(off.json as { id: string }).id}`, { status: "DISABLED" });
    assert.equal(disabled.status, 200, JSON.stringify(disabled.json));
    browser = await watchedBrowser(server.url);
    page = browser.page;
    await signIn(page, server.url);
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("lists live computed attributes; one clicked becomes a rule on its path; the saved audience's members are right", async () => {
    await page.goto(`${server.url}/audiences/new`);
    await page.getByLabel("Name").fill("Spent over 100 in 12 hours");
    await page.getByRole("tab", { name: "Visual" }).click();
    const section = page.getByRole("region", { name: /^Computed attributes/ });
    const item = section.getByRole("button", { name: `Add attribute ${path}` });
    await item.waitFor({ timeout: TIMEOUT });
    assert.equal(await section.getByRole("listitem").count(), 1, "the disabled attribute is not listed");
    assert.match(await item.innerText(), /Spend spend12h · SUM, 12 hours/);
    // Searching by display name finds it.
    await page.getByLabel("Search the palette").fill("Spend spend12h");
    await item.click();
    const rule = page.locator(".v-canvas").getByRole("group", { name: `Attribute ${path}`, exact: true }).first();
    await rule.waitFor({ timeout: TIMEOUT });
    await rule.getByLabel("Operator", { exact: true }).first().selectOption({ label: ">" });
    await rule.getByLabel("Value", { exact: true }).fill("100");
    const want = `${path} > 100`;
    await page.waitForFunction((w) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === w, want, { timeout: TIMEOUT });
    await page.getByRole("button", { name: "Save audience" }).click();
    // The builder is /audiences/new?tab=…: wait for the saved audience's own address.
    await page.waitForURL(/\/audiences\/(?!new\b)[^/?]+$/, { timeout: TIMEOUT });
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]!);
    const saved = await http.call("GET", `${DEFS}/${id}`);
    assert.equal((saved.json as { expression: { value: string } }).expression.value, want);
    const job = await http.runJob();
    assert.equal(job.status, "SUCCEEDED", JSON.stringify(job));
    assert.equal(job.metrics?.segmentedProfileCounter?.[id], 2, JSON.stringify(job.metrics));
    assert.deepEqual(browser.pageErrors, []);
    assert.deepEqual(browser.foreignRequests, []);
  });
});
