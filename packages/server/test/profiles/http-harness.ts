// A real HTTP server (127.0.0.1:0) carrying only the profile data plane routes,
// built from the foundation's auth, error and body-parsing pieces, over the
// test run's profile store. Merge policies come from an in-memory resolver.
import Fastify, { type FastifyInstance } from "fastify";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { defaultConfig } from "../../src/platform/config.js";
import type { Clock } from "../../src/platform/clock.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { notFound } from "../../src/services/errors.js";
import { TenantDirectory } from "../../src/services/tenancy.js";
import { registerProfileRoutes } from "../../src/profiles/http/index.js";
import { NO_MERGE_POLICY, type MergePolicySpec } from "../../src/profiles/types.js";
import { openTestStore, type TestStore } from "./test-store.js";

export const ORG = "PROFILEORG000000000000000@AdobeOrg";
export const OTHER_ORG = "OTHERORG00000000000000000@AdobeOrg";
export const TOKEN = "profiles-token";
export const API_KEY = "profiles-key";

export interface HttpHarness {
  url: string;
  ts: TestStore;
  policies: Map<string, MergePolicySpec>;
  clock: { t: number } & Clock;
  close(): Promise<void>;
}

export async function startProfileServer(): Promise<HttpHarness> {
  const ts = openTestStore();
  const clock = { t: Date.UTC(2026, 10, 21, 12), now() { return this.t; } };
  const config = defaultConfig();
  config.auth.staticTokens = [{ token: TOKEN, orgs: [ORG, OTHER_ORG] }];
  config.auth.apiKeys = [API_KEY];
  config.organizations = [
    { id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }, { name: "dev", type: "development", default: false }] },
    { id: OTHER_ORG, sandboxes: [{ name: "prod", type: "production", default: true }] },
  ];
  const policies = new Map<string, MergePolicySpec>();
  const app: FastifyInstance = Fastify({ logger: false, bodyLimit: config.bodyLimitBytes });
  installErrorHandling(app);
  installBodyParsing(app);
  await registerProfileRoutes(app, {
    authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config), profiles: ts.store, clock,
    policies: {
      async resolve(_tenant, id) {
        if (id === undefined) return policies.get("default") ?? NO_MERGE_POLICY;
        const p = policies.get(id);
        if (p === undefined) throw notFound("Merge policy", id);
        return p;
      },
    },
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { url, ts, policies, clock, async close() { await app.close(); await ts.cleanup(); } };
}

export interface Res { status: number; json: unknown; text: string }

export async function call(url: string, method: string, path: string, body?: unknown, opts: { sandbox?: string; org?: string; contentType?: string; raw?: string } = {}): Promise<Res> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${TOKEN}`, "x-api-key": API_KEY, "x-gw-ims-org-id": opts.org ?? ORG, "x-sandbox-name": opts.sandbox ?? "prod",
  };
  let payload: string | undefined;
  if (opts.raw !== undefined) {
    payload = opts.raw;
    headers["content-type"] = opts.contentType ?? "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["content-type"] = "application/json";
  }
  const r = await fetch(url + path, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
  const text = await r.text();
  let json: unknown;
  try { json = text === "" ? undefined : JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, json, text };
}
