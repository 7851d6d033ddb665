/**
 * A real HTTP server for the batch API tests: the foundation's definition and
 * merge-policy routes plus the batch plugin, exactly as the lead wires them
 * into app.ts, over the test run's stores (embedded or PostgreSQL). Requests go
 * through fetch, never inject().
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify";
import pg from "pg";
import { createLogger, createServices, type Clock } from "../../src/index.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { installBodyParsing } from "../../src/http/body-parsing.js";
import { installErrorHandling } from "../../src/http/errors.js";
import { definitionRoutes } from "../../src/http/routes/definitions.js";
import { mergePolicyRoutes } from "../../src/http/routes/merge-policies.js";
import { batchPlugin, type BatchHandles } from "../../src/batch/http/plugin.js";
import type { ScheduleService } from "../../src/batch/schedules/schedule-service.js";
import type { PreviewService } from "../../src/batch/previews/preview-service.js";
import type { ExportService } from "../../src/batch/exports/export-service.js";
import type { JobRunner } from "../../src/batch/jobs/job-runner.js";
import { PgBatchRepository } from "../../src/batch/store/pg-repository.js";
import { SqliteBatchRepository } from "../../src/batch/store/sqlite-repository.js";
import type { BatchRepository } from "../../src/batch/store/types.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { TenantContext } from "../../src/services/tenancy.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { API_KEY, ORG_A, TOKEN_A, testConfig } from "../helpers/server-harness.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { STORE_KIND, DATABASE_URL, openStoreAt } from "../profiles/test-store.js";

export { ORG_A };

export interface BatchHarness {
  url: string;
  app: FastifyInstance;
  profiles: ProfileStore;
  runner: JobRunner;
  schedules: ScheduleService;
  previews: PreviewService;
  exports: ExportService;
  /** The metadata store and a tenant of the config (services built beside the plugin's, e.g. a second hub's). */
  metadata: MetadataStore;
  tenant(orgId: string, sandboxName: string): TenantContext;
  /** Where the profile data lives (reopen after a restart). */
  profileLocation: string;
  batchLocation: string;
  close(opts?: { keepData?: boolean }): Promise<void>;
}

export interface HarnessOptions {
  clock?: Clock;
  chunkSize?: number;
  /** Wraps the profile store the batch plugin uses (tests pause scans with it). */
  wrapProfiles?: (p: ProfileStore) => ProfileStore;
  /** Reuse the data of an earlier harness (restart). */
  reuse?: { store: TestStoreHandle; profileLocation: string; batchLocation: string };
}

/** The test database URL with a user name (as the profile store tests resolve it). */
export function pgConnectionString(): string {
  const url = new URL(DATABASE_URL);
  if (url.username === "") url.username = process.env["PGUSER"] || process.env["USER"] || userInfo().username;
  return url.toString();
}

export function openRepo(location: string): BatchRepository {
  return STORE_KIND === "postgres" ? new PgBatchRepository({ connectionString: pgConnectionString(), schema: location }) : new SqliteBatchRepository(location);
}

export async function startBatchHarness(label: string, opts: HarnessOptions = {}): Promise<BatchHarness & { store: TestStoreHandle }> {
  const store = opts.reuse?.store ?? (await createTestStore(label));
  const dir = mkdtempSync(path.join(tmpdir(), `segmentd-batch-${label}-`));
  const suffix = `${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const profileLocation = opts.reuse?.profileLocation ?? (STORE_KIND === "postgres" ? `t_bprof_${suffix}` : path.join(dir, "profiles.db"));
  const batchLocation = opts.reuse?.batchLocation ?? (STORE_KIND === "postgres" ? `t_bjobs_${suffix}` : path.join(dir, "batch.db"));
  const config = testConfig(store);
  const metadata = await store.open();
  const profiles = openStoreAt(profileLocation);
  const logger = createLogger("silent");
  const clock: Clock = opts.clock ?? { now: () => Date.now() };
  const deps = { config, store: metadata, clock, bus: new InProcessBus(() => {}), logger };
  const services = createServices(deps);
  for (const tenant of services.tenants.all()) await services.mergePolicies.ensureDefault(tenant);
  const app = Fastify({ loggerInstance: logger as FastifyBaseLogger });
  installErrorHandling(app);
  installBodyParsing(app);
  const auth = { authenticator: services.authenticator, tenants: services.tenants };
  await app.register(definitionRoutes, { prefix: "/data/core/ups", ...auth, definitions: services.definitions });
  await app.register(mergePolicyRoutes, { prefix: "/data/core/ups", ...auth, mergePolicies: services.mergePolicies });
  let handles: BatchHandles | undefined;
  await app.register(batchPlugin, {
    prefix: "/data/core/ups",
    ...auth,
    metadata,
    profiles: opts.wrapProfiles ? opts.wrapProfiles(profiles) : profiles,
    eligibility: (ctx, expr, mergePolicyId, schemaName) => services.definitions.eligibility(ctx, expr, mergePolicyId, schemaName),
    repo: openRepo(batchLocation),
    clock,
    ...(opts.chunkSize === undefined ? {} : { chunkSize: opts.chunkSize }),
    scheduleTickMs: 0,
    expose: (x) => {
      handles = x;
    },
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    app,
    profiles,
    runner: handles!.runner,
    schedules: handles!.schedules,
    previews: handles!.previews,
    exports: handles!.exports,
    metadata,
    tenant: (orgId, sandboxName) => services.tenants.resolve(orgId, sandboxName)!,
    store,
    profileLocation,
    batchLocation,
    async close(o = {}) {
      await app.close();
      await profiles.close();
      await metadata.close();
      if (!o.keepData) {
        await store.dispose();
        if (STORE_KIND === "postgres") await dropSchemas([profileLocation, batchLocation]);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

async function dropSchemas(schemas: readonly string[]): Promise<void> {
  const c = new pg.Client({ connectionString: pgConnectionString() });
  await c.connect();
  for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await c.end();
}

export function headers(sandbox = "prod"): Record<string, string> {
  return { authorization: `Bearer ${TOKEN_A}`, "x-api-key": API_KEY, "x-gw-ims-org-id": ORG_A, "x-sandbox-name": sandbox, "content-type": "application/json" };
}

export async function call(h: { url: string }, method: string, p: string, body?: unknown, sandbox = "prod"): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${h.url}${p}`, { method, headers: headers(sandbox), ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : (JSON.parse(text) as unknown) };
}
