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

/**
 * In the client process: an open-loop load. Request i is due at start + i / rate, whatever
 * happened to the earlier ones (autocannon's rate limit sends each second's quota in a burst
 * and never sends while its connections wait, so it measures bursts, and a slow server sees
 * fewer requests). Up to `connections` keep-alive connections; a request due while all are busy
 * waits for one, and its latency counts from the time it was due (no coordinated omission).
 * Prints a ClientResult (latency in ms, `rps` = responses per second over the run) on stdout.
 */
export async function pacedLoad(o: { url: string; connections: number; seconds: number; rate: number; body: () => unknown }): Promise<void> {
  const http = await import("node:http");
  const u = new URL(o.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const latencies: number[] = [];
  let non2xx = 0, errors = 0, sent = 0;
  const start = performance.now();
  const end = start + o.seconds * 1000;
  const interval = 1000 / o.rate;
  const inFlight = new Set<Promise<void>>();
  const send = (due: number): void => {
    const payload = JSON.stringify(o.body());
    const done = new Promise<void>((resolve) => {
      const req = http.request({ agent, host: u.hostname, port: u.port, path: u.pathname + u.search, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode! < 200 || res.statusCode! >= 300) non2xx++;
          latencies.push(performance.now() - due);
          resolve();
        });
      });
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end(payload);
    });
    inFlight.add(done);
    void done.then(() => inFlight.delete(done));
  };
  for (;;) {
    const now = performance.now();
    if (now >= end) break;
    // Every request due by now (a late timer sends the ones it owes at once, each timed from when it was due).
    while (start + sent * interval <= now) send(start + sent++ * interval);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + sent * interval - performance.now())));
  }
  await Promise.all(inFlight);
  agent.destroy();
  const sorted = Float64Array.from(latencies).sort();
  const pct = (p: number) => Number(percentile(sorted, p).toFixed(1));
  const out: ClientResult = { requests: latencies.length, rps: latencies.length / o.seconds, p50: pct(50), p99: pct(99), non2xx, errors };
  process.stdout.write(JSON.stringify(out));
}

/** The p-th percentile (0–100) of ascending values (NaN when there are none). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
