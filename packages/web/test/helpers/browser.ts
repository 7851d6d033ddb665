/**
 * Debian's Chromium driven by playwright-core (stack-notes §7). The flags keep
 * Chromium from contacting outside hosts (background networking, component
 * updates, sync, QUIC probes), which are closed on CI anyway; a fresh profile
 * directory keeps runs independent.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env.SEGMENTD_CHROMIUM ?? "/usr/lib/chromium/chromium";

export async function launchChromium(): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const profile = mkdtempSync(path.join(tmpdir(), "segmentd-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface WatchedBrowser {
  context: BrowserContext;
  page: Page;
  /** Requests to any host but the server's (the tool must make none). */
  foreignRequests: string[];
  /** Uncaught errors of the page (the tool must throw none). */
  pageErrors: string[];
  close(): Promise<void>;
}

/** Chromium with one page, recording what a browser test asserts never happens: other hosts contacted, page errors. */
export async function watchedBrowser(serverUrl: string): Promise<WatchedBrowser> {
  const browser = await launchChromium();
  const { context } = browser;
  const origin = new URL(serverUrl).origin;
  const foreignRequests: string[] = [];
  const pageErrors: string[] = [];
  context.on("request", (req) => {
    const u = req.url();
    if (!u.startsWith(origin + "/") && !u.startsWith("data:")) foreignRequests.push(u);
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (err) => pageErrors.push(err.message));
  return { context, page, foreignRequests, pageErrors, close: () => browser.close() };
}

/** Signs in with the development tenant's pre-filled credentials and waits for the audiences list. */
export async function signIn(page: Page, serverUrl: string): Promise<void> {
  await page.goto(serverUrl + "/signin");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/audiences$/);
}
