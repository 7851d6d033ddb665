/**
 * The in-process backfill of a windowed definition (one whose verdict depends on now), on the test
 * run's store with a manual clock: time passes between the evaluation over the snapshot and the
 * chunk's write. A profile whose event left the window meanwhile (the sweep would have exited it)
 * is decided by the live engine on now — not realized from the snapshot's stale verdict; a profile
 * whose events are all still inside the window is written from the snapshot, and its exit is
 * scheduled for the sweep (the engine holds no state of it), which writes it once its event leaves.
 * The services are wired as batch/http/plugin.ts wires them, without HTTP.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { BackfillRunner } from "../../src/batch/backfill/backfill-runner.js";
import type { BackfillView, LiveGate } from "../../src/batch/backfill/backfill-types.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { ManualClock } from "../../src/platform/clock.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { DefinitionService } from "../../src/services/definitions.js";
import { MergePolicyService } from "../../src/services/merge-policies.js";
import { createStreaming } from "../../src/streaming/plugin.js";
import { openBackfillServices, type BackfillServices } from "./backfill-services.js";

const MINUTE = 60_000;
/** Noon UTC: no midnight passes during the test (a midnight makes every windowed verdict the engine's). */
const T0 = Date.UTC(2026, 10, 20, 12);
const ORG = "WINDOWED@AdobeOrg";
const BUYERS = 'chain(xEvent, timestamp, [C0: WHAT(eventType = "commerce.purchases") WHEN(<= 1 hours before now)])';
/** Minutes before T0 of each profile's purchase. */
const BOUGHT = { stale: 50, fresh: 5, old: 180 } as const;

let w: BackfillServices | undefined;
let stopFirst: () => Promise<void> = async () => {};
after(async () => w?.close(stopFirst));

test("a windowed definition's backfill: a profile whose event left the window since the evaluation is the engine's (not realized), the others written and their exits scheduled", async () => {
  w = await openBackfillServices("backfill-windowed", ORG);
  const { tenants, tenant, scope, metadata, repo, snapshots } = w;
  const store = w.ts.store;
  const clock = new ManualClock(T0);
  const bus = new InProcessBus();
  const streaming = createStreaming({ meta: metadata, hub: store, clock, bus, onError: (err) => assert.fail(String(err)) });

  // Three profiles, each with one purchase.
  const profilesDs = (await store.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  const eventsDs = (await store.createDataset(scope, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, T0)).id;
  const identity = (name: string) => ({ ECID: [{ id: `w-${name}`, primary: true }] });
  const names = Object.keys(BOUGHT) as Array<keyof typeof BOUGHT>;
  const loaded = await ingestRecords(store, scope, profilesDs, names.map((n, index) => ({ index, value: { identityMap: identity(n) } })), { now: T0 });
  const bought = await ingestRecords(store, scope, eventsDs, names.map((n, index) => ({ index, value: { _id: `buy-${n}`, identityMap: identity(n), eventType: "commerce.purchases", timestamp: new Date(T0 - BOUGHT[n] * MINUTE).toISOString() } })), { now: T0 });
  assert.deepEqual([loaded.accepted, bought.accepted], [3, 3]);
  const pid = Object.fromEntries(names.map((n, i) => [n, String(loaded.storedPids![i])])) as Record<keyof typeof BOUGHT, string>;
  assert.deepEqual(Array.from(bought.storedPids!), Array.from(loaded.storedPids!), "each purchase is its profile's");

  // The live gate: 20 minutes pass between the evaluation (at T0) and the first chunk's write.
  let held = 0;
  const engine = streaming.engine;
  const live: LiveGate = {
    settled: engine.settled.bind(engine),
    holdIdle: (t, profileIds, write) => {
      if (held++ === 0) clock.advance(20 * MINUTE);
      return engine.holdIdle(t, profileIds, write);
    },
    recheck: engine.recheck.bind(engine),
  };
  let finished!: (v: BackfillView) => void;
  const done = new Promise<BackfillView>((resolve) => (finished = resolve));
  const runner = new BackfillRunner({ metadata, profiles: store, repo, clock, snapshots, live, tenantOf: (s) => tenants.resolve(s.orgId, s.sandboxName), onFinished: (v) => finished({ ...v }) });
  const unfollow = streaming.catalog.follow((e) => void runner.definitionChanged(tenant, e.definitionId, e.change));
  stopFirst = async () => {
    unfollow();
    await runner.stop();
    await streaming.close();
  };

  const policy = await new MergePolicyService(metadata, clock, bus).create(tenant, {
    name: "pdg", schema: { name: "_xdm.context.profile" }, identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" }, default: true,
  });
  const def = await new DefinitionService(metadata, clock, bus).create(tenant, {
    name: "recent buyers", schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: BUYERS },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } }, mergePolicyId: policy.id,
  });
  const view = await done;
  assert.equal(view.state, "succeeded", JSON.stringify(view));
  assert.ok(held > 0, "the backfill wrote through the live gate");

  // At T0 the snapshot saw two buyers in the last hour; at T0 + 20 min the stale one's purchase is 70 minutes old.
  assert.deepEqual({ total: view.total, entered: view.entered, exited: view.exited, fenced: view.fenced }, { total: 2, entered: 1, exited: 0, fenced: 1 }, JSON.stringify(view));
  assert.deepEqual(await store.listMemberIds(scope, def.id, "realized"), [pid.fresh]);
  const log = await store.listTransitions(scope, { definitionId: def.id });
  assert.deepEqual(log.map((t) => ({ profileId: t.profileId, from: t.from, to: t.to, source: t.source, at: t.at })), [
    { profileId: pid.fresh, from: null, to: "realized", source: "backfill", at: new Date(T0).toISOString() },
  ], "the stale buyer got no transition (it would be realized now and exited by the next sweep)");

  // The fresh buyer's purchase leaves the window at T0 + 55 min (+1 ms): the sweep, told by the backfill, exits it then and not before.
  assert.ok(engine.scheduled >= 1, `re-checks scheduled: ${engine.scheduled}`);
  clock.set(T0 + 55 * MINUTE);
  assert.deepEqual(await engine.sweep(), [], "nothing is due before the purchase leaves the window");
  clock.set(T0 + 56 * MINUTE);
  const swept = await engine.sweep();
  assert.deepEqual(swept.map((t) => ({ profileId: t.profileId, definitionId: t.definitionId, from: t.from, to: t.to, source: t.source })), [
    { profileId: pid.fresh, definitionId: def.id, from: "realized", to: "exited", source: "streaming" },
  ]);
  assert.deepEqual(await store.listMemberIds(scope, def.id, "realized"), []);
});
