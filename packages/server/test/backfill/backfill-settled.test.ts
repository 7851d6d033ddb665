/**
 * An edit's backfill and an evaluation of the previous version still committing: a record the
 * engine evaluated on the definition as it was before the edit, whose write had not committed when
 * the edit came, must not stand after the backfill (its write committing after the backfill read
 * the stored statuses left a profile out of the audience it qualifies for — backfill-stream.test.ts
 * in CI, 2 members missing and 3 too many of 20,000 profiles). The backfill waits for such
 * evaluations before its fence (LiveGate.settled). The services are wired as
 * batch/http/plugin.ts wires them, without HTTP; the engine's writes pass a gate the test opens.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { BackfillRunner } from "../../src/batch/backfill/backfill-runner.js";
import type { BackfillView, LiveGate } from "../../src/batch/backfill/backfill-types.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { ManualClock } from "../../src/platform/clock.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { MembershipChange } from "../../src/profiles/store.js";
import type { MembershipTransition, TenantScope } from "../../src/profiles/types.js";
import { DefinitionService } from "../../src/services/definitions.js";
import { MergePolicyService } from "../../src/services/merge-policies.js";
import type { StreamingHub } from "../../src/streaming/engine.js";
import { createStreaming } from "../../src/streaming/plugin.js";
import { openBackfillServices, type BackfillServices } from "./backfill-services.js";

const T0 = Date.UTC(2026, 10, 20, 12);
const ORG = "SETTLED@AdobeOrg";
const PROFILE_CLASS = "_xdm.context.profile";

let w: BackfillServices | undefined;
let stopFirst: () => Promise<void> = async () => {};
after(async () => w?.close(stopFirst));

test("an edit's backfill waits for the engine's evaluations of the previous version: one committing after the backfill's evaluation does not stand", async () => {
  w = await openBackfillServices("backfill-settled", ORG);
  const { tenants, tenant, scope, metadata, repo, snapshots } = w;
  const store = w.ts.store;
  const clock = new ManualClock(T0);
  const bus = new InProcessBus();

  // The engine's membership writes wait at this gate while it is closed.
  let gate: Promise<void> | null = null;
  let open!: () => void;
  let waiting!: () => void;
  const reached = new Promise<void>((resolve) => (waiting = resolve));
  const hub = new Proxy(store, {
    get(target, key) {
      if (key === "applyMembershipChanges") {
        return async (s: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> => {
          if (gate !== null) {
            waiting();
            await gate;
          }
          return target.applyMembershipChanges(s, changes);
        };
      }
      const v: unknown = Reflect.get(target, key, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as StreamingHub;
  const streaming = createStreaming({ meta: metadata, hub, clock, bus, onError: (err) => assert.fail(String(err)) });
  const engine = streaming.engine;
  const live: LiveGate = { settled: engine.settled.bind(engine), holdIdle: engine.holdIdle.bind(engine) };
  const views: BackfillView[] = [];
  let finished: (v: BackfillView) => void = () => {};
  const runner = new BackfillRunner({ metadata, profiles: store, repo, clock, snapshots, live, tenantOf: (s) => tenants.resolve(s.orgId, s.sandboxName), onFinished: (v) => { views.push({ ...v }); finished(v); } });
  const unfollow = streaming.catalog.follow((e) => void runner.definitionChanged(tenant, e.definitionId, e.change));
  stopFirst = async () => {
    unfollow();
    await runner.stop();
    await streaming.close();
  };
  const next = () => new Promise<BackfillView>((resolve) => (finished = resolve));

  const profilesDs = (await store.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  const record = (country: string) => [{ index: 0, value: { identityMap: { ECID: [{ id: "s-ann", primary: true }] }, homeAddress: { countryCode: country } } }];
  const first = await ingestRecords(store, scope, profilesDs, record("US"), { now: T0 });
  const pid = String(first.storedPids![0]);

  await new MergePolicyService(metadata, clock, bus).create(tenant, {
    name: "none", schema: { name: PROFILE_CLASS }, identityGraph: { type: "none" }, attributeMerge: { type: "timestampOrdered" }, default: true,
  });
  const definitions = new DefinitionService(metadata, clock, bus);
  const input = (country: string) => ({
    name: "by country", schema: { name: PROFILE_CLASS }, expression: { type: "PQL" as const, format: "pql/text" as const, value: `homeAddress.countryCode = "${country}"` },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } },
  });
  let done = next();
  const def = await definitions.create(tenant, input("US"));
  assert.equal((await done).state, "succeeded");
  assert.deepEqual(await store.listMemberIds(scope, def.id, "realized"), [pid], "the US profile entered with the creation's backfill");

  // Ann moves to France; the engine evaluates the record on the US definition (an exit) and its write waits at the gate.
  gate = new Promise((resolve) => (open = resolve));
  clock.advance(1000);
  const moved = await ingestRecords(store, scope, profilesDs, record("FR"), { now: clock.now() });
  const streamed = engine.onRecordsStored(tenant, moved.stored, moved.storedPids);
  await reached;

  // The edit: French profiles. Its backfill must not settle Ann's membership before that exit commits.
  done = next();
  clock.advance(1000);
  await definitions.overwrite(tenant, def.id, input("FR"));
  const early = await Promise.race([done.then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 300))]);
  open();
  gate = null;
  const exit = await streamed;
  assert.deepEqual(exit.map((t) => [t.profileId, t.from, t.to, t.source]), [[pid, "realized", "exited", "streaming"]], "the exit the US definition gave");
  const view = await done;
  assert.equal(view.state, "succeeded", JSON.stringify(view));
  await engine.idle();
  assert.deepEqual(await store.listMemberIds(scope, def.id, "realized"), [pid], "Ann is French: a member of the edited definition");
  assert.equal(early, false, "the backfill waited for the evaluation in flight");
  const log = await store.listTransitions(scope, { definitionId: def.id });
  assert.deepEqual(log.map((t) => [t.from, t.to, t.source]), [[null, "realized", "backfill"], ["realized", "exited", "streaming"], ["exited", "realized", "backfill"]]);
  assert.equal(views.length, 2);
});
