/**
 * Shared set-up of the realtime benches (bench/edge.ts, bench/streaming.ts):
 * one org and sandbox over the embedded stores in a temp dir, with the
 * definition service ready (the load client is in ./load-client.ts).
 */
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { DefinitionService } from "../../packages/server/src/services/definitions.js";
import { MergePolicyService, PROFILE_SCHEMA_CLASS } from "../../packages/server/src/services/merge-policies.js";
import { TenantDirectory, type TenantContext } from "../../packages/server/src/services/tenancy.js";
import { openSqliteStore } from "../../packages/server/src/stores/embedded/sqlite-store.js";
import { EmbeddedProfileStore } from "../../packages/server/src/profiles/embedded/sqlite-store.js";
import { WorkerProfileStore } from "../../packages/server/src/profiles/embedded/worker-store.js";
import type { ProfileStore } from "../../packages/server/src/profiles/store.js";
import { SystemClock } from "../../packages/server/src/platform/clock.js";
import { InProcessBus } from "../../packages/server/src/platform/bus.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../../packages/server/src/platform/config.js";
import type { MetadataStore } from "../../packages/server/src/stores/types.js";

export interface RealtimeWorld {
  dir: string;
  clock: SystemClock;
  bus: InProcessBus;
  meta: MetadataStore;
  /** The server's default: the embedded store in a worker thread; `directStore` runs it on the main thread. */
  hub: ProfileStore;
  tenants: TenantDirectory;
  tenant: TenantContext;
  /** The profile store's scope for the same tenant. */
  scope: { orgId: string; sandboxName: string };
  definitions: DefinitionService;
  /** Create a definition with exactly one evaluation method enabled; returns its id. */
  define(name: string, pql: string, method: "continuous" | "synchronous"): Promise<string>;
}

export async function openRealtimeWorld(org: string, limits: Partial<SandboxLimits> = {}, opts: { directStore?: boolean } = {}): Promise<RealtimeWorld> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-bench-realtime-"));
  const clock = new SystemClock();
  const bus = new InProcessBus();
  const meta = openSqliteStore(dir);
  const hubFile = path.join(dir, "profiles.db");
  const hub: ProfileStore = opts.directStore === true ? new EmbeddedProfileStore({ path: hubFile }) : new WorkerProfileStore({ path: hubFile });
  const tenants = new TenantDirectory({
    organizations: [{ id: org, sandboxes: [{ name: "prod", type: "production", default: true, limits }] }],
    limits: { ...DEFAULT_LIMITS },
  });
  const tenant = tenants.resolve(org, "prod")!;
  await new MergePolicyService(meta, clock, bus).ensureDefault(tenant);
  const definitions = new DefinitionService(meta, clock, bus);
  return {
    dir,
    clock,
    bus,
    meta,
    hub,
    tenants,
    tenant,
    scope: { orgId: org, sandboxName: "prod" },
    definitions,
    async define(name, pql, method) {
      const d = await definitions.create(tenant, {
        name,
        schema: { name: PROFILE_SCHEMA_CLASS },
        expression: { type: "PQL", format: "pql/text", value: pql },
        evaluationInfo: { batch: { enabled: false }, continuous: { enabled: method === "continuous" }, synchronous: { enabled: method === "synchronous" } },
      });
      return d.id;
    },
  };
}
