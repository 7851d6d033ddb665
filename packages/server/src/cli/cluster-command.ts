/**
 * `segmentd cluster up` (`npm run cluster`): a local multi-process deployment to try — the hub's
 * nats-server (JetStream domain `hub`), the hub (`segmentd serve --nats`, on PostgreSQL when a
 * database URL is configured, embedded otherwise), and N edge sites, each a leaf nats-server with
 * its own domain and an edge node (`segmentd edge`). Uses the development tenant of `npm start`
 * (the same data directory's credentials) and loads the demo into the hub as `serve` does. Prints
 * every address and an interact call to an edge node; Ctrl-C stops them all.
 * `--hubs N` (N > 1, PostgreSQL only) runs N hubs behind HAProxy (cluster-haproxy.ts) on the
 * given port, the hubs on the ports after it; a hub that dies is started again, as a service
 * manager would.
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
import { haproxyConfig, startHaproxy } from "./cluster-haproxy.js";

interface ClusterCliOptions extends Omit<ServerCliOptions, "workers"> {
  sites: string;
  hubs: string;
  workers?: string;
}

/** Most hubs `--hubs` starts on one machine. */
const MAX_HUBS = 9;

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

function listening(c: ChildProcess, label: string, ready = /listening on (http:\/\/\S+)/): Promise<string> {
  return new Promise((resolve, reject) => {
    c.stdout!.on("data", (d: Buffer) => {
      const m = ready.exec(d.toString());
      if (m) resolve(m[1]!);
    });
    c.once("exit", (code) => reject(new Error(`${label} exited (${code}) before it was ready`)));
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
    .option("--hubs <n>", `hubs behind HAProxy on --port (1-${MAX_HUBS}; more than 1 needs --database-url: they share PostgreSQL)`, "1")
    .option("--workers <n>", `streaming workers (0-${MAX_HUBS}; default 1 with several hubs, whose streaming they evaluate, else 0; needs --database-url)`)
    .option("--no-demo", "do not load the demo into an empty development sandbox (env SEGMENTD_DEMO=0)")
    .action(async (action: string, o: ClusterCliOptions) => {
      if (action !== "up") throw new ConfigError(`unknown action '${action}' (use: segmentd cluster up)`);
      // `--workers` here counts worker processes; the hubs get serve's `--workers` flag from it.
      const config = configFromCli({ ...o, workers: undefined });
      const sites = o.sites.split(",").map((s) => s.trim()).filter((s) => s !== "");
      for (const s of sites) if (!SITE_NAME.test(s) || s === "hub") throw new ConfigError(`--sites: '${s}' must be 1-32 lower-case letters, digits or '-' (not 'hub')`);
      const hubCount = Number(o.hubs);
      if (!Number.isInteger(hubCount) || hubCount < 1 || hubCount > MAX_HUBS) throw new ConfigError(`--hubs: '${o.hubs}' must be a whole number from 1 to ${MAX_HUBS}`);
      if (hubCount > 1 && !config.databaseUrl) throw new ConfigError(`--hubs ${hubCount}: several hubs share one PostgreSQL database; pass --database-url (or SEGMENTD_DATABASE_URL)`);
      const workerCount = Number(o.workers ?? (hubCount > 1 ? 1 : 0));
      if (!Number.isInteger(workerCount) || workerCount < 0 || workerCount > MAX_HUBS) throw new ConfigError(`--workers: '${o.workers}' must be a whole number from 0 to ${MAX_HUBS}`);
      // Several hubs evaluating streaming in process would each know only the records they stored.
      if (hubCount > 1 && workerCount === 0) throw new ConfigError(`--hubs ${hubCount} --workers 0: several hubs evaluate streaming through workers; pass --workers 1 or more`);
      if (workerCount > 0 && !config.databaseUrl) throw new ConfigError(`--workers ${workerCount}: streaming workers write to PostgreSQL; pass --database-url (or SEGMENTD_DATABASE_URL)`);
      const basePort = o.port !== undefined ? parsePort(o.port, "--port") : 8080;
      // With several hubs HAProxy takes --port and the hubs the ports after it; the edge sites follow.
      const hubPorts = hubCount === 1 ? [basePort] : Array.from({ length: hubCount }, (_, i) => basePort + 1 + i);
      const firstEdgePort = hubPorts[hubPorts.length - 1]! + 1;
      // Every port is checked before any process starts (`npm start` may still hold 8080).
      await assertPortFree(config.host, basePort);
      for (const [i, p] of hubPorts.entries()) {
        if (p !== basePort) await assertPortFree(config.host, p, `hub-${i + 1}`);
      }
      for (const [i, s] of sites.entries()) {
        await assertPortFree(config.host, firstEdgePort + i).catch((err: unknown) => {
          throw err instanceof CliError ? new CliError(`port ${firstEdgePort + i} (edge site ${s}) is in use; pass --port <another port> (the edge sites take the ports after the hub's)`) : err;
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
      let stopping = false;
      const stopAll = async () => {
        stopping = true;
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
        /** Starts a process and, with several hubs, starts it again when it dies (as systemd's Restart= would). */
        const supervised = async (label: string, args: string[], ready: RegExp | undefined, describe: (found: string, pid: number | undefined) => string): Promise<string> => {
          const p = child(args, label, (l) => out(`[${label}] ${l}`));
          procs.push(p);
          const found = await listening(p, `the ${label}`, ready);
          out(`${label.padEnd(20)}${describe(found, p.pid)}`);
          if (hubCount > 1) {
            p.once("exit", (code, signal) => {
              if (stopping) return;
              procs.splice(procs.indexOf(p), 1);
              out(`${label} exited (${signal ?? code}); starting it again`);
              supervised(label, args, ready, describe).catch((err: unknown) => out(`${label} did not start again: ${err instanceof Error ? err.message : String(err)}`));
            });
          }
          return found;
        };
        const database = config.databaseUrl ? ["--database-url", config.databaseUrl] : [];
        const startHub = (i: number): Promise<string> => {
          const label = hubCount === 1 ? "hub" : `hub-${i + 1}`;
          const args = ["serve", ...common, "-d", path.join(root, hubCount === 1 ? "hub" : label), "-p", String(hubPorts[i]), "--nats", hubNats.url, ...database, ...(workerCount > 0 ? ["--workers"] : [])];
          return supervised(label, args, undefined, (url, pid) => `${url}  (${config.databaseUrl ? "PostgreSQL" : "embedded stores"}; pid ${pid})`);
        };
        // The first hub creates the schemas; the others then start together.
        let hubUrl = await startHub(0);
        if (hubCount > 1) {
          await Promise.all(hubPorts.slice(1).map((_, k) => startHub(k + 1)));
          const proxy = await startHaproxy(root, haproxyConfig({ host: config.host, port: basePort, backends: hubPorts.map((port, i) => ({ name: `hub-${i + 1}`, host: config.host, port })) }));
          procs.push(proxy.child);
          hubUrl = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${basePort}`;
          await proxyReady(hubUrl);
          out(`HAProxy             ${hubUrl}  (→ ${hubCount} hubs, round robin, GET /readyz every 1 s; config ${proxy.configFile}; pid ${proxy.child.pid})`);
        }
        for (let k = 1; k <= workerCount; k++) {
          // A worker takes no --log-level (SEGMENTD_LOG_LEVEL reaches it through the environment).
          const args = ["worker", ...(configFile ? ["-c", configFile] : []), "--nats", hubNats.url, ...database, "--id", `worker-${k}`];
          await supervised(`worker-${k}`, args, /segmentd worker (\S+) started/, (id, pid) => `streaming worker ${id} (pid ${pid})`);
        }
        for (const [i, s] of sites.entries()) {
          const leaf = await startNatsServer({ dir: path.join(root, `nats-${s}`), domain: s, hubLeafUrl: hubNats.leafUrl! });
          nats.push(leaf);
          const edge = child(["edge", ...common, "-d", path.join(root, `edge-${s}`), "-p", String(firstEdgePort + i), "--location", s, "--nats", leaf.url], s, (l) => out(`[${s}] ${l}`));
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
      let stopRequested = false;
      const stop = () => {
        if (stopRequested) return;
        stopRequested = true;
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

/** Until HAProxy answers /readyz from a hub (its first health checks passed). */
async function proxyReady(url: string, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const ok = await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) return;
    if (Date.now() - t0 > ms) throw new CliError(`HAProxy at ${url} did not answer /readyz from a hub within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
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
