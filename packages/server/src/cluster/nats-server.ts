/**
 * Runs a nats-server with JetStream as a child process: the hub's server (JetStream domain
 * `hub`, a leafnode port the edge sites dial) or an edge site's leaf server (its own domain,
 * a remote to the hub's leafnode port). `segmentd cluster up` and the cluster tests use it;
 * a deployment runs nats-server as a system service with the same settings (docs/deployment.md).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";

export interface NatsServerOptions {
  /** Folder for the config file and JetStream's store (created). */
  dir: string;
  /** JetStream domain: `hub` for the hub, the site's name for an edge site. */
  domain: string;
  /** Client port (0 = a free one). */
  port?: number;
  /** Hub: the port edge sites' leaf nodes dial (0 = a free one). */
  leafPort?: number;
  /** Edge site: the hub's leafnode URL (`nats-leaf://host:port`). */
  hubLeafUrl?: string;
  host?: string;
  /** The nats-server binary (default $SEGMENTD_NATS_SERVER, /usr/sbin/nats-server when present, else `nats-server` on PATH). */
  binary?: string;
  /** A command the server runs under, e.g. `["ip", "netns", "exec", "ns1"]` (tests of a cut link). */
  wrap?: string[];
  /** More lines of server configuration (e.g. subject `mappings`). */
  extraConfig?: string[];
}

export interface RunningNatsServer {
  readonly url: string;
  /** Hub only: what an edge site's leaf node dials. */
  readonly leafUrl: string | null;
  readonly port: number;
  readonly domain: string;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and store (after stop or kill). */
  restart(): Promise<void>;
  readonly child: ChildProcess | null;
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, host, () => {
      const a = s.address();
      const port = typeof a === "object" && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function defaultBinary(): string {
  const env = process.env["SEGMENTD_NATS_SERVER"];
  if (env) return env;
  return existsSync("/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : "nats-server";
}

async function waitForPort(host: string, port: number, child: ChildProcess, log: () => string, ms = 15_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nats-server exited (${child.exitCode}) before listening:\n${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, host);
      c.once("connect", () => {
        c.destroy();
        resolve(true);
      });
      c.once("error", () => resolve(false));
    });
    // JetStream is ready once the log says so (the port opens a little before).
    if (ok && /Server is ready/.test(log())) return;
    if (Date.now() - t0 > ms) throw new Error(`nats-server did not start within ${ms} ms:\n${log()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function startNatsServer(o: NatsServerOptions): Promise<RunningNatsServer> {
  const host = o.host ?? "127.0.0.1";
  const port = o.port || (await freePort());
  const leafPort = o.hubLeafUrl === undefined ? o.leafPort || (await freePort()) : null;
  mkdirSync(path.join(o.dir, "jetstream"), { recursive: true });
  const lines = [
    `server_name: "segmentd-${o.domain}-${port}"`,
    `listen: "${host}:${port}"`,
    // A silent partition is noticed within seconds, not the default 2 minutes.
    `ping_interval: "2s"`,
    `ping_max: 2`,
    `jetstream { store_dir: "${path.join(o.dir, "jetstream")}", domain: "${o.domain}" }`,
  ];
  if (leafPort !== null) lines.push(`leafnodes { listen: "${host}:${leafPort}" }`);
  else lines.push(`leafnodes { remotes: [ { url: "${o.hubLeafUrl!}" } ] }`);
  lines.push(...(o.extraConfig ?? []));
  const configFile = path.join(o.dir, "nats.conf");
  writeFileSync(configFile, lines.join("\n") + "\n");
  const binary = o.binary ?? defaultBinary();

  let child: ChildProcess | null = null;
  let log = "";
  const launch = async () => {
    log = "";
    const argv = [...(o.wrap ?? []), binary, "-c", configFile];
    const c = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    child = c;
    c.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    c.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    await waitForPort(host, port, c, () => log);
  };
  const waitExit = async (signal: NodeJS.Signals) => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.kill(signal);
    await exited;
  };
  await launch();
  return {
    url: `nats://${host}:${port}`,
    leafUrl: leafPort === null ? null : `nats-leaf://${host}:${leafPort}`,
    port,
    domain: o.domain,
    get child() {
      return child;
    },
    stop: () => waitExit("SIGTERM"),
    kill: () => waitExit("SIGKILL"),
    restart: launch,
  };
}
