/**
 * Configuration: defaults, then the config file (`segmentd.config.json` in the
 * working directory, or `--config` / SEGMENTD_CONFIG), then environment
 * variables, then command-line overrides. Every key is documented in
 * docs/configuration.md; keep the two in step.
 */
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";

export interface SandboxLimits {
  /** All definitions in one sandbox (AEP guardrail: 4,000). */
  definitions: number;
  /** Streaming (`continuous`) definitions, edge ones included (AEP: 500). */
  streaming: number;
  /** Edge (`synchronous`) definitions (AEP: 150). */
  edge: number;
  /** Largest accepted `expression.value`, in bytes of UTF-8. */
  expressionBytes: number;
  /** The events per profile PQL's cost model assumes (E): a definition is judged at this many (docs/reliability.md). */
  eventsPerProfile: number;
  /** The most units of work one profile's evaluation may need (PQL's cost model at `eventsPerProfile`; enforced while evaluating too). */
  evaluationCost: number;
  /** The most milliseconds one profile's evaluation may hold the event loop. */
  evaluationMsPerProfile: number;
  /** The deadline of a request's evaluation (explain, preview, estimates, edit impact), in milliseconds. */
  evaluationDeadlineMs: number;
  /** Computed attributes that are not DISABLED, per sandbox (AEP: 25); unset: computed/limits.ts's default. */
  computedAttributes?: number;
}

export interface SandboxConfig {
  name: string;
  /** Stable id; derived from the org and name when omitted. */
  id?: string;
  type: "production" | "development";
  default: boolean;
  limits?: Partial<SandboxLimits>;
}

export interface OrganizationConfig {
  id: string;
  sandboxes: SandboxConfig[];
}

export interface StaticTokenConfig {
  token: string;
  /** Organizations this token grants access to. */
  orgs: string[];
}

export interface AuthConfig {
  /** HS256 shared secret for signed JWTs. */
  jwtHs256Secret?: string;
  /** RS256 public key (PEM) for signed JWTs. */
  jwtRs256PublicKey?: string;
  /** A static JSON Web Key Set (RS256 / ES256 public keys, chosen by the token's `kid`). */
  jwtJwks?: { keys: Record<string, unknown>[] };
  /** An identity provider's JWKS URL (jwks_uri): fetched, cached and fetched again when its keys rotate. */
  jwtJwksUrl?: string;
  /** When set, a JWT's `iss` must equal it. */
  jwtIssuer?: string;
  /** When set, a JWT's `aud` must contain it. */
  jwtAudience?: string;
  /** Claim(s) holding the token's organization(s): a string or an array of strings. */
  jwtOrgClaim: string;
  /** Static bearer tokens. */
  staticTokens: StaticTokenConfig[];
  /** Registered client ids accepted in `x-api-key`. */
  apiKeys: string[];
  /** Operator (admin) bearer tokens; never valid as org tokens and vice versa. */
  operatorTokens: string[];
  /**
   * OAuth server-to-server credentials for `POST /ims/token/v3` (IMS's client_credentials grant):
   * each client's tokens grant its organizations. Needs `jwtHs256Secret` (the tokens are JWTs
   * signed with it); a client id is also accepted as `x-api-key`, as Adobe's is.
   */
  clients?: ClientCredentialsConfig[];
  /** Throttling of `/ims/token/v3`'s failed attempts (services/auth/token-throttle.ts has the defaults). */
  tokenThrottle?: TokenThrottleConfig;
}

export interface TokenThrottleConfig {
  /** Failed attempts a client id, or a remote address, may make in a burst (default 10). */
  failures?: number;
  /** One more failed attempt is allowed every refillMs (default 1000). */
  refillMs?: number;
  /** Remote addresses tracked at most; the least recently failing is dropped first (default 10,000). */
  maxAddresses?: number;
}

export interface ClientCredentialsConfig {
  clientId: string;
  clientSecret: string;
  orgs: string[];
}

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** PostgreSQL URL; when set, metadata lives there instead of the data directory. */
  databaseUrl?: string;
  logLevel: string;
  /** Largest accepted request body (bytes); larger ones get 413. */
  bodyLimitBytes: number;
  /** Grace period for in-flight requests on SIGTERM/SIGINT before the process exits anyway. */
  shutdownTimeoutMs: number;
  limits: SandboxLimits;
  auth: AuthConfig;
  organizations: OrganizationConfig[];
  /**
   * Data lifecycle settings (allowances per organization, work-order limits), as
   * written in the config file; validated by the hygiene module's parser.
   */
  hygiene?: unknown;
  /**
   * Edge locations: `{names, defaultLocation?}` (default one location, `edge`), and their memory
   * bounds: `maxProfiles` per location (100,000), `profileIdleMs` (25 h; 0 = never),
   * `streamingMaxProfiles` held by the streaming engine (200,000).
   */
  edge?: { names: string[]; defaultLocation?: string; maxProfiles?: number; profileIdleMs?: number; streamingMaxProfiles?: number };
  /** Embedded profile store: `worker` runs it in a worker thread (default true), off the event loop. */
  profileStore?: { worker: boolean };
  /**
   * NATS with JetStream (docs/deployment.md): a hub serves edge nodes through it; an edge node
   * reaches its site's server. Absent: the all-in-one, no NATS. `hubDomain` default `hub`.
   */
  natsUrl?: string;
  natsHubDomain?: string;
  /**
   * Streaming evaluation by `segmentd worker` processes (docs/deployment.md): the hub publishes
   * the stored changes to `partitions` profile-keyed partitions (default 64, fixed for a
   * deployment) instead of evaluating them. Needs natsUrl and databaseUrl.
   */
  streamingWorkers?: { partitions: number };
  /**
   * Batch snapshots kept on disk so the first job after a restart need not scan every profile
   * (docs/batch.md): `persist` (default true), `dir` (default `<dataDir>/snapshots`).
   * `evaluationWorkers`: worker threads that evaluate previews, estimates, edit impact and jobs
   * over the snapshots, off the event loop (default `evaluationWorkers(c)`: cores − 1, at least 1; 0: on the main thread).
   */
  batchSnapshots?: { persist: boolean; dir?: string; evaluationWorkers?: number };
  /**
   * Batch segmentation: `defaultSchedule`, the Quartz cron (UTC) of the daily schedule every
   * sandbox gets, evaluating all its batch audiences (default DEFAULT_BATCH_SCHEDULE, 01:00 UTC);
   * false: no default schedule (batch audiences run on demand or by schedules created through the API).
   * `scheduleTickMs`: how often the scheduler looks for due schedules (default 60 000).
   * `backfillChunk`: profiles a backfill writes at a time, each chunk held from the streaming
   * engine while it is written (default 2,000; smaller holds a profile's events less long).
   * `onWorkers`: on a hub with `--workers`, segment jobs are evaluated and written by the workers,
   * each over its shard of the partitions it holds, and previews, estimates and edit impact are
   * answered by them (#44; default true there; false: in the hub's process, over its own snapshot).
   */
  batch?: { defaultSchedule?: string | false; scheduleTickMs?: number; backfillChunk?: number; onWorkers?: boolean };
  /**
   * Destinations (docs/activation.md): `allowPrivateNetworks` lets destination URLs reach loopback,
   * private and link-local addresses (default false; metadata addresses stay refused); `secretKey`
   * (32 bytes, base64 or hex) encrypts stored destination secrets, else a key generated once in the
   * data directory is used; `reconcileMs`: how often the deliverer compares its running flows with
   * the stored ones (default 5000; with several hubs another hub's change arrives at once anyway).
   */
  activation?: { allowPrivateNetworks: boolean; secretKey?: string; reconcileMs?: number };
}

/** The daily batch schedule every sandbox gets unless `batch.defaultSchedule` says otherwise. */
export const DEFAULT_BATCH_SCHEDULE = "0 0 1 * * ?";

/** The default schedule's cron, or false when there is none. */
export function defaultBatchSchedule(c: Config): string | false {
  return c.batch?.defaultSchedule ?? DEFAULT_BATCH_SCHEDULE;
}

/** `batch.defaultSchedule` / SEGMENTD_BATCH_DEFAULT_SCHEDULE: a cron expression, or false / "off". */
function parseDefaultSchedule(v: unknown, what: string): string | false {
  if (v === false || v === "off" || v === "false") return false;
  if (typeof v !== "string" || v.trim() === "") throw new ConfigError(`${what} must be a Quartz cron expression (e.g. "0 0 1 * * ?") or false`);
  return v.trim();
}

/** `batch.scheduleTickMs`: 100 ms to a day. */
function parseScheduleTick(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 100 || v > 86_400_000) throw new ConfigError(`${what} must be an integer from 100 to 86400000 (ms)`);
  return v;
}

/** `batch.backfillChunk`: 100 to 100,000 profiles. */
function parseBackfillChunk(v: unknown, what: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 100 || v > 100_000) throw new ConfigError(`${what} must be an integer from 100 to 100000 (profiles)`);
  return v;
}

/** Worker threads of the evaluation pool: configured, else one fewer than the cores (at least 1). */
export function evaluationWorkers(c: Config): number {
  return c.batchSnapshots?.evaluationWorkers ?? Math.max(1, availableParallelism() - 1);
}

/** Where batch snapshot files go, or null when they are not kept. */
export function batchSnapshotDir(c: Config): string | null {
  if (c.batchSnapshots?.persist === false) return null;
  return c.batchSnapshots?.dir ?? path.join(c.dataDir, "snapshots");
}

export const DEFAULT_STREAM_PARTITIONS = 64;

/** The partition count as given (a flag, an env variable, a file): a positive integer up to 1,024. */
export function parsePartitions(v: unknown, what: string): number {
  const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1 || n > 1024) throw new ConfigError(`${what} must be an integer from 1 to 1024, got ${JSON.stringify(v)}`);
  return n;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  definitions: 4000,
  streaming: 500,
  edge: 150,
  expressionBytes: 64 * 1024,
  eventsPerProfile: 10_000,
  evaluationCost: 1_000_000_000,
  evaluationMsPerProfile: 50,
  evaluationDeadlineMs: 10_000,
};

export function defaultConfig(): Config {
  return {
    host: "127.0.0.1",
    port: 8080,
    dataDir: "./.data",
    logLevel: "info",
    bodyLimitBytes: 1024 * 1024,
    shutdownTimeoutMs: 10_000,
    limits: { ...DEFAULT_LIMITS },
    auth: { jwtOrgClaim: "org", staticTokens: [], apiKeys: [], operatorTokens: [] },
    organizations: [],
    profileStore: { worker: true },
  };
}

export class ConfigError extends Error {}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(obj: Record<string, Json>, key: string, where: string): string | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw new ConfigError(`${where}.${key} must be a string`);
  return v;
}

function num(obj: Record<string, Json>, key: string, where: string): number | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) {
    throw new ConfigError(`${where}.${key} must be a non-negative integer`);
  }
  return v;
}

function strList(obj: Record<string, Json>, key: string, where: string): string[] | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
    throw new ConfigError(`${where}.${key} must be an array of strings`);
  }
  return v as string[];
}

function limitsFrom(v: Json | undefined, where: string): Partial<SandboxLimits> {
  if (v === undefined) return {};
  if (!isObject(v)) throw new ConfigError(`${where} must be an object`);
  const out: Partial<SandboxLimits> = {};
  for (const key of ["definitions", "streaming", "edge", "expressionBytes", "eventsPerProfile", "evaluationCost", "evaluationMsPerProfile", "evaluationDeadlineMs", "computedAttributes"] as const) {
    const n = num(v, key, where);
    if (n !== undefined) out[key] = n;
  }
  return out;
}

/** Merge a parsed config file over `base`. Unknown keys are rejected so that typos do not pass silently. */
export function applyConfigFile(base: Config, raw: unknown, source: string): Config {
  if (!isObject(raw)) throw new ConfigError(`${source}: the top level must be a JSON object`);
  const known = new Set(["host", "port", "dataDir", "databaseUrl", "logLevel", "bodyLimitBytes", "shutdownTimeoutMs", "limits", "auth", "organizations", "hygiene", "edge", "profileStore", "natsUrl", "natsHubDomain", "streamingWorkers", "batchSnapshots", "batch", "activation"]);
  for (const k of Object.keys(raw)) if (!known.has(k)) throw new ConfigError(`${source}: unknown key "${k}"`);
  const c: Config = structuredClone(base);
  c.host = str(raw, "host", source) ?? c.host;
  c.port = num(raw, "port", source) ?? c.port;
  c.dataDir = str(raw, "dataDir", source) ?? c.dataDir;
  c.databaseUrl = str(raw, "databaseUrl", source) ?? c.databaseUrl;
  c.logLevel = str(raw, "logLevel", source) ?? c.logLevel;
  c.natsUrl = str(raw, "natsUrl", source) ?? c.natsUrl;
  c.natsHubDomain = str(raw, "natsHubDomain", source) ?? c.natsHubDomain;
  if (c.natsHubDomain !== undefined && !/^[a-z0-9][a-z0-9-]{0,31}$/.test(c.natsHubDomain)) throw new ConfigError(`${source}: natsHubDomain must be 1-32 lower-case letters, digits or '-'`);
  const sw = raw.streamingWorkers;
  if (sw !== undefined) {
    if (!isObject(sw)) throw new ConfigError(`${source}: streamingWorkers must be an object ({ "partitions": 64 })`);
    for (const k of Object.keys(sw)) if (k !== "partitions") throw new ConfigError(`${source}: unknown key "streamingWorkers.${k}"`);
    c.streamingWorkers = { partitions: sw.partitions === undefined ? DEFAULT_STREAM_PARTITIONS : parsePartitions(sw.partitions, `${source}: streamingWorkers.partitions`) };
  }
  c.bodyLimitBytes = num(raw, "bodyLimitBytes", source) ?? c.bodyLimitBytes;
  c.shutdownTimeoutMs = num(raw, "shutdownTimeoutMs", source) ?? c.shutdownTimeoutMs;
  c.limits = { ...c.limits, ...limitsFrom(raw.limits, `${source}: limits`) };
  const auth = raw.auth;
  if (auth !== undefined) {
    if (!isObject(auth)) throw new ConfigError(`${source}: auth must be an object`);
    const w = `${source}: auth`;
    c.auth.jwtHs256Secret = str(auth, "jwtHs256Secret", w) ?? c.auth.jwtHs256Secret;
    c.auth.jwtRs256PublicKey = str(auth, "jwtRs256PublicKey", w) ?? c.auth.jwtRs256PublicKey;
    c.auth.jwtOrgClaim = str(auth, "jwtOrgClaim", w) ?? c.auth.jwtOrgClaim;
    c.auth.jwtJwksUrl = str(auth, "jwtJwksUrl", w) ?? c.auth.jwtJwksUrl;
    c.auth.jwtIssuer = str(auth, "jwtIssuer", w) ?? c.auth.jwtIssuer;
    c.auth.jwtAudience = str(auth, "jwtAudience", w) ?? c.auth.jwtAudience;
    const jwks = auth.jwtJwks;
    if (jwks !== undefined) {
      if (!isObject(jwks) || !Array.isArray(jwks.keys) || !jwks.keys.every(isObject)) throw new ConfigError(`${w}.jwtJwks must be a JSON Web Key Set ({ "keys": [ … ] })`);
      c.auth.jwtJwks = { keys: jwks.keys };
    }
    c.auth.apiKeys = strList(auth, "apiKeys", w) ?? c.auth.apiKeys;
    c.auth.operatorTokens = strList(auth, "operatorTokens", w) ?? c.auth.operatorTokens;
    const cl = auth.clients;
    if (cl !== undefined) {
      if (!Array.isArray(cl)) throw new ConfigError(`${w}.clients must be an array`);
      c.auth.clients = cl.map((t, i) => {
        const where = `${w}.clients[${i}]`;
        if (!isObject(t)) throw new ConfigError(`${where} must be an object`);
        const clientId = str(t, "clientId", where);
        const clientSecret = str(t, "clientSecret", where);
        const orgs = strList(t, "orgs", where);
        if (!clientId || !clientSecret || !orgs) throw new ConfigError(`${where} needs "clientId", "clientSecret" and "orgs"`);
        return { clientId, clientSecret, orgs };
      });
    }
    const tt = auth.tokenThrottle;
    if (tt !== undefined) {
      const where = `${w}.tokenThrottle`;
      if (!isObject(tt)) throw new ConfigError(`${where} must be an object`);
      const throttle: TokenThrottleConfig = {};
      for (const k of Object.keys(tt)) {
        if (k !== "failures" && k !== "refillMs" && k !== "maxAddresses") throw new ConfigError(`${where}: unknown key "${k}"`);
        const n = num(tt, k, where);
        if (n === undefined || n < 1) throw new ConfigError(`${where}.${k} must be a positive integer`);
        throttle[k] = n;
      }
      c.auth.tokenThrottle = throttle;
    }
    const st = auth.staticTokens;
    if (st !== undefined) {
      if (!Array.isArray(st)) throw new ConfigError(`${w}.staticTokens must be an array`);
      c.auth.staticTokens = st.map((t, i) => {
        if (!isObject(t)) throw new ConfigError(`${w}.staticTokens[${i}] must be an object`);
        const token = str(t, "token", `${w}.staticTokens[${i}]`);
        const orgs = strList(t, "orgs", `${w}.staticTokens[${i}]`);
        if (!token || !orgs) throw new ConfigError(`${w}.staticTokens[${i}] needs "token" and "orgs"`);
        return { token, orgs };
      });
    }
  }
  if (raw.hygiene !== undefined) c.hygiene = raw.hygiene;
  const edge = raw.edge;
  if (edge !== undefined) {
    if (!isObject(edge)) throw new ConfigError(`${source}: edge must be an object`);
    for (const k of Object.keys(edge)) {
      if (!["names", "defaultLocation", "maxProfiles", "profileIdleMs", "streamingMaxProfiles"].includes(k)) throw new ConfigError(`${source}: unknown key "edge.${k}"`);
    }
    const names = strList(edge, "names", `${source}: edge`) ?? c.edge?.names ?? ["edge"];
    if (names.length === 0) throw new ConfigError(`${source}: edge.names must list at least one location`);
    const defaultLocation = str(edge, "defaultLocation", `${source}: edge`);
    if (defaultLocation !== undefined && !names.includes(defaultLocation)) {
      throw new ConfigError(`${source}: edge.defaultLocation "${defaultLocation}" is not one of edge.names`);
    }
    c.edge = defaultLocation === undefined ? { names } : { names, defaultLocation };
    for (const k of ["maxProfiles", "profileIdleMs", "streamingMaxProfiles"] as const) {
      const n = num(edge, k, `${source}: edge`);
      if (n === undefined) continue;
      if (!Number.isSafeInteger(n) || n < (k === "profileIdleMs" ? 0 : 1)) throw new ConfigError(`${source}: edge.${k} must be a ${k === "profileIdleMs" ? "non-negative" : "positive"} integer`);
      c.edge[k] = n;
    }
  }
  const ps = raw.profileStore;
  if (ps !== undefined) {
    if (!isObject(ps)) throw new ConfigError(`${source}: profileStore must be an object`);
    for (const k of Object.keys(ps)) if (k !== "worker") throw new ConfigError(`${source}: unknown key "profileStore.${k}"`);
    if (ps.worker !== undefined && typeof ps.worker !== "boolean") throw new ConfigError(`${source}: profileStore.worker must be a boolean`);
    if (typeof ps.worker === "boolean") c.profileStore = { worker: ps.worker };
  }
  const bs = raw.batchSnapshots;
  if (bs !== undefined) {
    if (!isObject(bs)) throw new ConfigError(`${source}: batchSnapshots must be an object ({ "persist": true, "dir": "…" })`);
    for (const k of Object.keys(bs)) if (k !== "persist" && k !== "dir" && k !== "evaluationWorkers") throw new ConfigError(`${source}: unknown key "batchSnapshots.${k}"`);
    if (bs.persist !== undefined && typeof bs.persist !== "boolean") throw new ConfigError(`${source}: batchSnapshots.persist must be a boolean`);
    if (bs.dir === "") throw new ConfigError(`${source}: batchSnapshots.dir must not be empty`);
    const persist = typeof bs.persist === "boolean" ? bs.persist : (c.batchSnapshots?.persist ?? true);
    const dir = str(bs, "dir", `${source}: batchSnapshots`) ?? c.batchSnapshots?.dir;
    const workers = bs.evaluationWorkers ?? c.batchSnapshots?.evaluationWorkers;
    if (workers !== undefined && !(Number.isSafeInteger(workers) && (workers as number) >= 0 && (workers as number) <= 64)) throw new ConfigError(`${source}: batchSnapshots.evaluationWorkers must be an integer from 0 to 64`);
    c.batchSnapshots = { persist, ...(dir === undefined ? {} : { dir }), ...(workers === undefined ? {} : { evaluationWorkers: workers as number }) };
  }
  const batch = raw.batch;
  if (batch !== undefined) {
    if (!isObject(batch)) throw new ConfigError(`${source}: batch must be an object ({ "defaultSchedule": "0 0 1 * * ?" })`);
    for (const k of Object.keys(batch)) if (k !== "defaultSchedule" && k !== "scheduleTickMs" && k !== "backfillChunk" && k !== "onWorkers") throw new ConfigError(`${source}: unknown key "batch.${k}"`);
    if (batch.defaultSchedule !== undefined) c.batch = { ...c.batch, defaultSchedule: parseDefaultSchedule(batch.defaultSchedule, `${source}: batch.defaultSchedule`) };
    if (batch.scheduleTickMs !== undefined) c.batch = { ...c.batch, scheduleTickMs: parseScheduleTick(batch.scheduleTickMs, `${source}: batch.scheduleTickMs`) };
    if (batch.backfillChunk !== undefined) c.batch = { ...c.batch, backfillChunk: parseBackfillChunk(batch.backfillChunk, `${source}: batch.backfillChunk`) };
    if (batch.onWorkers !== undefined) {
      if (typeof batch.onWorkers !== "boolean") throw new ConfigError(`${source}: batch.onWorkers must be true or false`);
      c.batch = { ...c.batch, onWorkers: batch.onWorkers };
    }
  }
  const act = raw.activation;
  if (act !== undefined) {
    if (!isObject(act)) throw new ConfigError(`${source}: activation must be an object ({ "allowPrivateNetworks": false })`);
    for (const k of Object.keys(act)) if (k !== "allowPrivateNetworks" && k !== "secretKey" && k !== "reconcileMs") throw new ConfigError(`${source}: unknown key "activation.${k}"`);
    if (act.reconcileMs !== undefined && (typeof act.reconcileMs !== "number" || !Number.isInteger(act.reconcileMs) || act.reconcileMs < 100 || act.reconcileMs > 3_600_000)) {
      throw new ConfigError(`${source}: activation.reconcileMs must be an integer from 100 to 3600000 (ms)`);
    }
    if (act.allowPrivateNetworks !== undefined && typeof act.allowPrivateNetworks !== "boolean") throw new ConfigError(`${source}: activation.allowPrivateNetworks must be a boolean`);
    if (act.secretKey !== undefined && typeof act.secretKey !== "string") throw new ConfigError(`${source}: activation.secretKey must be a string`);
    const allowPrivateNetworks = typeof act.allowPrivateNetworks === "boolean" ? act.allowPrivateNetworks : (c.activation?.allowPrivateNetworks ?? false);
    const secretKey = typeof act.secretKey === "string" ? act.secretKey : c.activation?.secretKey;
    const reconcileMs = typeof act.reconcileMs === "number" ? act.reconcileMs : c.activation?.reconcileMs;
    c.activation = { allowPrivateNetworks, ...(secretKey === undefined ? {} : { secretKey }), ...(reconcileMs === undefined ? {} : { reconcileMs }) };
  }
  const orgs = raw.organizations;
  if (orgs !== undefined) {
    if (!Array.isArray(orgs)) throw new ConfigError(`${source}: organizations must be an array`);
    c.organizations = orgs.map((o, i) => {
      const w = `${source}: organizations[${i}]`;
      if (!isObject(o)) throw new ConfigError(`${w} must be an object`);
      const id = str(o, "id", w);
      if (!id) throw new ConfigError(`${w}.id is required`);
      const sbs = o.sandboxes;
      if (!Array.isArray(sbs) || sbs.length === 0) throw new ConfigError(`${w}.sandboxes must be a non-empty array`);
      return {
        id,
        sandboxes: sbs.map((s, j) => {
          const ws = `${w}.sandboxes[${j}]`;
          if (!isObject(s)) throw new ConfigError(`${ws} must be an object`);
          const name = str(s, "name", ws);
          if (!name) throw new ConfigError(`${ws}.name is required`);
          const type = str(s, "type", ws) ?? "development";
          if (type !== "production" && type !== "development") {
            throw new ConfigError(`${ws}.type must be "production" or "development"`);
          }
          const def = s.default;
          if (def !== undefined && typeof def !== "boolean") throw new ConfigError(`${ws}.default must be a boolean`);
          const sandbox: SandboxConfig = { name, type, default: def ?? false, limits: limitsFrom(s.limits, `${ws}.limits`) };
          const sid = str(s, "id", ws);
          if (sid) sandbox.id = sid;
          return sandbox;
        }),
      };
    });
  }
  return c;
}

/** Environment variables override the file. */
export function applyEnv(base: Config, env: NodeJS.ProcessEnv): Config {
  const c: Config = structuredClone(base);
  if (env.SEGMENTD_HOST) c.host = env.SEGMENTD_HOST;
  if (env.SEGMENTD_PORT) c.port = parsePort(env.SEGMENTD_PORT, "SEGMENTD_PORT");
  if (env.SEGMENTD_DATA_DIR) c.dataDir = env.SEGMENTD_DATA_DIR;
  if (env.SEGMENTD_DATABASE_URL) c.databaseUrl = env.SEGMENTD_DATABASE_URL;
  if (env.SEGMENTD_LOG_LEVEL) c.logLevel = env.SEGMENTD_LOG_LEVEL;
  if (env.SEGMENTD_NATS_URL) c.natsUrl = env.SEGMENTD_NATS_URL;
  if (env.SEGMENTD_STREAM_PARTITIONS) c.streamingWorkers = { partitions: parsePartitions(env.SEGMENTD_STREAM_PARTITIONS, "SEGMENTD_STREAM_PARTITIONS") };
  if (env.SEGMENTD_JWT_HS256_SECRET) c.auth.jwtHs256Secret = env.SEGMENTD_JWT_HS256_SECRET;
  if (env.SEGMENTD_JWT_JWKS_URL) c.auth.jwtJwksUrl = env.SEGMENTD_JWT_JWKS_URL;
  if (env.SEGMENTD_JWT_RS256_PUBLIC_KEY_FILE) {
    c.auth.jwtRs256PublicKey = readFileSync(env.SEGMENTD_JWT_RS256_PUBLIC_KEY_FILE, "utf8");
  }
  if (env.SEGMENTD_BODY_LIMIT_BYTES) c.bodyLimitBytes = parsePort(env.SEGMENTD_BODY_LIMIT_BYTES, "SEGMENTD_BODY_LIMIT_BYTES", Number.MAX_SAFE_INTEGER);
  const worker = env.SEGMENTD_PROFILE_STORE_WORKER;
  if (worker) {
    if (worker === "1" || worker === "true") c.profileStore = { worker: true };
    else if (worker === "0" || worker === "false") c.profileStore = { worker: false };
    else throw new ConfigError(`SEGMENTD_PROFILE_STORE_WORKER must be 1, 0, true or false, got "${worker}"`);
  }
  const persist = env.SEGMENTD_BATCH_SNAPSHOTS_PERSIST;
  if (persist) {
    if (persist !== "1" && persist !== "true" && persist !== "0" && persist !== "false") throw new ConfigError(`SEGMENTD_BATCH_SNAPSHOTS_PERSIST must be 1, 0, true or false, got "${persist}"`);
    c.batchSnapshots = { ...c.batchSnapshots, persist: persist === "1" || persist === "true" };
  }
  if (env.SEGMENTD_BATCH_SNAPSHOT_DIR) c.batchSnapshots = { ...c.batchSnapshots, persist: c.batchSnapshots?.persist ?? true, dir: env.SEGMENTD_BATCH_SNAPSHOT_DIR };
  if (env.SEGMENTD_BATCH_DEFAULT_SCHEDULE) c.batch = { ...c.batch, defaultSchedule: parseDefaultSchedule(env.SEGMENTD_BATCH_DEFAULT_SCHEDULE, "SEGMENTD_BATCH_DEFAULT_SCHEDULE") };
  if (env.SEGMENTD_EVALUATION_WORKERS) c.batchSnapshots = { ...c.batchSnapshots, persist: c.batchSnapshots?.persist ?? true, evaluationWorkers: parsePort(env.SEGMENTD_EVALUATION_WORKERS, "SEGMENTD_EVALUATION_WORKERS", 64) };
  return c;
}

export function parsePort(text: string, what: string, max = 65535): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > max) throw new ConfigError(`${what} must be an integer between 0 and ${max}, got "${text}"`);
  return n;
}

export interface LoadConfigOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Explicit config file; an error when missing (the default file is optional). */
  configFile?: string;
  overrides?: Partial<Pick<Config, "host" | "port" | "dataDir" | "databaseUrl" | "logLevel" | "natsUrl" | "streamingWorkers">>;
}

export function loadConfig(options: LoadConfigOptions = {}): Config {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  let c = defaultConfig();
  const explicit = options.configFile ?? env.SEGMENTD_CONFIG;
  const file = explicit ? path.resolve(cwd, explicit) : path.join(cwd, "segmentd.config.json");
  if (existsSync(file)) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(file, "utf8"));
    } catch (err) {
      throw new ConfigError(`${file}: not valid JSON (${(err as Error).message})`);
    }
    c = applyConfigFile(c, raw, file);
  } else if (explicit) {
    throw new ConfigError(`config file not found: ${file}`);
  }
  c = applyEnv(c, env);
  const o = options.overrides ?? {};
  for (const key of ["host", "port", "dataDir", "databaseUrl", "logLevel", "natsUrl", "streamingWorkers"] as const) {
    if (o[key] !== undefined) (c as unknown as Record<string, unknown>)[key] = o[key];
  }
  c.dataDir = path.resolve(cwd, c.dataDir);
  if (c.batchSnapshots?.dir !== undefined) c.batchSnapshots.dir = path.resolve(cwd, c.batchSnapshots.dir);
  if ((c.auth.clients?.length ?? 0) > 0 && !c.auth.jwtHs256Secret) {
    throw new ConfigError("auth.clients need auth.jwtHs256Secret (or SEGMENTD_JWT_HS256_SECRET): the tokens /ims/token/v3 issues are signed with it");
  }
  if (c.streamingWorkers !== undefined && (c.natsUrl === undefined || c.databaseUrl === undefined)) {
    throw new ConfigError("streaming workers need NATS and PostgreSQL: give natsUrl (--nats) and databaseUrl (--database-url) as well");
  }
  return c;
}
