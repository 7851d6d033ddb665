/** Structured logging (pino). One root logger per process; Fastify derives request loggers from it. */
import pino, { type Logger, type LoggerOptions } from "pino";

export type { Logger };

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: "segmentd" },
    // Never log credentials, even at debug level.
    redact: { paths: ["req.headers.authorization", "req.headers[\"x-api-key\"]"], censor: "[redacted]" },
  };
  return destination ? pino(options, destination) : pino(options);
}
