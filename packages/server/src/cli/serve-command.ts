/**
 * `segmentd serve`: start the HTTP service and shut it down gracefully on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the store).
 */
import type { Command } from "commander";
import path from "node:path";
import { DEFAULT_STREAM_PARTITIONS, loadConfig, parsePartitions, parsePort, type Config } from "../platform/config.js";
import { ManualClock } from "../platform/clock.js";
import { exitOnSignals } from "./shutdown.js";
import { startServer } from "../server.js";
import { curlExamples, DEV_CREDENTIALS_FILE } from "../services/dev-bootstrap.js";
import { loadDemoIfEmpty } from "../profiles/demo-loader.js";
import { demoTarget, STARTUP_DEMO } from "./demo-command.js";

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

export function addServerOptions(cmd: Command): Command {
  return cmd
    .option("-c, --config <file>", "config file (default ./segmentd.config.json when present; env SEGMENTD_CONFIG)")
    .option("-d, --data-dir <dir>", "data directory (default ./.data; env SEGMENTD_DATA_DIR)")
    .option("-p, --port <port>", "port (default 8080; env SEGMENTD_PORT)")
    .option("-H, --host <host>", "interface to listen on (default 127.0.0.1; env SEGMENTD_HOST)")
    .option("--database-url <url>", "PostgreSQL URL for metadata (env SEGMENTD_DATABASE_URL)")
    .option("--log-level <level>", "pino log level (default info; env SEGMENTD_LOG_LEVEL)");
}

export function registerServeCommand(program: Command): void {
  addServerOptions(program.command("serve").description("start the segmentd HTTP service"))
    .option("--nats <url>", "NATS server with JetStream: run as the hub of edge nodes (env SEGMENTD_NATS_URL; see docs/deployment.md)")
    .option("--workers", "with --nats and --database-url: streaming evaluation by `segmentd worker` processes (config streamingWorkers; docs/deployment.md)")
    .option("--partitions <n>", "with --workers: the profile-keyed partitions (default 64, fixed for a deployment; env SEGMENTD_STREAM_PARTITIONS)")
    .option("--no-demo", "do not load the small demo dataset into an empty development sandbox (env SEGMENTD_DEMO=0)")
    .action(async (o: ServerCliOptions) => {
    const config = configFromCli(o);
    const server = await startServer(config, testClockOf(process.env));
    // Before anything else is awaited (the demo load below): a signal during it must shut down cleanly too.
    exitOnSignals({
      timeoutMs: config.shutdownTimeoutMs,
      close: () => server.close(),
      log: { info: (signal) => server.app.log.info({ signal }, "shutting down: finishing in-flight requests"), error: (what, err) => server.app.log.error({ err }, what) },
    });
    const out = (line: string) => process.stdout.write(line + "\n");
    out(`segmentd listening on ${server.url} (store: ${server.store.kind}${server.store.kind === "embedded" ? `, data dir ${config.dataDir}` : ""})`);
    out(`OpenAPI: ${server.url}/openapi.json  docs: ${server.url}/docs  health: ${server.url}/healthz`);
    if (server.devCredentials) {
      const c = server.devCredentials;
      out("");
      out(`Development tenant (${server.devCredentialsCreated ? "created" : "loaded"}; stored in ${path.join(config.dataDir, DEV_CREDENTIALS_FILE)}):`);
      out(`  org ${c.orgId}, sandbox ${c.sandboxName}, api key ${c.apiKey}`);
      out(`  print again with: segmentd token --data-dir ${config.dataDir}`);
      out("Try it:");
      for (const line of curlExamples(server.url, c)) out(line);
      out("");
      // A first-time user gets data to segment at once; an existing sandbox is never touched.
      if (o.demo !== false && process.env.SEGMENTD_DEMO !== "0") {
        try {
          const loaded = await loadDemoIfEmpty(server.profiles, { orgId: c.orgId, sandboxName: c.sandboxName }, demoTarget(server.url, c), {
            ...STARTUP_DEMO,
            now: Date.now(),
            seed: 1,
          });
          if (loaded) out(`Loaded the demo retail dataset into sandbox ${c.sandboxName}: ${loaded.recordsWritten} records (load more with: segmentd demo).`);
        } catch (err) {
          server.app.log.error({ err }, "loading the demo dataset failed; the service keeps running");
        }
      }
    }
  });
}

/** SEGMENTD_TEST_CLOCK=<epoch ms>: a clock only `POST /admin/clock` moves (scripted test runs; never production). */
function testClockOf(env: NodeJS.ProcessEnv): { testClock?: ManualClock } {
  const v = env.SEGMENTD_TEST_CLOCK;
  if (v === undefined || v === "") return {};
  if (!/^\d+$/.test(v)) throw new Error(`SEGMENTD_TEST_CLOCK must be epoch milliseconds, got "${v}"`);
  return { testClock: new ManualClock(Number(v)) };
}
