/**
 * The `segmentd` command as a user runs it: the compiled CLI (`packages/server/dist/cli/main.js`,
 * what `npm start`, `npm run segmentd` and `npx segmentd` run) in a child process. When the
 * build is older than the sources it is rebuilt first (tsc, as `npm run build` does), one test
 * process at a time.
 */
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, type Spawned } from "./spawn.js";

export const CLI = path.join(REPO_ROOT, "packages/server/dist/cli/main.js");

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestSource(full) : e.name.endsWith(".ts") ? statSync(full).mtimeMs : 0);
  }
  return newest;
}

function builtAt(): number {
  try {
    return statSync(CLI).mtimeMs;
  } catch {
    return 0;
  }
}

/** Rebuild the pql and server packages when a source is newer than the CLI (a lock directory serialises test files). */
export async function ensureBuilt(): Promise<void> {
  const sources = () => Math.max(newestSource(path.join(REPO_ROOT, "packages/server/src")), newestSource(path.join(REPO_ROOT, "packages/pql/src")));
  if (builtAt() >= sources()) return;
  const lock = path.join(REPO_ROOT, "packages/server/.build-lock");
  for (const t0 = Date.now(); ; ) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() - t0 > 300_000) rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    if (builtAt() >= sources()) return;
    const tsc = path.join(REPO_ROOT, "node_modules/typescript/bin/tsc");
    for (const p of ["packages/pql/tsconfig.build.json", "packages/server/tsconfig.build.json"]) {
      try {
        execFileSync(process.execPath, [tsc, "-p", p], { cwd: REPO_ROOT, stdio: "pipe" });
      } catch (err) {
        // Type errors still emit JavaScript (no noEmitOnError); the tests then show whether it runs.
        if (builtAt() === 0) throw err;
      }
    }
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

const live = new Set<Spawned["child"]>();

export function killAllCli(): void {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  live.clear();
}

/** Runs `file args…` (the CLI by default) from the checkout's root, output captured. */
export function spawnCli(args: string[], o: { env?: NodeJS.ProcessEnv; cwd?: string; shell?: boolean; /** another program than the CLI */ exec?: string } = {}): Spawned {
  const [cmd, argv] = o.shell === true ? ["sh", ["-c", args.join(" ")]] : o.exec !== undefined ? [o.exec, args] : [process.execPath, [CLI, ...args]];
  const env = { ...process.env, ...o.env };
  // The suite's own settings must not leak into a user's run.
  delete env.SEGMENTD_TEST_STORE;
  delete env.SEGMENTD_LOG_FORMAT;
  for (const [k, v] of Object.entries(o.env ?? {})) if (v !== undefined) env[k] = v;
  const child = spawn(cmd as string, argv as string[], { cwd: o.cwd ?? REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  live.add(child);
  child.on("exit", () => live.delete(child));
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  // "close": the process has exited and its output is all read.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Runs to the end; fails after `ms`. */
export async function runCli(args: string[], o: Parameters<typeof spawnCli>[1] & { ms?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const s = spawnCli(args, o);
  const timer = setTimeout(() => s.child.kill("SIGKILL"), o.ms ?? 120_000);
  const { code } = await s.exited;
  clearTimeout(timer);
  return { code, stdout: s.stdout(), stderr: s.stderr() };
}
