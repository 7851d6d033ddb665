/**
 * `segmentd cluster up` (`npm run cluster`): a local multi-process deployment to try — the hub's
 * nats-server (JetStream domain `hub`), the hub (`segmentd serve --nats`, on PostgreSQL when a
 * database URL is configured, embedded otherwise), and N edge sites, each a leaf nats-server with
 * its own domain and an edge node (`segmentd edge`). Uses the development tenant of `npm start`
 * (the same data directory's credentials) and loads the demo into the hub as `serve` does. Prints
 * every address and an interact call to an edge node; Ctrl-C stops them all.
 * A real deployment runs the same processes as system services (docs/deployment.md).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { startNatsServer, type RunningNatsServer } from "../cluster/nats-server.js";
import { SITE_NAME } from "../cluster/subjects.js";
import { ConfigError, parsePort } from "../platform/config.js";
import { defaultLogFormat } from "../platform/logger.js";
import { loadOrCreateDevCredentials, withDevTenant, type DevCredentials } from "../services/dev-bootstrap.js";
import { ensureDemoSetup, findDemoSetup, loadDemoOverHttp, type DemoSetup } from "../profiles/demo-loader.js";
import { configFromCli, DATABASE_URL_HELP, type ServerCliOptions } from "./serve-command.js";
import { demoSetupLines, demoTarget, interactCurl, STARTUP_DEMO } from "./demo-command.js";
import { assertPortFree, CliError } from "./cli-error.js";

interface ClusterCliOptions extends ServerCliOptions {
  sites: string;
}

function child(args: string[], label: string, onLine: (line: string) => void): ChildProcess {
  // The same entry point this command runs from (dist in an install, the sources under tsx).
  // Their output is a pipe to this process: they log in the format this terminal would get.
  const env = { ...process.env, SEGMENTD_LOG_FORMAT: defaultLogFormat() };
  const c = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...args], { stdio: ["ignore", "pipe", "pipe"], env });
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
    .option("-d, --data-dir <dir>", "data directory (default ./.data, as `segmentd serve`): the development tenant's credentials; each process's data under <dir>/cluster")
    .option("-p, --port <port>", "the hub's port (default 8080); edge nodes take the next ones")
    .option("--database-url <url>", `the hub's ${DATABASE_URL_HELP}`)
    .option("--sites <names>", "edge sites, comma-separated", "edge-1,edge-2")
    .option("--no-demo", "do not load the demo into an empty development sandbox (env SEGMENTD_DEMO=0)")
    .action(async (action: string, o: ClusterCliOptions) => {
      if (action !== "up") throw new ConfigError(`unknown action '${action}' (use: segmentd cluster up)`);
      const config = configFromCli(o);
      const sites = o.sites.split(",").map((s) => s.trim()).filter((s) => s !== "");
      for (const s of sites) if (!SITE_NAME.test(s) || s === "hub") throw new ConfigError(`--sites: '${s}' must be 1-32 lower-case letters, digits or '-' (not 'hub')`);
      const basePort = o.port !== undefined ? parsePort(o.port, "--port") : 8080;
      // Every port is checked before any process starts (`npm start` may still hold 8080).
      await assertPortFree(config.host, basePort);
      for (const [i, s] of sites.entries()) {
        await assertPortFree(config.host, basePort + 1 + i).catch((err: unknown) => {
          throw err instanceof CliError ? new CliError(`port ${basePort + 1 + i} (edge site ${s}) is in use; pass --port <another port> (the edge sites take the ports after the hub's)`) : err;
        });
      }
      const root = path.join(config.dataDir, "cluster");
      mkdirSync(root, { recursive: true });
      // Every process must know the same organizations: without a configured one, the development
      // tenant of `npm start` (created once in the data directory) is written into a config file the processes share.
      let configFile = o.config;
      let dev: DevCredentials | undefined;
      if (config.organizations.length === 0) {
        dev = loadOrCreateDevCredentials(config.dataDir).credentials;
        const withDev = withDevTenant(config, dev);
        configFile = path.join(root, "cluster.config.json");
        writeFileSync(configFile, JSON.stringify({ organizations: withDev.organizations, auth: withDev.auth }, null, 2));
        process.stdout.write(`Development tenant (as \`npm start\`'s): org ${dev.orgId}, sandbox ${dev.sandboxName}, token ${dev.token}, API key ${dev.apiKey}\n`);
      }
      const nats: RunningNatsServer[] = [];
      const edgeUrls: string[] = [];
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
        const hubUrl = await listening(hub, "the hub");
        out(`hub                 ${hubUrl}  (${config.databaseUrl ? "PostgreSQL" : "embedded stores"})`);
        for (const [i, s] of sites.entries()) {
          const leaf = await startNatsServer({ dir: path.join(root, `nats-${s}`), domain: s, hubLeafUrl: hubNats.leafUrl! });
          nats.push(leaf);
          const edge = child(["edge", ...common, "-d", path.join(root, `edge-${s}`), "-p", String(basePort + 1 + i), "--location", s, "--nats", leaf.url], s, (l) => out(`[${s}] ${l}`));
          procs.push(edge);
          const edgeUrl = await listening(edge, `edge node ${s}`);
          edgeUrls.push(edgeUrl);
          out(`edge site ${s.padEnd(9)} ${edgeUrl}  (leaf NATS ${leaf.url}, JetStream domain ${s})`);
        }
        const setup = dev && o.demo !== false && process.env.SEGMENTD_DEMO !== "0" ? await clusterDemo(hubUrl, dev, out) : null;
        out("");
        out("Datasets, datastreams and definitions are created at the hub; interact requests go to an edge node.");
        if (setup) {
          for (const line of demoSetupLines(setup)) out(line);
          out("Try the edge audience at an edge node:");
          out(`  ${interactCurl(edgeUrls[0] ?? hubUrl, setup.datastream.id)}`);
        }
        out("Ctrl-C stops every process.");
      } catch (err) {
        await stopAll();
        throw err;
      }
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        out("stopping every process...");
        void stopAll().then(() => {
          out("cluster stopped.");
          process.exit(0);
        });
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
}

/** The demo at the hub, as `serve` loads it: data into an empty sandbox, then its datastream and audiences. */
async function clusterDemo(hubUrl: string, dev: DevCredentials, out: (line: string) => void): Promise<DemoSetup | null> {
  const target = demoTarget(hubUrl, dev);
  const r = await fetch(`${hubUrl}/data/foundation/catalog/dataSets?limit=1`, { headers: target.headers });
  const empty = r.ok && Object.keys(await r.json() as object).length === 0;
  if (!empty) return findDemoSetup(target);
  out(`loading the demo into sandbox ${dev.sandboxName} at the hub...`);
  const loaded = await loadDemoOverHttp(target, { ...STARTUP_DEMO, seed: 1 });
  out(`loaded the demo retail dataset: ${loaded.recordsWritten} records`);
  return ensureDemoSetup(target, loaded.datasets.events);
}
