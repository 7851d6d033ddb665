import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import { registerRealtime } from "../packages/server/src/edge/register.js";
import { Authenticator } from "../packages/server/src/services/auth/authenticator.js";
import { TenantDirectory } from "../packages/server/src/services/tenancy.js";
import { DefinitionService } from "../packages/server/src/services/definitions.js";
import { MergePolicyService, PROFILE_SCHEMA_CLASS } from "../packages/server/src/services/merge-policies.js";
import { openSqliteStore } from "../packages/server/src/stores/embedded/sqlite-store.js";
import { EmbeddedProfileStore } from "../packages/server/src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../packages/server/src/profiles/ingest.js";
import { SystemClock } from "../packages/server/src/platform/clock.js";
import { InProcessBus } from "../packages/server/src/platform/bus.js";
import { DEFAULT_LIMITS } from "../packages/server/src/platform/config.js";
const ORG = "X@AdobeOrg";
const dir = mkdtempSync(path.join(os.tmpdir(), "zz-"));
const clock = new SystemClock(); const bus = new InProcessBus();
const meta = openSqliteStore(dir); const hub = new EmbeddedProfileStore({ path: path.join(dir, "p.db") });
const tenants = new TenantDirectory({ organizations: [{ id: ORG, sandboxes: [{ name: "prod", type: "production", default: true }] }], limits: { ...DEFAULT_LIMITS } });
const tenant = tenants.resolve(ORG, "prod")!; const scope = { orgId: ORG, sandboxName: "prod" };
await new MergePolicyService(meta, clock, bus).ensureDefault(tenant);
const defs = new DefinitionService(meta, clock, bus);
for (let i = 0; i < 150; i++) {
  const pql = i % 3 === 0 ? `chain(xEvent, timestamp, [C0: WHAT(eventType = "type.${i % 30}") WHEN(< 3 hours before now)])` : i % 3 === 1 ? `homeAddress.countryCode = "US" and loyalty.points > ${i}` : `loyalty.tier = "gold" and chain(xEvent, timestamp, [C0: WHAT(eventType = "type.${i % 30}") WHEN(today)])`;
  await defs.create(tenant, { name: `d${i}`, schema: { name: PROFILE_SCHEMA_CLASS }, expression: { type: "PQL", format: "pql/text", value: pql }, evaluationInfo: { batch: { enabled: false }, continuous: { enabled: false }, synchronous: { enabled: true } } });
}
await hub.createDataset(scope, { id: "ev", name: "ev", schemaClass: "experienceevent", profileEnabled: true }, clock.now());
await hub.createDataset(scope, { id: "crm", name: "crm", schemaClass: "profile", profileEnabled: true }, clock.now());
await ingestRecords(hub, scope, "crm", Array.from({ length: 5000 }, (_, i) => ({ index: i, value: { identityMap: { CRMID: [{ id: `c${i}`, primary: true }] }, homeAddress: { countryCode: "US" }, loyalty: { tier: "gold", points: i % 1000 } } })), { now: clock.now() });
const app = Fastify({ logger: false });
const rt = await registerRealtime(app, { authenticator: new Authenticator({ jwtOrgClaim: "org", staticTokens: [], apiKeys: [], operatorTokens: [] }, clock), tenants, meta, hub, clock, bus });
const ds = await rt.datastreams.create(tenant, { name: "b", eventDatasetId: "ev" });
await rt.projector.projectAll(tenant, "edge");
const body = (i: number) => ({ event: { xdm: { identityMap: { CRMID: [{ id: `c${i % 5000}`, primary: true }] }, eventType: `type.${i % 30}`, timestamp: new Date(Date.now() - 50).toISOString() } } });
for (let round = 0; round < 3; round++) {
  const N = 20000; const t = performance.now();
  for (let i = 0; i < N; i++) await rt.interact.interact(undefined, ds.id, JSON.parse(JSON.stringify(body(i))), "r");
  const mid = performance.now();
  await rt.flush();
  console.log(`interact ${((mid - t) * 1000 / N).toFixed(1)} µs/req, flush ${((performance.now() - mid)).toFixed(0)} ms`);
}
await app.close();
