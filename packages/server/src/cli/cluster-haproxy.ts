/**
 * HAProxy in front of several hubs for `segmentd cluster up --hubs N` (issue #43): Debian's
 * package, run in the foreground with a config written for the run. Round robin over the hubs,
 * each checked with GET /readyz every second (out after 2 failures, back after 2 successes);
 * `/ee/` requests stay on the hub a cookie names (each hub's edge location is its own).
 * A request whose connection to a hub fails is sent to another one (`retries`, `redispatch`);
 * only GET and HEAD are retried after reaching a hub (an empty response: it died mid-request),
 * because a write may have been applied before the hub died — its client sees the 502 and decides.
 * docs/deployment.md shows the same config for a real deployment.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { CliError } from "./cli-error.js";

export interface HaproxyBackend {
  name: string;
  host: string;
  port: number;
}

/** The cookie that keeps a browser's /ee/ requests on one hub. */
export const EDGE_COOKIE = "segmentd_hub";

function servers(backends: readonly HaproxyBackend[], sticky: boolean): string[] {
  return [
    "  balance roundrobin",
    "  option httpchk GET /readyz",
    "  http-check expect status 200",
    "  default-server inter 1s fastinter 500ms fall 2 rise 2",
    ...backends.map((b) => `  server ${b.name} ${b.host}:${b.port} check${sticky ? ` cookie ${b.name}` : ""}`),
  ];
}

/** The config text: a frontend on host:port, the hubs as the API's backend and, with a sticky cookie, as the edge's. */
export function haproxyConfig(o: { host: string; port: number; backends: readonly HaproxyBackend[]; statsPort?: number }): string {
  const lines = [
    "global",
    "  maxconn 4096",
    "",
    "defaults",
    "  mode http",
    "  timeout connect 2s",
    "  timeout client 60s",
    "  timeout server 60s",
    "  timeout http-keep-alive 10s",
    // Connection failures are retried on another hub; after a hub answered nothing, only reads.
    "  retries 3",
    "  option redispatch 1",
    "  retry-on conn-failure empty-response response-timeout",
    "",
    "frontend segmentd",
    `  bind ${o.host}:${o.port}`,
    "  http-request disable-l7-retry unless METH_GET || METH_HEAD",
    "  use_backend edge if { path_beg /ee/ }",
    "  default_backend hubs",
    "",
    "backend hubs",
    ...servers(o.backends, false),
    "",
    // A browser's interact calls stay on one hub (its edge location holds the page's events), as
    // Adobe's Edge Network keeps a visitor on one cluster with its cluster cookie; a dead hub's
    // visitors go to another (redispatch), which reads the profile from the shared store.
    "backend edge",
    `  cookie ${EDGE_COOKIE} insert indirect nocache httponly`,
    ...servers(o.backends, true),
  ];
  if (o.statsPort !== undefined) lines.push("", "frontend stats", `  bind ${o.host}:${o.statsPort}`, "  stats enable", "  stats uri /", "  stats refresh 2s");
  return lines.join("\n") + "\n";
}

/** The haproxy binary: $SEGMENTD_HAPROXY, Debian's /usr/sbin/haproxy, or `haproxy` on PATH. */
export function haproxyBinary(): string {
  if (process.env.SEGMENTD_HAPROXY) return process.env.SEGMENTD_HAPROXY;
  return existsSync("/usr/sbin/haproxy") ? "/usr/sbin/haproxy" : "haproxy";
}

/** Writes the config under `dir` and starts HAProxy in the foreground; rejects if it exits at once (a bad config, a port taken). */
export async function startHaproxy(dir: string, config: string): Promise<{ child: ChildProcess; configFile: string }> {
  const configFile = path.join(dir, "haproxy.cfg");
  writeFileSync(configFile, config);
  const binary = haproxyBinary();
  // -db: stay in the foreground; -W: master-worker (a SIGTERM to it stops the workers too).
  const child = spawn(binary, ["-W", "-db", "-f", configFile], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 500);
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(err.code === "ENOENT" ? new CliError(`--hubs needs HAProxy in front of the hubs: '${binary}' was not found (Debian: apt install haproxy; or set SEGMENTD_HAPROXY)`) : err);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new CliError(`HAProxy exited (${code}) at start:\n${log.trim()}`));
    });
  });
  return { child, configFile };
}
