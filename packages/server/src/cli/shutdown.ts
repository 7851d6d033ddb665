/**
 * A long-running command's graceful stop: on the first SIGTERM or SIGINT, `close` (finish what is
 * in flight), then exit 0; exit 1 if it fails or takes longer than `timeoutMs`.
 */
export interface ShutdownLog {
  info(signal: string): void;
  error(what: string, err?: unknown): void;
}

export function exitOnSignals(o: { timeoutMs: number; close(): Promise<void>; log: ShutdownLog; /** the last line, once everything is closed */ stopped?: () => void }): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    o.log.info(signal);
    const force = setTimeout(() => {
      o.log.error("shutdown timed out; exiting");
      process.exit(1);
    }, o.timeoutMs);
    force.unref();
    o.close().then(
      () => {
        o.stopped?.();
        process.exit(0);
      },
      (err: unknown) => {
        o.log.error("shutdown failed", err);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}
