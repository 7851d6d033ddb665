/**
 * The backfill's chunks: two are in flight at once (one decided while the other is written), each
 * holding its own profiles; a chunk whose write fails fails the backfill with the store's error
 * once the other chunk in flight has settled — nothing rejects unobserved, no later chunk starts,
 * and what the settled chunks wrote stays (a retry writes only what is still to change).
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { BackfillRunner } from "../../src/batch/backfill/backfill-runner.js";
import type { BackfillStore, BackfillView } from "../../src/batch/backfill/backfill-types.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { applyConfigFile, ConfigError, defaultConfig } from "../../src/platform/config.js";
import { ManualClock } from "../../src/platform/clock.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { DefinitionService } from "../../src/services/definitions.js";
import { MergePolicyService } from "../../src/services/merge-policies.js";
import { openBackfillServices, type BackfillServices } from "./backfill-services.js";

const T0 = Date.UTC(2026, 10, 20, 12);
const ORG = "CHUNKS@AdobeOrg";
const PROFILE_CLASS = "_xdm.context.profile";

test("batch.backfillChunk sets the profiles a backfill writes at a time; bad values are refused naming the key", () => {
  assert.deepEqual(applyConfigFile(defaultConfig(), { batch: { backfillChunk: 500 } }, "f.json").batch, { backfillChunk: 500 });
  for (const bad of [0, 99, 2.5, "2000", 100_001, null]) {
    assert.throws(() => applyConfigFile(defaultConfig(), { batch: { backfillChunk: bad } }, "f.json"), new ConfigError("f.json: batch.backfillChunk must be an integer from 100 to 100000 (profiles)"));
  }
});

let w: BackfillServices | undefined;
let stopFirst: () => Promise<void> = async () => {};
after(async () => w?.close(stopFirst));

test("a backfill writes two chunks at once; a chunk's failed write fails it with the store's error after the other settles, and starts no further chunk", async () => {
  w = await openBackfillServices("backfill-chunks", ORG);
  const { tenants, tenant, scope, metadata, repo, snapshots } = w;
  const store = w.ts.store;
  const clock = new ManualClock(T0);
  const bus = new InProcessBus();

  // Chunk writes as the store sees them: the first is slow, the second fails.
  let calls = 0;
  let inFlight = 0;
  let most = 0;
  const writes: string[][] = [];
  const profiles = new Proxy(store, {
    get(target, key) {
      if (key === "applyMembershipTargets") {
        return async (...a: Parameters<BackfillStore["applyMembershipTargets"]>) => {
          const n = ++calls;
          inFlight++;
          most = Math.max(most, inFlight);
          try {
            if (n === 1) await new Promise((r) => setTimeout(r, 50));
            if (n === 2) throw new Error("disk I/O error (test)");
            writes.push(Array.from(a[1].realized, String));
            return await target.applyMembershipTargets(...a);
          } finally {
            inFlight--;
          }
        };
      }
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  }) as BackfillStore;
  let finished!: (v: BackfillView) => void;
  const done = new Promise<BackfillView>((resolve) => (finished = resolve));
  const runner = new BackfillRunner({ metadata, profiles, repo, clock, snapshots, chunkSize: 2, tenantOf: (s) => tenants.resolve(s.orgId, s.sandboxName), onFinished: (v) => finished({ ...v }) });
  stopFirst = () => runner.stop();

  const profilesDs = (await store.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  const res = await ingestRecords(store, scope, profilesDs, Array.from({ length: 8 }, (_, index) => ({ index, value: { identityMap: { ECID: [{ id: `c-${index}`, primary: true }] }, homeAddress: { countryCode: "US" } } })), { now: T0 });
  assert.equal(res.accepted, 8);
  await new MergePolicyService(metadata, clock, bus).create(tenant, {
    name: "none", schema: { name: PROFILE_CLASS }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" }, default: true,
  });
  const def = await new DefinitionService(metadata, clock, bus).create(tenant, {
    name: "US", schema: { name: PROFILE_CLASS }, expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
  });
  await runner.definitionChanged(tenant, def.id, "created");
  const view = await done;

  assert.equal(view.state, "failed", JSON.stringify(view));
  assert.equal(view.error, "disk I/O error (test)");
  assert.equal(most, 2, "two chunks were written at once");
  assert.equal(calls, 2, "no chunk started after the failure");
  assert.equal(writes.length, 1);
  const members = await store.listMemberIds(scope, def.id, "realized");
  assert.deepEqual(members, writes[0], "the first chunk's write stands; the failed one wrote nothing");
  assert.equal(members.length, 2);
  assert.equal((await runner.get(scope, def.id))?.state, "failed");
});
