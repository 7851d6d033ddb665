/**
 * Data lifecycle (hygiene): the one entry point the app uses.
 *
 *   const hygiene = await createHygiene({ dataDir, databaseUrl, profiles, clock, config });
 *   await app.register(hygienePlugin, { hygiene, authenticator, tenants });
 *   await hygiene.start();            // scheduler: due expirations, unfinished work orders
 *   ...
 *   await hygiene.stop(); await hygiene.deps.store.close();
 */
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import type { AuthDeps } from "../http/auth.js";
import type { Clock } from "../platform/clock.js";
import type { HygieneConfig } from "./entitlements.js";
import { Hygiene } from "./hygiene.js";
import type { LifecycleListener, LifecycleProfileStore } from "./lifecycle-exits.js";
import { hygieneAdminRoutes } from "./http/admin-routes.js";
import { hygieneRoutes } from "./http/routes.js";
import { openHygieneStore } from "./store/open.js";

export { Hygiene, type HygieneDeps } from "./hygiene.js";
export { parseHygieneConfig, defaultHygieneConfig, type HygieneConfig } from "./entitlements.js";
export type { HygieneStore } from "./store/types.js";
export type { LifecycleChange, LifecycleListener } from "./lifecycle-exits.js";

export async function createHygiene(options: {
  dataDir: string;
  databaseUrl?: string;
  profiles: LifecycleProfileStore;
  clock: Clock;
  config: HygieneConfig;
  onError?: (err: unknown, what: string) => void;
  onChange?: LifecycleListener;
}): Promise<Hygiene> {
  const store = await openHygieneStore({ dataDir: options.dataDir, databaseUrl: options.databaseUrl });
  return new Hygiene({ store, profiles: options.profiles, clock: options.clock, config: options.config, onError: options.onError, onChange: options.onChange });
}

/** Registers /data/core/hygiene/* (org tokens) and /admin/orgs/:orgId/entitlements (operator tokens), each in its own encapsulated context. */
export async function registerHygiene(app: FastifyInstance, deps: AuthDeps & { hygiene: Hygiene }): Promise<void> {
  await app.register(hygieneRoutes, deps);
  await app.register(hygieneAdminRoutes, deps);
}

/**
 * The hygiene routes as a named plugin. The scheduler's start and stop stay with the caller
 * (server.ts): it starts once the server listens and stops after the app has closed.
 */
export const hygienePlugin = fp(async (app: FastifyInstance, deps: AuthDeps & { hygiene: Hygiene }) => registerHygiene(app, deps), { name: "segmentd-hygiene", fastify: "5.x" });
