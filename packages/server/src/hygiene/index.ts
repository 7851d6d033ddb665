/**
 * Data lifecycle (hygiene): the one entry point the app uses.
 *
 *   await app.register(hygienePlugin, { ...auth, dataDir, databaseUrl, profiles, clock, config, onChange });
 *   app.hygiene!.quotas ...   // started once the app is ready, stopped and closed with it
 *
 * `createHygiene` and `registerHygiene` do the same by hand (tests, benches).
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

export interface HygieneOpenOptions {
  dataDir: string;
  databaseUrl?: string;
  profiles: LifecycleProfileStore;
  clock: Clock;
  config: HygieneConfig;
  onError?: (err: unknown, what: string) => void;
  /** Records deleted or updated: the app passes the changes on to the engines that hold profiles. */
  onChange?: LifecycleListener;
}

export async function createHygiene(options: HygieneOpenOptions): Promise<Hygiene> {
  const store = await openHygieneStore({ dataDir: options.dataDir, databaseUrl: options.databaseUrl });
  return new Hygiene({ store, profiles: options.profiles, clock: options.clock, config: options.config, onError: options.onError, onChange: options.onChange });
}

/** Registers /data/core/hygiene/* (org tokens) and /admin/orgs/:orgId/entitlements (operator tokens), each in its own encapsulated context. */
export async function registerHygiene(app: FastifyInstance, deps: AuthDeps & { hygiene: Hygiene }): Promise<void> {
  await app.register(hygieneRoutes, deps);
  await app.register(hygieneAdminRoutes, deps);
}

declare module "fastify" {
  interface FastifyInstance {
    /** Data lifecycle; present when the hygiene plugin is registered. */
    hygiene?: Hygiene;
  }
}

export type HygienePluginOptions = AuthDeps & HygieneOpenOptions;

/**
 * The data lifecycle capability: opens its store, serves its routes, decorates the app with
 * `hygiene`, starts the scheduler (unfinished work orders resumed, due expirations) once the app
 * is ready, and stops it and closes its store when the app closes (before the profile store).
 */
export const hygienePlugin = fp(
  async (app: FastifyInstance, o: HygienePluginOptions) => {
    const hygiene = await createHygiene(o);
    app.addHook("onClose", async () => {
      try {
        await hygiene.stop();
      } finally {
        await hygiene.deps.store.close();
      }
    });
    await registerHygiene(app, { authenticator: o.authenticator, tenants: o.tenants, hygiene });
    app.decorate("hygiene", hygiene);
    app.addHook("onReady", async () => {
      // Several hubs (app.hubLeases): the holder of the lifecycle lease polls, and resumes unfinished orders when it gains it.
      const roles = app.hubLeases;
      if (roles !== undefined) {
        hygiene.gate = () => roles.holds("lifecycle");
        hygiene.runner.cluster = { runnerId: roles.hubId, liveRunners: () => roles.liveHubs() };
        roles.onGained?.("lifecycle", () => hygiene.resumeUnfinished());
      }
      await hygiene.start();
    });
  },
  { name: "segmentd-hygiene", fastify: "5.x" },
);
