/**
 * A real HTTP server (127.0.0.1, random port) with the foundation's error
 * handling and body parsing and the realtime registration (edge interact,
 * datastreams, metrics) over the fixture's stores and ManualClock.
 */
import Fastify, { type FastifyInstance } from "fastify";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { registerRealtime, type Realtime } from "../../src/edge/register.js";
import type { EdgeLocationsConfig } from "../../src/edge/locations.js";
import type { HubForwarderOptions } from "../../src/edge/hub-forwarder.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { DEFAULT_LIMITS } from "../../src/platform/config.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { ORG, openFixture, type Fixture } from "../streaming/fixtures.js";

export const TOKEN = "edge-test-token";
export const API_KEY = "edge-test-key";
export const OTHER_ORG = "OTHER000000000000000000B@AdobeOrg";

export interface HarnessResponse {
  status: number;
  json: unknown;
  headers: Headers;
}

/** One app (realtime registration over HTTP) on a fixture's stores. */
export interface EdgeApp {
  app: FastifyInstance;
  rt: Realtime;
  url: string;
  /** Tenant-API headers (org of the fixture, sandbox prod). */
  headers(org?: string): Record<string, string>;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<HarnessResponse>;
  put(path: string, body: unknown, headers?: Record<string, string>): Promise<HarnessResponse>;
  get(path: string, headers?: Record<string, string>): Promise<HarnessResponse>;
  del(path: string, headers?: Record<string, string>): Promise<HarnessResponse>;
  /** Closes the app (its realtime engines), not the fixture. */
  close(): Promise<void>;
}

export interface EdgeHarness extends EdgeApp {
  f: Fixture;
  /** Closes the app and the fixture. */
  close(): Promise<void>;
}

export interface EdgeAppOptions {
  edge?: EdgeLocationsConfig;
  forwarder?: HubForwarderOptions;
  /** The metadata store the realtime registration uses (default the fixture's). */
  meta?: MetadataStore;
  /** Passed to registerRealtime (a datastreams.json there is imported). */
  dataDir?: string;
  datastreamRefreshMs?: number;
  /** The hub the realtime registration writes to and reads from (default the fixture's; a wrapper to hold or fail writes). */
  hub?: Fixture["hub"];
}

/**
 * A second (third...) app on the fixture's hub and clock, as another server process sharing the
 * stores would be: with `meta` from `f.openMeta()` it shares the metadata store through its own
 * connection and keeps its own datastreams in memory.
 */
export async function startEdgeApp(f: Fixture, opts: EdgeAppOptions = {}): Promise<EdgeApp> {
  const auth = { jwtOrgClaim: "org", staticTokens: [{ token: TOKEN, orgs: [ORG, OTHER_ORG] }], apiKeys: [API_KEY], operatorTokens: [] };
  const tenants = new TenantDirectory({
    organizations: [
      { id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] },
      { id: OTHER_ORG, sandboxes: [{ name: "prod", type: "production", default: true }] },
    ],
    limits: { ...DEFAULT_LIMITS },
  });
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  installBodyParsing(app);
  const rt = await registerRealtime(app, {
    authenticator: new Authenticator(auth, f.clock),
    tenants,
    meta: opts.meta ?? f.meta,
    hub: opts.hub ?? f.hub,
    clock: f.clock,
    bus: f.bus,
    ...(opts.edge ? { edge: opts.edge } : {}),
    ...(opts.forwarder ? { forwarder: opts.forwarder } : {}),
    ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
    ...(opts.datastreamRefreshMs !== undefined ? { datastreamRefreshMs: opts.datastreamRefreshMs } : {}),
    onError: (err) => {
      throw err;
    },
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  const headers = (org = ORG) => ({ authorization: `Bearer ${TOKEN}`, "x-api-key": API_KEY, "x-gw-ims-org-id": org, "x-sandbox-name": "prod" });
  const call = async (method: string, path: string, body: unknown, h: Record<string, string>) => {
    // No content type on a DELETE (no body): a JSON content type with an empty body is a 400.
    const type: Record<string, string> = method === "DELETE" ? {} : { "content-type": "application/json" };
    const r = await fetch(url + path, { method, headers: { ...type, ...h }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await r.text();
    return { status: r.status, json: text === "" ? undefined : (JSON.parse(text) as unknown), headers: r.headers };
  };
  return {
    app,
    rt,
    url,
    headers,
    post: (path, body, h = {}) => call("POST", path, body, h),
    put: (path, body, h = {}) => call("PUT", path, body, h),
    get: (path, h = {}) => call("GET", path, undefined, h),
    del: (path, h = {}) => call("DELETE", path, undefined, h),
    async close() {
      await app.close();
    },
  };
}

export async function startEdgeHarness(start: number, edge?: EdgeLocationsConfig, opts: { forwarder?: HubForwarderOptions; hub?: (f: Fixture) => Fixture["hub"] } = {}): Promise<EdgeHarness> {
  const f = await openFixture(start);
  const a = await startEdgeApp(f, { ...(edge ? { edge } : {}), ...(opts.forwarder ? { forwarder: opts.forwarder } : {}), ...(opts.hub ? { hub: opts.hub(f) } : {}) });
  return {
    ...a,
    f,
    async close() {
      await a.close();
      await f.close();
    },
  };
}

/** The segment ids of an interact response's activation:pull handle. */
export function segmentsOf(json: unknown): string[] {
  const body = json as { handle: Array<{ type: string; payload: Array<{ segments?: Array<{ id: string; namespace: string }> }> }> };
  const pull = body.handle.find((h) => h.type === "activation:pull");
  if (!pull) throw new Error("no activation:pull handle");
  return pull.payload.flatMap((p) => p.segments ?? []).map((s) => s.id).sort();
}
