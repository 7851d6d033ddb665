/**
 * A published attribute's first evaluation over the resident snapshot (computed/processing.ts
 * `residentEvaluator`, batch/engine/snapshot-counts.ts), on the profile store under test: for a
 * generated population and attributes covering every function and duration unit, with events on
 * the lookback's edges (its first instant, `now`, just before), the profiles it counts equal those
 * the reference (computed/values.ts `contributingEvents`) finds over the same events; after more
 * events are stored (the snapshot refreshed incrementally, not rebuilt) and the clock moved, again.
 * The store scan is never used while there is a snapshot.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { SnapshotCache } from "../../src/batch/columnar/cache.js";
import { SnapshotCounts } from "../../src/batch/engine/snapshot-counts.js";
import { AttributeProcessor, residentEvaluator, type StoredProfileEvents } from "../../src/computed/processing.js";
import { ComputedAttributeService } from "../../src/computed/service.js";
import { contributingEvents, lookbackStart, referenceDefinition } from "../../src/computed/values.js";
import { ManualClock } from "../../src/platform/clock.js";
import { defaultConfig } from "../../src/platform/config.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { rng } from "../../src/profiles/demo.js";
import { NO_MERGE_POLICY } from "../../src/profiles/types.js";
import { scopeOf, type TenantContext } from "../../src/services/tenancy.js";
import type { DurationUnit } from "../../src/stores/computed-attributes.js";
import type { MetadataStore } from "../../src/stores/types.js";
import { createTestStore, type TestStoreHandle } from "../helpers/test-store.js";
import { openTestStore, type TestStore } from "../profiles/test-store.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
// Noon on March 31st: a month back clamps to February 28th.
const T0 = Date.parse("2026-03-31T12:00:00.000Z");
const T1 = T0 + 3 * DAY + 5 * HOUR;
const PROFILES = 240;
const ctx: TenantContext = { orgId: "orgSnap@AdobeOrg", sandbox: { sandboxId: "sbSnap", sandboxName: "prod", type: "production", default: true }, limits: defaultConfig().limits };
const scope = scopeOf(ctx);

const PRICE = "commerce.order.priceTotal";
const PAGE = "web.webPageDetails.name";
/** [function's expression, count, unit]: every function, every unit, with and without a condition. */
const ATTRS: Array<[string, number, DurationUnit]> = [
  [`xEvent[eventType = "t0"].sum(${PRICE})`, 7, "DAYS"],
  ["xEvent.count()", 6, "HOURS"],
  [`xEvent[eventType = "t1" or ${PRICE} > 200].count()`, 2, "WEEKS"],
  [`xEvent[eventType = "t2"].min(${PRICE})`, 12, "HOURS"],
  [`xEvent[eventType = "t1"].max(${PRICE})`, 1, "MONTHS"],
  ["xEvent.max(timestamp)", 3, "DAYS"],
  [`xEvent[eventType = "t0"].topN(timestamp, 1).map({"timestamp": timestamp, "value": ${PAGE}}).head()`, 4, "WEEKS"],
  [`xEvent[${PAGE} = "page1"].topN(timestamp, 3).map(${PAGE})`, 6, "MONTHS"],
  [`xEvent[eventType = "t2"].sum(${PRICE})`, 24, "HOURS"],
  [`xEvent[eventType = "t0" or eventType = "t2"].topN(timestamp, 2).map(${PRICE})`, 1, "DAYS"],
];

let handle: TestStoreHandle;
let meta: MetadataStore;
let ts: TestStore;
let snapshots: SnapshotCache;
before(async () => {
  handle = await createTestStore("ca-snapshot");
  meta = await handle.open();
  ts = openTestStore();
  snapshots = new SnapshotCache({});
});
after(async () => {
  await snapshots.close();
  await ts.cleanup();
  await meta.close();
  await handle.dispose();
});

/** Every profile's events as stored (the reference reads them). */
const stored = new Map<number, Record<string, unknown>[]>();
let nextEvent = 0;

/** An event of profile i at `at`: a random type, price and page, its timestamp as text or epoch milliseconds. */
function event(r: () => number, i: number, at: number): Record<string, unknown> {
  const body: Record<string, unknown> = {
    _id: `e${nextEvent++}`,
    identityMap: { ECID: [{ id: `p${i}`, primary: true }] },
    eventType: `t${Math.floor(r() * 3)}`,
    timestamp: r() < 0.2 ? at : new Date(at).toISOString(),
  };
  if (r() < 0.85) body.commerce = { order: { priceTotal: Math.round(r() * 30_000) / 100 } };
  if (r() < 0.7) body.web = { webPageDetails: { name: `page${Math.floor(r() * 3)}` } };
  return body;
}

/** Events of profiles [from, to) around `now`: spread over 7 months and just after `now`, and on each lookback's edges. */
function events(r: () => number, profiles: readonly number[], now: number, perProfile: number): Record<string, unknown>[] {
  const edges = ATTRS.flatMap(([, count, unit]) => {
    const start = lookbackStart(now, { count, unit });
    return [start, start - 1, start + 1];
  });
  const out: Record<string, unknown>[] = [];
  for (const i of profiles) {
    const n = Math.floor(r() * perProfile);
    for (let k = 0; k < n; k++) {
      const x = r();
      const at = x < 0.15 ? edges[Math.floor(r() * edges.length)]! : x < 0.2 ? now + Math.floor(r() * 3) - 1 : now - Math.floor(r() * 210 * DAY) + 2 * HOUR;
      out.push(event(r, i, at));
    }
  }
  for (const e of out) {
    const i = Number(((e.identityMap as { ECID: { id: string }[] }).ECID[0]!.id).slice(1));
    stored.set(i, [...(stored.get(i) ?? []), e]);
  }
  return out;
}

async function ingest(datasetId: string, records: readonly Record<string, unknown>[], now: number): Promise<void> {
  const r = await ingestRecords(ts.store, scope, datasetId, records.map((value, index) => ({ index, value })), { now });
  assert.equal(r.accepted, records.length, JSON.stringify(r.failed?.slice(0, 3)));
}

/** Profiles with a contributing event at `now`, by the reference. */
function referenceCount(expression: string, duration: { count: number; unit: DurationUnit }, now: number): number {
  const def = referenceDefinition({ expression: { type: "PQL", format: "pql/text", value: expression }, duration });
  let n = 0;
  for (let i = 0; i < PROFILES + 20; i++) if (contributingEvents(def, stored.get(i) ?? [], now).length > 0) n++;
  return n;
}

test("the count over the resident snapshot equals the reference's for every function and unit, before and after an incremental refresh", async () => {
  const r = rng(41);
  const profilesDs = (await ts.store.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  const eventsDs = (await ts.store.createDataset(scope, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
  const profileRecords = (ids: readonly number[]) => ids.map((i) => ({ identityMap: { ECID: [{ id: `p${i}`, primary: true }] }, person: { name: { firstName: `n${i}` } } }));
  const first = Array.from({ length: PROFILES }, (_, i) => i);
  await ingest(profilesDs, profileRecords(first), T0);
  await ingest(eventsDs, events(r, first, T0, 12), T0);

  const clock = new ManualClock(T0);
  const counts = new SnapshotCounts(ts.store, meta.mergePolicies, snapshots);
  // The store scan fails the evaluation if it is ever used.
  const scanned: StoredProfileEvents = {
    count: (c) => ts.store.countProfiles(scopeOf(c)),
    scan: () => {
      throw new Error("the store was scanned");
    },
  };
  const processor = new AttributeProcessor(meta.computedAttributes, clock, residentEvaluator(() => counts, scanned), undefined, 0);
  const svc = new ComputedAttributeService(meta.computedAttributes, clock, { processor });

  /** Creates every attribute once; returns what each evaluation did to the snapshot. */
  const round = async (suffix: string, now: number, total: number): Promise<string[]> => {
    let nonEmpty = 0;
    const modes: string[] = [];
    for (const [k, [expression, count, unit]] of ATTRS.entries()) {
      const duration = { count, unit };
      const created = await svc.create(ctx, { name: `a${k}${suffix}`, displayName: `a${k}`, description: "", expression: { type: "PQL", format: "pql/text", value: expression }, duration, status: "NEW" });
      await processor.idle();
      modes.push(snapshots.stats(scope, NO_MERGE_POLICY)?.mode ?? "none");
      const done = await svc.get(ctx, created.id);
      const expected = referenceCount(expression, duration, now);
      assert.equal(done.status, "PROCESSED", `${expression} over ${count} ${unit}: ${JSON.stringify(done.evaluation)}`);
      assert.equal(done.lastEvaluationTs, new Date(now).toISOString());
      assert.deepEqual(done.evaluation, { profilesEvaluated: total, profilesTotal: total, profilesWithValue: expected }, `${expression} over ${count} ${unit}`);
      if (expected > 0 && expected < total) nonEmpty++;
    }
    // The population tells the attributes apart: most have some profiles with a value and some without.
    assert.ok(nonEmpty >= ATTRS.length - 2, `${nonEmpty} attributes split the profiles`);
    return modes;
  };

  const unchanged = ATTRS.slice(1).map(() => "unchanged");
  assert.deepEqual(await round("x", T0, PROFILES), ["built", ...unchanged], "built once, then reused");

  // More events (some profiles new), stored after the snapshot was built; the windows move.
  clock.set(T1);
  const later = [...Array.from({ length: 60 }, (_, k) => k * 4), ...Array.from({ length: 20 }, (_, k) => PROFILES + k)];
  await ingest(profilesDs, profileRecords(later.filter((i) => i >= PROFILES)), T1);
  await ingest(eventsDs, events(r, later, T1, 8), T1);
  assert.deepEqual(await round("y", T1, PROFILES + 20), ["incremental", ...unchanged], "the changed profiles re-read, nothing rebuilt");
});

/**
 * The store the snapshot is built from, its scan yielding chunks of 100 profiles and waiting after
 * the first one until `release` (the profiles of the test above).
 */
function gatedStore(): { store: typeof ts.store; release: () => void; reachedGate: Promise<void> } {
  let release = (): void => {};
  const gate = new Promise<void>((r) => (release = r));
  let reached = (): void => {};
  const reachedGate = new Promise<void>((r) => (reached = r));
  const inner = ts.store;
  async function* scanProfiles(...a: Parameters<typeof inner.scanProfiles>) {
    let first = true;
    for await (const chunk of inner.scanProfiles(...a)) {
      for (let k = 0; k < chunk.length; k += 100) {
        yield chunk.slice(k, k + 100);
        if (first) {
          first = false;
          reached();
          await gate;
        }
      }
    }
  }
  const store = new Proxy(inner, {
    get: (target, prop) => {
      if (prop === "scanProfiles") return scanProfiles;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === "function" ? (v as (...x: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { store, release, reachedGate };
}

for (const disable of [false, true]) {
  test(disable ? "a DISABLE while the snapshot is built wins: the evaluation stops, nothing more is written" : "while the snapshot is built, the profiles read so far are the progress written; then PROCESSED with the reference's count", async () => {
    const gated = gatedStore();
    const cache = new SnapshotCache({});
    const clock = new ManualClock(T1);
    const processor = new AttributeProcessor(meta.computedAttributes, clock, residentEvaluator(() => new SnapshotCounts(gated.store, meta.mergePolicies, cache), { count: (c) => ts.store.countProfiles(scopeOf(c)), scan: () => assert.fail("the store was scanned") }), undefined, 0);
    const svc = new ComputedAttributeService(meta.computedAttributes, clock, { processor });
    const [expression, count, unit] = ATTRS[0]!;
    const created = await svc.create(ctx, { name: `gated${disable ? "D" : "P"}`, displayName: "g", description: "", expression: { type: "PQL", format: "pql/text", value: expression }, duration: { count, unit }, status: "NEW" });
    await gated.reachedGate;
    // The first chunk's progress is written while the build waits for the next one.
    let during = await svc.get(ctx, created.id);
    for (let i = 0; during.evaluation?.profilesEvaluated !== 100 && i < 200; i++) {
      await new Promise((r) => setTimeout(r, 10));
      during = await svc.get(ctx, created.id);
    }
    assert.equal(during.status, "PROCESSING");
    assert.deepEqual(during.evaluation, { profilesEvaluated: 100, profilesTotal: PROFILES + 20, profilesWithValue: 0 });
    if (disable) assert.equal((await svc.patch(ctx, created.id, { status: "DISABLED" })).status, "DISABLED");
    gated.release();
    await processor.idle();
    const done = await svc.get(ctx, created.id);
    if (disable) {
      assert.equal(done.status, "DISABLED");
      assert.equal(done.lastEvaluationTs, undefined);
      assert.deepEqual(done.evaluation, during.evaluation, "nothing written after the DISABLE");
    } else {
      assert.equal(done.status, "PROCESSED");
      assert.deepEqual(done.evaluation, { profilesEvaluated: PROFILES + 20, profilesTotal: PROFILES + 20, profilesWithValue: referenceCount(expression, { count, unit }, T1) });
    }
    await cache.close();
  });
}
