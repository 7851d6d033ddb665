/**
 * A sandbox with real stores for the streaming, edge and metrics tests: the
 * metadata store with the definition and merge-policy services (so definitions
 * are classified exactly as over the API), the embedded profile store (the
 * hub), an event dataset and a profile dataset, and a ManualClock. Both stores
 * follow SEGMENTD_TEST_STORE (embedded by default, PostgreSQL in test:pg).
 */
import { InProcessBus } from "../../src/platform/bus.js";
import { ManualClock } from "../../src/platform/clock.js";
import { DEFAULT_LIMITS } from "../../src/platform/config.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { JsonObject, ValidRecord } from "../../src/profiles/types.js";
import { validateRecord } from "../../src/profiles/validate.js";
import { DefinitionService } from "../../src/services/definitions.js";
import { MergePolicyService, PROFILE_SCHEMA_CLASS } from "../../src/services/merge-policies.js";
import { derivedSandboxId, type TenantContext } from "../../src/services/tenancy.js";
import { createTestStore } from "../helpers/test-store.js";
import { openTestStore } from "../profiles/test-store.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { DefinitionCatalog } from "../../src/streaming/definition-catalog.js";

export const ORG = "FIXTURE0000000000000000A@AdobeOrg";
export const EVENTS_DS = "ds-events";
export const PROFILES_DS = "ds-profiles";

export interface Fixture {
  clock: ManualClock;
  bus: InProcessBus;
  meta: MetadataStore;
  /** The metadata store's data directory (embedded: where metadata.sqlite is; postgres: a temp dir). */
  dataDir: string;
  /** Another connection to the same metadata store (same file or schema), as a second process or a restart would open; closed with the fixture unless closed before. */
  openMeta(): Promise<MetadataStore>;
  hub: ProfileStore;
  tenant: TenantContext;
  definitions: DefinitionService;
  mergePolicies: MergePolicyService;
  catalog: DefinitionCatalog;
  /** Create a definition through the service; returns its id. */
  define(name: string, pql: string, methods: { continuous?: boolean; synchronous?: boolean }, mergePolicyId?: string): Promise<string>;
  /** Validate and store records durably in the hub (as the ingestion path does); returns the stored records. */
  store(datasetId: string, bodies: JsonObject[]): Promise<ValidRecord[]>;
  close(): Promise<void>;
}

export function tenantFor(orgId: string, sandboxName = "prod"): TenantContext {
  return {
    orgId,
    sandbox: { sandboxId: derivedSandboxId(orgId, sandboxName), sandboxName, type: "production", default: true },
    limits: { ...DEFAULT_LIMITS },
  };
}

export async function openFixture(start: number | Date): Promise<Fixture> {
  const clock = new ManualClock(start);
  const bus = new InProcessBus((topic, err) => {
    throw new Error(`bus handler for ${topic} failed: ${String(err)}`);
  });
  const metaHandle = await createTestStore("realtime");
  const meta = await metaHandle.open();
  const hubHandle = openTestStore();
  const hub = hubHandle.store;
  const tenant = tenantFor(ORG);
  const scope = { orgId: ORG, sandboxName: "prod" };
  const mergePolicies = new MergePolicyService(meta, clock, bus);
  await mergePolicies.ensureDefault(tenant);
  const definitions = new DefinitionService(meta, clock, bus);
  await hub.createDataset(scope, { id: EVENTS_DS, name: "events", schemaClass: "experienceevent", profileEnabled: true }, clock.now());
  await hub.createDataset(scope, { id: PROFILES_DS, name: "profiles", schemaClass: "profile", profileEnabled: true }, clock.now());
  const catalog = new DefinitionCatalog(meta, bus);
  const extraMetas: MetadataStore[] = [];
  return {
    clock,
    bus,
    meta,
    dataDir: metaHandle.dataDir,
    async openMeta() {
      const m = await metaHandle.open();
      extraMetas.push(m);
      return m;
    },
    hub,
    tenant,
    definitions,
    mergePolicies,
    catalog,
    async define(name, pql, methods, mergePolicyId) {
      const d = await definitions.create(tenant, {
        name,
        schema: { name: PROFILE_SCHEMA_CLASS },
        expression: { type: "PQL", format: "pql/text", value: pql },
        evaluationInfo: { batch: { enabled: false }, continuous: { enabled: methods.continuous ?? false }, synchronous: { enabled: methods.synchronous ?? false } },
        ...(mergePolicyId ? { mergePolicyId } : {}),
      });
      return d.id;
    },
    async store(datasetId, bodies) {
      const ds = await hub.getDataset(scope, datasetId);
      if (!ds) throw new Error(`no dataset ${datasetId}`);
      const records = bodies.map((b, i) => {
        const r = validateRecord(b, i, ds);
        if (!r.ok) throw new Error(`invalid test record: ${JSON.stringify(r.errors)}`);
        return r.record;
      });
      const res = await ingestRecords(hub, scope, datasetId, bodies.map((value, index) => ({ index, value })), { now: clock.now() });
      if (res.failed.length > 0) throw new Error(`records failed: ${JSON.stringify(res.failed)}`);
      return records;
    },
    async close() {
      catalog.close();
      await hubHandle.cleanup();
      // Closing a store twice is a no-op.
      for (const m of extraMetas) await m.close();
      await meta.close();
      await metaHandle.dispose();
    },
  };
}

let seq = 0;

/** An experience event body for a CRM id. */
export function event(crmId: string, eventType: string, at: number, extra: JsonObject = {}): JsonObject {
  return {
    _id: `evt-${++seq}-${crmId}`,
    eventType,
    timestamp: new Date(at).toISOString(),
    identityMap: { CRMID: [{ id: crmId, primary: true }] },
    ...extra,
  };
}

/** A profile record body for a CRM id. */
export function profile(crmId: string, attrs: JsonObject): JsonObject {
  return { identityMap: { CRMID: [{ id: crmId, primary: true }] }, ...attrs };
}
