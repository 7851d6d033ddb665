/**
 * The benches' data: the demo generator's profiles and events (seed 1, at `now`) ingested into a
 * store in chunks, as ingestion clients would send them. bench:batch, bench:backfill and
 * bench:shards load the same data this way (into the embedded store or PostgreSQL).
 */
import { DEMO_DATASETS, demoEvents, demoProfiles } from "../../packages/server/src/profiles/demo.js";
import { ingestRecords } from "../../packages/server/src/profiles/ingest.js";
import type { ProfileStore } from "../../packages/server/src/profiles/store.js";
import type { JsonObject, TenantScope } from "../../packages/server/src/profiles/types.js";

const LOAD_CHUNK = 20_000;

/** Loads `profiles` profiles and `events` events; logs progress every 500,000 records. */
export async function loadDemo(store: ProfileStore, scope: TenantScope, o: { profiles: number; events: number; now: number; log?: (line: string) => void }): Promise<{ profilesDs: string; eventsDs: string; ms: number }> {
  const demo = { profiles: o.profiles, events: o.events, now: o.now, seed: 1 };
  const profilesDs = (await store.createDataset(scope, DEMO_DATASETS.profiles, o.now)).id;
  const eventsDs = (await store.createDataset(scope, DEMO_DATASETS.events, o.now)).id;
  const t0 = performance.now();
  for (const [ds, gen, n] of [[profilesDs, demoProfiles(demo), o.profiles], [eventsDs, demoEvents(demo), o.events]] as const) {
    let batch: Array<{ index: number; value: JsonObject }> = [];
    let done = 0;
    for (const value of gen) {
      batch.push({ index: batch.length, value });
      if (batch.length === LOAD_CHUNK) {
        await ingestRecords(store, scope, ds, batch, { now: o.now });
        done += batch.length;
        batch = [];
        if (done % 500_000 === 0) o.log?.(`  loaded ${done} / ${n} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      }
    }
    if (batch.length > 0) await ingestRecords(store, scope, ds, batch, { now: o.now });
  }
  return { profilesDs, eventsDs, ms: performance.now() - t0 };
}
