/**
 * A mistake the user can fix from the command line (a busy port, a missing option): `main.ts`
 * prints its message as one line, without a stack, and exits 1.
 */
import { createServer } from "node:net";

export class CliError extends Error {
  override readonly name = "CliError";
}

/** The line printed for a port another process holds. */
export function portInUseMessage(port: number, what = "port"): string {
  return `${what} ${port} is in use; pass --port <another port> (or stop the process listening there)`;
}

/**
 * Refuses a port something already listens on, before anything is started: a server that fails
 * its `listen` after opening stores and NATS connections logs their shutdown errors on the way out.
 * Port 0 (any free port) always passes; a race with another process is still caught at `listen`.
 */
export async function assertPortFree(host: string, port: number, what?: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => {
      reject(err.code === "EADDRINUSE" ? new CliError(portInUseMessage(port, what)) : err);
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** `listen` failing with EADDRINUSE despite the probe (another process took the port meanwhile). */
export function asPortInUse(err: unknown, port: number): unknown {
  return (err as NodeJS.ErrnoException | undefined)?.code === "EADDRINUSE" ? new CliError(portInUseMessage(port)) : err;
}
