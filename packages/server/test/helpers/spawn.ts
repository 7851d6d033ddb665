/** Spawning server processes for tests and waiting for their READY line. */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const live = new Set<ChildProcess>();

/**
 * SIGKILL every child still running. Call it from `after()`: a failed
 * assertion must not leave a server behind (its pipes would also keep the
 * test process from exiting).
 */
export function killAll(): void {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  live.clear();
}

export function spawnTs(script: string, args: string[], env: NodeJS.ProcessEnv = {}): Spawned {
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", script, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  live.add(child);
  child.on("exit", () => live.delete(child));
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Resolve with the first stdout match of `pattern`, or fail after `ms` (generous: CI machines can be loaded). */
export async function waitFor(s: Spawned, pattern: RegExp, ms = 60_000): Promise<RegExpMatchArray> {
  const t0 = Date.now();
  for (;;) {
    const m = s.stdout().match(pattern);
    if (m) return m;
    if (s.child.exitCode !== null) throw new Error(`process exited (${s.child.exitCode}) before printing ${pattern}:\n${s.stdout()}\n${s.stderr()}`);
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${pattern}:\n${s.stdout()}\n${s.stderr()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
