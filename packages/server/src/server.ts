/**
 * Start a server from configuration: dev tenant bootstrap (when no
 * organization is configured), store, services, default merge policies, HTTP.
 * `close()` stops accepting, waits for in-flight requests, then closes the store.
 */
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { buildApp, createServices, type Services } from "./app.js";
import { InProcessBus, type EventBus } from "./platform/bus.js";
import { SystemClock, type Clock } from "./platform/clock.js";
import type { Config } from "./platform/config.js";
import { createLogger, type Logger } from "./platform/logger.js";
import { openMetadataStore } from "./stores/open-store.js";
import type { MetadataStore } from "./stores/types.js";
import { loadOrCreateDevCredentials, withDevTenant, type DevCredentials } from "./services/dev-bootstrap.js";
import { openProfileStore } from "./profiles/open.js";
import { removeStaleSpools } from "./profiles/upload-spool.js";
import type { ProfileStore } from "./profiles/store.js";
import { createHygiene, parseHygieneConfig, type Hygiene, type LifecycleListener } from "./hygiene/index.js";

export interface StartOptions {
  clock?: Clock;
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
  const clock = options.clock ?? new SystemClock();
  const bus = new InProcessBus((topic, err) => logger.error({ err, topic }, "bus subscriber failed"));
  let profiles: ProfileStore | undefined;
  let hygiene: Hygiene | undefined;
  // Lifecycle changes reach the streaming engine, which exists only once the app is built.
  let onLifecycleChange: LifecycleListener | undefined;
  try {
    profiles = options.profiles ?? openProfileStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, worker: config.profileStore?.worker !== false, onWorkerCrash: (err) => logger.error({ err }, "profile store worker crashed") });
    hygiene = await createHygiene({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      profiles,
      clock,
      config: hygieneConfig,
      onError: (err, what) => logger.error({ err }, `data lifecycle: ${what} failed`),
      onChange: (change) => onLifecycleChange?.(change),
    });
    // Uploads a killed process was receiving (embedded: this process alone owns the data directory).
    if (config.databaseUrl === undefined) await removeStaleSpools(path.join(config.dataDir, "uploads"));
    const deps = { config, store, clock, bus, logger, profiles, hygiene };
    const services = createServices(deps);
    for (const tenant of services.tenants.all()) await services.mergePolicies.ensureDefault(tenant);
    const app = await buildApp(deps, services);
    const realtime = app.realtime;
    if (realtime) {
      // Deleted or updated records change continuous memberships at once (a vanished
      // profile exits every audience; hygiene itself recorded those exits), vanished
      // profiles leave every edge location, and changed ones are projected again.
      onLifecycleChange = async (change) => {
        const tenant = services.tenants.resolve(change.scope.orgId, change.scope.sandboxName);
        if (!tenant) return;
        await realtime.streaming.onProfilesChanged(tenant, [...change.changedProfileIds, ...change.removedProfileIds]);
        await realtime.projector.forget(tenant, change.removedProfileIds);
        await realtime.projector.project(tenant, change.changedProfileIds);
      };
    }
    await app.listen({ host: config.host, port: config.port });
    await hygiene.start();
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
          await app.close();
          await running.hygiene.stop();
          await running.hygiene.deps.store.close();
          await running.profiles.close();
          await store.close();
        })();
        return closing;
      },
    };
    return running;
  } catch (err) {
    await hygiene?.stop().catch(() => {});
    await hygiene?.deps.store.close().catch(() => {});
    await profiles?.close().catch(() => {});
    await store.close().catch(() => {});
    throw err;
  }
}
