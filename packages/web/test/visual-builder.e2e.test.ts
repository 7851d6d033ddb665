/**
 * The visual audience builder (#29) in Debian's Chromium against a real
 * segmentd (the development tenant, its own server). A marketer's session,
 * without typing PQL — only clicking, dragging, choosing from lists and typing
 * values into rule inputs:
 *
 *   seed profiles and events over HTTP → build and save (1) a purchase in the
 *   last 2 hours (keyboard only; Edge selectable), (2) US customers (dragged
 *   from the palette; profile only), (3) 40 or older with a purchase in the
 *   last 2 hours, (4) in (2) and in (1) (segment of segments), (5) US
 *   customers who added to cart and then bought within the last 12 hours (a
 *   sequence), (6) at least 2 purchases in the last 30 days excluding (2)
 *   (Edge disabled with its reasons) → each saved PQL is what the rules say,
 *   and a batch job's members equal the members computed here from the
 *   fixture; (1) is also checked on the edge → the estimate shown equals
 *   POST /preview + GET /estimate for the same expression, and so does each
 *   top-level rule's count → PQL with a part the builder cannot show comes
 *   back as rules plus a read-only block, and the PQL tab gets its text back
 *   unchanged.
 *
 * Screenshots (1280×800 and 390×844) go to docs/screenshots/visual-*.png; the
 * test fails if the browser requested another host or a page threw.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { Locator, Page } from "playwright-core";
import { signIn, watchedBrowser, type WatchedBrowser } from "./helpers/browser.js";
import { DESKTOP, PHONE, tenantApi, type TenantApi } from "./helpers/e2e-api.js";
import { startE2eServer, type E2eServer } from "./helpers/e2e-server.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const SHOTS = path.join(ROOT, "docs", "screenshots");
const TIMEOUT = 15_000;
const HOUR = 3_600_000;
const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
const EVENT_CLASS = "https://ns.adobe.com/xdm/context/experienceevent";
const DEFS = "/data/core/ups/segment/definitions";
const JOBS = "/data/core/ups/segment/jobs";
const PURCHASE = "commerce.purchases";
const ADD = "commerce.productListAdds";

interface Person {
  email: string;
  age: number;
  country: string;
  /** Hours ago of each purchase and each cart add. */
  purchases: number[];
  adds: number[];
}

/** 24 people; purchases and cart adds at hours well away from every window's edge. */
const PEOPLE: Person[] = Array.from({ length: 24 }, (_, i) => ({
  email: `p${String(i).padStart(2, "0")}@example.com`,
  age: 20 + ((i * 7) % 50),
  country: ["US", "CA", "FR"][i % 3]!,
  purchases: [[0.5], [5, 72], [1, 240, 300], []][i % 4]!.concat(i % 5 === 0 ? [1080] : []),
  adds: i % 2 === 0 ? [3] : i % 3 === 1 ? [0.25] : [],
}));

const recentBuy = (p: Person) => p.purchases.some((h) => h <= 2);
const isUs = (p: Person) => p.country === "US";
/** An add and a later purchase, both in the last 12 hours (chain: strictly increasing times). */
const addThenBuy = (p: Person) => p.adds.some((a) => a <= 12 && p.purchases.some((b) => b <= 12 && b < a));

const EXPECTED: Record<string, (p: Person) => boolean> = {
  recent: recentBuy,
  us: isUs,
  olderRecent: (p) => p.age >= 40 && recentBuy(p),
  both: (p) => isUs(p) && recentBuy(p),
  cartThenBuy: (p) => isUs(p) && addThenBuy(p),
  loyalNotUs: (p) => p.purchases.filter((h) => h <= 30 * 24).length >= 2 && !isUs(p),
};

/**
 * Run in the page (as text: the test runner's transform would add helpers the
 * page lacks): controls without a name, and text under 4.5:1 contrast against
 * the nearest background, in the builder's rules area and the estimate.
 */
const A11Y_CHECK = `(() => {
  const out = [];
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c;
    }
    return [255, 255, 255];
  };
  for (const root of document.querySelectorAll(".visual, .v-estimate, .rules-field .tab-list")) {
    for (const el of root.querySelectorAll("input, select, textarea, button")) {
      if (el.offsetParent === null) continue;
      const named = el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || (el.labels && el.labels.length) || (el.tagName === "BUTTON" && el.textContent.trim());
      if (!named) out.push("no name: " + el.outerHTML.slice(0, 80));
    }
    for (const el of root.querySelectorAll("*")) {
      const text = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== "");
      if (!text || el.offsetParent === null || el.closest(":disabled, [aria-hidden=true]")) continue;
      const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(background(el))].sort((x, y) => y - x);
      const ratio = (a + 0.05) / (b + 0.05);
      if (ratio < 4.5) out.push("contrast " + ratio.toFixed(2) + ": " + el.textContent.trim().slice(0, 40));
    }
  }
  return out;
})()`;

describe("visual audience builder in a real browser", { timeout: 240_000 }, () => {
  let server: E2eServer;
  let browser: WatchedBrowser;
  let page: Page;
  const saved: Record<string, { id: string; pql: string }> = {};
  let graphType = "none";
  let eventsDataset = "";

  let http: TenantApi;
  const api = (method: string, p: string, body?: unknown) => http.call(method, p, body);
  /** The estimate API's answer for one expression: POST /preview, then GET /estimate until ready. */
  const previewEstimate = async (expression: string) => {
    const r = await api("POST", "/data/core/ups/preview", { predicateExpression: expression, predicateType: "pql/text", graphType });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const id = (r.json as { previewId: string }).previewId;
    for (const deadline = Date.now() + TIMEOUT; ;) {
      const e = (await api("GET", `/data/core/ups/estimate/${id}`)).json as { state: string; estimatedSize: number; estimatedSizeRange: { low: number; high: number } };
      if (e.state === "RESULT_READY") return e;
      assert.ok(e.state !== "FAILED" && Date.now() < deadline, JSON.stringify(e));
      await new Promise((res) => setTimeout(res, 50));
    }
  };

  /** The whole page at each width; the window is as tall as the page so that sticky parts sit where they end up. */
  const shoot = async (name: string, only?: "desktop") => {
    for (const [suffix, size] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      if (only && suffix !== only) continue;
      await page.setViewportSize(size);
      await page.waitForTimeout(150);
      const height = await page.evaluate(() => document.documentElement.scrollHeight);
      await page.setViewportSize({ width: size.width, height });
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.waitForTimeout(150);
      await page.screenshot({ path: path.join(SHOTS, `${name}-${suffix}.png`) });
    }
    await page.setViewportSize(DESKTOP);
  };

  const canvas = () => page.locator(".v-canvas");
  const card = (name: string | RegExp) => canvas().getByRole("group", { name, exact: typeof name === "string" }).first();
  const search = async (text: string) => {
    await page.getByLabel("Search the palette").fill(text);
  };
  /** The estimate has answered for the expression now in the PQL editor. */
  const estimated = async () => {
    await page.waitForFunction(() => {
      const size = document.querySelector<HTMLElement>("[data-testid=estimate-size]");
      return size?.dataset.size !== undefined && !document.querySelector(".v-estimate-body")?.classList.contains("is-stale");
    }, undefined, { timeout: TIMEOUT });
  };
  const pqlNow = () => page.locator("#aud-expression").inputValue();
  const checked = () => page.getByText("Checked with the server.").waitFor({ timeout: TIMEOUT });
  const edge = () => page.getByRole("radio", { name: "Edge" });

  const startAudience = async (name: string) => {
    await page.goto(`${server.url}/audiences/new`);
    await page.getByLabel("Name").fill(name);
    await page.getByRole("tab", { name: "Visual" }).click();
    await page.getByRole("button", { name: /^Add attribute person\.age/ }).waitFor({ timeout: TIMEOUT });
  };
  const save = async (key: string, expectedPql: string) => {
    await page.waitForFunction((want) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === want, expectedPql, { timeout: TIMEOUT }).catch(() => undefined);
    assert.equal(await pqlNow(), expectedPql, "the rules write the intended PQL");
    await page.getByRole("button", { name: "Save audience" }).click();
    // The builder is /audiences/new?tab=…: wait for the saved audience's own address.
    await page.waitForURL(/\/audiences\/(?!new\b)[^/?]+$/, { timeout: TIMEOUT });
    const id = decodeURIComponent(new URL(page.url()).pathname.split("/")[2]!);
    const def = (await api("GET", `${DEFS}/${encodeURIComponent(id)}`)).json as { expression: { value: string } };
    assert.equal(def.expression.value, expectedPql);
    saved[key] = { id, pql: expectedPql };
    return id;
  };
  /** Choose an option of a select inside a card by its label. */
  const choose = (scope: Locator, label: string, option: string) => scope.getByLabel(label, { exact: true }).first().selectOption({ label: option });

  /**
   * Every control of the builder has a name, text has a contrast of at least
   * 4.5:1 against what is behind it, and at phone width nothing is wider than
   * the screen.
   */
  const checkAccessible = async () => {
    const problems = (await page.evaluate(A11Y_CHECK)) as string[];
    assert.deepEqual(problems, []);
    await page.setViewportSize(PHONE);
    await page.waitForTimeout(150);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), "no horizontal scrolling at 390 px");
    await page.setViewportSize(DESKTOP);
  };

  before(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // Test the UI as it is in the sources now, not a bundle left by an older build.
    execFileSync(process.execPath, [path.join(ROOT, "packages", "web", "build.mjs")], { stdio: "inherit" });
    server = await startE2eServer();
    http = tenantApi(server);
    const profiles = await http.dataset("crm", PROFILE_CLASS);
    eventsDataset = await http.dataset("web", EVENT_CLASS);
    const now = Date.now();
    for (const p of PEOPLE) {
      const identityMap = { Email: [{ id: p.email, primary: true }] };
      await http.ingest(profiles, PROFILE_CLASS, { identityMap, person: { age: p.age }, homeAddress: { countryCode: p.country } });
      const events: [string, number][] = [...p.purchases.map((h): [string, number] => [PURCHASE, h]), ...p.adds.map((h): [string, number] => [ADD, h])];
      for (const [i, [type, h]] of events.entries()) {
        await http.ingest(eventsDataset, EVENT_CLASS, { identityMap, _id: `${p.email}-${i}`, eventType: type, timestamp: new Date(now - h * HOUR).toISOString(), ...(type === PURCHASE ? { commerce: { order: { priceTotal: 10 + i } } } : {}) });
      }
    }
    const policies = (await api("GET", "/data/core/ups/config/mergePolicies?limit=100")).json as { children: { default: boolean; identityGraph: { type: string } }[] };
    graphType = policies.children.find((p) => p.default)?.identityGraph.type === "pdg" ? "pdg" : "none";

    browser = await watchedBrowser(server.url);
    page = browser.page;
    await signIn(page, server.url);
  });

  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it("(1) single event in a short window, built with the keyboard only: Edge selectable", async () => {
    await startAudience("Recent buyers");
    await page.getByLabel("Search the palette").focus();
    await page.keyboard.type("purchases");
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press("Tab");
      if ((await page.evaluate(() => document.activeElement?.getAttribute("aria-label") ?? "")).startsWith(`Add event ${PURCHASE}`)) break;
    }
    await page.keyboard.press("Enter");
    // Focus moved to the new rule's first control (its event type); then: how many, events, when.
    assert.equal(await page.evaluate(() => document.activeElement?.closest("label, .v-input")?.querySelector("label")?.textContent), "Event type");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLSelectElement).value), "", "on When: any time");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Control+A");
    await page.keyboard.type("2");
    await page.keyboard.press("Tab");
    await page.keyboard.press("ArrowUp");
    const pql = `xEvent[eventType = "${PURCHASE}" and timestamp occurs <= 2 hours before now].count() >= 1`;
    await page.waitForFunction((want) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === want, pql, { timeout: TIMEOUT });
    await checked();
    assert.equal(await edge().isEnabled(), true, "one event in a 2-hour window is edge-eligible");
    await edge().check();
    await save("recent", pql);
  });

  it("(2) profile only: an attribute dragged from the palette, a value typed", async () => {
    await startAudience("US customers");
    await search("country");
    const item = page.getByRole("button", { name: /^Add attribute homeAddress\.countryCode/ });
    await item.dragTo(canvas().locator("ol.v-children").first());
    const rule = card("Attribute homeAddress.countryCode");
    await rule.waitFor({ timeout: TIMEOUT });
    assert.equal(await rule.getByLabel("Operator").inputValue(), "equals");
    await rule.getByLabel("Value", { exact: true }).fill("US");
    await checked();
    assert.equal(await edge().isEnabled(), true, "a profile-only audience is edge-eligible");
    await save("us", 'homeAddress.countryCode = "US"');
  });

  it("(3) single event with a profile attribute; a rule moved with Alt+Shift+↑; estimates equal the estimate API's", async () => {
    await startAudience("Older recent buyers");
    await search(PURCHASE);
    await page.getByRole("button", { name: `Add event ${PURCHASE}` }).click();
    const event = card("Event");
    await choose(event, "When", "in the last");
    await event.getByLabel("Amount").fill("2");
    await choose(event, "Unit", "hours");
    await search("age");
    await page.getByRole("button", { name: /^Add attribute person\.age/ }).click();
    const age = card("Attribute person.age");
    await choose(age, "Operator", "≥");
    // Not a number yet: the PQL keeps its last good text, and Save says which rule is incomplete.
    const before = await pqlNow();
    await age.getByLabel("Value", { exact: true }).fill("4x");
    assert.equal(await age.getByRole("alert").first().innerText(), "Enter a number, such as 3 or 2.5.");
    assert.equal(await pqlNow(), before);
    await page.getByRole("button", { name: "Save audience" }).click();
    await page.getByText("A rule is not complete.").waitFor({ timeout: TIMEOUT });
    assert.match(page.url(), /\/audiences\/new/, "not saved");
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute("aria-invalid")), "true", "focus on the incomplete value");
    await age.getByLabel("Value", { exact: true }).fill("40");
    await age.getByLabel("Value", { exact: true }).press("Alt+Shift+ArrowUp");
    await page.locator("[role=status], #announcer, [aria-live]").filter({ hasText: "Moved Attribute person.age to position 1 of 2" }).first().waitFor({ state: "attached", timeout: TIMEOUT });
    const eventPql = `xEvent[eventType = "${PURCHASE}" and timestamp occurs <= 2 hours before now].count() >= 1`;
    const pql = `person.age >= 40 and ${eventPql}`;
    await page.waitForFunction((want) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === want, pql, { timeout: TIMEOUT });
    await estimated();
    const shown = await page.getByTestId("estimate-size").evaluate((el: HTMLElement) => ({ ...el.dataset }));
    const want = await previewEstimate(pql);
    assert.deepEqual([Number(shown.size), Number(shown.low), Number(shown.high)], [want.estimatedSize, want.estimatedSizeRange.low, want.estimatedSizeRange.high]);
    assert.match(await page.getByTestId("estimate-size").innerText(), new RegExp(`≈ ${want.estimatedSize} profiles?$`));
    for (const [name, text] of [["Attribute person.age", "person.age >= 40"], ["Event", eventPql]] as const) {
      const count = await card(name).locator(".v-count").evaluate((el: HTMLElement) => ({ size: el.dataset.size, low: el.dataset.low, high: el.dataset.high, text: el.textContent }));
      const alone = await previewEstimate(text);
      assert.deepEqual([Number(count.size), Number(count.low), Number(count.high)], [alone.estimatedSize, alone.estimatedSizeRange.low, alone.estimatedSizeRange.high], name);
      assert.equal(count.text, `≈ ${alone.estimatedSize}`);
    }
    await checked();
    assert.equal(await edge().isEnabled(), true, "a 2-hour event with a profile attribute is edge-eligible");
    await save("olderRecent", pql);
  });

  it("(4) segment of segments: two audiences from the palette", async () => {
    await startAudience("US recent buyers");
    await search("US customers");
    await page.getByRole("button", { name: "Add audience membership: US customers" }).click();
    await search("Recent buyers");
    await page.getByRole("button", { name: "Add audience membership: Recent buyers" }).click();
    const members = canvas().getByRole("group", { name: "Audience membership" });
    assert.equal(await members.count(), 2);
    assert.equal(await members.first().getByLabel("Audience").locator("option:checked").innerText(), "US customers");
    await page.waitForFunction((want) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === want, `inSegment("${saved.us!.id}") and inSegment("${saved.recent!.id}")`, { timeout: TIMEOUT });
    // A rule dragged by its handle above the other.
    await members.nth(1).locator(".v-handle").dragTo(members.first(), { targetPosition: { x: 30, y: 4 } });
    assert.equal(await members.first().getByLabel("Audience").locator("option:checked").innerText(), "Recent buyers");
    await checked();
    assert.equal(await edge().isEnabled(), true, "a segment of segments is edge-eligible");
    await save("both", `inSegment("${saved.recent!.id}") and inSegment("${saved.us!.id}")`);
  });

  it("(5) multiple events with a profile attribute: a sequence within 12 hours", async () => {
    await startAudience("US cart then buy");
    await search("sequence");
    await page.getByRole("button", { name: "Add sequence of events" }).click();
    const seq = card("Sequence of events");
    for (const [step, type] of [["Step 1", ADD], ["Step 2", PURCHASE]] as const) {
      const s = seq.getByRole("group", { name: step });
      await s.getByLabel("Event type").selectOption(type);
      await choose(s, "When", "in the last");
      await s.getByLabel("Amount").fill("12");
      await choose(s, "Unit", "hours");
    }
    await search("country");
    await page.getByRole("button", { name: /^Add attribute homeAddress\.countryCode/ }).click();
    const country = card("Attribute homeAddress.countryCode");
    await country.getByLabel("Value", { exact: true }).fill("US");
    await country.getByRole("button", { name: "Move up" }).click();
    await estimated();
    await search("");
    await shoot("visual-sequence", "desktop");
    await checked();
    assert.equal(await edge().isEnabled(), true, "several events within 12 hours with a profile attribute are edge-eligible");
    await save("cartThenBuy", `homeAddress.countryCode = "US" and chain(xEvent, timestamp, [A: WHAT(eventType = "${ADD}") WHEN(<= 12 hours before now), B: WHAT(eventType = "${PURCHASE}") WHEN(<= 12 hours before now)])`);
  });

  it("(6) batch only: at least 2 purchases in 30 days, excluding an audience: Edge disabled with its reasons", async () => {
    await startAudience("Loyal buyers outside the US");
    await search(PURCHASE);
    await page.getByRole("button", { name: `Add event ${PURCHASE}` }).click();
    const event = card("Event");
    await choose(event, "How many", "at least");
    await event.getByLabel("Events", { exact: true }).fill("2");
    await choose(event, "When", "in the last");
    await event.getByLabel("Amount").fill("30");
    await canvas().getByRole("button", { name: "+ Exclude group" }).last().click();
    await search("US customers");
    await page.getByRole("button", { name: "Add audience membership: US customers" }).click();
    const pql = `xEvent[eventType = "${PURCHASE}" and timestamp occurs <= 30 days before now].count() >= 2 and not inSegment("${saved.us!.id}")`;
    await page.waitForFunction((want) => (document.getElementById("aud-expression") as HTMLTextAreaElement).value === want, pql, { timeout: TIMEOUT });
    await checked();
    assert.equal(await edge().isEnabled(), false);
    assert.match(await page.locator("#method-synchronous-reasons").innerText(), /30 days/);
    await estimated();
    const shown = await page.getByTestId("estimate-size").evaluate((el: HTMLElement) => ({ ...el.dataset }));
    const want = await previewEstimate(pql);
    assert.deepEqual([Number(shown.size), Number(shown.low), Number(shown.high)], [want.estimatedSize, want.estimatedSizeRange.low, want.estimatedSizeRange.high]);
    await search("");
    await checkAccessible();
    await shoot("visual-builder");
    await save("loyalNotUs", pql);
  });

  it("a batch job's members equal the fixture's, for every saved audience", async () => {
    // Listed by id: "*" would leave out the Edge audience (1), which jobs evaluate only when asked.
    const job = await api("POST", JOBS, { segments: Object.values(saved).map((d) => ({ segmentId: d.id })) });
    assert.equal(job.status, 200, JSON.stringify(job.json));
    const jobId = (job.json as { id: string }).id;
    for (const deadline = Date.now() + 60_000; ;) {
      const j = (await api("GET", `${JOBS}/${jobId}`)).json as { status: string };
      if (j.status === "SUCCEEDED") break;
      assert.ok(j.status !== "FAILED" && Date.now() < deadline, JSON.stringify(j));
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const [key, rule] of Object.entries(EXPECTED)) {
      const r = await api("GET", `${DEFS}/${encodeURIComponent(saved[key]!.id)}/members?status=realized&limit=100`);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const emails = (r.json as { children: { identities: { id: string }[] }[] }).children.flatMap((m) => m.identities.map((i) => i.id)).sort();
      const expected = PEOPLE.filter(rule).map((p) => p.email).sort();
      assert.ok(expected.length > 0 && expected.length < PEOPLE.length, `${key}: the fixture tells members from others`);
      assert.deepEqual(emails, expected, `${key}: ${saved[key]!.pql}`);
    }
  });

  it("the edge qualifies a new purchase for (1), not a page view", async () => {
    const stream = await api("POST", "/data/core/edge/datastreams", { name: "web", eventDatasetId: eventsDataset });
    assert.equal(stream.status, 201, JSON.stringify(stream.json));
    const dataStreamId = (stream.json as { id: string }).id;
    const interact = async (id: string, eventType: string) => {
      const r = await fetch(`${server.url}/ee/v2/interact?dataStreamId=${encodeURIComponent(dataStreamId)}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ event: { xdm: { identityMap: { ECID: [{ id, primary: true }] }, eventType, timestamp: new Date().toISOString() } } }),
      });
      assert.equal(r.status, 200);
      return r.text();
    };
    assert.ok((await interact("ecid-visual-1", PURCHASE)).includes(saved.recent!.id), "a purchase now qualifies");
    assert.ok(!(await interact("ecid-visual-2", "web.webpagedetails.pageViews")).includes(saved.recent!.id), "a page view does not");
  });

  it("editing an audience in the Visual tab: the impact of the change is shown before it is saved", async () => {
    await page.goto(`${server.url}/audiences/${encodeURIComponent(saved.us!.id)}/edit?tab=visual`);
    const country = card("Attribute homeAddress.countryCode");
    await country.getByLabel("Value", { exact: true }).fill("CA");
    const after = PEOPLE.filter((p) => p.country === "CA").length;
    await page.waitForFunction((n) => document.querySelector("[data-testid=impact-after]")?.textContent === n, String(after), { timeout: TIMEOUT });
    assert.equal(await page.getByTestId("impact-leave").innerText(), String(PEOPLE.filter(isUs).length));
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.waitForURL(/\/audiences\/[^/]+$/, { timeout: TIMEOUT });
    assert.equal(((await api("GET", `${DEFS}/${encodeURIComponent(saved.us!.id)}`)).json as { expression: { value: string } }).expression.value, 'homeAddress.countryCode = "CA"');
  });

  it("PQL the builder cannot fully show: rules plus a read-only block, and the text comes back unchanged", async () => {
    await page.goto(`${server.url}/audiences/new`);
    await page.getByRole("tab", { name: "PQL" }).click();
    const text = 'person.age>30   AND xEvent.exists(e => e.eventType = "commerce.purchases")';
    await page.getByLabel("Expression (PQL)").fill(text);
    await page.getByRole("tab", { name: "Visual" }).click();
    await page.getByText("One part of this expression cannot be shown as rules.").waitFor({ timeout: TIMEOUT });
    const age = card("Attribute person.age");
    assert.equal(await age.getByLabel("Operator").inputValue(), "greaterThan");
    assert.equal(await age.getByLabel("Value", { exact: true }).inputValue(), "30");
    const block = card("PQL (read-only)");
    // The block shows the part's canonical text (what a later edit of the rules writes for it).
    assert.equal(await block.getByTestId("pql-block").innerText(), 'xEvent.exists((e) => e.eventType = "commerce.purchases")');
    assert.match(await block.innerText(), /Edit it in the PQL tab/);
    assert.equal(await block.locator("input, select, textarea").count(), 0, "a block has nothing to edit");
    await page.getByRole("tab", { name: "PQL" }).click();
    assert.equal(await pqlNow(), text, "looking at the rules changed nothing");

    // An edit of the rules writes canonical PQL and keeps the block as it was.
    await page.getByRole("tab", { name: "Visual" }).click();
    await age.getByLabel("Value", { exact: true }).fill("35");
    await page.getByRole("tab", { name: "PQL" }).click();
    assert.equal(await pqlNow(), 'person.age > 35 and xEvent.exists((e) => e.eventType = "commerce.purchases")');
  });

  it("never contacted another host and no page threw", () => {
    assert.deepEqual(browser.foreignRequests, []);
    assert.deepEqual(browser.pageErrors, []);
  });
});
