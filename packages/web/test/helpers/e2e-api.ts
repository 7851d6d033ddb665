/**
 * What the browser tests do over HTTP beside the browser: tenant API calls with the
 * development tenant's credentials, profile-enabled datasets, streamed records, batch jobs,
 * and screenshots at desktop and phone width.
 */
import assert from "node:assert/strict";
import path from "node:path";
import type { Page } from "playwright-core";
import type { E2eServer } from "./e2e-server.js";

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
const JOBS = "/data/core/ups/segment/jobs";

export interface ApiAnswer {
  status: number;
  json: unknown;
}

export interface TenantApi {
  /** A call with the tenant's headers (`tenant: false` sends none, as a browser's edge call does). */
  call(method: string, p: string, body?: unknown, tenant?: boolean): Promise<ApiAnswer>;
  /** A profile-enabled dataset of a standard class (its id). */
  dataset(name: string, schemaId: string): Promise<string>;
  /** One record through streaming collection, validated synchronously. */
  ingest(datasetId: string, schemaId: string, entity: Record<string, unknown>): Promise<void>;
  /** A batch job over every published audience, waited for; its final state. */
  runJob(): Promise<{ status: string; metrics?: { segmentedProfileCounter?: Record<string, number> } }>;
}

export function tenantApi(server: E2eServer): TenantApi {
  const call = async (method: string, p: string, body?: unknown, tenant = true): Promise<ApiAnswer> => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (tenant) {
      Object.assign(headers, {
        authorization: `Bearer ${server.creds.token}`,
        "x-api-key": server.creds.apiKey,
        "x-gw-ims-org-id": server.creds.orgId,
        "x-sandbox-name": server.creds.sandboxName,
      });
    }
    const r = await fetch(server.url + p, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) };
  };
  return {
    call,
    async dataset(name, schemaId) {
      const r = await call("POST", "/data/foundation/catalog/dataSets", { name, schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] } });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      return String((r.json as string[])[0]).split("/").pop()!;
    },
    async ingest(datasetId, schemaId, entity) {
      const r = await call("POST", "/collection/e2e?syncValidation=true", {
        header: { schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed-full+json;version=1" }, datasetId },
        body: { xdmMeta: { schemaRef: { id: schemaId } }, xdmEntity: entity },
      });
      assert.equal(r.status, 200, JSON.stringify(r.json));
    },
    async runJob() {
      const job = await call("POST", JOBS, { segments: [{ segmentId: "*" }] });
      assert.equal(job.status, 200, JSON.stringify(job.json));
      const id = (job.json as { id: string }).id;
      for (const deadline = Date.now() + 60_000; ;) {
        const j = (await call("GET", `${JOBS}/${id}`)).json as { status: string; metrics?: { segmentedProfileCounter?: Record<string, number> } };
        if (j.status === "SUCCEEDED") return j;
        assert.ok(j.status !== "FAILED" && Date.now() < deadline, JSON.stringify(j));
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

/** A full-page screenshot of `page` at desktop and phone width into `dir` (`<name>-desktop.png`, `<name>-phone.png`). */
export async function shoot(page: Page, dir: string, name: string): Promise<void> {
  for (const [suffix, size] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
    await page.setViewportSize(size);
    await page.evaluate(() => window.scrollTo(0, 0));
    // Layout settles after the resize (media queries, wrapped header).
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(dir, `${name}-${suffix}.png`), fullPage: true });
  }
  await page.setViewportSize(DESKTOP);
}
