/**
 * Start a server from configuration: dev tenant bootstrap (when no
 * organization is configured), store, services, default merge policies, HTTP.
 * `close()` stops accepting, waits for in-flight requests, then closes the store.
 */
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildApp, createServices, type Services } from "./app.js";
import { InProcessBus, type EventBus } from "./platform/bus.js";
import { SystemClock, type Clock, type ManualClock } from "./platform/clock.js";
import type { Config } from "./platform/config.js";
import { createLogger, type Logger } from "./platform/logger.js";
import { openMetadataStore } from "./stores/open-store.js";
import type { MetadataStore } from "./stores/types.js";
import { loadOrCreateDevCredentials, withDevTenant, type DevCredentials } from "./services/dev-bootstrap.js";
import { openProfileStore } from "./profiles/open.js";
import { removeStaleSpools } from "./profiles/upload-spool.js";
import type { ProfileStore } from "./profiles/store.js";
import { parseHygieneConfig, type Hygiene } from "./hygiene/index.js";

export interface StartOptions {
  clock?: Clock;
  /**
   * A clock that moves only through `POST /admin/clock` (operator token), which also runs the
   * streaming sweep: scripted runs that must give the same result every time (the workers'
   * equivalence suite). `segmentd serve` sets it from SEGMENTD_TEST_CLOCK; never for production.
   */
  testClock?: ManualClock;
  logger?: Logger;
  /** Use this store instead of opening one from the config (tests). Closed by close(). */
  store?: MetadataStore;
  /** Use this profile store instead of opening one from the config (tests). Closed by close(). */
  profiles?: ProfileStore;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  config: Config;
  store: MetadataStore;
  services: Services;
  /** The profile data plane's store (datasets, fragments, events, memberships). */
  profiles: ProfileStore;
  /** Data lifecycle: quotas, work orders, dataset expirations. */
  hygiene: Hygiene;
  bus: EventBus;
  /** Present when the server runs the local development tenant. */
  devCredentials?: DevCredentials;
  devCredentialsCreated: boolean;
  close(): Promise<void>;
}

export async function startServer(baseConfig: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(baseConfig.logLevel);
  let config = baseConfig;
  let devCredentials: DevCredentials | undefined;
  let devCredentialsCreated = false;
  if (config.organizations.length === 0) {
    const dev = loadOrCreateDevCredentials(config.dataDir);
    devCredentials = dev.credentials;
    devCredentialsCreated = dev.created;
    config = withDevTenant(config, dev.credentials);
  }
  // Validate the hygiene section before opening anything, so a bad config file fails fast.
  const hygieneConfig = parseHygieneConfig(config.hygiene);
  const store = options.store ?? (await openMetadataStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl }));
  const clock = options.testClock ?? options.clock ?? new SystemClock();
  const bus = new InProcessBus((topic, err) => logger.error({ err, topic }, "bus subscriber failed"));
  let profiles: ProfileStore | undefined;
  try {
    profiles = options.profiles ?? openProfileStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, worker: config.profileStore?.worker !== false, onWorkerCrash: (err) => logger.error({ err }, "profile store worker crashed") });
    // Uploads a killed process was receiving (embedded: this process alone owns the data directory).
    if (config.databaseUrl === undefined) await removeStaleSpools(path.join(config.dataDir, "uploads"));
    const deps = { config, store, clock, bus, logger, profiles, hygiene: hygieneConfig, ...(options.testClock ? { testClock: options.testClock } : {}) };
    const services = createServices(deps);
    for (const tenant of services.tenants.all()) await services.mergePolicies.ensureDefault(tenant);
    // Every capability is a plugin of the app: it opens, starts and closes what it owns.
    const app = await buildApp(deps, services);
    const hygiene = app.hygiene!;
    try {
      await app.listen({ host: config.host, port: config.port });
    } catch (err) {
      await app.close().catch(() => {});
      throw err;
    }
    const addr = app.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.port;
    const host = config.host.includes(":") ? `[${config.host}]` : config.host;
    let closing: Promise<void> | undefined;
    const running: RunningServer = {
      app,
      url: `http://${host}:${port}`,
      config,
      store,
      services,
      profiles,
      hygiene,
      bus,
      devCredentials,
      devCredentialsCreated,
      close() {
        closing ??= (async () => {
          // The plugins close what they own (hygiene's store, the engines) in reverse order.
          await app.close();
          await running.profiles.close();
          await store.close();
        })();
        return closing;
      },
    };
    return running;
  } catch (err) {
    await profiles?.close().catch(() => {});
    await store.close().catch(() => {});
    throw err;
  }
}
