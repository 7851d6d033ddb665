/**
 * The in-process services a backfill runs on, wired as batch/http/plugin.ts wires them, without
 * HTTP: the test run's profile store, one organization's tenant, a metadata store, a batch
 * repository and a snapshot cache in a temporary data directory. `close` releases them all.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { openBatchRepository } from "../../src/batch/store/open.js";
import type { BatchRepository } from "../../src/batch/store/types.js";
import { defaultConfig } from "../../src/platform/config.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { TenantDirectory, scopeOf, type TenantContext } from "../../src/services/tenancy.js";
import { openMetadataStore } from "../../src/stores/open-store.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";

export interface BackfillServices {
  ts: TestStore;
  tenants: TenantDirectory;
  tenant: TenantContext;
  scope: TenantScope;
  metadata: MetadataStore;
  repo: BatchRepository;
  snapshots: SnapshotCache;
  /** Runs `before` (runners, engines to stop first), then closes the services and removes the data. */
  close(before?: () => Promise<void>): Promise<void>;
}

export async function openBackfillServices(prefix: string, org: string): Promise<BackfillServices> {
  const ts = openTestStore();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `segmentd-${prefix}-`));
  const config = defaultConfig();
  config.dataDir = dataDir;
  config.organizations = [{ id: org, sandboxes: [{ name: "prod", type: "production", default: true }] }];
  const tenants = new TenantDirectory(config);
  const tenant = tenants.resolve(org, "prod")!;
  const metadata = await openMetadataStore({ dataDir });
  const repo = openBatchRepository({ dataDir });
  const snapshots = new SnapshotCache({});
  return {
    ts, tenants, tenant, scope: scopeOf(tenant), metadata, repo, snapshots,
    async close(before) {
      try {
        await before?.();
        await snapshots.close();
        await repo.close();
        await metadata.close();
      } finally {
        await ts.cleanup();
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}
