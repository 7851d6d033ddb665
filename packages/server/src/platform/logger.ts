/**
 * Structured logging (pino). One root logger per process; Fastify derives request loggers from it.
 *
 * Two formats: JSON lines (pino's own; for CI, services and log collectors) and `pretty`, one
 * readable line per entry for a person at a terminal. `SEGMENTD_LOG_FORMAT=pretty|json` chooses;
 * without it, pretty when standard output is a terminal, JSON otherwise. In pretty form Fastify's
 * two lines per request become one, shown only at `debug` (a page load is dozens of requests:
 * at `info` they would scroll the banner's curl lines away).
 */
import pino, { type Logger, type LoggerOptions } from "pino";

export type { Logger };
export type LogFormat = "json" | "pretty";

export function createLogger(level: string, destination?: NodeJS.WritableStream, format: LogFormat = defaultLogFormat()): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: "segmentd" },
    // Never log credentials, even at debug level.
    redact: { paths: ["req.headers.authorization", "req.headers[\"x-api-key\"]"], censor: "[redacted]" },
  };
  if (format === "pretty") {
    const out = destination ?? process.stdout;
    const shownFrom = pino.levels.values[level] ?? pino.levels.values.info!;
    const pending = new Map<unknown, string>();
    return pino(options, { write: (line: string) => { const text = prettyLine(line, shownFrom, pending); if (text !== null) out.write(text); } });
  }
  return destination ? pino(options, destination) : pino(options);
}

/** SEGMENTD_LOG_FORMAT, else pretty on a terminal. An unknown value is an error: a typo must not pass silently. */
export function defaultLogFormat(env: NodeJS.ProcessEnv = process.env, tty: boolean = process.stdout.isTTY === true): LogFormat {
  const v = env.SEGMENTD_LOG_FORMAT;
  if (v === undefined || v === "") return tty ? "pretty" : "json";
  if (v === "pretty" || v === "json") return v;
  throw new Error(`SEGMENTD_LOG_FORMAT must be pretty or json, got "${v}"`);
}

const LEVEL_NAMES: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Keys every entry has, or that the line already shows. */
const SHOWN = new Set(["level", "time", "service", "msg", "pid", "hostname", "reqId", "req", "res", "responseTime", "err"]);

/**
 * One JSON entry as `HH:MM:SS LEVEL message key=value …` (an error's stack below it, indented), or
 * null when it is not shown: Fastify's "incoming request", and "request completed" below `debug`.
 * `pending` carries each request's method and URL (logged on the way in) to its completion line.
 */
export function prettyLine(json: string, shownFrom: number, pending: Map<unknown, string> = new Map()): string | null {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith("\n") ? json : json + "\n";
  }
  const level = typeof e.level === "number" ? e.level : 30;
  const msg = typeof e.msg === "string" ? e.msg : "";
  const time = new Date(typeof e.time === "number" ? e.time : Date.now()).toISOString().slice(11, 19);
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const debug = shownFrom <= pino.levels.values.debug!;
  if (msg === "incoming request") {
    const req = (e.req ?? {}) as { method?: string; url?: string };
    if (debug) {
      // A request whose completion is never logged must not hold memory for ever.
      if (pending.size >= 10_000) pending.clear();
      pending.set(e.reqId, `${req.method ?? "?"} ${req.url ?? "?"}`);
    }
    return null;
  }
  if (msg === "request completed") {
    const what = pending.get(e.reqId) ?? "?";
    pending.delete(e.reqId);
    if (!debug) return null;
    const res = (e.res ?? {}) as { statusCode?: number };
    const ms = typeof e.responseTime === "number" ? ` ${e.responseTime.toFixed(1)} ms` : "";
    return `${time} DEBUG ${what} ${res.statusCode ?? "?"}${ms}\n`;
  }
  const fields = Object.entries(e)
    .filter(([k]) => !SHOWN.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  let text = `${time} ${name} ${msg}${fields.length > 0 ? " " + fields.join(" ") : ""}`;
  const err = e.err as { type?: string; message?: string; stack?: string } | string | undefined;
  if (typeof err === "string") text += ` err=${err}`;
  else if (err !== undefined) text += `\n    ${(err.stack ?? `${err.type ?? "Error"}: ${err.message ?? ""}`).split("\n").join("\n    ")}`;
  return text + "\n";
}
