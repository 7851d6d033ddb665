/**
 * Issue #38, acceptance 6: the Destinations page in Debian's Chromium against a real
 * segmentd (the development tenant, its own server, activation.allowPrivateNetworks so
 * that it may send to 127.0.0.1) and a real webhook receiver in its own process
 * (packages/server/test/helpers/webhook-receiver.ts):
 *
 *   seed 5 profiles and two batch audiences over HTTP → the Destinations page is empty
 *   → the create form: its own checks, then the server's refusal of a metadata address
 *   in words (and nothing left behind), then a webhook destination with a bearer token,
 *   a custom header, one of the two audiences, one attribute and one namespace, a 4 s
 *   retry period → the signing secret shown once → the current members arrive as
 *   `existing`, signed with that secret, and the page counts them → a new member
 *   (batch job) arrives as `realized` and the count rises → the receiver answers 500:
 *   the page shows the failed attempts, the receiver's error and a dead letter → the
 *   receiver recovers, Replay sends the dead letter under its webhook-id → Activate now
 *   sends every member again (a run "Activate now") → pause / resume → a new signing
 *   secret, shown once, signs what follows → the list's health row (and a reload of a
 *   destination's address) → delete removes the flow and its connections → a file export
 *   (export now, a run's file downloaded) → a NATS JetStream subject on a real nats-server
 *   of its own (the form's subject check, the server's refusal of a metadata server, then
 *   the members as `existing` and a joiner as `realized`, read from the flow's stream).
 *
 * Every figure expected is computed here from the fixture and from what the receiver
 * logged, not read from the server. Screenshots at 1280×800 and 390×844 go to
 * docs/screenshots/destinations-*.png; at 390 px no page scrolls sideways; the test
 * fails if the browser requested another host or a page threw.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { connect } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startNatsServer, type RunningNatsServer } from "../../server/src/cluster/nats-server.js";
import { received, startReceiver, type Receiver } from "../../server/test/activation/delivery-harness.js";
import { killAll } from "../../server/test/helpers/spawn.js";
import { signIn, watchedBrowser, type WatchedBrowser } from "./helpers/browser.js";
import { PHONE, shoot as shootPage, tenantApi, type TenantApi } from "./helpers/e2e-api.js";
import { startE2eServer, type E2eServer } from "./helpers/e2e-server.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const SHOTS = path.join(ROOT, "docs", "screenshots");
const TIMEOUT = 20_000;
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
const DEFS = "/data/core/ups/segment/definitions";
const FS = "/data/foundation/flowservice";
const NAME = "CRM webhook";
const TOKEN = "t0ken-e2e";

interface Person { email: string; age: number; country: string }
/** Over 30: cat, dan, eve (bob is 25, ann 28); gus and hal join later. */
const FIRST: Person[] = [
  { email: "ann@example.com", age: 28, country: "US" },
  { email: "bob@example.com", age: 25, country: "CA" },
  { email: "cat@example.com", age: 35, country: "US" },
  { email: "dan@example.com", age: 45, country: "CA" },
  { email: "eve@example.com", age: 55, country: "US" },
];
const GUS: Person = { email: "gus@example.com", age: 61, country: "CA" };
const HAL: Person = { email: "hal@example.com", age: 70, country: "US" };
/** Joins while the NATS destination publishes. */
const IVY: Person = { email: "ivy@example.com", age: 80, country: "US" };
const over30 = (ps: Person[]) => ps.filter((p) => p.age > 30).map((p) => p.email).sort();

describe("issue #38: the Destinations page in a real browser", { timeout: 300_000 }, () => {
  let server: E2eServer;
  let browser: WatchedBrowser;
  let page: Page;
  let http: TenantApi;
  let receiver: Receiver;
  let port = 0;
  let dir = "";
  let log = "";
  let datasetId = "";
  let olderId = "";
  let usId = "";
  let secret = "";
  let flowId = "";
  const api = (method: string, p: string, body?: unknown) => http.call(method, p, body);
  const shoot = (name: string) => shootPage(page, SHOTS, name);
  const ingest = (p: Person) => http.ingest(datasetId, PROFILE_CLASS, { identityMap: { Email: [{ id: p.email, primary: true }], Phone: [{ id: `+1555${p.age}` }] }, person: { age: p.age }, homeAddress: { countryCode: p.country } });
  /** Every profile object the receiver answered 200 for: [email, status of the older audience]. */
  const accepted = () => received(log, secret).filter((r) => r.outcome === 200).flatMap((r) => r.profiles.map((p) => [p.identityMap["email"]?.[0]?.id ?? p.identityMap["Email"]?.[0]?.id, p.ups[olderId]?.status] as const));
  const restartReceiver = async (o: { status?: number }) => {
    receiver.proc.child.kill("SIGKILL");
    await receiver.proc.exited;
    receiver = await startReceiver(log, { port, ...o });
  };
  const refresh = () => page.getByRole("button", { name: "Refresh", exact: true }).click();
  /** Presses Refresh until the figure reads `want` (the deliverer works on its own time). */
  const figureIs = async (testid: string, want: string) => {
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const got = await page.getByTestId(testid).innerText();
      if (got === want) return;
      assert.ok(Date.now() < deadline, `${testid} is ${got}, waited for ${want}`);
      await page.waitForTimeout(300);
      await refresh();
    }
  };
  /** Deletes the destination shown through its page: back on an empty list, no flow or connection left. */
  const deleteShown = async () => {
    await page.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await page.waitForURL(/\/destinations$/);
    await page.getByText("No destinations yet.").waitFor({ timeout: TIMEOUT });
    for (const kind of ["flows", "targetConnections", "connections"]) {
      assert.equal(((await api("GET", `${FS}/${kind}`)).json as { items: unknown[] }).items.length, 0, `${kind} deleted`);
    }
  };
  /** The create form for a kind other than a webhook (no endpoint asked), named, sending "Customers over 30". */
  const startCreate = async (kind: string, heading: string, name: string, why: string) => {
    await page.getByRole("link", { name: "Create destination" }).first().click();
    await page.getByLabel(kind).check();
    await page.getByRole("heading", { level: 1, name: heading }).waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByLabel("Endpoint URL").isVisible(), false, why);
    await page.getByLabel("Name", { exact: true }).fill(name);
    await page.getByLabel("Customers over 30").check();
  };
  const noSidewaysScroll = async (what: string) => {
    await page.setViewportSize(PHONE);
    await page.waitForTimeout(150);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= PHONE.width, `${what} is ${width}px wide at ${PHONE.width}px`);
    await page.setViewportSize({ width: 1280, height: 800 });
  };

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // Test the UI as it is in the sources now, not a bundle left by an older build.
    execFileSync(process.execPath, [path.join(ROOT, "packages", "web", "build.mjs")], { stdio: "inherit" });
    dir = mkdtempSync(path.join(tmpdir(), "segmentd-dest-e2e-"));
    log = path.join(dir, "receiver.ndjson");
    receiver = await startReceiver(log);
    port = receiver.port;
    server = await startE2eServer((c) => {
      c.activation = { allowPrivateNetworks: true };
    });
    http = tenantApi(server);
    datasetId = await http.dataset("crm", PROFILE_CLASS);
    for (const p of FIRST) await ingest(p);
    const def = async (name: string, pql: string) => {
      const r = await api("POST", DEFS, { name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: pql } });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return (r.json as { id: string }).id;
    };
    olderId = await def("Customers over 30", "person.age > 30");
    usId = await def("US customers", 'homeAddress.countryCode = "US"');
    const job = await http.runJob();
    assert.equal(job.metrics?.segmentedProfileCounter?.[olderId], over30(FIRST).length);
    browser = await watchedBrowser(server.url);
    page = browser.page;
    await signIn(page, server.url);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    killAll();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("starts with no destination, reached from the main navigation", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Destinations" }).click();
    await page.waitForURL(/\/destinations$/);
    await page.getByText("No destinations yet.").waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByRole("link", { name: "Destinations", exact: true }).getAttribute("aria-current"), "page");
  });

  it("checks the form, then shows the server's refusal of a metadata address and leaves nothing behind", async () => {
    await page.getByRole("link", { name: "Create destination" }).first().click();
    await page.waitForURL(/\/destinations\/new$/);
    await page.getByRole("button", { name: "Create destination" }).click();
    assert.equal(await page.locator("#dest-name-error").innerText(), "Give the destination a name.");
    assert.equal(await page.locator("#dest-url-error").innerText(), "Enter the endpoint's URL.");
    assert.equal(await page.locator("#audiences-error").innerText(), "Choose at least one audience to send.");
    assert.equal(await page.getByLabel("Name", { exact: true }).getAttribute("aria-invalid"), "true");

    const metadata = "http://169.254.169.254/hook";
    // The server's own words for this URL, asked directly: the page must show exactly them.
    const spec = { id: "d0e3b7a2-6c1f-4f5e-9a8b-1c2d3e4f5a61", version: "1.0" };
    const base = await api("POST", `${FS}/connections`, { name: "probe", connectionSpec: spec });
    assert.equal(base.status, 201, JSON.stringify(base.json));
    const baseId = (base.json as { id: string }).id;
    const refused = await api("POST", `${FS}/targetConnections`, { name: "probe", baseConnectionId: baseId, connectionSpec: spec, params: { httpEndpoint: metadata } });
    assert.equal(refused.status, 400);
    assert.equal((await api("DELETE", `${FS}/connections/${baseId}`)).status, 204);
    await page.getByLabel("Name", { exact: true }).fill(NAME);
    await page.getByLabel("Endpoint URL").fill(metadata);
    await page.getByLabel("Customers over 30").check();
    await page.getByRole("button", { name: "Create destination" }).click();
    const error = page.locator(".form-status .notice-error");
    await error.waitFor({ timeout: TIMEOUT });
    assert.equal(await error.locator(".notice-title").innerText(), "The destination was not created.");
    const words = "Destination address 169.254.169.254 is a cloud metadata address; segmentd never sends to metadata, unspecified, multicast or reserved addresses";
    assert.equal(await error.locator(".notice-detail").innerText(), words);
    assert.deepEqual(refused.json && { code: (refused.json as { errors: Record<string, Array<{ code: string }>> }).errors["400"]![0]!.code, title: (refused.json as { title: string }).title }, { code: "SEGMENTD-DESTINATION-ADDRESS-400", title: words });
    for (const kind of ["connections", "targetConnections", "flows"]) {
      assert.equal(((await api("GET", `${FS}/${kind}`)).json as { items: unknown[] }).items.length, 0, `no ${kind} left behind`);
    }
  });

  it("creates a webhook destination with chosen audiences, attributes and a namespace, and shows its signing secret once", async () => {
    await page.getByLabel("Endpoint URL").fill(`http://127.0.0.1:${port}/hook`);
    await page.getByLabel("Bearer token", { exact: true }).check();
    await page.locator("#dest-token").fill(TOKEN);
    await page.getByLabel("Custom headers (optional)").fill("X-Tenant: acme");
    assert.equal(await page.getByLabel("US customers").isChecked(), false);
    await page.getByLabel("person.age").check();
    await page.getByLabel(/^email$/i).check();
    await page.locator("summary", { hasText: "Delivery settings" }).click();
    await page.getByLabel("Retry failed deliveries for (seconds)").fill("4");
    await shoot("destinations-create");
    await noSidewaysScroll("the create form");
    await page.getByRole("button", { name: "Create destination" }).click();
    const shown = page.getByTestId("signing-secret");
    await shown.waitFor({ timeout: TIMEOUT });
    secret = await shown.innerText();
    assert.match(secret, /^whsec_[A-Za-z0-9+/=]{20,}$/);
    const flows = ((await api("GET", `${FS}/flows`)).json as { items: Array<{ id: string; name: string; delivery: { retryPeriodMs: number } }> }).items;
    assert.equal(flows.length, 1);
    flowId = flows[0]!.id;
    assert.equal(flows[0]!.delivery.retryPeriodMs, 4000);
    assert.doesNotMatch(JSON.stringify(flows), /whsec_/, "the secret is not readable again");
    await page.getByRole("link", { name: "Open the destination" }).click();
    await page.waitForURL(new RegExp(`/destinations/${flowId}$`));
    assert.equal(await page.getByTestId("signing-secret").count(), 0, "shown only once");
  });

  it("sends the current members as existing, signed with that secret, and counts them", async () => {
    const members = over30(FIRST);
    await figureIs("stat-sent", String(members.length));
    const got = received(log, secret);
    assert.ok(got.length > 0);
    assert.ok(got.every((r) => r.signed), "every request verifies with the secret the page showed");
    const raw = got.map((r) => r.profiles).flat();
    assert.deepEqual(accepted().map(([e]) => e).sort(), members);
    assert.ok(accepted().every(([, s]) => s === "existing"));
    // Only the chosen audience, attribute and namespace.
    assert.ok(raw.every((p) => Object.keys(p.ups).join() === olderId), "US customers is not sent");
    assert.ok(raw.every((p) => JSON.stringify(p["person"]) === JSON.stringify({ age: FIRST.find((f) => f.email === (p.identityMap["email"] ?? p.identityMap["Email"])![0]!.id)!.age })));
    assert.ok(raw.every((p) => !("homeAddress" in p) && Object.keys(p.identityMap).map((k) => k.toLowerCase()).join() === "email"));
    const headers = readFileSync(log, "utf8").split("\n").filter((l) => l !== "").map((l) => (JSON.parse(l) as { headers: Record<string, string> }).headers);
    assert.ok(headers.every((h) => h["authorization"] === `Bearer ${TOKEN}` && h["x-tenant"] === "acme"));
    assert.equal(await page.getByTestId("endpoint").innerText(), `http://127.0.0.1:${port}/hook`);
    assert.match(await page.getByTestId("flow-audiences").innerText(), /^Customers over 30 · added /);
    assert.equal(await page.getByTestId("flow-attributes").innerText(), "person.age");
    assert.equal(await page.getByTestId("health").innerText(), "Healthy");
  });

  it("delivers a member who joins, and the sent count rises", async () => {
    await ingest(GUS);
    await http.runJob();
    await figureIs("stat-sent", String(over30(FIRST).length + 1));
    assert.deepEqual(accepted().filter(([e]) => e === GUS.email), [[GUS.email, "realized"]]);
  });

  it("shows a failing receiver's error, the failed attempts and the dead letter", async () => {
    await restartReceiver({ status: 500 });
    await ingest(HAL);
    await http.runJob();
    // 4 s of retries, then a dead letter.
    await figureIs("stat-dead", "1");
    const failedAttempts = received(log, secret).filter((r) => r.outcome === 500);
    assert.ok(failedAttempts.length >= 2, "retried before giving up");
    assert.ok(failedAttempts.every((r) => r.webhookId === failedAttempts[0]!.webhookId), "every retry under the same webhook-id");
    assert.equal(await page.getByTestId("stat-failed").innerText(), String(failedAttempts.length));
    assert.match(await page.getByTestId("stat-last-error").innerText(), /^Last error: Receiver answered HTTP 500: failing on purpose \(500\) \(/);
    // One line for the repeated error, counted (a run keeps its last 10 errors).
    const errorLines = await page.getByTestId("error-list").locator("li").allInnerTexts();
    assert.equal(errorLines.length, 1);
    assert.match(errorLines[0]!, new RegExp(`Receiver answered HTTP 500: failing on purpose \\(500\\) · ${Math.min(10, failedAttempts.length)} times$`));
    assert.equal(await page.getByTestId("health").innerText(), "Dead letters");
    const dead = page.locator(".dead-table tbody tr");
    assert.equal(await dead.count(), 1);
    assert.match(await dead.innerText(), new RegExp(`${failedAttempts[0]!.webhookId}\\s+1\\s+${failedAttempts.length}\\s+Receiver answered HTTP 500`));
    await shoot("destinations-detail-failure");
    await noSidewaysScroll("a destination with a failure");
  });

  it("replays the dead letter once the receiver recovers, under the same webhook-id", async () => {
    const deadId = received(log, secret).find((r) => r.outcome === 500)!.webhookId;
    await restartReceiver({});
    await page.getByRole("button", { name: "Replay dead letters" }).click();
    await page.locator(".action-status").getByText("1 dead letter is being sent again.").waitFor({ timeout: TIMEOUT });
    await figureIs("stat-sent", String(over30(FIRST).length + 2));
    await figureIs("stat-dead", "0");
    const ok = received(log, secret).filter((r) => r.outcome === 200 && r.webhookId === deadId);
    assert.equal(ok.length, 1);
    assert.deepEqual(ok[0]!.profiles.map((p) => p.ups[olderId]?.status), ["realized"]);
    assert.ok(await page.getByTestId("dead-empty").isVisible());
  });

  it("Activate now sends every member again, as a run of its own", async () => {
    const everyone = over30([...FIRST, GUS, HAL]);
    const before = accepted().length;
    await page.getByRole("button", { name: "Activate now" }).click();
    await page.locator(".action-status").getByText(/^Sending every selected audience's current members again \(run /).waitFor({ timeout: TIMEOUT });
    await figureIs("stat-sent", String(over30(FIRST).length + 2 + everyone.length));
    const again = accepted().slice(before);
    assert.deepEqual(again.map(([e]) => e).sort(), everyone);
    assert.ok(again.every(([, s]) => s === "existing"));
    assert.ok(received(log, secret).every((r) => r.signed));
    const runs = page.locator(".runs-table tbody tr");
    await page.waitForFunction(() => Array.from(document.querySelectorAll(".runs-table tbody th")).some((th) => th.textContent?.startsWith("Activate now")), undefined, { timeout: TIMEOUT });
    const resendRun = runs.filter({ hasText: "Activate now" });
    assert.equal(await resendRun.getByTestId("run-sent").innerText(), String(everyone.length));
    await shoot("destinations-detail");
  });

  it("pauses and resumes; a paused destination cannot be activated", async () => {
    await page.getByRole("button", { name: "Pause" }).click();
    await page.locator(".action-status").getByText("Paused: nothing is sent until you resume.").waitFor({ timeout: TIMEOUT });
    await page.waitForFunction(() => document.querySelector("[data-testid=health]")?.textContent === "Paused", undefined, { timeout: TIMEOUT });
    assert.equal(await page.getByRole("button", { name: "Activate now" }).isDisabled(), true);
    assert.equal(((await api("GET", `${FS}/flows/${flowId}`)).json as { items: Array<{ state: string }> }).items[0]!.state, "disabled");
    await page.getByRole("button", { name: "Resume" }).click();
    await page.locator(".action-status").getByText(/^Resumed: changes are sent again/).waitFor({ timeout: TIMEOUT });
    await page.waitForFunction(() => document.querySelector("[data-testid=health]")?.textContent === "Healthy", undefined, { timeout: TIMEOUT });
    assert.equal(await page.getByRole("button", { name: "Activate now" }).isDisabled(), false);
  });

  it("replaces the signing secret: the new one is shown once and signs every request after it", async () => {
    const old = secret;
    const sentBefore = Number(await page.getByTestId("stat-sent").innerText());
    const requestsBefore = received(log, old).length;
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Replace signing secret" }).click();
    await page.locator(".action-status").getByText("The signing secret was replaced.").waitFor({ timeout: TIMEOUT });
    secret = await page.getByTestId("signing-secret").innerText();
    assert.match(secret, /^whsec_/);
    assert.notEqual(secret, old);
    await page.getByRole("button", { name: "Activate now" }).click();
    await figureIs("stat-sent", String(sentBefore + over30([...FIRST, GUS, HAL]).length));
    const after = received(log, secret).slice(requestsBefore);
    assert.ok(after.length > 0 && after.every((r) => r.signed), "the new secret signs them");
    assert.ok(received(log, old).slice(requestsBefore).every((r) => !r.signed), "the old one no longer does");
    await page.reload();
    await page.getByRole("heading", { level: 1, name: NAME }).waitFor({ timeout: TIMEOUT });
    assert.equal(await page.getByTestId("signing-secret").count(), 0, "shown only once");
  });

  it("lists the destination with its health figures", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Destinations" }).click();
    await page.waitForURL(/\/destinations$/);
    const row = page.locator(`tr[data-flow-id="${flowId}"]`);
    await row.waitFor({ timeout: TIMEOUT });
    const sent = over30(FIRST).length + 2 + 2 * over30([...FIRST, GUS, HAL]).length;
    const failed = received(log, secret).filter((r) => r.outcome === 500).length;
    assert.equal(await row.getByTestId("sent").innerText(), String(sent));
    assert.equal(await row.getByTestId("failed").innerText(), String(failed));
    assert.equal(await row.getByTestId("retrying").innerText(), "0");
    assert.equal(await row.getByTestId("dead").innerText(), "0");
    assert.match(await row.getByTestId("last-error").innerText(), /Receiver answered HTTP 500/);
    assert.match(await row.locator("th").innerText(), new RegExp(`${NAME}\\s+http://127\\.0\\.0\\.1:${port}/hook`));
    await shoot("destinations-list");
    await noSidewaysScroll("the destinations list");
    // A reload opens the same page (the server serves the client route).
    await page.goto(`${server.url}/destinations/${flowId}`);
    await page.getByRole("heading", { level: 1, name: NAME }).waitFor({ timeout: TIMEOUT });
  });

  it("deletes the destination with its connections", async () => {
    await deleteShown();
    // Nothing of the unchosen audience ever left.
    assert.ok(received(log, secret).every((r) => r.profiles.every((p) => !(usId in p.ups))));
  });

  it("creates a file export destination, exports now and downloads a run's file: the audience's members", async () => {
    const everyone = over30([...FIRST, GUS, HAL]);
    await startCreate("File export", "Create a file export destination", "Nightly files", "no endpoint for files");
    // Its own check: a time without a date.
    await page.getByLabel("At (UTC time, optional)").fill("06:00");
    await page.getByRole("button", { name: "Create destination" }).click();
    await page.getByText("Give the date of the first export, or leave the time empty to export now.").waitFor({ timeout: TIMEOUT });
    await page.getByLabel("At (UTC time, optional)").fill("");
    // The message goes once the form no longer earns it.
    await page.getByText("Give the date of the first export, or leave the time empty to export now.").waitFor({ state: "detached", timeout: TIMEOUT });
    assert.equal(await page.getByText("Give the date of the first export, or leave the time empty to export now.").count(), 0);
    await page.getByLabel("Format").selectOption("ndjson");
    await page.getByLabel("How often").selectOption("EVERY_6_HOURS");
    await shoot("destinations-create-file");
    await page.getByRole("button", { name: "Create destination" }).click();
    await page.getByRole("heading", { level: 1, name: "Created “Nightly files”" }).waitFor({ timeout: TIMEOUT });
    await page.getByRole("link", { name: "Open the destination" }).click();
    await page.getByRole("heading", { level: 1, name: "Nightly files" }).waitFor({ timeout: TIMEOUT });
    const fileFlowId = decodeURIComponent(page.url().split("/destinations/")[1]!);
    // The start has passed: the first export runs at once; Export now makes a second.
    const succeeded = async (n: number) => {
      const deadline = Date.now() + TIMEOUT;
      for (;;) {
        const statuses = await page.getByTestId("export-status").allInnerTexts();
        if (statuses.filter((x) => x === "Succeeded").length >= n) return;
        assert.ok(Date.now() < deadline, `export runs: ${statuses.join(", ")}`);
        await page.waitForTimeout(300);
        await refresh();
      }
    };
    await succeeded(1);
    await page.getByRole("button", { name: "Export now" }).click();
    await page.locator(".action-status").getByText(/^Exporting the audiences' members now \(run /).waitFor({ timeout: TIMEOUT });
    await succeeded(2);
    assert.match(await page.getByTestId("file-format").innerText(), /^NDJSON$/);
    const file = page.getByTestId("export-file").first();
    const name = await file.innerText();
    assert.match(name, new RegExp(`^${olderId}-full-0001\\.ndjson$`));
    const [download] = await Promise.all([page.waitForEvent("download"), file.click()]);
    assert.equal(download.suggestedFilename(), name);
    const rows = readFileSync((await download.path())!, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { identityMap: Record<string, Array<{ id: string }>>; segmentMembership: { ups: Record<string, { status: string }> } });
    assert.deepEqual(rows.map((r) => (r.identityMap["Email"] ?? r.identityMap["email"])![0]!.id).sort(), everyone);
    assert.ok(rows.every((r) => r.segmentMembership.ups[olderId]?.status === "realized"));
    await shoot("destinations-detail-file");
    await noSidewaysScroll("a file export destination");
    // Its row in the list, then deleted with its connections.
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Destinations" }).click();
    const row = page.locator(`tr[data-flow-id="${fileFlowId}"]`);
    await row.waitFor({ timeout: TIMEOUT });
    assert.match(await row.locator("th").innerText(), /Nightly files\s+File export/);
    await row.getByRole("link", { name: "Nightly files" }).click();
    await deleteShown();
  });

  it("creates a NATS JetStream destination: its members and then a change are published to the flow's stream", async () => {
    const natsDir = mkdtempSync(path.join(tmpdir(), "segmentd-dest-e2e-nats-"));
    let nats: RunningNatsServer | undefined;
    const nc = { close: async () => {} } as { close(): Promise<void> };
    try {
      nats = await startNatsServer({ dir: natsDir, domain: "e2e" });
      await startCreate("NATS subject", "Create a NATS JetStream destination", "Members stream", "no endpoint for NATS");
      // The form's own check, then the server's refusal of a metadata address, leaving nothing behind.
      await page.getByLabel("Subject", { exact: true }).fill("crm.*");
      await page.getByRole("button", { name: "Create destination" }).click();
      await page.getByText("Dot-separated tokens of letters, digits, _ and - (no wildcards or spaces).").waitFor({ timeout: TIMEOUT });
      await page.getByLabel("Subject", { exact: true }).fill("crm.members");
      await page.getByLabel("NATS server (optional)").fill("nats://169.254.169.254:4222");
      await page.getByRole("button", { name: "Create destination" }).click();
      await page.locator(".form-status .notice-error").getByText("The destination was not created.").waitFor({ timeout: TIMEOUT });
      assert.match(await page.locator(".form-status").innerText(), /169\.254\.169\.254/);
      for (const kind of ["flows", "targetConnections", "connections"]) {
        assert.equal(((await api("GET", `${FS}/${kind}`)).json as { items: unknown[] }).items.length, 0, `no ${kind} left by the refusal`);
      }
      await page.getByLabel("NATS server (optional)").fill(nats.url);
      await page.getByLabel("person.age").check();
      await shoot("destinations-create-nats");
      await page.getByRole("button", { name: "Create destination" }).click();
      await page.getByRole("heading", { level: 1, name: "Created “Members stream”" }).waitFor({ timeout: TIMEOUT });
      assert.equal(await page.getByTestId("signing-secret").count(), 0, "a NATS destination has no signing secret");
      await page.getByRole("link", { name: "Open the destination" }).click();
      await page.getByRole("heading", { level: 1, name: "Members stream" }).waitFor({ timeout: TIMEOUT });
      const natsFlowId = decodeURIComponent(page.url().split("/destinations/")[1]!);
      const stream = `SEGMENTD_FLOW_${natsFlowId.replace(/[^A-Za-z0-9_]/g, "")}`;
      assert.equal(await page.getByTestId("endpoint").innerText(), "crm.members");
      assert.equal(await page.getByTestId("nats-server").innerText(), nats.url);
      assert.equal(await page.getByTestId("nats-stream").innerText(), stream);
      assert.equal(await page.getByRole("button", { name: "Replace signing secret" }).count(), 0);

      // What a consumer reads from the stream: every member as existing, then a joiner as realized.
      const conn = await connect({ servers: nats.url });
      nc.close = () => conn.close();
      const jsm = await jetstreamManager(conn);
      const read = async (want: number) => {
        const deadline = Date.now() + TIMEOUT;
        for (;;) {
          const info = await jsm.streams.info(stream).catch(() => null);
          if (info !== null && info.state.messages >= want) break;
          assert.ok(Date.now() < deadline, `stream ${stream}: ${info?.state.messages ?? "not made"} messages, waited for ${want}`);
          await new Promise((r) => setTimeout(r, 200));
        }
        const consumer = await jetstream(conn).consumers.get(stream, { deliver_policy: DeliverPolicy.All });
        const out: Array<{ subject: string; msgId: string; body: { status: string; audienceId: string; identityMap: Record<string, Array<{ id: string }>>; attributes: Record<string, unknown> } }> = [];
        const batch = await consumer.fetch({ max_messages: want, expires: 2000 });
        for await (const m of batch) out.push({ subject: m.subject, msgId: m.headers?.get("Nats-Msg-Id") ?? "", body: m.json() });
        return out;
      };
      const members = over30([...FIRST, GUS, HAL]);
      const first = await read(members.length);
      const email = (b: (typeof first)[number]["body"]) => (b.identityMap["Email"] ?? b.identityMap["email"])![0]!.id;
      assert.deepEqual(first.map((m) => email(m.body)).sort(), members);
      for (const m of first) {
        assert.equal(m.subject, "crm.members");
        assert.equal(m.body.audienceId, olderId);
        assert.equal(m.body.status, "existing");
        assert.deepEqual(Object.keys(m.body.attributes), ["person"], "only the chosen attribute");
      }
      await figureIs("stat-sent", String(members.length));
      await ingest(IVY);
      await http.runJob();
      const all = await read(members.length + 1);
      const joined = all.filter((m) => m.body.status === "realized");
      assert.deepEqual(joined.map((m) => email(m.body)), [IVY.email]);
      assert.equal(new Set(all.map((m) => m.msgId)).size, all.length, "each message id once");
      await figureIs("stat-sent", String(members.length + 1));
      await shoot("destinations-detail-nats");
      await noSidewaysScroll("a NATS destination");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Destinations" }).click();
      const row = page.locator(`tr[data-flow-id="${natsFlowId}"]`);
      await row.waitFor({ timeout: TIMEOUT });
      assert.match(await row.locator("th").innerText(), /Members stream\s+crm\.members/);
      await row.getByRole("link", { name: "Members stream" }).click();
      await deleteShown();
    } finally {
      await nc.close().catch(() => {});
      await nats?.stop().catch(() => {});
      rmSync(natsDir, { recursive: true, force: true });
    }
  });

  it("never contacted another host and no page threw", () => {
    assert.deepEqual(browser.foreignRequests, []);
    assert.deepEqual(browser.pageErrors, []);
  });
});
