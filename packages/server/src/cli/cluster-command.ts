/**
 * `segmentd cluster up` (`npm run cluster`): a local multi-process deployment to try — the hub's
 * nats-server (JetStream domain `hub`), the hub (`segmentd serve --nats`, on PostgreSQL when a
 * database URL is configured, embedded otherwise), and N edge sites, each a leaf nats-server with
 * its own domain and an edge node (`segmentd edge`). Prints every address; Ctrl-C stops them all.
 * A real deployment runs the same processes as system services (docs/deployment.md).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { startNatsServer, type RunningNatsServer } from "../cluster/nats-server.js";
import { SITE_NAME } from "../cluster/subjects.js";
import { ConfigError, parsePort } from "../platform/config.js";
import { loadOrCreateDevCredentials, withDevTenant } from "../services/dev-bootstrap.js";
import { configFromCli, type ServerCliOptions } from "./serve-command.js";

interface ClusterCliOptions extends ServerCliOptions {
  sites: string;
}

function child(args: string[], label: string, onLine: (line: string) => void): ChildProcess {
  // The same entry point this command runs from (dist in an install, the sources under tsx).
  const c = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let buf = "";
  c.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  c.stderr!.on("data", (d: Buffer) => process.stderr.write(`[${label}] ${d.toString()}`));
  return c;
}

function listening(c: ChildProcess, label: string): Promise<string> {
  return new Promise((resolve, reject) => {
    c.stdout!.on("data", (d: Buffer) => {
      const m = /listening on (http:\/\/\S+)/.exec(d.toString());
      if (m) resolve(m[1]!);
    });
    c.once("exit", (code) => reject(new Error(`${label} exited (${code}) before listening`)));
  });
}

export function registerClusterCommand(program: Command): void {
  program
    .command("cluster")
    .description("run a local hub + edge sites deployment (each a process, over nats-server): `segmentd cluster up`")
    .argument("<action>", "up")
    .option("-c, --config <file>", "config file shared by the hub and the edge nodes (organizations, auth)")
    .option("-d, --data-dir <dir>", "where every process keeps its data (default ./.data/cluster)")
    .option("-p, --port <port>", "the hub's port (default 8080); edge nodes take the next ones")
    .option("--database-url <url>", "run the hub on PostgreSQL (env SEGMENTD_DATABASE_URL)")
    .option("--sites <names>", "edge sites, comma-separated", "edge-1,edge-2")
    .action(async (action: string, o: ClusterCliOptions) => {
      if (action !== "up") throw new ConfigError(`unknown action '${action}' (use: segmentd cluster up)`);
      const config = configFromCli({ ...o, dataDir: o.dataDir ?? "./.data/cluster" });
      const sites = o.sites.split(",").map((s) => s.trim()).filter((s) => s !== "");
      for (const s of sites) if (!SITE_NAME.test(s) || s === "hub") throw new ConfigError(`--sites: '${s}' must be 1-32 lower-case letters, digits or '-' (not 'hub')`);
      const basePort = o.port !== undefined ? parsePort(o.port, "--port") : 8080;
      const root = config.dataDir;
      mkdirSync(root, { recursive: true });
      // Every process must know the same organizations: without a configured one, the development
      // tenant is created here once and written into a config file the processes share.
      let configFile = o.config;
      if (config.organizations.length === 0) {
        const dev = loadOrCreateDevCredentials(root);
        const withDev = withDevTenant(config, dev.credentials);
        configFile = path.join(root, "cluster.config.json");
        writeFileSync(configFile, JSON.stringify({ organizations: withDev.organizations, auth: withDev.auth }, null, 2));
        process.stdout.write(`Development tenant: org ${dev.credentials.orgId}, token ${dev.credentials.token}, API key ${dev.credentials.apiKey} (in ${configFile})\n`);
      }
      const nats: RunningNatsServer[] = [];
      const procs: ChildProcess[] = [];
      const out = (line: string) => process.stdout.write(line + "\n");
      const stopAll = async () => {
        for (const p of procs.reverse()) if (p.exitCode === null) p.kill("SIGTERM");
        // A process that has not stopped within 15 s is killed.
        const kill = setTimeout(() => procs.forEach((p) => p.exitCode === null && p.kill("SIGKILL")), 15_000);
        await Promise.all(procs.map((p) => (p.exitCode === null && p.signalCode === null ? new Promise((r) => p.once("exit", r)) : null)));
        clearTimeout(kill);
        for (const n of nats.reverse()) await n.stop();
      };
      try {
        const hubNats = await startNatsServer({ dir: path.join(root, "nats-hub"), domain: "hub" });
        nats.push(hubNats);
        out(`hub NATS            ${hubNats.url}  (JetStream domain hub, leaf nodes at ${hubNats.leafUrl})`);
        const common = [...(configFile ? ["-c", configFile] : []), "--log-level", config.logLevel];
        const hub = child(["serve", ...common, "-d", path.join(root, "hub"), "-p", String(basePort), "--nats", hubNats.url, ...(config.databaseUrl ? ["--database-url", config.databaseUrl] : [])], "hub", (l) => out(`[hub] ${l}`));
        procs.push(hub);
        out(`hub                 ${await listening(hub, "the hub")}  (${config.databaseUrl ? "PostgreSQL" : "embedded stores"})`);
        for (const [i, s] of sites.entries()) {
          const leaf = await startNatsServer({ dir: path.join(root, `nats-${s}`), domain: s, hubLeafUrl: hubNats.leafUrl! });
          nats.push(leaf);
          const edge = child(["edge", ...common, "-d", path.join(root, `edge-${s}`), "-p", String(basePort + 1 + i), "--location", s, "--nats", leaf.url], s, (l) => out(`[${s}] ${l}`));
          procs.push(edge);
          out(`edge site ${s.padEnd(9)} ${await listening(edge, `edge node ${s}`)}  (leaf NATS ${leaf.url}, JetStream domain ${s})`);
        }
        out("");
        out("Create datasets, datastreams and definitions at the hub; send interact requests to an edge node:");
        out(`  curl -X POST 'http://127.0.0.1:${basePort + 1}/ee/v2/interact?dataStreamId=<id>' -H 'content-type: application/json' -d '{"event":{"xdm":{...}}}'`);
        out("Ctrl-C stops every process.");
      } catch (err) {
        await stopAll();
        throw err;
      }
      const stop = () => {
        void stopAll().then(() => process.exit(0));
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
}
