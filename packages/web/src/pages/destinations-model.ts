/**
 * The Destinations page's pure logic (no DOM, unit-tested in test/destinations.test.ts):
 * the create form's draft — a webhook, a NATS JetStream subject or a file export — → the three Flow Service bodies
 * (base connection, target connection, flow), the form's checks, custom headers typed as
 * "Name: value" lines, and a dataflow's health, lag and last errors in words.
 */
import { PROFILE_FLOW_SPEC_ID, SPEC_IDS, type DeliveryStats, type Flow, type FlowRun } from "../api/destinations.js";

export const FILE_FREQUENCIES = ["DAILY", "EVERY_3_HOURS", "EVERY_6_HOURS", "EVERY_8_HOURS", "EVERY_12_HOURS"] as const;
export type FileFrequency = (typeof FILE_FREQUENCIES)[number];

/** A file export's settings (docs/activation.md "File export"). */
export interface FileDraft {
  format: "ndjson" | "csv";
  gzip: boolean;
  /** Every run writes every member, or the first run does and later ones the changes since the previous. */
  mode: "DAILY_FULL_EXPORT" | "FIRST_FULL_THEN_INCREMENTAL";
  frequency: FileFrequency;
  /** The first export's UTC date ("YYYY-MM-DD") and time ("HH:mm"); no date: now. */
  startDate: string;
  startTime: string;
}

export const DEFAULT_FILE: FileDraft = { format: "ndjson", gzip: false, mode: "DAILY_FULL_EXPORT", frequency: "DAILY", startDate: "", startTime: "" };

/** A NATS JetStream subject's settings (docs/activation.md "NATS JetStream"). */
export interface NatsDraft {
  subject: string;
  /** nats://host:port or tls://host:port; empty: the server's own NATS (natsUrl). */
  serverUrl: string;
}

export type DestinationKindDraft = "webhook" | "nats" | "file";

export interface DestinationDraft {
  /**
   * Absent: a webhook. A file export ignores the endpoint, authentication, headers and delivery
   * settings; a NATS subject ignores the endpoint, authentication and headers.
   */
  kind?: DestinationKindDraft;
  file?: FileDraft;
  nats?: NatsDraft;
  name: string;
  url: string;
  auth: "none" | "bearer";
  token: string;
  /** One "Name: value" per line. */
  headers: string;
  audienceIds: string[];
  /** XDM attribute paths, e.g. person.name.firstName. */
  attributes: string[];
  /** Identity namespaces; none selected sends every namespace. */
  namespaces: string[];
  retryPeriodSeconds: number;
  maxBatchSize: number;
}

export type DraftField = "name" | "url" | "token" | "headers" | "audiences" | "attributes" | "retryPeriodSeconds" | "maxBatchSize" | "startDate" | "startTime" | "subject" | "serverUrl";
export type DraftErrors = Partial<Record<DraftField, string>>;

export const DEFAULT_RETRY_SECONDS = 86_400;
export const DEFAULT_BATCH_SIZE = 100;
/** The API's limits (docs/activation.md "Errors and limits"), said before a round trip. */
const MAX_HEADERS = 20;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
const ATTRIBUTE_PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
/** The server's subject rule (activation/inputs.ts): dot-separated tokens, no wildcards. */
const SUBJECT = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const RESERVED_SUBJECT_ROOTS = ["segmentd", "_inbox"];
const NATS_URL = /^(nats|tls):\/\/[^/\s?#@]+\/?$/i;

/** "X-Tenant: acme" lines → headers; blank lines are skipped; each bad line is named by its number. */
export function parseHeaders(text: string): { headers: Record<string, string>; error?: string } {
  const headers: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) return { headers, error: `Line ${i + 1}: write a header as “Name: value”.` };
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (!HEADER_NAME.test(name)) return { headers, error: `Line ${i + 1}: “${name}” is not a header name (letters, digits and - only, at most 64).` };
    if (Object.keys(headers).some((k) => k.toLowerCase() === name.toLowerCase())) return { headers, error: `Line ${i + 1}: ${name} is given twice.` };
    headers[name] = value;
  }
  if (Object.keys(headers).length > MAX_HEADERS) return { headers, error: `At most ${MAX_HEADERS} custom headers.` };
  return { headers };
}

export function validateDraft(d: DestinationDraft): DraftErrors {
  const errors: DraftErrors = {};
  if (d.name.trim() === "") errors.name = "Give the destination a name.";
  if (d.audienceIds.length === 0) errors.audiences = "Choose at least one audience to send.";
  const bad = d.attributes.find((a) => !ATTRIBUTE_PATH.test(a));
  if (bad !== undefined) errors.attributes = `“${bad}” is not an attribute path (e.g. person.name.firstName).`;
  if (d.kind === "file") {
    const f = d.file ?? DEFAULT_FILE;
    if (f.startDate !== "" && (!/^\d{4}-\d{2}-\d{2}$/.test(f.startDate) || Number.isNaN(Date.parse(`${f.startDate}T00:00:00Z`)) || new Date(`${f.startDate}T00:00:00Z`).toISOString().slice(0, 10) !== f.startDate)) errors.startDate = "A date as YYYY-MM-DD.";
    if (f.startTime !== "" && !/^([01]\d|2[0-3]):[0-5]\d$/.test(f.startTime)) errors.startTime = "A time as HH:mm (UTC).";
    if (f.startTime !== "" && f.startDate === "" && errors.startTime === undefined) errors.startDate = "Give the date of the first export, or leave the time empty to export now.";
    return errors;
  }
  if (d.kind !== "nats") {
    const url = d.url.trim();
    if (url === "") errors.url = "Enter the endpoint's URL.";
    else if (!/^https?:\/\/[^/\s]/i.test(url)) errors.url = "The URL must start with http:// or https://.";
    if (d.auth === "bearer" && d.token.trim() === "") errors.token = "Enter the bearer token, or choose no authentication.";
    const h = parseHeaders(d.headers);
    if (h.error !== undefined) errors.headers = h.error;
  } else {
    const n = d.nats ?? { subject: "", serverUrl: "" };
    const subject = n.subject.trim();
    const root = subject.split(".")[0]!.toLowerCase();
    if (subject === "") errors.subject = "Enter the subject to publish to (e.g. crm.members).";
    else if (subject.length > 200) errors.subject = "At most 200 characters.";
    else if (!SUBJECT.test(subject)) errors.subject = "Dot-separated tokens of letters, digits, _ and - (no wildcards or spaces).";
    else if (RESERVED_SUBJECT_ROOTS.includes(root)) errors.subject = `Subjects under “${subject.split(".")[0]!}.” are reserved (segmentd's own streams and NATS inboxes).`;
    const server = n.serverUrl.trim();
    if (server !== "" && !NATS_URL.test(server)) errors.serverUrl = "A server as nats://host:port or tls://host:port, or empty for segmentd's own NATS.";
  }
  if (!Number.isInteger(d.retryPeriodSeconds) || d.retryPeriodSeconds < 1 || d.retryPeriodSeconds > 604_800) errors.retryPeriodSeconds = "Between 1 and 604,800 seconds (7 days).";
  if (!Number.isInteger(d.maxBatchSize) || d.maxBatchSize < 1 || d.maxBatchSize > 1000) errors.maxBatchSize = "Between 1 and 1,000 profiles.";
  return errors;
}

export function connectionBody(d: DestinationDraft): Record<string, unknown> {
  if (d.kind === "file") return { name: `${d.name.trim()} (files)`, connectionSpec: { id: SPEC_IDS.file, version: "1.0" } };
  if (d.kind === "nats") return { name: `${d.name.trim()} (NATS)`, connectionSpec: { id: SPEC_IDS.nats, version: "1.0" } };
  return {
    name: `${d.name.trim()} (auth)`,
    connectionSpec: { id: SPEC_IDS.webhook, version: "1.0" },
    auth: d.auth === "bearer" ? { specName: "Bearer Token", params: { token: d.token.trim() } } : { specName: "None", params: {} },
  };
}

export function targetBody(d: DestinationDraft, baseConnectionId: string): Record<string, unknown> {
  if (d.kind === "file") {
    const f = d.file ?? DEFAULT_FILE;
    return {
      name: d.name.trim(),
      baseConnectionId,
      connectionSpec: { id: SPEC_IDS.file, version: "1.0" },
      params: { format: f.format, compression: f.gzip ? "GZIP" : "NONE", exportMode: f.mode, frequency: f.frequency },
    };
  }
  if (d.kind === "nats") {
    const n = d.nats ?? { subject: "", serverUrl: "" };
    const serverUrl = n.serverUrl.trim();
    return {
      name: d.name.trim(),
      baseConnectionId,
      connectionSpec: { id: SPEC_IDS.nats, version: "1.0" },
      params: { subject: n.subject.trim(), ...(serverUrl !== "" ? { serverUrl } : {}) },
    };
  }
  const { headers } = parseHeaders(d.headers);
  return {
    name: d.name.trim(),
    baseConnectionId,
    connectionSpec: { id: SPEC_IDS.webhook, version: "1.0" },
    data: { format: "json" },
    params: { httpEndpoint: d.url.trim(), ...(Object.keys(headers).length > 0 ? { headers } : {}) },
  };
}

export function flowBody(d: DestinationDraft, targetConnectionId: string): Record<string, unknown> {
  const paths = [...new Set(d.attributes.map((a) => a.trim()).filter((a) => a !== ""))];
  const namespaces = [...new Set(d.namespaces)];
  const f = d.kind === "file" ? d.file ?? DEFAULT_FILE : undefined;
  const schedule = f !== undefined && f.startDate !== "" ? { schedule: { startDate: f.startDate, startTime: f.startTime === "" ? "00:00" : f.startTime } } : {};
  return {
    name: d.name.trim(),
    flowSpec: { id: PROFILE_FLOW_SPEC_ID, version: "1.0" },
    targetConnectionIds: [targetConnectionId],
    transformations: [{
      name: "GeneralTransform",
      params: {
        segmentSelectors: { selectors: d.audienceIds.map((id) => ({ type: "PLATFORM_SEGMENT", value: { id, ...schedule } })) },
        profileSelectors: { selectors: [...paths, ...namespaces.map((n) => `identityMap.${n}`)].map((path) => ({ type: "JSON_PATH", value: { path, operator: "EXISTS" } })) },
      },
    }],
    ...(f === undefined ? { delivery: { maxBatchSize: d.maxBatchSize, retryPeriodMs: d.retryPeriodSeconds * 1000 } } : {}),
  };
}

/** A NATS destination's stream (the server's natsStreamName): SEGMENTD_FLOW_<flow id, letters, digits and _ only>. */
export function natsStreamName(flowId: string): string {
  return `SEGMENTD_FLOW_${flowId.replace(/[^A-Za-z0-9_]/g, "")}`;
}

/** A frequency in words: "Every day", "Every 3 hours". */
export function frequencyWords(f: string | undefined): string {
  if (f === undefined || f === "DAILY") return "Every day";
  const m = /^EVERY_(\d+)_HOURS$/.exec(f);
  return m ? `Every ${m[1]} hours` : f;
}

/** A file export run's status in words (queued, running, success, failed, expired). */
export function exportStatusWords(status: string): string {
  switch (status) {
    case "queued": return "Queued";
    case "running": return "Running";
    case "success": return "Succeeded";
    case "failed": return "Failed";
    case "expired": return "Expired (files removed)";
    default: return status;
  }
}

/** A flow's selected attributes and identity namespaces, apart. */
export function selectedOf(flow: Pick<Flow, "transformations">): { audiences: Array<{ id: string; name?: string; createTime?: string }>; attributes: string[]; namespaces: string[] } {
  const params = flow.transformations[0]?.params;
  const paths = (params?.profileSelectors.selectors ?? []).map((s) => s.value.path);
  return {
    audiences: (params?.segmentSelectors.selectors ?? []).map((s) => s.value),
    attributes: paths.filter((p) => !p.startsWith("identityMap.")),
    namespaces: paths.filter((p) => p.startsWith("identityMap.")).map((p) => p.slice("identityMap.".length)),
  };
}

export type HealthKind = "healthy" | "retrying" | "dead" | "paused" | "unknown";

/**
 * One word for a dataflow's state. Dead letters outrank retries (they need a person:
 * replay them); a paused flow is paused whatever its counters say; without stats the
 * server runs no deliverer.
 */
export function healthOf(flow: Pick<Flow, "state" | "deliveryStats">): { kind: HealthKind; label: string } {
  if (flow.state === "disabled") return { kind: "paused", label: "Paused" };
  const s = flow.deliveryStats;
  if (s === undefined) return { kind: "unknown", label: "Not delivering here" };
  if (s.dead > 0) return { kind: "dead", label: "Dead letters" };
  if (s.retrying > 0) return { kind: "retrying", label: "Retrying" };
  return { kind: "healthy", label: "Healthy" };
}

/** Delivery lag in words: "0 s", "1.5 s", "4 min 5 s", "2 h 10 min". */
export function formatLag(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds <= 0) return "0 s";
  if (seconds < 10) return `${Math.round(seconds * 10) / 10} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 === 0 ? "" : ` ${s % 60} s`}`;
  const m = Math.floor(s / 60);
  return `${Math.floor(m / 60)} h${m % 60 === 0 ? "" : ` ${m % 60} min`}`;
}

/** A period in ms in the largest whole unit: "24 hours", "5 seconds", "90 minutes". */
export function formatPeriod(ms: number): string {
  const unit = (n: number, word: string) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;
  if (ms % 86_400_000 === 0) return unit(ms / 86_400_000, "day");
  if (ms % 3_600_000 === 0) return unit(ms / 3_600_000, "hour");
  if (ms % 60_000 === 0) return unit(ms / 60_000, "minute");
  if (ms % 1000 === 0) return unit(ms / 1000, "second");
  return unit(ms, "millisecond");
}

export interface ShownError {
  /** The latest time it happened. */
  at: string | undefined;
  message: string;
  /** How many of the reported errors had this message. */
  count: number;
}

/**
 * The last error and the runs' errors, one entry per message (a failing receiver repeats
 * itself on every retry) with how often and when last, newest first, at most `max`.
 */
export function lastErrors(stats: DeliveryStats | undefined, runs: readonly FlowRun[], max = 10): ShownError[] {
  const all: Array<{ at: string | undefined; message: string }> = [];
  for (const r of runs) for (const e of r.statusSummary.errors ?? []) all.push({ at: e.at, message: e.message });
  // The last error is also in a run, unless the runs list is older or cut: count it only then.
  const last = stats?.lastError;
  if (last && !all.some((e) => e.at === last.at && e.message === last.message)) all.push({ at: last.at, message: last.message });
  const time = (at: string | undefined) => (at === undefined ? 0 : Date.parse(at) || 0);
  const byMessage = new Map<string, ShownError>();
  for (const e of all) {
    const seen = byMessage.get(e.message);
    if (!seen) byMessage.set(e.message, { ...e, count: 1 });
    else {
      seen.count += 1;
      if (time(e.at) > time(seen.at)) seen.at = e.at;
    }
  }
  return [...byMessage.values()].sort((a, b) => time(b.at) - time(a.at)).slice(0, max);
}

/** "Activate now" or "Streaming delivery", as the run's activity names it. */
export function runKind(run: Pick<FlowRun, "activities" | "metrics">): string {
  const named = run.activities?.[0]?.name;
  if (named !== undefined && named !== "") return named;
  return run.metrics.segmentd?.kind === "resend" ? "Activate now" : "Streaming delivery";
}

/** Run statuses as words: AEP's camelCase codes read badly in a table. */
export function runStatusWords(status: string): string {
  switch (status) {
    case "success": return "Succeeded";
    case "partialSuccess": return "Partly failed";
    case "inProgress": return "In progress";
    case "failed": return "Failed";
    default: return status;
  }
}
