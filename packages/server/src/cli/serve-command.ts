/**
 * `segmentd serve`: start the HTTP service and shut it down gracefully on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the store).
 */
import type { Command } from "commander";
import path from "node:path";
import { DEFAULT_STREAM_PARTITIONS, loadConfig, parsePartitions, parsePort, type Config } from "../platform/config.js";
import { ManualClock } from "../platform/clock.js";
import { exitOnSignals } from "./shutdown.js";
import { startServer, type RunningServer } from "../server.js";
import { curlExamples, DEV_CREDENTIALS_FILE } from "../services/dev-bootstrap.js";
import { ensureDemoSetup, findDemoSetup, loadDemoIfEmpty, type DemoLoadResult, type DemoSetup } from "../profiles/demo-loader.js";
import { demoSetupLines, demoTarget, interactCurl, STARTUP_DEMO } from "./demo-command.js";
import { asPortInUse, assertPortFree } from "./cli-error.js";

/** The data directory when none is configured (platform/config.ts's default). */
const DEFAULT_DATA_DIR = "./.data";

export interface ServerCliOptions {
  config?: string;
  dataDir?: string;
  port?: string;
  host?: string;
  databaseUrl?: string;
  logLevel?: string;
  nats?: string;
  workers?: boolean;
  partitions?: string;
  /** commander's --no-demo */
  demo?: boolean;
}

export function configFromCli(o: ServerCliOptions): Config {
  return loadConfig({
    configFile: o.config,
    overrides: {
      ...(o.dataDir !== undefined ? { dataDir: o.dataDir } : {}),
      ...(o.port !== undefined ? { port: parsePort(o.port, "--port") } : {}),
      ...(o.host !== undefined ? { host: o.host } : {}),
      ...(o.databaseUrl !== undefined ? { databaseUrl: o.databaseUrl } : {}),
      ...(o.logLevel !== undefined ? { logLevel: o.logLevel } : {}),
      ...(o.nats !== undefined ? { natsUrl: o.nats } : {}),
      ...(o.workers === true || o.partitions !== undefined ? { streamingWorkers: { partitions: o.partitions === undefined ? DEFAULT_STREAM_PARTITIONS : parsePartitions(o.partitions, "--partitions") } } : {}),
    },
  });
}

/** `--database-url`'s help, the same wherever the option appears (jobs, cluster, worker say whose data it is). */
export const DATABASE_URL_HELP = "PostgreSQL URL: all data (metadata, profiles, memberships, jobs, data lifecycle) there instead of the embedded SQLite files of the data directory (env SEGMENTD_DATABASE_URL)";

/** The options a command that only reads the configuration needs (where the data is, where the server listens). */
export function addLocationOptions(cmd: Command): Command {
  return cmd
    .option("-c, --config <file>", "config file (default ./segmentd.config.json when present; env SEGMENTD_CONFIG)")
    .option("-d, --data-dir <dir>", "data directory (default ./.data; env SEGMENTD_DATA_DIR)")
    .option("-p, --port <port>", "port (default 8080; env SEGMENTD_PORT)")
    .option("-H, --host <host>", "interface to listen on (default 127.0.0.1; env SEGMENTD_HOST)");
}

export function addServerOptions(cmd: Command, o: { databaseUrl?: boolean } = {}): Command {
  addLocationOptions(cmd);
  if (o.databaseUrl !== false) cmd.option("--database-url <url>", DATABASE_URL_HELP);
  return cmd.option("--log-level <level>", "pino log level (default info; env SEGMENTD_LOG_LEVEL; SEGMENTD_LOG_FORMAT=pretty|json chooses the format)");
}

export function registerServeCommand(program: Command): void {
  addServerOptions(program.command("serve").description("start the segmentd HTTP service"))
    .option("--nats <url>", "NATS server with JetStream: run as the hub of edge nodes (env SEGMENTD_NATS_URL; see docs/deployment.md)")
    .option("--workers", "with --nats and --database-url: streaming evaluation by `segmentd worker` processes (config streamingWorkers; docs/deployment.md)")
    .option("--partitions <n>", "with --workers: the profile-keyed partitions (default 64, fixed for a deployment; env SEGMENTD_STREAM_PARTITIONS)")
    .option("--no-demo", "do not load the demo (retail data, a datastream, example audiences) into an empty development sandbox (env SEGMENTD_DEMO=0)")
    .action(async (o: ServerCliOptions) => {
    const config = configFromCli(o);
    // A busy port is refused before anything opens: one line, not the shutdown errors of a half-started server.
    await assertPortFree(config.host, config.port);
    const out = (line: string) => process.stdout.write(line + "\n");
    let server: RunningServer;
    try {
      server = await startServer(config, testClockOf(process.env));
    } catch (err) {
      throw asPortInUse(err, config.port);
    }
    // Before anything else is awaited (the demo load below): a signal during it must shut down cleanly too.
    exitOnSignals({
      timeoutMs: config.shutdownTimeoutMs,
      close: () => server.close(),
      log: { info: (signal) => server.app.log.info({ signal }, "shutting down: finishing in-flight requests"), error: (what, err) => server.app.log.error({ err }, what) },
      stopped: () => out("segmentd stopped."),
    });
    const c = server.devCredentials;
    // The demo's requests to this server, counted until the banner (their logs must come before it).
    let demoRequests = 0;
    const countRequest = (_req: unknown, res: NodeJS.EventEmitter) => {
      demoRequests += 1;
      res.once("close", () => (demoRequests -= 1));
    };
    server.app.server.on("request", countRequest);
    let demo: { loaded: DemoLoadResult | null; setup: DemoSetup | null } | null = null;
    // A first-time user gets data, a datastream and audiences at once; an existing sandbox is never changed.
    if (c && o.demo !== false && process.env.SEGMENTD_DEMO !== "0") {
      demo = { loaded: null, setup: null };
      try {
        const target = demoTarget(server.url, c);
        const empty = (await server.profiles.listDatasets({ orgId: c.orgId, sandboxName: c.sandboxName }, { limit: 1 })).length === 0;
        if (empty) out(`segmentd: loading the demo into sandbox ${c.sandboxName} (first start)...`);
        demo.loaded = await loadDemoIfEmpty(server.profiles, { orgId: c.orgId, sandboxName: c.sandboxName }, target, { ...STARTUP_DEMO, seed: 1 });
        demo.setup = demo.loaded ? await ensureDemoSetup(target, demo.loaded.datasets.events) : await findDemoSetup(target);
      } catch (err) {
        server.app.log.error({ err }, "loading the demo failed; the service keeps running");
      }
    }
    // The banner comes last, after the start-up logs, so that it is what the terminal shows: the
    // demo's last requests log their completion after answering, and pino writes asynchronously.
    for (const until = Date.now() + 2000; demoRequests > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 5));
    server.app.server.off("request", countRequest);
    await new Promise((r) => setTimeout(r, 10));
    await new Promise<void>((r) => {
      const log = server.app.log as unknown as { flush?: (cb?: (err?: Error) => void) => void };
      const done = setTimeout(r, 1000);
      const settle = () => {
        clearTimeout(done);
        r();
      };
      try {
        if (typeof log.flush === "function") log.flush(settle);
        else settle();
      } catch {
        settle();
      }
    });
    out(`segmentd listening on ${server.url} (store: ${server.store.kind}${server.store.kind === "embedded" ? `, data dir ${config.dataDir}` : ""})`);
    out(`OpenAPI: ${server.url}/openapi.json  docs: ${server.url}/docs  audience tool: ${server.url}/  health: ${server.url}/healthz`);
    if (c) {
      out("");
      out(`Development tenant (${server.devCredentialsCreated ? "created" : "loaded"}; stored in ${path.join(config.dataDir, DEV_CREDENTIALS_FILE)}):`);
      out(`  org ${c.orgId}, sandbox ${c.sandboxName}, api key ${c.apiKey}`);
      out(`  print again with: ${tokenHint(config.dataDir)}`);
      if (demo?.loaded) out(`Loaded the demo retail dataset into sandbox ${c.sandboxName}: ${demo.loaded.recordsWritten} records (load more with: ${demoHint(server.url, config.dataDir)}).`);
      if (demo?.setup) for (const line of demoSetupLines(demo.setup)) out(line);
      out("Try it:");
      for (const line of curlExamples(server.url, c)) out(line);
      if (demo?.setup) out(interactCurl(server.url, demo.setup.datastream.id));
      out("");
    }
  });
}

/**
 * The command that prints the credentials again, as typed in the checkout: `npx` finds the
 * `segmentd` that npm linked into node_modules/.bin (it is not on PATH).
 */
export function tokenHint(dataDir: string): string {
  return path.resolve(dataDir) === path.resolve(DEFAULT_DATA_DIR) ? "npx segmentd token" : `npx segmentd token --data-dir ${dataDir}`;
}

/** `segmentd demo` against this server, with the flags its defaults would get wrong. */
export function demoHint(url: string, dataDir: string): string {
  return ["npx segmentd demo", ...(url === "http://127.0.0.1:8080" ? [] : [`--url ${url}`]), ...(path.resolve(dataDir) === path.resolve(DEFAULT_DATA_DIR) ? [] : [`--data-dir ${dataDir}`])].join(" ");
}

/** SEGMENTD_TEST_CLOCK=<epoch ms>: a clock only `POST /admin/clock` moves (scripted test runs; never production). */
function testClockOf(env: NodeJS.ProcessEnv): { testClock?: ManualClock } {
  const v = env.SEGMENTD_TEST_CLOCK;
  if (v === undefined || v === "") return {};
  if (!/^\d+$/.test(v)) throw new Error(`SEGMENTD_TEST_CLOCK must be epoch milliseconds, got "${v}"`);
  return { testClock: new ManualClock(Number(v)) };
}
