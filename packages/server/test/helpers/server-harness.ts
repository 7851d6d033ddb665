/**
 * A real server on 127.0.0.1:0 with two organizations, for API tests over HTTP
 * (fetch; never inject()).
 *
 *   org A: sandboxes prod (production, default) and dev
 *   org B: sandbox prod
 * Tokens: static tokenA (org A), tokenB (org B), JWTs signed with JWT_SECRET
 * (claim "org"), operator token OPERATOR_TOKEN. API key API_KEY.
 */
import { createLogger, defaultConfig, startServer, type Config, type RunningServer } from "../../src/index.js";
import type { Clock } from "../../src/platform/clock.js";
import { createTestStore, type TestStoreHandle } from "./test-store.js";

export const ORG_A = "AAAAAAAAAAAAAAAAAAAAAAAA@AdobeOrg";
export const ORG_B = "BBBBBBBBBBBBBBBBBBBBBBBB@AdobeOrg";
export const TOKEN_A = "token-org-a";
export const TOKEN_B = "token-org-b";
export const API_KEY = "test-api-key";
export const OPERATOR_TOKEN = "operator-secret-token";
export const JWT_SECRET = "jwt-test-secret-0123456789";

export interface Harness {
  server: RunningServer;
  url: string;
  store: TestStoreHandle;
  close(): Promise<void>;
}

export function testConfig(handle: TestStoreHandle, patch: (c: Config) => void = () => {}): Config {
  const c = defaultConfig();
  c.port = 0;
  c.dataDir = handle.dataDir;
  c.databaseUrl = handle.databaseUrl;
  c.logLevel = "silent";
  c.auth.staticTokens = [
    { token: TOKEN_A, orgs: [ORG_A] },
    { token: TOKEN_B, orgs: [ORG_B] },
  ];
  c.auth.apiKeys = [API_KEY];
  c.auth.operatorTokens = [OPERATOR_TOKEN];
  c.auth.jwtHs256Secret = JWT_SECRET;
  c.organizations = [
    { id: ORG_A, sandboxes: [{ name: "prod", type: "production", default: true }, { name: "dev", type: "development", default: false }] },
    { id: ORG_B, sandboxes: [{ name: "prod", type: "production", default: true }] },
  ];
  // No daily schedule: a suite that crosses 01:00 UTC must not get a batch job it did not ask
  // for (test/batch/default-schedule.test.ts turns it back on).
  c.batch = { defaultSchedule: false };
  patch(c);
  return c;
}

export async function startHarness(label: string, options: { patch?: (c: Config) => void; clock?: Clock } = {}): Promise<Harness> {
  const store = await createTestStore(label);
  const config = testConfig(store, options.patch);
  const server = await startServer(config, { logger: createLogger("silent"), store: await store.open(), clock: options.clock });
  return {
    server,
    url: server.url,
    store,
    async close() {
      await server.close();
      await store.dispose();
    },
  };
}

export interface Caller {
  token?: string | null;
  apiKey?: string | null;
  org?: string | null;
  sandbox?: string | null;
}

export interface Res {
  status: number;
  headers: Headers;
  text: string;
  // Parsed JSON body (undefined when the body is empty or not JSON).
  json: unknown;
}

/** An API client for one caller; `null` omits a header. `{"content-type": ""}` sends no Content-Type. */
export function client(baseUrl: string, who: Caller = {}) {
  const headers = (): Record<string, string> => {
    const h: Record<string, string> = {};
    const token = who.token === undefined ? TOKEN_A : who.token;
    if (token !== null) h.authorization = `Bearer ${token}`;
    const key = who.apiKey === undefined ? API_KEY : who.apiKey;
    if (key !== null) h["x-api-key"] = key;
    const org = who.org === undefined ? ORG_A : who.org;
    if (org !== null) h["x-gw-ims-org-id"] = org;
    const sb = who.sandbox === undefined ? "prod" : who.sandbox;
    if (sb !== null) h["x-sandbox-name"] = sb;
    return h;
  };
  const call = async (method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<Res> => {
    const h = { ...headers(), ...extra };
    let payload: string | Blob | undefined;
    if (body !== undefined) {
      payload = typeof body === "string" ? body : JSON.stringify(body);
      if (h["content-type"] === "") {
        // No Content-Type at all: fetch adds text/plain to string bodies, not to untyped blobs.
        delete h["content-type"];
        payload = new Blob([payload]);
      } else if (!Object.keys(h).some((k) => k.toLowerCase() === "content-type")) h["content-type"] = "application/json";
    }
    const r = await fetch(baseUrl + path, { method, headers: h, body: payload });
    const text = await r.text();
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: r.status, headers: r.headers, text, json };
  };
  return {
    get: (path: string, extra?: Record<string, string>) => call("GET", path, undefined, extra),
    post: (path: string, body?: unknown, extra?: Record<string, string>) => call("POST", path, body, extra),
    patch: (path: string, body?: unknown, extra?: Record<string, string>) => call("PATCH", path, body, extra),
    put: (path: string, body?: unknown, extra?: Record<string, string>) => call("PUT", path, body, extra),
    delete: (path: string, extra?: Record<string, string>) => call("DELETE", path, undefined, extra),
    call,
  };
}

export type Client = ReturnType<typeof client>;

export const DEFS = "/data/core/ups/segment/definitions";
export const MPS = "/data/core/ups/config/mergePolicies";

export function definitionBody(name: string, value = 'homeAddress.countryCode = "US"', extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    schema: { name: "_xdm.context.profile" },
    expression: { type: "PQL", format: "pql/text", value },
    ...extra,
  };
}

/** Narrow an unknown JSON value to a record for property access in assertions. */
export function obj(v: unknown): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error(`expected a JSON object, got ${JSON.stringify(v)?.slice(0, 200)}`);
  return v as Record<string, unknown>;
}

export function arr(v: unknown): unknown[] {
  if (!Array.isArray(v)) throw new Error(`expected a JSON array, got ${JSON.stringify(v)?.slice(0, 200)}`);
  return v;
}

export const PROFILE_CLASS = "https://ns.adobe.com/xdm/context/profile";
export const EVENT_CLASS = "https://ns.adobe.com/xdm/context/experienceevent";

/** A streaming-collection message (POST /collection/{inlet}) carrying one XDM record. */
export function xdmMessage(datasetId: string, schemaId: string, entity: Record<string, unknown>): Record<string, unknown> {
  return { header: { schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed-full+json;version=1" }, datasetId }, body: { xdmMeta: { schemaRef: { id: schemaId } }, xdmEntity: entity } };
}

/** A profile-enabled dataset of a standard class; its id. */
export async function profileDataset(c: Client, name: string, schemaId: string): Promise<string> {
  const r = await c.post("/data/foundation/catalog/dataSets", { name, schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] } });
  if (r.status !== 201) throw new Error(`dataset ${name}: ${r.status} ${r.text}`);
  return String(arr(r.json)[0]).split("/").pop()!;
}

/** A batch job over every published definition (`segmentId: "*"`), polled (every 50 ms, `polls` times at most) until it succeeds. */
export async function runSegmentJob(c: Client, polls = 400): Promise<void> {
  const job = await c.post("/data/core/ups/segment/jobs", { segments: [{ segmentId: "*" }] });
  if (job.status !== 200) throw new Error(`segment job: ${job.status} ${job.text}`);
  for (let i = 0; ; i++) {
    const j = obj((await c.get(`/data/core/ups/segment/jobs/${obj(job.json).id as string}`)).json);
    if (j.status === "SUCCEEDED") return;
    if (j.status === "FAILED" || i >= polls) throw new Error(`segment job: ${JSON.stringify(j)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
