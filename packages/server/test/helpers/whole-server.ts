/**
 * The whole server (startServer) on a temporary data directory, real HTTP on 127.0.0.1, one
 * organization with a `prod` sandbox, driven the way a user drives it: `call` with the tenant
 * headers, `dataset` through the Catalog API.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createLogger, defaultConfig, startServer, type RunningServer } from "../../src/index.js";

export interface WholeServer {
  server: RunningServer;
  call(method: string, url: string, body?: unknown): Promise<{ status: number; json: unknown }>;
  /** A profile-enabled Catalog dataset of that class; its id. */
  dataset(name: string, schema: "profile" | "experienceevent"): Promise<string>;
  close(): Promise<void>;
}

export async function startWholeServer(org: string, name: string): Promise<WholeServer> {
  const token = `${name}-token`;
  const key = `${name}-key`;
  const headers = { authorization: `Bearer ${token}`, "x-api-key": key, "x-gw-ims-org-id": org, "x-sandbox-name": "prod", "content-type": "application/json" };
  const dir = mkdtempSync(path.join(os.tmpdir(), `segmentd-${name}-`));
  const c = defaultConfig();
  c.port = 0;
  c.dataDir = dir;
  c.auth.staticTokens = [{ token, orgs: [org] }];
  c.auth.apiKeys = [key];
  c.organizations = [{ id: org, sandboxes: [{ name: "prod", type: "production", default: true }] }];
  const server = await startServer(c, { logger: createLogger("silent") });
  const call = async (method: string, url: string, body?: unknown) => {
    const r = await fetch(server.url + url, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) };
  };
  return {
    server,
    call,
    async dataset(dsName, schema) {
      const r = await call("POST", "/data/foundation/catalog/dataSets", {
        name: dsName,
        schemaRef: { id: `https://ns.adobe.com/xdm/context/${schema}`, contentType: "application/vnd.adobe.xed+json;version=1" },
        tags: { unifiedProfile: ["enabled:true"], unifiedIdentity: ["enabled:true"] },
      });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      return (r.json as string[])[0]!.replace("@/dataSets/", "");
    },
    async close() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
