/**
 * Shared bench helpers: a throw-away server with one org and sandbox, and
 * autocannon run in a separate process (its CLI), so that the load generator
 * does not share the server's event loop.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger, defaultConfig, startServer, type Config, type RunningServer } from "../../packages/server/src/index.js";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BENCH_ORG = "BENCH000000000000000000@AdobeOrg";
export const BENCH_TOKEN = "bench-token";
export const BENCH_KEY = "bench-key";

export interface BenchServer {
  server: RunningServer;
  headers: Record<string, string>;
  close(): Promise<void>;
}

/** Embedded store in a temp dir, or PostgreSQL when SEGMENTD_DATABASE_URL is set; `configure` changes the rest of the configuration. */
export async function startBenchServer(limits: { definitions: number }, configure: (c: Config) => void = () => {}): Promise<BenchServer> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-"));
  const c = defaultConfig();
  c.port = 0;
  c.dataDir = dataDir;
  c.databaseUrl = process.env.SEGMENTD_DATABASE_URL;
  c.auth.staticTokens = [{ token: BENCH_TOKEN, orgs: [BENCH_ORG] }];
  c.auth.apiKeys = [BENCH_KEY];
  c.organizations = [{ id: BENCH_ORG, sandboxes: [{ name: "prod", type: "production", default: true, limits }] }];
  configure(c);
  const server = await startServer(c, { logger: createLogger("warn") });
  return {
    server,
    headers: { authorization: `Bearer ${BENCH_TOKEN}`, "x-api-key": BENCH_KEY, "x-gw-ims-org-id": BENCH_ORG, "x-sandbox-name": "prod" },
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface LoadResult {
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
}

interface AutocannonJson {
  requests: { total: number; average: number };
  latency: { p50: number; p90: number; p99: number; max: number };
  non2xx: number;
  errors: number;
}

/** Run the autocannon CLI against `url` and return its latency figures (ms). */
export async function autocannon(url: string, opts: { method?: string; headers: Record<string, string>; body?: string; connections: number; seconds: number; idReplacement?: boolean }): Promise<LoadResult> {
  const args = [path.join(ROOT, "node_modules", "autocannon", "autocannon.js"), "-j", "-c", String(opts.connections), "-d", String(opts.seconds)];
  if (opts.method) args.push("-m", opts.method);
  for (const [k, v] of Object.entries(opts.headers)) args.push("-H", `${k}=${v}`);
  if (opts.body !== undefined) args.push("-b", opts.body);
  if (opts.idReplacement) args.push("-I");
  args.push(url);
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let s = "";
    let e = "";
    child.stdout.on("data", (d: Buffer) => (s += d.toString()));
    child.stderr.on("data", (d: Buffer) => (e += d.toString()));
    child.on("exit", (code) => (code === 0 ? resolve(s) : reject(new Error(`autocannon exited ${code}: ${e}`))));
  });
  const j = JSON.parse(out) as AutocannonJson;
  return {
    requests: j.requests.total,
    rps: j.requests.average,
    p50: j.latency.p50,
    p90: j.latency.p90,
    p99: j.latency.p99,
    max: j.latency.max,
    non2xx: j.non2xx,
    errors: j.errors,
  };
}
