// Test fixtures for the hygiene suites: the hygiene store the run asks for
// (SEGMENTD_TEST_STORE=embedded (default) | postgres, a fresh schema per test
// file, dropped afterwards), an embedded profile store in a temporary file,
// and a real HTTP server built from the foundation's auth, tenancy and error
// plumbing plus registerHygiene.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import pg from "pg";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { defaultHygieneConfig, type HygieneConfig } from "../../src/hygiene/entitlements.js";
import { Hygiene } from "../../src/hygiene/hygiene.js";
import { registerHygiene } from "../../src/hygiene/index.js";
import { openPgHygieneStore } from "../../src/hygiene/store/pg-store.js";
import { openSqliteHygieneStore } from "../../src/hygiene/store/sqlite-store.js";
import type { HygieneStore } from "../../src/hygiene/store/types.js";
import { ManualClock } from "../../src/platform/clock.js";
import { defaultConfig, type Config } from "../../src/platform/config.js";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { JsonObject, TenantScope } from "../../src/profiles/types.js";
import { Authenticator } from "../../src/services/auth/authenticator.js";
import { TenantDirectory } from "../../src/services/tenancy.js";

export const STORE_KIND = (process.env["SEGMENTD_TEST_STORE"] ?? "embedded") === "postgres" ? "postgres" : "embedded";
export const DATABASE_URL = process.env["SEGMENTD_TEST_DATABASE_URL"] ?? "postgres://127.0.0.1:5432/test";

export interface TestHygieneStore {
  store: HygieneStore;
  /** Opens a second store on the same data (another "process" sharing the database). */
  reopen(): Promise<HygieneStore>;
  cleanup(): Promise<void>;
}

function pgAdminUrl(): string {
  const url = new URL(DATABASE_URL);
  if (url.username === "") url.username = process.env["PGUSER"] || process.env["USER"] || userInfo().username;
  return url.toString();
}

export async function openTestHygieneStore(): Promise<TestHygieneStore> {
  if (STORE_KIND === "postgres") {
    const schema = `t_hygiene_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = new pg.Client({ connectionString: pgAdminUrl() });
    await admin.connect();
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.end();
    const opened: HygieneStore[] = [];
    const open = async () => {
      const s = await openPgHygieneStore(pgAdminUrl(), { schema, max: 20 });
      opened.push(s);
      return s;
    };
    const store = await open();
    return {
      store,
      reopen: open,
      async cleanup() {
        for (const s of opened) await s.close();
        const c = new pg.Client({ connectionString: pgAdminUrl() });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await c.end();
      },
    };
  }
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-hygiene-"));
  const opened: HygieneStore[] = [];
  const open = async () => {
    const s = openSqliteHygieneStore(dir);
    opened.push(s);
    return s;
  };
  const store = await open();
  return {
    store,
    reopen: open,
    async cleanup() {
      for (const s of opened) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TestProfiles {
  store: EmbeddedProfileStore;
  cleanup(): Promise<void>;
}

export function openTestProfiles(): TestProfiles {
  const dir = mkdtempSync(path.join(tmpdir(), "segmentd-hygiene-profiles-"));
  const store = new EmbeddedProfileStore({ path: path.join(dir, "profiles.db"), synchronous: "normal" });
  return {
    store,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function ingest(profiles: EmbeddedProfileStore, scope: TenantScope, datasetId: string, records: JsonObject[], now: number): Promise<void> {
  const r = await ingestRecords(profiles, scope, datasetId, records.map((value, index) => ({ index, value })), { now });
  if (r.failed.length > 0) throw new Error(`ingest failed: ${JSON.stringify(r.failed)}`);
}

/** A profile record whose primary identity is `email`. */
export function person(email: string, extra: JsonObject = {}): JsonObject {
  return { identityMap: { Email: [{ id: email, primary: true }] }, person: { name: { firstName: email.split("@")[0]! } }, ...extra };
}

export const ORG_A = "orgA@AdobeOrg";
export const ORG_B = "orgB@AdobeOrg";
export const TOKEN_A = "token-org-a";
export const TOKEN_B = "token-org-b";
export const OPERATOR_TOKEN = "token-operator";
export const API_KEY = "test-client";

export function testServerConfig(): Config {
  const c = defaultConfig();
  c.auth.staticTokens = [
    { token: TOKEN_A, orgs: [ORG_A] },
    { token: TOKEN_B, orgs: [ORG_B] },
  ];
  c.auth.apiKeys = [API_KEY];
  c.auth.operatorTokens = [OPERATOR_TOKEN];
  c.organizations = [
    { id: ORG_A, sandboxes: [{ name: "prod", type: "production", default: true }, { name: "dev", type: "development", default: false }] },
    { id: ORG_B, sandboxes: [{ name: "prod", type: "production", default: true }] },
  ];
  return c;
}

export interface TestServer {
  app: FastifyInstance;
  url: string;
  hygiene: Hygiene;
  clock: ManualClock;
  profiles: EmbeddedProfileStore;
  store: HygieneStore;
  /** fetch with org A's (or the given) credentials. */
  call(method: string, path: string, body?: unknown, opts?: { token?: string; org?: string; sandbox?: string | null; headers?: Record<string, string> }): Promise<{ status: number; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startTestServer(options: { clockStart: number; hygieneConfig?: Partial<HygieneConfig> }): Promise<TestServer> {
  const hs = await openTestHygieneStore();
  const ps = openTestProfiles();
  const clock = new ManualClock(options.clockStart);
  const config = testServerConfig();
  const hygiene = new Hygiene({ store: hs.store, profiles: ps.store, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0, ...options.hygieneConfig } });
  const app = Fastify({ logger: false });
  installBodyParsing(app);
  installErrorHandling(app);
  await registerHygiene(app, { hygiene, authenticator: new Authenticator(config.auth, clock), tenants: new TenantDirectory(config) });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  const call: TestServer["call"] = async (method, p, body, opts = {}) => {
    const headers: Record<string, string> = {
      authorization: `Bearer ${opts.token ?? TOKEN_A}`,
      "x-api-key": API_KEY,
      "x-gw-ims-org-id": opts.org ?? ORG_A,
      ...(opts.headers ?? {}),
    };
    if (opts.sandbox !== null) headers["x-sandbox-name"] = opts.sandbox ?? "prod";
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(`${url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>) };
  };
  return {
    app,
    url,
    hygiene,
    clock,
    profiles: ps.store,
    store: hs.store,
    call,
    async close() {
      await app.close();
      await hygiene.stop();
      await hs.cleanup();
      await ps.cleanup();
    },
  };
}

/** The `consumed` of each quota, by name, as GET /quota reports it. */
export async function quotaMap(server: TestServer, org = ORG_A, token = TOKEN_A): Promise<Record<string, { consumed: number; quota: number }>> {
  const r = await server.call("GET", "/data/core/hygiene/quota", undefined, { org, token, sandbox: null });
  if (r.status !== 200) throw new Error(`GET /quota: ${r.status} ${JSON.stringify(r.body)}`);
  const out: Record<string, { consumed: number; quota: number }> = {};
  for (const q of r.body.quotas as Array<{ name: string; consumed: number; quota: number }>) out[q.name] = { consumed: q.consumed, quota: q.quota };
  return out;
}
