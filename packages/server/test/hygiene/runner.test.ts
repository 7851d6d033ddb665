// The work-order runner at the service level: a failing execution ends in
// `failed` with the reason, an order accepted by a process that stopped before
// running it is executed after a restart, two runners never both execute one
// order that one of them claimed, and a restart takes over an order a stopped
// process had claimed.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { defaultHygieneConfig } from "../../src/hygiene/entitlements.js";
import { Hygiene } from "../../src/hygiene/hygiene.js";
import type { LifecycleChange, LifecycleProfileStore } from "../../src/hygiene/lifecycle-exits.js";
import { WorkOrderRunner } from "../../src/hygiene/work-order-runner.js";
import { ManualClock } from "../../src/platform/clock.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { workOrder } from "./fixtures.js";
import { ingest, openTestHygieneStore, openTestProfiles, person, type TestHygieneStore, type TestProfiles } from "./helpers.js";

const T0 = Date.UTC(2026, 4, 4);
const ORG = "runner@AdobeOrg";
const A: TenantScope = { orgId: ORG, sandboxName: "prod" };
const ctx = { orgId: ORG, sandboxName: "prod", actor: "tester" };

/** The profile store, counting the calls of deleteByIdentities (how many times an order ran). */
function countingDeletes(store: LifecycleProfileStore): { store: LifecycleProfileStore; deletes: () => number } {
  let n = 0;
  const counting: LifecycleProfileStore = Object.assign(Object.create(store) as LifecycleProfileStore, {
    deleteByIdentities: async (...args: Parameters<LifecycleProfileStore["deleteByIdentities"]>) => {
      n++;
      return store.deleteByIdentities(...args);
    },
  });
  return { store: counting, deletes: () => n };
}

describe("work-order runner", () => {
  let hs: TestHygieneStore;
  let ps: TestProfiles;
  before(async () => {
    hs = await openTestHygieneStore();
    ps = openTestProfiles();
    await ps.store.createDataset(A, { id: "crm", name: "CRM", schemaClass: "profile", profileEnabled: true }, T0);
  });
  after(async () => {
    await hs.cleanup();
    await ps.cleanup();
  });

  it("marks an order failed, with the reason, when execution throws", async () => {
    const failing: LifecycleProfileStore = Object.assign(Object.create(ps.store) as LifecycleProfileStore, {
      updateFields: async () => {
        throw new Error("disk on fire");
      },
    });
    const clock = new ManualClock(T0);
    const hygiene = new Hygiene({ store: hs.store, profiles: failing, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0 } });
    const order = await hygiene.workOrders.create(ctx, {
      action: "update_identity", datasetId: "crm", identities: [{ namespace: { code: "email" }, id: "a@x.com" }], fieldUpdates: { remove: ["x"] },
    });
    await hygiene.runner.idle();
    const stored = await hs.store.getWorkOrder(ORG, order.workorderId);
    assert.equal(stored?.status, "failed");
    assert.equal(stored?.failure, "disk on fire");
    assert.deepEqual(stored?.productStatusDetails.map((p) => p.productStatus), ["failed", "failed", "failed", "failed"]);
    // The quota stays consumed: the order was accepted (decisions §3 counts accepted orders).
    const q = await hygiene.quotas.report(ORG, "monthlyUpdatedFieldIdentitiesQuota");
    assert.equal(q.quotas[0]!.consumed, 1);
  });

  it("executes, after a restart, an order the previous process accepted but did not run", async () => {
    await ingest(ps.store, A, "crm", [person("left@x.com")], T0);
    const order = workOrder(ORG, { datasetId: "crm", identities: [{ namespace: "email", id: "left@x.com" }] });
    // Accepted and persisted, but never enqueued (the process died).
    assert.deepEqual(await hs.store.insertWorkOrder(order, []), { ok: true });
    const clock = new ManualClock(T0 + 5000);
    const restarted = new Hygiene({ store: await hs.reopen(), profiles: ps.store, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0 } });
    await restarted.start();
    await restarted.runner.idle();
    assert.equal((await hs.store.getWorkOrder(ORG, order.workorderId))?.status, "completed");
    const p = await ps.store.getProfile(A, { namespace: "email", id: "left@x.com" }, { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } });
    assert.ok(p === null || p.sources.length === 0, `left@x.com still has data in ${JSON.stringify(p?.sources)}`);
    await restarted.stop();
  });

  it("two runners racing for one order execute it once", async () => {
    const { store: counting, deletes } = countingDeletes(ps.store);
    const order = workOrder(ORG, { datasetId: "crm" });
    await hs.store.insertWorkOrder(order, []);
    const clock = new ManualClock(T0);
    const r1 = new WorkOrderRunner(hs.store, counting, clock);
    const r2 = new WorkOrderRunner(await hs.reopen(), counting, clock);
    r1.enqueue(ORG, order.workorderId);
    r2.enqueue(ORG, order.workorderId);
    await Promise.all([r1.idle(), r2.idle()]);
    assert.equal(deletes(), 1);
    assert.equal((await hs.store.getWorkOrder(ORG, order.workorderId))?.status, "completed");
  });

  it("a runner leaves an order another runner claimed; resume takes over one a stopped process claimed", async () => {
    const { store: counting, deletes } = countingDeletes(ps.store);
    const order = workOrder(ORG, { datasetId: "crm" });
    await hs.store.insertWorkOrder(order, []);
    // Claimed by a process that stopped before running it.
    assert.equal(await hs.store.replaceWorkOrder({ ...order, status: "submitted" }, ["received"]), true);
    const clock = new ManualClock(T0);
    const r1 = new WorkOrderRunner(hs.store, counting, clock);
    r1.enqueue(ORG, order.workorderId);
    await r1.idle();
    assert.equal(deletes(), 0, "a runner that did not claim the order must not run it");
    assert.equal((await hs.store.getWorkOrder(ORG, order.workorderId))?.status, "submitted");
    // The next process to start resumes it: it re-claims the order and runs it.
    const r2 = new WorkOrderRunner(await hs.reopen(), counting, clock);
    assert.ok((await r2.resume()) >= 1);
    await r2.idle();
    assert.equal(deletes(), 1);
    assert.equal((await hs.store.getWorkOrder(ORG, order.workorderId))?.status, "completed");
  });

  it("several hubs: a claim records its hub; a take-over leaves a live or recent claimant's order and takes a dead one's (also at the holder's poll)", async () => {
    const { store: counting, deletes } = countingDeletes(ps.store);
    const clock = new ManualClock(T0);
    let live = new Set(["hub-a", "hub-b"]);
    // Hub A claims an order and stops before finishing it (its runner is gone; its heartbeat not yet).
    const order = workOrder(ORG, { datasetId: "crm", updatedAt: T0 });
    await hs.store.insertWorkOrder(order, []);
    const claim = { ...order, status: "submitted" as const, claimedBy: "hub-a" };
    assert.equal(await hs.store.replaceWorkOrder(claim, ["received"]), true);
    const b = new Hygiene({ store: await hs.reopen(), profiles: counting, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0 } });
    b.runner.cluster = { runnerId: "hub-b", liveRunners: () => live };
    // Claimed 1 s ago by a live hub: left to it, at resume and at the lease holder's poll.
    clock.advance(1_000);
    assert.ok((await b.runner.resume()) >= 1);
    await b.tick();
    assert.equal(deletes(), 0, "a live hub's order is not run by another hub");
    // 60 s later and still alive: still its own.
    clock.advance(60_000);
    await b.tick();
    assert.equal(deletes(), 0);
    assert.equal((await hs.store.getWorkOrder(ORG, order.workorderId))?.claimedBy, "hub-a");
    // Hub A's heartbeat is gone: the holder's next poll takes the order over, once.
    live = new Set(["hub-b"]);
    await b.tick();
    await b.tick();
    assert.equal(deletes(), 1);
    const done = await hs.store.getWorkOrder(ORG, order.workorderId);
    assert.deepEqual([done?.status, done?.claimedBy], ["completed", "hub-b"]);
    // A claim of the last 10 s by a hub not (yet) among the live ones is left too.
    const fresh = workOrder(ORG, { datasetId: "crm", updatedAt: clock.now() - 2_000 });
    await hs.store.insertWorkOrder(fresh, []);
    assert.equal(await hs.store.replaceWorkOrder({ ...fresh, status: "submitted", claimedBy: "hub-c" }, ["received"]), true);
    await b.tick();
    assert.equal(deletes(), 1);
    clock.advance(10_000);
    await b.tick();
    assert.equal(deletes(), 2);
    await b.stop();
  });

  it("keeps a rename that lands while the order executes", async () => {
    const clock = new ManualClock(T0);
    // Filled in below: the fake store calls back into the service under test.
    const ref: { hygiene?: Hygiene; orderId: string } = { orderId: "" };
    const renaming: LifecycleProfileStore = Object.assign(Object.create(ps.store) as LifecycleProfileStore, {
      deleteByIdentities: async (...args: Parameters<LifecycleProfileStore["deleteByIdentities"]>) => {
        await ref.hygiene!.workOrders.rename(ctx, ref.orderId, { name: "renamed mid-run" });
        return ps.store.deleteByIdentities(...args);
      },
    });
    const hygiene = new Hygiene({ store: hs.store, profiles: renaming, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0 } });
    ref.hygiene = hygiene;
    const order = await hygiene.workOrders.create(ctx, { action: "delete_identity", datasetId: "ALL", displayName: "before", identities: [{ namespace: { code: "email" }, id: "r@x.com" }] });
    ref.orderId = order.workorderId;
    await hygiene.runner.idle();
    const stored = await hs.store.getWorkOrder(ORG, order.workorderId);
    assert.equal(stored?.status, "completed");
    assert.equal(stored?.displayName, "renamed mid-run");
  });

  it("tells the listener which profiles changed and which disappeared, for work orders and expirations", async () => {
    const changes: LifecycleChange[] = [];
    const clock = new ManualClock(T0);
    const hygiene = new Hygiene({ store: hs.store, profiles: ps.store, clock, config: { ...defaultHygieneConfig(), pollIntervalMs: 0 }, onChange: (c) => void changes.push(c) });
    await ps.store.createDataset(A, { id: "notify", name: "Notify", schemaClass: "profile", profileEnabled: true }, T0);
    await ps.store.createDataset(A, { id: "other", name: "Other", schemaClass: "profile", profileEnabled: true }, T0);
    await ingest(ps.store, A, "notify", [person("n1@x.com"), person("n2@x.com")], T0);
    await ingest(ps.store, A, "other", [person("n2@x.com")], T0);
    const p1 = (await ps.store.findProfileId(A, { namespace: "email", id: "n1@x.com" }))!;
    const p2 = (await ps.store.findProfileId(A, { namespace: "email", id: "n2@x.com" }))!;
    const order = await hygiene.workOrders.create(ctx, { action: "delete_identity", datasetId: "notify", identities: [{ namespace: { code: "email" }, id: "n1@x.com" }] });
    await hygiene.runner.idle();
    assert.deepEqual(changes, [{ scope: A, cause: { kind: "workorder", id: order.workorderId }, changedProfileIds: [p1], removedProfileIds: [p1] }]);
    const ttl = await hygiene.expirations.create(ctx, { datasetId: "notify", displayName: "bye", expiry: new Date(T0 + 86_400_000).toISOString() });
    clock.set(T0 + 86_400_000);
    await hygiene.tick();
    assert.deepEqual(changes[1], { scope: A, cause: { kind: "expiration", id: ttl.ttlId }, changedProfileIds: [p2], removedProfileIds: [] });
    assert.equal(changes.length, 2);
  });
});
