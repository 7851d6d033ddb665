/**
 * Backfill recovery with several hubs on one database (issue #43): a hub that starts (or the
 * schedules holder's periodic pass) takes over only the backfills of hubs no longer alive — not
 * one another live hub queued or runs, nor one started moments ago — and of two hubs recovering
 * the same orphan at once, one runs it. Two BackfillRunners on one repository and one store stand
 * for two hubs; the services are wired as batch/http/plugin.ts wires them, without HTTP.
 */
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { BackfillRunner } from "../../src/batch/backfill/backfill-runner.js";
import type { StoredBackfill } from "../../src/batch/backfill/backfill-types.js";
import { InProcessBus } from "../../src/platform/bus.js";
import { ManualClock } from "../../src/platform/clock.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { DefinitionService } from "../../src/services/definitions.js";
import { MergePolicyService } from "../../src/services/merge-policies.js";
import { openBackfillServices, type BackfillServices } from "./backfill-services.js";

const T0 = Date.UTC(2026, 10, 20, 12);
const ORG = "RECOVERY@AdobeOrg";

let w: BackfillServices | undefined;
const runners: BackfillRunner[] = [];
after(async () => w?.close(async () => {
  for (const r of runners) await r.stop();
}));

test("recovery takes over a dead hub's backfill, once, and leaves a live or just-started one's alone", async () => {
  w = await openBackfillServices("backfill-hubs", ORG);
  const { tenants, tenant, scope, metadata, repo, snapshots } = w;
  const store = w.ts.store;
  const clock = new ManualClock(T0);
  const bus = new InProcessBus();
  const hub = (runnerId: string) => {
    const r = new BackfillRunner({ metadata, profiles: store, repo, clock, snapshots, runnerId, tenantOf: (s) => tenants.resolve(s.orgId, s.sandboxName) });
    runners.push(r);
    return r;
  };

  const crm = (await store.createDataset(scope, { name: "crm", schemaClass: "profile", profileEnabled: true }, T0)).id;
  const loaded = await ingestRecords(store, scope, crm, ["US", "US", "DE"].map((c, index) => ({ index, value: { identityMap: { ECID: [{ id: `r-${index}`, primary: true }] }, homeAddress: { countryCode: c } } })), { now: T0 });
  assert.equal(loaded.accepted, 3);
  const policy = await new MergePolicyService(metadata, clock, bus).create(tenant, {
    name: "pdg", schema: { name: "_xdm.context.profile" }, identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" }, default: true,
  });
  const definitions = new DefinitionService(metadata, clock, bus);
  const define = async (name: string) => (await definitions.create(tenant, {
    name, schema: { name: "_xdm.context.profile" }, expression: { type: "PQL", format: "pql/text", value: 'homeAddress.countryCode = "US"' },
    evaluationInfo: { batch: { enabled: false }, continuous: { enabled: true }, synchronous: { enabled: false } }, mergePolicyId: policy.id,
  })).id;
  /** A backfill another hub stored as running, started `ago` ms before now. */
  const orphan = async (id: string, runBy: string, ago: number) => {
    const at = new Date(clock.now() - ago).toISOString();
    const doc: StoredBackfill = {
      view: { definitionId: id, state: "running", phase: "writing", reason: "created", definitionVersion: 0, fence: null, total: 0, processed: 0, entered: 0, exited: 0, fenced: 0,
        queuedAt: at, startedAt: at, evaluatedAt: null, finishedAt: null, attempts: 1, error: null },
      signature: "", doneSignature: null, runBy,
    };
    await repo.insert("backfill", { scope, id, status: "running", creationTime: clock.now() - ago, doc });
  };
  const stored = async (id: string) => (await repo.get<StoredBackfill>("backfill", scope, id))!;

  const d1 = await define("live hub's");
  await orphan(d1, "hub-a", 60_000);
  const b = hub("hub-b");
  // Hub A is alive: its backfill is its own.
  await b.recover(new Set(["hub-a", "hub-b"]));
  assert.deepEqual(b.counts(), { queued: 0, running: 0 });
  assert.deepEqual([(await stored(d1)).status, (await stored(d1)).doc.runBy], ["running", "hub-a"]);
  // Hub A is gone, but the backfill started 5 s ago (A may be one whose heartbeat was not read yet): left.
  const d2 = await define("just started");
  await orphan(d2, "hub-a", 5_000);
  await b.recover(new Set(["hub-b"]));
  assert.equal((await stored(d2)).doc.runBy, "hub-a");
  assert.equal((await stored(d2)).status, "running");
  // Later, A still gone: B takes over both and runs them from the start (attempt 2), once each.
  clock.advance(20_000);
  await b.recover(new Set(["hub-b"]));
  await b.idle();
  for (const id of [d1, d2]) {
    const r = await stored(id);
    assert.deepEqual({ status: r.status, runBy: r.doc.runBy, reason: r.doc.view.reason, attempts: r.doc.view.attempts, entered: r.doc.view.entered },
      { status: "succeeded", runBy: "hub-b", reason: "restarted", attempts: 2, entered: 2 }, JSON.stringify(r.doc.view));
  }
  assert.equal((await store.listMemberIds(scope, d1, "realized")).length, 2);

  // Two hubs recover a dead hub's backfill at the same moment: one of them runs it.
  const d3 = await define("contended");
  await orphan(d3, "hub-gone", 60_000);
  const c = hub("hub-c");
  await Promise.all([b.recover(new Set(["hub-b", "hub-c"])), c.recover(new Set(["hub-b", "hub-c"]))]);
  await Promise.all([b.idle(), c.idle()]);
  const r3 = await stored(d3);
  assert.equal(r3.status, "succeeded");
  assert.equal(r3.doc.view.attempts, 2, "run once after the take-over");
  assert.ok(["hub-b", "hub-c"].includes(r3.doc.runBy!));
  const log = await store.listTransitions(scope, { definitionId: d3 });
  assert.equal(log.length, 2, "each member's transition written once");
});
