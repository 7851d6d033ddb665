// Registers the profile data plane's HTTP API under AEP's paths. The app registers
// `profilesPlugin` after the streaming and edge plugins, whose engines it feeds: stored records
// go to streaming evaluation and to the edge locations. `registerProfileRoutes` serves
// the same routes on any app, with the hooks its caller gives (test harnesses).
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { accessRoutes } from "./access-routes.js";
import { batchRoutes, IMPORT_PREFIX } from "./batch-routes.js";
import { catalogRoutes, CATALOG_PREFIX } from "./catalog-routes.js";
import { COLLECTION_PREFIX, streamingRoutes } from "./streaming-routes.js";
import type { ProfileRoutesOptions } from "./context.js";
import { quarantineRoutes } from "./quarantine-routes.js";

export { policiesFromService, type MergePolicyResolver, type ProfileRoutesOptions, type ProfileRoutesStore } from "./context.js";

export async function registerProfileRoutes(app: FastifyInstance, opts: ProfileRoutesOptions & { uploadSpoolDir?: string }): Promise<void> {
  await app.register(catalogRoutes, { prefix: CATALOG_PREFIX, ...opts });
  await app.register(batchRoutes, { prefix: IMPORT_PREFIX, ...opts });
  await app.register(streamingRoutes, { prefix: COLLECTION_PREFIX, ...opts });
  await app.register(accessRoutes, { prefix: "/data/core/ups", ...opts });
  await app.register(quarantineRoutes, { prefix: "/data/core/ups", ...opts });
}

/** Options of `profilesPlugin`: the routes' own, without the hooks it takes from `app.streaming` and `app.edge`. */
export type ProfilesPluginOptions = Omit<ProfileRoutesOptions, "onStored" | "decideAhead" | "onBatchCompleted"> & { uploadSpoolDir?: string };

/**
 * The profiles capability. Depends on the streaming and edge plugins (by name, checked at
 * registration): streaming ingestion → continuous evaluation of the affected definitions, and
 * the hub's new state projected to the edge locations that hold the profiles.
 */
export const profilesPlugin = fp(
  async (app: FastifyInstance, opts: ProfilesPluginOptions) => {
    const { streaming, edge } = app;
    if (!streaming || !edge) throw new Error("segmentd-profiles: app.streaming or app.edge is missing (register the segmentd-streaming and segmentd-edge plugins first)");
    const engine = streaming.engine;
    await registerProfileRoutes(app, {
      ...opts,
      onStored: async (tenant, result) => {
        await engine.onRecordsStored(tenant, result.stored, result.storedPids, result.ahead);
        await edge.projector.project(tenant, result.profileIds);
      },
      // Known profiles' events are evaluated before their append: one commit for both.
      decideAhead: (tenant, records) => engine.decideAhead(tenant, records),
      // A completed batch's profiles are evaluated again (their records are not replayed one by one).
      onBatchCompleted: async (tenant, profileIds) => {
        await engine.onProfilesChanged(tenant, profileIds);
        await edge.projector.project(tenant, profileIds);
      },
    });
  },
  { name: "segmentd-profiles", fastify: "5.x", dependencies: ["segmentd-streaming", "segmentd-edge"] },
);
