/**
 * The audience tool end to end, in Debian's Chromium against a real segmentd
 * (the development tenant, as `npm start` runs it):
 *
 *   sign in (pre-filled) → create an audience: profile-only → Edge selectable;
 *   a 7-day event window → Edge disabled with its reason; 2 hours → Edge
 *   enabled; save → edge interact requests through the API → the details view
 *   shows total qualified and the 24-hour figure change → 7 days, 30 days →
 *   run a batch job and see it finish → delete refused while a dependent
 *   exists (reason shown) → delete.
 *
 * Along the way it takes a screenshot of every page at 1280×800 and at phone
 * width (390×844) into docs/screenshots/, and checks that the browser never
 * requested anything from another host and that no page threw.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { watchedBrowser, type WatchedBrowser } from "./helpers/browser.js";
import { startE2eServer, type E2eServer } from "./helpers/e2e-server.js";
import { shoot as shootPage, tenantApi, type TenantApi } from "./helpers/e2e-api.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const SHOTS = path.join(ROOT, "docs", "screenshots");
const TIMEOUT = 15_000;

const PROFILE_ONLY = 'homeAddress.countryCode = "US"';
const SEVEN_DAYS = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 7 days before now)])';
const TWO_HOURS = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 2 hours before now)])';

describe("audience tool in a real browser", { timeout: 180_000 }, () => {
  let server: E2eServer;
  let browser: WatchedBrowser;
  let page: Page;
  let audienceId = "";
  let dependentId = "";
  let eventsDatasetId = "";

  let http: TenantApi;
  const api = (method: string, p: string, body?: unknown, tenant = true) => http.call(method, p, body, tenant);
  const shoot = (name: string) => shootPage(page, SHOTS, name);

  const checked = () => page.getByText("Checked with the server.").waitFor({ timeout: TIMEOUT });
  const edgeRadio = () => page.getByRole("radio", { name: "Edge" });
  const typeExpression = async (text: string) => {
    const editor = page.getByLabel("Expression (PQL)");
    await editor.fill("");
    // Typed, not pasted: the live check must follow keystrokes.
    await editor.pressSequentially(text, { delay: 2 });
  };

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // Test the UI as it is in the sources now, not a bundle left by an older build.
    execFileSync(process.execPath, [path.join(ROOT, "packages", "web", "build.mjs")], { stdio: "inherit" });
    server = await startE2eServer();
    http = tenantApi(server);
    const index = await fetch(server.url + "/");
    if (index.status !== 200 || !(index.headers.get("content-type") ?? "").startsWith("text/html")) {
      throw new Error(`segmentd does not serve the audience tool at / (HTTP ${index.status}): register webRoutes (packages/server/src/web/routes.ts) in app.ts`);
    }
    browser = await watchedBrowser(server.url);
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("serves the tool at / and pre-fills the development token on sign-in", async () => {
    await page.goto(server.url + "/");
    await page.waitForURL(/\/signin/);
    assert.equal(await page.getByLabel("Access token").inputValue(), server.creds.token);
    assert.equal(await page.getByLabel("Organization").inputValue(), server.creds.orgId);
    await shoot("signin");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/audiences$/);
    await page.getByText("No audiences yet.").waitFor({ timeout: TIMEOUT });
  });

  it("offers Edge only when the expression qualifies, with the reason when it does not", async () => {
    await page.getByRole("link", { name: "Create audience" }).first().click();
    await page.waitForURL(/\/audiences\/new$/);
    await page.getByLabel("Name").fill("Recent purchasers");
    await page.getByLabel("Description").fill("Bought something in the last two hours");

    await typeExpression(PROFILE_ONLY);
    await checked();
    assert.equal(await edgeRadio().isEnabled(), true, "a profile-only audience can be evaluated on the edge");

    await typeExpression(SEVEN_DAYS);
    await checked();
    assert.equal(await edgeRadio().isEnabled(), false, "a 7-day event window is not edge-eligible");
    const reasons = await page.locator("#method-synchronous-reasons").innerText();
    assert.match(reasons, /7 days/);
    assert.match(reasons, /24 hours/);
    await shoot("builder-edge-disabled");

    await typeExpression(TWO_HOURS);
    await checked();
    assert.equal(await edgeRadio().isEnabled(), true, "a 2-hour event window is edge-eligible");
    await edgeRadio().check();
    await shoot("builder");
  });

  it("shows diagnostics with line and column for invalid PQL", async () => {
    const editor = page.getByLabel("Expression (PQL)");
    await editor.press("End");
    await editor.pressSequentially(" and");
    const diag = page.locator(".diagnostic").first();
    await diag.waitFor({ timeout: TIMEOUT });
    assert.match(await diag.innerText(), /Line 1:\d+/);
    await typeExpression(TWO_HOURS);
    await checked();
    await edgeRadio().check();
  });

  it("saves the audience as an Edge audience", async () => {
    await page.getByRole("button", { name: "Save audience" }).click();
    // The builder itself is /audiences/new: wait for the saved audience's own address.
    await page.waitForURL(/\/audiences\/(?!new$)[^/]+$/);
    audienceId = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]!);
    const stored = await api("GET", `/data/core/ups/segment/definitions/${encodeURIComponent(audienceId)}`);
    assert.equal(stored.status, 200);
    const def = stored.json as { name: string; expression: { value: string }; evaluationInfo: { synchronous: { enabled: boolean } } };
    assert.equal(def.name, "Recent purchasers");
    assert.equal(def.expression.value, TWO_HOURS);
    assert.equal(def.evaluationInfo.synchronous.enabled, true);
    // The address changes before the details view has fetched and rendered the audience.
    const edgeBadge = page.getByTestId("method").getByText("Edge", { exact: true });
    await edgeBadge.waitFor({ timeout: TIMEOUT });
    assert.equal(await edgeBadge.count(), 1);
    await page.getByTestId("total-qualified").waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByTestId("total-qualified").innerText(), "0");
    assert.equal(await page.getByTestId("new-audience-updated").innerText(), "0");
  });

  it("counts profiles qualified by edge interact requests, over 24 hours, 7 days and 30 days", async () => {
    const ds = await api("POST", "/data/foundation/catalog/dataSets", { name: "web events", schemaClass: "experienceevent", tags: { unifiedProfile: ["enabled:true"] } });
    assert.equal(ds.status, 201, JSON.stringify(ds.json));
    const datasetId = (ds.json as string[])[0]!.replace("@/dataSets/", "");
    eventsDatasetId = datasetId;
    const stream = await api("POST", "/data/core/edge/datastreams", { name: "web", eventDatasetId: datasetId });
    assert.equal(stream.status, 201, JSON.stringify(stream.json));
    const dataStreamId = (stream.json as { id: string }).id;
    const buyers = ["ecid-e2e-1", "ecid-e2e-2", "ecid-e2e-3"];
    for (const id of buyers) {
      const r = await api("POST", `/ee/v2/interact?dataStreamId=${encodeURIComponent(dataStreamId)}`, {
        event: { xdm: { identityMap: { ECID: [{ id, primary: true }] }, eventType: "commerce.purchases", timestamp: new Date().toISOString() } },
      }, false);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const segs = JSON.stringify(r.json);
      assert.ok(segs.includes(audienceId), `interact for ${id} qualifies for the audience: ${segs}`);
    }
    // A page view does not qualify anyone.
    const view = await api("POST", `/ee/v2/interact?dataStreamId=${encodeURIComponent(dataStreamId)}`, {
      event: { xdm: { identityMap: { ECID: [{ id: "ecid-e2e-viewer", primary: true }] }, eventType: "web.webpagedetails.pageViews", timestamp: new Date().toISOString() } },
    }, false);
    assert.equal(view.status, 200);

    // Edge results reach the hub asynchronously: reload the details view until they show.
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      await page.reload();
      await page.getByTestId("total-qualified").waitFor({ timeout: TIMEOUT });
      if ((await page.getByTestId("total-qualified").innerText()) === "3" || Date.now() > deadline) break;
      await page.waitForTimeout(300);
    }
    assert.equal(await page.getByTestId("total-qualified").innerText(), "3");
    assert.equal(await page.getByTestId("new-audience-updated").innerText(), "+3");
    assert.match(await page.getByText(/New audience updated \(last 24 hours\)/).innerText(), /24 hours/);
    assert.equal(await page.locator("svg.chart rect.bar-up").count(), 1, "one hourly bar holds the three qualifications");

    await page.locator("label[for=window-7d]").click();
    await page.getByText("New audience updated (last week)").waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByTestId("new-audience-updated").innerText(), "+3");
    assert.equal(await page.locator(".chart-axis span").count(), 3);
    assert.equal(await page.locator("svg.chart rect.bar-up").count(), 1, "the three qualifications fall on one day");

    await page.locator("label[for=window-30d]").click();
    await page.getByText("New audience updated (last 30 days)").waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByTestId("new-audience-updated").innerText(), "+3");
    assert.equal(await page.getByTestId("total-qualified").innerText(), "3");

    // Keyboard: arrow keys move the time range like any radio group.
    await page.locator("#window-30d").focus();
    await page.keyboard.press("ArrowLeft");
    await page.getByText("New audience updated (last week)").waitFor({ timeout: TIMEOUT });
    await page.locator("label[for=window-24h]").click();
    await page.getByText("New audience updated (last 24 hours)").waitFor({ timeout: TIMEOUT });
  });

  it("runs an on-demand batch job and shows its progress to the end", async () => {
    await page.getByRole("button", { name: "Run batch job now" }).click();
    const status = page.getByTestId("job-status");
    await status.waitFor({ timeout: TIMEOUT });
    await page.waitForFunction(() => /SUCCEEDED|FAILED|CANCELLED/.test(document.querySelector("[data-testid=job-status]")?.textContent ?? ""), undefined, { timeout: 60_000 });
    assert.equal(await status.innerText(), "SUCCEEDED");
    await shoot("details");
  });

  it("lists the audience with its method and total qualified, searchable and filterable", async () => {
    await page.locator("header nav").getByRole("link", { name: "Audiences" }).click();
    await page.waitForURL(/\/audiences$/);
    const row = page.locator("tbody tr", { hasText: "Recent purchasers" });
    await row.waitFor({ timeout: TIMEOUT });
    assert.match(await row.innerText(), /Edge/);
    await page.waitForFunction(() => /\b3\b/.test(document.querySelector("tbody tr td.num")?.textContent ?? ""), undefined, { timeout: TIMEOUT });
    assert.match(await row.innerText(), /Continuously/);

    await page.getByLabel("Evaluation method").selectOption("batch");
    await page.getByText("No audience matches.").waitFor({ timeout: TIMEOUT });
    await page.getByLabel("Evaluation method").selectOption("synchronous");
    await row.waitFor({ timeout: TIMEOUT });
    await page.getByLabel("Search").fill("nothing like this");
    await page.getByText("No audience matches.").waitFor({ timeout: TIMEOUT });
    await page.getByLabel("Search").fill("purchasers");
    await row.waitFor({ timeout: TIMEOUT });
    await page.getByLabel("Evaluation method").selectOption("");
    await page.getByLabel("Search").fill("");
    await row.waitFor({ timeout: TIMEOUT });
    await shoot("audiences");
  });

  it("shows the data lifecycle page: quota bars, work orders and dataset expirations with their statuses", async () => {
    await page.getByRole("link", { name: "Data lifecycle" }).click();
    await page.waitForURL(/\/lifecycle$/);
    await page.getByText("No work orders.").waitFor({ timeout: TIMEOUT });
    await page.getByText("No dataset expirations.").waitFor({ timeout: TIMEOUT });

    const order = await api("POST", "/data/core/hygiene/workorder", {
      action: "delete_identity", datasetId: eventsDatasetId, displayName: "Forget viewer", description: "Consumer request",
      identities: [{ namespace: { code: "ecid" }, id: "ecid-e2e-viewer" }],
    });
    assert.equal(order.status, 200, JSON.stringify(order.json));
    const ttl = await api("POST", "/data/core/hygiene/ttl", {
      datasetId: eventsDatasetId, displayName: "Expire web events", description: "Retention", expiry: new Date(Date.now() + 30 * 86_400_000).toISOString(),
    });
    assert.equal(ttl.status, 201, JSON.stringify(ttl.json));
    // The work order runs in the background: wait for its final status so the page has one definite thing to show.
    const orderId = (order.json as { workorderId: string }).workorderId;
    let orderStatus = (order.json as { status: string }).status;
    for (const deadline = Date.now() + TIMEOUT; !["completed", "failed"].includes(orderStatus) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 200));
      orderStatus = ((await api("GET", `/data/core/hygiene/workorder/${encodeURIComponent(orderId)}`)).json as { status: string }).status;
    }
    assert.equal(orderStatus, "completed");

    await page.reload();
    const quotaBars = page.locator(".quota-bar");
    await quotaBars.first().waitFor({ timeout: TIMEOUT });
    assert.equal(await quotaBars.count(), 4);
    // One active expiration is now consumed against its allowance.
    assert.equal(await page.locator('.quota-bar[aria-label="Dataset expirations"]').getAttribute("aria-valuenow"), "1");
    const orderRow = page.locator("tbody tr", { hasText: "Forget viewer" });
    await orderRow.waitFor({ timeout: TIMEOUT });
    assert.match(await orderRow.innerText(), /\bcompleted\b/);
    const ttlRow = page.locator("tbody tr", { hasText: "Expire web events" });
    await ttlRow.waitFor({ timeout: TIMEOUT });
    assert.match(await ttlRow.innerText(), /pending/i);
    await shoot("lifecycle");
  });

  it("refuses to delete while another audience depends on it, saying why, then deletes", async () => {
    const dep = await api("POST", "/data/core/ups/segment/definitions", {
      name: "Purchasers in the US",
      schema: { name: "_xdm.context.profile" },
      expression: { type: "PQL", format: "pql/text", value: `inSegment("${audienceId}") and homeAddress.countryCode = "US"` },
    });
    assert.equal(dep.status, 200, JSON.stringify(dep.json));
    dependentId = (dep.json as { id: string }).id;

    await page.goto(`${server.url}/audiences/${encodeURIComponent(audienceId)}`);
    await page.getByRole("button", { name: "Delete" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor({ timeout: TIMEOUT });
    await dialog.getByRole("button", { name: "Delete" }).click();
    await dialog.getByText("The audience was not deleted.").waitFor({ timeout: TIMEOUT });
    assert.match(await dialog.innerText(), new RegExp(dependentId));
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached", timeout: TIMEOUT });
    assert.equal((await api("GET", `/data/core/ups/segment/definitions/${encodeURIComponent(audienceId)}`)).status, 200);

    assert.equal((await api("DELETE", `/data/core/ups/segment/definitions/${encodeURIComponent(dependentId)}`)).status, 200);
    await page.getByRole("button", { name: "Delete" }).click();
    await dialog.getByRole("button", { name: "Delete" }).click();
    await page.waitForURL(/\/audiences$/);
    await page.getByText("No audiences yet.").waitFor({ timeout: TIMEOUT });
    assert.equal((await api("GET", `/data/core/ups/segment/definitions/${encodeURIComponent(audienceId)}`)).status, 404);
  });

  it("shows an unknown audience and an unknown page in words", async () => {
    await page.goto(`${server.url}/audiences/no-such-audience`);
    await page.getByText("This audience could not be opened.").waitFor({ timeout: TIMEOUT });
    await page.goto(`${server.url}/audiences/x/y/z`);
    await page.getByText("There is no page at this address.").waitFor({ timeout: TIMEOUT });
  });

  it("never contacted another host and no page threw", () => {
    assert.deepEqual(browser.foreignRequests, []);
    assert.deepEqual(browser.pageErrors, []);
  });
});
