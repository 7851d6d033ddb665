/**
 * Start a server from configuration: dev tenant bootstrap (when no
 * organization is configured), store, services, default merge policies, HTTP.
 * `close()` stops accepting, waits for in-flight requests, then closes the store.
 */
import type { FastifyInstance } from "fastify";
import { buildApp, createServices, type Services } from "./app.js";
import { InProcessBus, type EventBus } from "./platform/bus.js";
import { SystemClock, type Clock } from "./platform/clock.js";
import type { Config } from "./platform/config.js";
import { createLogger, type Logger } from "./platform/logger.js";
import { openMetadataStore } from "./stores/open-store.js";
import type { MetadataStore } from "./stores/types.js";
import { loadOrCreateDevCredentials, withDevTenant, type DevCredentials } from "./services/dev-bootstrap.js";

export interface StartOptions {
  clock?: Clock;
  logger?: Logger;
  /** Use this store instead of opening one from the config (tests). Closed by close(). */
  store?: MetadataStore;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  config: Config;
  store: MetadataStore;
  services: Services;
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
  const store = options.store ?? (await openMetadataStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl }));
  const clock = options.clock ?? new SystemClock();
  const bus = new InProcessBus((topic, err) => logger.error({ err, topic }, "bus subscriber failed"));
  try {
    const deps = { config, store, clock, bus, logger };
    const services = createServices(deps);
    for (const tenant of services.tenants.all()) await services.mergePolicies.ensureDefault(tenant);
    const app = await buildApp(deps, services);
    await app.listen({ host: config.host, port: config.port });
    const addr = app.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.port;
    const host = config.host.includes(":") ? `[${config.host}]` : config.host;
    let closing: Promise<void> | undefined;
    return {
      app,
      url: `http://${host}:${port}`,
      config,
      store,
      services,
      bus,
      devCredentials,
      devCredentialsCreated,
      close() {
        closing ??= (async () => {
          // app.close() stops accepting and waits for in-flight requests. Their
          // keep-alive connections turn idle only after the response, so keep
          // closing idle connections; otherwise close() waits out keepAliveTimeout.
          const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
          try {
            await app.close();
          } finally {
            clearInterval(sweep);
          }
          await store.close();
        })();
        return closing;
      },
    };
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
}
