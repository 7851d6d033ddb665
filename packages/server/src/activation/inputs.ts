/**
 * Request bodies of the destinations API → what is stored: base connection auth, target
 * connection params, flow transformations (AEP's segmentSelectors / profileSelectors) and
 * segmentd's delivery policy. Every check throws a 400 with an exact code and message;
 * nothing is stored before all of them pass. URL reachability (DNS) is checked by the
 * service after these.
 */
import { ApiError } from "../services/errors.js";
import { FILE_EXPORT_MODES, FILE_FREQUENCIES } from "./connection-specs.js";
import type { DeliveryPolicy, DestinationKind, FileTarget, WebhookAuth } from "./types.js";
import { checkTargetUrl, DestinationAddressError, hostOf, parseUrlOf, URL_CODES } from "./url-safety.js";

export const DESTINATION_CODE = "SEGMENTD-DESTINATION-400";
export const HEADER_CODE = "SEGMENTD-DESTINATION-HEADER-400";

export const LIMITS = {
  name: 256,
  description: 4096,
  headers: 20,
  headerName: 64,
  headerValue: 1024,
  segmentSelectors: 100,
  profileSelectors: 200,
  attributePath: 256,
  secret: 4096,
  /** Rows of each kind per sandbox. */
  perSandbox: 200,
} as const;

export function invalid(message: string, code: string = DESTINATION_CODE): ApiError {
  return new ApiError(400, code, message);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function str(o: Obj, key: string, where: string, max: number, required = true): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === "") {
    if (required) throw invalid(`${where}.${key} is required`);
    return undefined;
  }
  if (typeof v !== "string") throw invalid(`${where}.${key} must be a string`);
  if (v.length > max) throw invalid(`${where}.${key} is longer than ${max} characters`);
  return v;
}

// ---- base connections -------------------------------------------------------------

const AUTH_NAMES: Record<string, WebhookAuth["type"]> = { none: "none", bearertoken: "bearer", bearer: "bearer", oauth2clientcredentials: "oauth2", oauth2: "oauth2" };

/** `auth: {specName, params}` of a base connection; absent means none. */
export function parseAuth(kind: DestinationKind, auth: unknown): WebhookAuth {
  if (auth === undefined || auth === null) return { type: "none" };
  if (!isObj(auth)) throw invalid("auth must be an object {specName, params}");
  const name = typeof auth.specName === "string" ? auth.specName.replace(/[\s_-]/g, "").toLowerCase() : "none";
  const type = AUTH_NAMES[name];
  if (type === undefined) throw invalid(`auth.specName "${String(auth.specName).slice(0, 64)}" is not one of: None, Bearer Token, OAuth2 Client Credentials`);
  if (type !== "none" && kind !== "webhook") throw invalid(`auth.specName "${String(auth.specName)}" is not offered by this connection spec (only None)`);
  const params = auth.params ?? {};
  if (!isObj(params)) throw invalid("auth.params must be an object");
  if (type === "none") return { type };
  if (type === "bearer") return { type, token: str(params, "token", "auth.params", LIMITS.secret)! };
  const tokenUrl = str(params, "accessTokenUrl", "auth.params", 2048)!;
  checkTargetUrl(tokenUrl, "auth.params.accessTokenUrl");
  const scope = str(params, "scope", "auth.params", 1024, false);
  return {
    type,
    tokenUrl,
    clientId: str(params, "clientId", "auth.params", 1024)!,
    clientSecret: str(params, "clientSecret", "auth.params", LIMITS.secret)!,
    ...(scope === undefined ? {} : { scope }),
  };
}

/** What a response shows of an auth: the non-secret parameters, secrets as "***". */
export function authView(auth: WebhookAuth): { specName: string; params: Obj } {
  switch (auth.type) {
    case "none":
      return { specName: "None", params: {} };
    case "bearer":
      return { specName: "Bearer Token", params: { token: "***" } };
    case "oauth2":
      return { specName: "OAuth2 Client Credentials", params: { accessTokenUrl: auth.tokenUrl, clientId: auth.clientId, clientSecret: "***", ...(auth.scope === undefined ? {} : { scope: auth.scope }) } };
  }
}

// ---- target connections -----------------------------------------------------------

/** Names a client may not set: the transport's own, the auth, and the signature. */
const RESERVED_HEADERS = new Set([
  "host", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect",
  "proxy-authorization", "proxy-connection", "authorization", "webhook-id", "webhook-timestamp", "webhook-signature", "cookie",
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function parseHeaders(v: unknown): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw invalid("params.headers must be an object of header names to string values", HEADER_CODE);
  const entries = Object.entries(v);
  if (entries.length > LIMITS.headers) throw invalid(`params.headers has ${entries.length} headers; at most ${LIMITS.headers} are allowed`, HEADER_CODE);
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    const shown = name.slice(0, LIMITS.headerName);
    if (name.length === 0 || name.length > LIMITS.headerName || !TOKEN.test(name)) throw invalid(`params.headers: "${shown}" is not a valid header name (a token of at most ${LIMITS.headerName} characters)`, HEADER_CODE);
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower) || lower.startsWith("proxy-") || lower.startsWith("sec-")) throw invalid(`params.headers: "${name}" is set by segmentd and cannot be configured`, HEADER_CODE);
    if (seen.has(lower)) throw invalid(`params.headers: "${name}" is given twice`, HEADER_CODE);
    seen.add(lower);
    if (typeof value !== "string") throw invalid(`params.headers.${name} must be a string`, HEADER_CODE);
    if (value.length > LIMITS.headerValue) throw invalid(`params.headers.${name} is longer than ${LIMITS.headerValue} characters`, HEADER_CODE);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) throw invalid(`params.headers.${name} contains a control character`, HEADER_CODE);
    out[name] = value;
  }
  return out;
}

export type TargetParams =
  | { kind: "webhook"; url: string; headers: Record<string, string> }
  | { kind: "nats"; subject: string; serverUrl?: string }
  | Omit<FileTarget, "kind"> & { kind: "file" };

const SUBJECT = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
/** First subject tokens that are not a destination's: segmentd's own streams (cluster mode) and NATS reply inboxes. */
const RESERVED_SUBJECT_ROOTS = new Set(["segmentd", "_inbox"]);

/**
 * A NATS server URL's form, without DNS: `nats://` or `tls://` (TLS required), a host, an optional
 * port, nothing else (no credentials, path, query). Returns the same host and port as an http URL,
 * which is what the address checks (`assertPublicTarget`) read: the WHATWG parser normalizes
 * IPv4 spellings (`127.1`, `0x7f.1`) only for special schemes such as http.
 */
export function checkNatsUrl(raw: string, what = "params.serverUrl"): { url: URL; tls: boolean; hostPort: string; addressUrl: string } {
  const u = parseUrlOf(raw, what, ["nats", "tls"]);
  if (u.username !== "" || u.password !== "") throw new DestinationAddressError(URL_CODES.url, `${what} must not contain credentials (user:password@)`, "");
  if ((u.pathname !== "" && u.pathname !== "/") || u.search !== "" || u.hash !== "") throw new DestinationAddressError(URL_CODES.url, `${what} must be only a scheme, a host and a port (nats://host:4222)`, "");
  let addressUrl: URL;
  try {
    addressUrl = new URL(`http://${u.host}/`);
  } catch {
    throw new DestinationAddressError(URL_CODES.url, `${what} is not a valid absolute URL`, "");
  }
  const host = hostOf(addressUrl);
  if (host === "") throw new DestinationAddressError(URL_CODES.url, `${what} has no host`, "");
  const port = u.port === "" ? "4222" : u.port;
  const hostPort = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  return { url: u, tls: u.protocol === "tls:", hostPort, addressUrl: addressUrl.toString() };
}

function oneOf<T extends string>(o: Obj, key: string, allowed: readonly T[], dflt: T): T {
  const v = o[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "string" || !(allowed as readonly string[]).includes(v)) throw invalid(`params.${key} must be one of: ${allowed.join(", ")}`);
  return v as T;
}

export function parseTargetParams(kind: DestinationKind, params: unknown): TargetParams {
  if (params === undefined || params === null) params = {};
  if (!isObj(params)) throw invalid("params must be an object");
  const allowed: Record<DestinationKind, string[]> = { webhook: ["httpEndpoint", "headers"], nats: ["subject", "serverUrl"], file: ["format", "compression", "exportMode", "frequency"] };
  for (const k of Object.keys(params)) if (!allowed[kind].includes(k)) throw invalid(`params.${k.slice(0, 64)} is not a parameter of this connection spec (allowed: ${allowed[kind].join(", ")})`);
  switch (kind) {
    case "webhook": {
      const url = str(params, "httpEndpoint", "params", 100_000)!;
      checkTargetUrl(url, "params.httpEndpoint");
      return { kind, url, headers: parseHeaders(params.headers) };
    }
    case "nats": {
      const subject = str(params, "subject", "params", 200)!;
      if (!SUBJECT.test(subject)) throw invalid("params.subject must be dot-separated tokens of letters, digits, _ and - (no wildcards or spaces)");
      const root = subject.split(".")[0]!.toLowerCase();
      if (RESERVED_SUBJECT_ROOTS.has(root)) throw invalid(`params.subject must not start with "${subject.split(".")[0]!}." (reserved for segmentd's own streams and NATS inboxes)`);
      const serverUrl = str(params, "serverUrl", "params", 100_000, false);
      if (serverUrl === undefined) return { kind, subject };
      checkNatsUrl(serverUrl);
      return { kind, subject, serverUrl };
    }
    case "file":
      return {
        kind,
        format: oneOf(params, "format", ["ndjson", "csv"] as const, "ndjson"),
        gzip: oneOf(params, "compression", ["NONE", "GZIP"] as const, "NONE") === "GZIP",
        mode: oneOf(params, "exportMode", FILE_EXPORT_MODES, "DAILY_FULL_EXPORT") === "DAILY_FULL_EXPORT" ? "full" : "incremental",
        frequency: oneOf(params, "frequency", FILE_FREQUENCIES, "DAILY"),
      };
  }
}

// ---- flows --------------------------------------------------------------------------

export const DEFAULT_DELIVERY: DeliveryPolicy = {
  maxBatchSize: 100,
  maxWaitMs: 200,
  concurrency: 2,
  ratePerSecond: 0,
  retryPeriodMs: 24 * 3600_000,
  timeoutMs: 5000,
};

const DELIVERY_BOUNDS: Record<keyof DeliveryPolicy, [number, number]> = {
  maxBatchSize: [1, 1000],
  maxWaitMs: [0, 60_000],
  concurrency: [1, 32],
  ratePerSecond: [0, 10_000],
  retryPeriodMs: [1000, 7 * 24 * 3600_000],
  timeoutMs: [100, 60_000],
};

export function parseDelivery(v: unknown, base: DeliveryPolicy = DEFAULT_DELIVERY): DeliveryPolicy {
  if (v === undefined || v === null) return { ...base };
  if (!isObj(v)) throw invalid("delivery must be an object");
  const out = { ...base };
  for (const [k, value] of Object.entries(v)) {
    const bounds = DELIVERY_BOUNDS[k as keyof DeliveryPolicy];
    if (bounds === undefined) throw invalid(`delivery.${k.slice(0, 64)} is not a delivery setting (allowed: ${Object.keys(DELIVERY_BOUNDS).join(", ")})`);
    if (typeof value !== "number" || !Number.isInteger(value) || value < bounds[0] || value > bounds[1]) throw invalid(`delivery.${k} must be an integer from ${bounds[0]} to ${bounds[1]}`);
    out[k as keyof DeliveryPolicy] = value;
  }
  return out;
}

/** A segment selector as stored: AEP's value (echoed back) plus what segmentd decided. */
export interface StoredSegmentSelector {
  id: string;
  /** The selector's value as given (name, description, exportMode, schedule, …), id included. */
  value: Obj;
  startTime: number;
  addedAt: number;
}

export interface StoredProfileSelectors {
  attributes: string[];
  identityNamespaces: string[];
  /** The selectors as given, normalized (echoed back). */
  selectors: Obj[];
}

export interface FlowTransformations {
  segmentSelectors: StoredSegmentSelector[];
  profileSelectors: StoredProfileSelectors;
}

const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const NAMESPACE = /^[A-Za-z0-9_.-]{1,64}$/;

/** `schedule.startDate` ("YYYY-MM-DD") and `startTime` ("HH:mm"), UTC, as epoch ms; absent: `now`. */
function startOf(value: Obj, where: string, now: number): number {
  const schedule = value.schedule;
  if (schedule === undefined || schedule === null) return now;
  if (!isObj(schedule)) throw invalid(`${where}.schedule must be an object`);
  const date = schedule.startDate;
  if (date === undefined) return now;
  if (typeof date !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(date)) throw invalid(`${where}.schedule.startDate must be a date YYYY-MM-DD`);
  const time = schedule.startTime ?? "00:00";
  if (typeof time !== "string" || !/^([01]\d|2[0-3]):[0-5]\d$/.test(time)) throw invalid(`${where}.schedule.startTime must be a time HH:mm (UTC)`);
  const ms = Date.parse(`${date}T${time}:00Z`);
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== date) throw invalid(`${where}.schedule.startDate is not a calendar date`);
  return ms;
}

/**
 * `transformations` of a flow (AEP: one GeneralTransform with segmentSelectors and
 * profileSelectors). `previous` keeps each audience's addedAt (and start) across updates.
 */
export function parseTransformations(v: unknown, now: number, previous: StoredSegmentSelector[] = []): FlowTransformations {
  if (v === undefined || v === null) return { segmentSelectors: [], profileSelectors: { attributes: [], identityNamespaces: [], selectors: [] } };
  if (!Array.isArray(v)) throw invalid("transformations must be an array");
  if (v.length > 1) throw invalid("transformations must hold one GeneralTransform");
  if (v.length === 0) return parseTransformations(undefined, now);
  const t = v[0] as unknown;
  if (!isObj(t)) throw invalid("transformations[0] must be an object");
  if (t.name !== undefined && t.name !== "GeneralTransform") throw invalid('transformations[0].name must be "GeneralTransform"');
  const params = t.params ?? {};
  if (!isObj(params)) throw invalid("transformations[0].params must be an object");
  const before = new Map(previous.map((s) => [s.id, s]));
  const selectorsOf = (key: string, max: number): unknown[] => {
    const holder = params[key];
    if (holder === undefined || holder === null) return [];
    if (!isObj(holder)) throw invalid(`transformations[0].params.${key} must be an object {selectors: [...]}`);
    const list = holder.selectors ?? [];
    if (!Array.isArray(list)) throw invalid(`transformations[0].params.${key}.selectors must be an array`);
    if (list.length > max) throw invalid(`transformations[0].params.${key}.selectors has ${list.length} entries; at most ${max} are allowed`);
    return list;
  };
  const segmentSelectors: StoredSegmentSelector[] = [];
  const seen = new Set<string>();
  selectorsOf("segmentSelectors", LIMITS.segmentSelectors).forEach((s, i) => {
    const where = `segmentSelectors.selectors[${i}]`;
    if (!isObj(s)) throw invalid(`${where} must be an object {type, value}`);
    if (s.type !== "PLATFORM_SEGMENT") throw invalid(`${where}.type must be "PLATFORM_SEGMENT"`);
    if (!isObj(s.value)) throw invalid(`${where}.value must be an object with the audience id`);
    const id = str(s.value, "id", `${where}.value`, 256)!;
    if (seen.has(id)) throw invalid(`${where}: audience ${id} is selected twice`);
    seen.add(id);
    const { createTime: _c, updateTime: _u, ...value } = s.value;
    const old = before.get(id);
    const startTime = value.schedule === undefined && old !== undefined ? old.startTime : startOf(value, `${where}.value`, old?.addedAt ?? now);
    segmentSelectors.push({ id, value, startTime, addedAt: old?.addedAt ?? now });
  });
  const attributes: string[] = [];
  const identityNamespaces: string[] = [];
  const selectors: Obj[] = [];
  selectorsOf("profileSelectors", LIMITS.profileSelectors).forEach((s, i) => {
    const where = `profileSelectors.selectors[${i}]`;
    if (!isObj(s)) throw invalid(`${where} must be an object {type, value}`);
    if (s.type !== "JSON_PATH") throw invalid(`${where}.type must be "JSON_PATH"`);
    if (!isObj(s.value)) throw invalid(`${where}.value must be an object {path, operator}`);
    if (s.value.operator !== undefined && s.value.operator !== "EXISTS") throw invalid(`${where}.value.operator must be "EXISTS"`);
    let path = str(s.value, "path", `${where}.value`, LIMITS.attributePath)!;
    if (path.startsWith("xdm:")) path = path.slice(4);
    const identity = s.value.identity;
    let ns: string | null = null;
    if (isObj(identity) && typeof identity.namespace === "string") ns = identity.namespace;
    else if (path.startsWith("identityMap.")) ns = path.slice("identityMap.".length);
    if (ns !== null) {
      if (!NAMESPACE.test(ns)) throw invalid(`${where}: "${ns.slice(0, 64)}" is not an identity namespace code`);
      const lower = ns.toLowerCase();
      if (!identityNamespaces.includes(lower)) identityNamespaces.push(lower);
    } else {
      if (!PATH.test(path)) throw invalid(`${where}.value.path "${path.slice(0, 64)}" is not an XDM field path (dot-separated names)`);
      if (!attributes.includes(path)) attributes.push(path);
    }
    selectors.push({ type: "JSON_PATH", value: { ...s.value, path, operator: "EXISTS" } });
  });
  return { segmentSelectors, profileSelectors: { attributes, identityNamespaces, selectors } };
}

/** AEP's transformations as a response shows them (and as a JSON Patch edits them). */
export function renderTransformations(t: FlowTransformations): Obj[] {
  return [
    {
      name: "GeneralTransform",
      params: {
        profileSelectors: { selectors: t.profileSelectors.selectors },
        segmentSelectors: {
          selectors: t.segmentSelectors.map((s) => ({
            type: "PLATFORM_SEGMENT",
            value: { ...s.value, id: s.id, createTime: String(Math.floor(s.addedAt / 1000)), updateTime: String(Math.floor(s.addedAt / 1000)) },
          })),
        },
      },
    },
  ];
}
