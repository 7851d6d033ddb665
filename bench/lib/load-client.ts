/**
 * Benches run their load generator as a separate process, so that it never
 * shares the server's event loop. Kept apart from the server-side helpers so
 * that the client process loads nothing of the server.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";

/**
 * Run this bench file again as the load client (`--client ...args`) in its own
 * process and return the JSON it prints on stdout.
 */
export function runLoadClient<T>(benchFile: string, args: string[]): Promise<T> {
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", benchFile, "--client", ...args], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) =>
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`load client exited ${code}`)))),
  );
}

/** What a load client reports back (autocannon's figures; latency in ms). */
export interface ClientResult {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

interface AutocannonRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  setupRequest: (req: { body?: string }) => { body?: string };
}
interface AutocannonResult {
  requests: { total: number; average: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
}
type Autocannon = (opts: { url: string; connections: number; duration: number; overallRate?: number; requests: AutocannonRequest[] }) => Promise<AutocannonResult>;

/**
 * In the client process: POST JSON bodies made by `body()` (a fresh one per
 * request) to `url` with autocannon, optionally at a fixed overall rate, and
 * print the result as JSON on stdout for `runLoadClient` to read.
 */
export async function postLoad(o: { url: string; connections: number; seconds: number; rate?: number; body: () => unknown }): Promise<void> {
  const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;
  const u = new URL(o.url);
  const r = await autocannon({
    url: `${u.protocol}//${u.host}`,
    connections: o.connections,
    duration: o.seconds,
    ...(o.rate !== undefined && o.rate > 0 ? { overallRate: o.rate } : {}),
    requests: [
      {
        method: "POST",
        path: u.pathname + u.search,
        headers: { "content-type": "application/json" },
        setupRequest(req) {
          req.body = JSON.stringify(o.body());
          return req;
        },
      },
    ],
  });
  const out: ClientResult = { requests: r.requests.total, rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
  process.stdout.write(JSON.stringify(out));
}
