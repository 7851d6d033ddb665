/** @segmentd/server: what tests, benches and other packages use. */
export { buildApp, createServices, SERVICE_VERSION, type AppDeps, type Services } from "./app.js";
export { startServer, type RunningServer, type StartOptions } from "./server.js";
export { loadConfig, defaultConfig, DEFAULT_LIMITS, type Config, type SandboxLimits } from "./platform/config.js";
export { ManualClock, SystemClock, type Clock } from "./platform/clock.js";
export { InProcessBus, type EventBus, type BusEvents } from "./platform/bus.js";
export { createLogger } from "./platform/logger.js";
export { openMetadataStore } from "./stores/open-store.js";
export { openSqliteStore } from "./stores/embedded/sqlite-store.js";
export { openPgStore } from "./stores/postgres/pg-store.js";
export type * from "./stores/types.js";
export type * from "./stores/records.js";
export { signJwt } from "./services/auth/jwt.js";
export { type DevCredentials, readDevCredentials, curlExamples } from "./services/dev-bootstrap.js";
export { derivedSandboxId, type TenantContext } from "./services/tenancy.js";
