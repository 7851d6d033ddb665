// Registers the profile data plane's HTTP API under AEP's paths. The lead wires
// this into app.ts: `await registerProfileRoutes(app, {...auth, profiles, clock,
// policies: policiesFromService(services.mergePolicies)})`.
import type { FastifyInstance } from "fastify";
import { accessRoutes } from "./access-routes.js";
import { batchRoutes, IMPORT_PREFIX } from "./batch-routes.js";
import { catalogRoutes, CATALOG_PREFIX } from "./catalog-routes.js";
import { COLLECTION_PREFIX, streamingRoutes } from "./streaming-routes.js";
import type { ProfileRoutesOptions } from "./context.js";
import { quarantineRoutes } from "./quarantine-routes.js";

export { policiesFromService, type MergePolicyResolver, type ProfileRoutesOptions } from "./context.js";

export async function registerProfileRoutes(app: FastifyInstance, opts: ProfileRoutesOptions & { uploadSpoolDir?: string }): Promise<void> {
  await app.register(catalogRoutes, { prefix: CATALOG_PREFIX, ...opts });
  await app.register(batchRoutes, { prefix: IMPORT_PREFIX, ...opts });
  await app.register(streamingRoutes, { prefix: COLLECTION_PREFIX, ...opts });
  await app.register(accessRoutes, { prefix: "/data/core/ups", ...opts });
  await app.register(quarantineRoutes, { prefix: "/data/core/ups", ...opts });
}
