/**
 * Assemble the HTTP application: platform concerns (request ids, logging,
 * metrics, errors, body parsing, OpenAPI), then one plugin per API area.
 *
 * Adding an API area: write `http/routes/<area>.ts` as a Fastify plugin that
 * calls `registerTenantHooks` (or `registerOrgHooks` / `registerOperatorHooks`)
 * first, declares JSON schemas for params/query/body/responses on every route,
 * reads the tenant with `tenantOf(request)` and throws `ApiError` for failures;
 * then register it below with its prefix. A capability that owns services and
 * lifecycle hooks is a named plugin (fastify-plugin) that lists the plugins it
 * uses in `dependencies`; Fastify refuses it at registration when one is missing.
 */
import { requestIdOf } from "./http/request-id.js";
import path from "node:path";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import { batchSnapshotDir, defaultBatchSchedule, evaluationWorkers, type Config } from "./platform/config.js";
import type { Clock, ManualClock } from "./platform/clock.js";
import type { EventBus } from "./platform/bus.js";
import type { Logger } from "./platform/logger.js";
import { createMetrics, type HttpMetrics } from "./platform/metrics.js";
import type { MetadataStore } from "./stores/types.js";
import { Authenticator } from "./services/auth/authenticator.js";
import { TokenIssuer } from "./services/auth/token-issuer.js";
import { DefinitionService } from "./services/definitions.js";
import { AudienceService } from "./services/audiences.js";
import { MergePolicyService, PROFILE_SCHEMA_CLASS } from "./services/merge-policies.js";
import { NO_MERGE_POLICY } from "./profiles/types.js";
import { SchemaRegistryService } from "./services/schema-registry.js";
import { TenantDirectory, scopeOf } from "./services/tenancy.js";
import { installBodyParsing } from "./http/body-parsing.js";
import { installErrorHandling } from "./http/errors.js";
import { registerOpenApi, openApiRoute } from "./http/openapi.js";
import { definitionRoutes } from "./http/routes/definitions.js";
import { mergePolicyRoutes } from "./http/routes/merge-policies.js";
import { healthRoutes } from "./http/routes/health.js";
import { adminRoutes } from "./http/routes/admin.js";
import { imsTokenRoutes } from "./http/routes/ims-token.js";
import { searchRoutes } from "./http/routes/search.js";
import { SCHEMA_REGISTRY_PREFIX, schemaRegistryRoutes } from "./http/routes/schema-registry.js";
import { audienceRoutes } from "./http/routes/audiences.js";
import type { ProfileStore } from "./profiles/store.js";
import { profilesPlugin, policiesFromService } from "./profiles/http/index.js";
import { hygienePlugin, type HygieneConfig, type LifecycleListener } from "./hygiene/index.js";
import { webPlugin } from "./web/routes.js";
import { streamingPlugin } from "./streaming/plugin.js";
import { edgePlugin } from "./edge/plugin.js";
import { audienceMetricsPlugin } from "./metrics/routes.js";
import { batchPlugin, type BatchHandles } from "./batch/http/plugin.js";
import { DATA_ACCESS_PREFIX, dataAccessRoutes } from "./batch/http/data-access-routes.js";
import { clusterHubPlugin } from "./cluster/hub-plugin.js";
import { partitionFeedPlugin } from "./cluster/partition-feed-plugin.js";
import { hubInvalidationPlugin } from "./cluster/hub-invalidation.js";
import { hubLeasesPlugin } from "./cluster/hub-leases.js";
import { openBatchRepository } from "./batch/store/open.js";
import { activationPlugin } from "./activation/http/plugin.js";
import { computedAttributesPlugin } from "./computed/http/routes.js";
import { definitionExpander } from "./computed/expand.js";
import { profileValues } from "./computed/profile-values.js";
import { definitionsReading } from "./computed/dependents.js";
import { residentEvaluator, storedProfileEvents } from "./computed/processing.js";
import { explainComputed } from "./computed/explain-values.js";

export const SERVICE_VERSION = "0.1.0";

export interface AppDeps {
  config: Config;
  store: MetadataStore;
  clock: Clock;
  bus: EventBus;
  logger: Logger;
  metrics?: HttpMetrics;
  /** The profile data plane (datasets, ingestion, profile access); its routes are served when present. */
  profiles?: ProfileStore;
  /** Data lifecycle (quotas, work orders, dataset expirations), served with the profile data plane when present. */
  hygiene?: HygieneConfig;
  /** The clock is this one and `POST /admin/clock` moves it (StartOptions.testClock). */
  testClock?: ManualClock;
}

export interface Services {
  tenants: TenantDirectory;
  authenticator: Authenticator;
  tokenIssuer: TokenIssuer;
  definitions: DefinitionService;
  mergePolicies: MergePolicyService;
  schemaRegistry: SchemaRegistryService;
  audiences: AudienceService;
}

export function createServices(deps: AppDeps): Services {
  // Definitions may read computed attributes: their references become the attributes' aggregates.
  const definitions = new DefinitionService(deps.store, deps.clock, deps.bus, definitionExpander(deps.store.computedAttributes));
  const profiles = deps.profiles;
  return {
    tenants: new TenantDirectory(deps.config),
    authenticator: new Authenticator(deps.config.auth, deps.clock),
    tokenIssuer: new TokenIssuer(deps.config.auth, deps.clock),
    definitions,
    mergePolicies: new MergePolicyService(deps.store, deps.clock, deps.bus),
    schemaRegistry: new SchemaRegistryService(deps.store, deps.clock,
      deps.profiles ? async (tenant, id) => (await deps.profiles!.getDataset(scopeOf(tenant), id)) !== null : undefined),
    audiences: new AudienceService(deps.store, definitions, deps.clock,
      profiles ? async (scope, id) => (await profiles.getDataset(scope, id)) !== null : undefined),
  };
}

export async function buildApp(deps: AppDeps, services: Services = createServices(deps)): Promise<FastifyInstance> {
  const metrics = deps.metrics ?? createMetrics();
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.config.bodyLimitBytes,
    // Honour a client's x-request-id when it is a sane token; generate one otherwise.
    genReqId: requestIdOf,
    return503OnClosing: true,
    forceCloseConnections: "idle",
  });

  try {
    await assemble(app, deps, services, metrics);
    await app.ready();
  } catch (err) {
    // What the plugins loaded so far opened (stores, timers) is closed by their onClose hooks.
    await app.close().catch(() => {});
    throw err;
  }
  return app;
}

async function assemble(app: FastifyInstance, deps: AppDeps, services: Services, metrics: HttpMetrics): Promise<void> {
  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  app.addHook("onResponse", async (request, reply) => {
    const labels = { method: request.method, route: request.routeOptions.url ?? "unmatched", status_code: String(reply.statusCode) };
    metrics.requests.inc(labels);
    metrics.duration.observe(labels, reply.elapsedTime / 1000);
  });

  installErrorHandling(app);
  installBodyParsing(app);
  await registerOpenApi(app, SERVICE_VERSION);

  const auth = { authenticator: services.authenticator, tenants: services.tenants };
  let batchHandles: BatchHandles | undefined;
  await app.register(imsTokenRoutes, { issuer: services.tokenIssuer });
  await app.register(healthRoutes, { store: deps.store, metrics, ...(deps.profiles ? { profiles: deps.profiles } : {}) });
  await app.register(definitionRoutes, { prefix: "/data/core/ups", ...auth, definitions: services.definitions });
  await app.register(mergePolicyRoutes, { prefix: "/data/core/ups", ...auth, mergePolicies: services.mergePolicies });
  await app.register(audienceRoutes, { prefix: "/data/core/ups", ...auth, audiences: services.audiences });
  await app.register(searchRoutes, { prefix: "/data/core/ups", ...auth, audiences: services.audiences });
  await app.register(schemaRegistryRoutes, { prefix: SCHEMA_REGISTRY_PREFIX, ...auth, schemas: services.schemaRegistry });
  // Computed attributes (AEP's /data/core/ca/attributes); decorates the app with `computed`.
  await app.register(computedAttributesPlugin, {
    ...auth,
    repo: deps.store.computedAttributes,
    clock: deps.clock,
    logger: deps.logger,
    dependents: definitionsReading(deps.store.definitions),
    // A published attribute's first evaluation runs over the batch area's resident snapshot (registered below).
    ...(deps.profiles ? { profiles: residentEvaluator(() => batchHandles?.counts, storedProfileEvents(deps.profiles, deps.store.mergePolicies)) } : {}),
  });
  await app.register(adminRoutes, {
    prefix: "/admin",
    ...auth,
    ...(deps.profiles ? { profiles: deps.profiles } : {}),
    // The test clock's move also runs the scheduler's pass (a daily schedule fires when its time is passed).
    ...(deps.testClock ? { testClock: { clock: deps.testClock, sweep: async () => { await app.streaming?.sweep(); await batchHandles?.schedules.tick(); } } } : {}),
  });
  // The capabilities, each a named plugin that owns its services and hooks and declares the
  // plugins it depends on: registering one before those fails here, naming the missing one.
  if (deps.profiles) {
    const onError = (err: unknown) => deps.logger.error({ err }, "streaming/edge evaluation failed");
    // The hub's NATS (docs/deployment.md), when it has one.
    const nats = deps.config.natsUrl === undefined ? undefined : { natsUrl: deps.config.natsUrl, ...(deps.config.natsHubDomain !== undefined ? { hubDomain: deps.config.natsHubDomain } : {}) };
    // Several hubs on one database: once-per-deployment work runs on the holder of its lease (issue #43).
    if (nats !== undefined && deps.config.databaseUrl !== undefined) {
      await app.register(hubLeasesPlugin, { natsUrl: nats.natsUrl, metrics: metrics.registry, onError: (err) => deps.logger.error({ err }, "hub leases failed") });
    }
    const workers = deps.config.streamingWorkers;
    if (workers !== undefined && nats !== undefined) {
      // Streaming evaluation by `segmentd worker` processes: the stored changes go to their
      // partitions (docs/deployment.md); decorates the app with `streaming` all the same.
      await app.register(partitionFeedPlugin, {
        ...nats,
        partitions: workers.partitions,
        meta: deps.store,
        hub: deps.profiles,
        // Segment jobs, previews, estimates and edit impact on the workers' shards unless turned off (#44).
        batchOnWorkers: deps.config.batch?.onWorkers !== false,
        tenants: services.tenants,
        clock: deps.clock,
        bus: deps.bus,
        metrics: metrics.registry,
        onError: (err) => deps.logger.error({ err }, "streaming workers' feed failed"),
      });
    } else {
      // Streaming evaluation in process: the definition catalog and engine; decorates the app with `streaming`.
      await app.register(streamingPlugin, {
        meta: deps.store,
        hub: deps.profiles,
        clock: deps.clock,
        bus: deps.bus,
        ...(deps.config.edge?.streamingMaxProfiles !== undefined ? { maxCachedProfiles: deps.config.edge.streamingMaxProfiles } : {}),
        onError,
      });
    }
    // Edge evaluation: locations, datastreams, interact, the hub forwarder; decorates the app with `edge`.
    await app.register(edgePlugin, {
      ...auth,
      meta: deps.store,
      hub: deps.profiles,
      clock: deps.clock,
      bus: deps.bus,
      dataDir: deps.config.dataDir,
      edge: deps.config.edge,
      metrics: metrics.registry,
      onError,
    });
    // "Profiles over time" of an audience, from the transitions streaming and edge record.
    await app.register(audienceMetricsPlugin, { prefix: "/data/core/ups", ...auth, meta: deps.store, hub: deps.profiles, clock: deps.clock, computed: explainComputed(deps.store.computedAttributes) });
    // Batch segmentation: jobs, schedules, previews/estimates, exports (closes its store with the app).
    await app.register(batchPlugin, {
      prefix: "/data/core/ups",
      ...auth,
      metadata: deps.store,
      profiles: deps.profiles,
      eligibility: (ctx, expr, mergePolicyId, schemaName) => services.definitions.eligibility(ctx, expr, mergePolicyId, schemaName),
      expand: definitionExpander(deps.store.computedAttributes),
      descriptors: (ctx) => services.schemaRegistry.listDescriptors(ctx),
      repo: openBatchRepository(deps.config),
      clock: deps.clock,
      logger: deps.logger,
      ...snapshotFiles(deps.config, deps.logger),
      evaluationWorkers: evaluationWorkers(deps.config),
      defaultSchedule: defaultBatchSchedule(deps.config),
      ...(deps.config.batch?.scheduleTickMs === undefined ? {} : { scheduleTickMs: deps.config.batch.scheduleTickMs }),
      ...(deps.config.batch?.backfillChunk === undefined ? {} : { backfillChunk: deps.config.batch.backfillChunk }),
      metrics: metrics.registry,
      bus: deps.bus,
      expose: (handles) => {
        batchHandles = handles;
      },
    });
    // AEP's Data Access API: the files export jobs write, read back from their datasets.
    await app.register(dataAccessRoutes, { prefix: DATA_ACCESS_PREFIX, ...auth, profiles: deps.profiles });
    // Datasets, ingestion and profile access; stored records feed the realtime engines.
    await app.register(profilesPlugin, {
      ...auth,
      profiles: deps.profiles,
      clock: deps.clock,
      policies: policiesFromService(services.mergePolicies),
      schemas: services.schemaRegistry,
      // Batch files are received into the data directory before they are staged (never held in memory).
      uploadSpoolDir: path.join(deps.config.dataDir, "uploads"),
      // The entities API shows computed attributes' values under the tenant's field group.
      computedValues: profileValues(deps.store.computedAttributes),
    });
    if (deps.hygiene) {
      // Deleted or updated records change continuous memberships at once (a vanished profile
      // exits every audience; hygiene itself recorded those exits), vanished profiles leave
      // every edge location, and changed ones are projected again.
      const onChange: LifecycleListener = async (change) => {
        const tenant = services.tenants.resolve(change.scope.orgId, change.scope.sandboxName);
        if (!tenant) return;
        await app.streaming?.engine.onProfilesChanged(tenant, [...change.changedProfileIds, ...change.removedProfileIds]);
        await app.edge?.projector.forget(tenant, change.removedProfileIds);
        await app.edge?.projector.project(tenant, change.changedProfileIds);
      };
      await app.register(hygienePlugin, {
        ...auth,
        dataDir: deps.config.dataDir,
        ...(deps.config.databaseUrl === undefined ? {} : { databaseUrl: deps.config.databaseUrl }),
        profiles: deps.profiles,
        clock: deps.clock,
        config: deps.hygiene,
        onError: (err, what) => deps.logger.error({ err }, `data lifecycle: ${what} failed`),
        onChange,
      });
    }
    // Destinations and dataflows (Flow Service API) and their deliverer; decorates the app with `activation`.
    await app.register(activationPlugin, {
      ...auth,
      dataDir: deps.config.dataDir,
      ...(deps.config.databaseUrl === undefined ? {} : { databaseUrl: deps.config.databaseUrl }),
      ...(deps.config.activation === undefined ? {} : { activation: deps.config.activation }),
      clock: deps.clock,
      audiences: async (t, ids) => {
        const ctx = services.tenants.resolve(t.orgId, t.sandboxName);
        return ctx ? new Map([...(await services.audiences.bulkGet(ctx, ids))].map(([id, a]) => [id, a.name])) : new Map<string, string>();
      },
      profiles: deps.profiles,
      metrics: metrics.registry,
      ...(nats === undefined ? {} : { natsUrl: nats.natsUrl }),
      // Payload attributes are merged with the sandbox's default merge policy, as AEP's exports are.
      mergePolicy: async (scope) => {
        const ctx = services.tenants.resolve(scope.orgId, scope.sandboxName);
        const p = ctx === null || ctx === undefined ? undefined : (await deps.store.mergePolicies.getDefault(scopeOf(ctx), PROFILE_SCHEMA_CLASS))?.policy;
        return p === undefined ? NO_MERGE_POLICY : { id: p.id, identityGraph: p.identityGraph, attributeMerge: p.attributeMerge };
      },
      onError: (err, what) => deps.logger.error({ err }, `activation: ${what} failed`),
    });
    // The hub of edge nodes over NATS JetStream (docs/deployment.md); closed before the edge.
    if (nats !== undefined) {
      await app.register(clusterHubPlugin, {
        ...nats,
        tenants: services.tenants,
        meta: deps.store,
        hub: deps.profiles,
        bus: deps.bus,
        metrics: metrics.registry,
        onError: (err) => deps.logger.error({ err }, "edge sites: hub link failed"),
      });
      // Several hubs on one database: each one's cached configuration follows the others' changes (issue #43).
      if (deps.config.databaseUrl !== undefined) {
        await app.register(hubInvalidationPlugin, { natsUrl: nats.natsUrl, bus: deps.bus, tenants: services.tenants, metrics: metrics.registry, onError: (err) => deps.logger.error({ err }, "hub invalidation failed") });
      }
    }
  }
  // The audience tool (packages/web, built into packages/server/static) at `/`.
  await app.register(webPlugin, { config: deps.config });
  openApiRoute(app);
}

/** Batch snapshot files: their directory, and the profile store they belong to (its file, or its database without credentials). */
function snapshotFiles(config: Config, logger: Logger): { snapshotFiles?: { dir: string; storeIdentity: string; onWarning: (message: string, err?: unknown) => void } } {
  const dir = batchSnapshotDir(config);
  if (dir === null) return {};
  let store = `embedded:${path.join(config.dataDir, "profiles.db")}`;
  if (config.databaseUrl !== undefined) {
    store = `postgres:${config.databaseUrl}`;
    try {
      const u = new URL(config.databaseUrl);
      u.username = "";
      u.password = "";
      store = `postgres:${u.toString()}`;
    } catch {
      // Not a URL: the cache keeps only a hash of it anyway.
    }
  }
  return { snapshotFiles: { dir, storeIdentity: store, onWarning: (message, err) => logger.warn({ err }, message) } };
}
