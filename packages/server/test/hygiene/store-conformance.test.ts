// One conformance suite for both hygiene stores: SEGMENTD_TEST_STORE picks
// embedded (default) or postgres (a fresh schema, dropped afterwards).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { QuotaCharge, WorkOrderListQuery } from "../../src/hygiene/records.js";
import type { HygieneStore } from "../../src/hygiene/store/types.js";
import { expiration, workOrder } from "./fixtures.js";
import { STORE_KIND, openTestHygieneStore, type TestHygieneStore } from "./helpers.js";

const DAY = "dailyConsumerDeleteIdentitiesQuota" as const;
const MONTH = "monthlyConsumerDeleteIdentitiesQuota" as const;

function charges(units: number, dayAllowance: number, monthAllowance: number, day = "2026-01-15", month = "2026-01"): QuotaCharge[] {
  return [
    { quota: DAY, period: day, units, allowance: dayAllowance },
    { quota: MONTH, period: month, units, allowance: monthAllowance },
  ];
}

const listAll = (over: Partial<WorkOrderListQuery> = {}): WorkOrderListQuery => ({ orderBy: { field: "createdAt", direction: "asc" }, offset: 0, limit: 100, ...over });

describe(`hygiene store conformance (${STORE_KIND})`, () => {
  let t: TestHygieneStore;
  let store: HygieneStore;
  before(async () => {
    t = await openTestHygieneStore();
    store = t.store;
  });
  after(async () => {
    await t.cleanup();
  });

  describe("quota check-and-consume", () => {
    it("charges every quota of an accepted order and stores the order", async () => {
      const org = "consume@AdobeOrg";
      const o = workOrder(org, { operationCount: 7 });
      assert.deepEqual(await store.insertWorkOrder(o, charges(7, 10, 100)), { ok: true });
      assert.deepEqual(await store.consumed(org, [{ quota: DAY, period: "2026-01-15" }, { quota: MONTH, period: "2026-01" }]), [7, 7]);
      assert.deepEqual(await store.getWorkOrder(org, o.workorderId), o);
    });

    it("accepts exactly up to the allowance and rejects one unit more, changing nothing", async () => {
      const org = "edge@AdobeOrg";
      assert.deepEqual(await store.insertWorkOrder(workOrder(org), charges(10, 10, 100)), { ok: true });
      const rejected = workOrder(org);
      assert.deepEqual(await store.insertWorkOrder(rejected, charges(1, 10, 100)), { ok: false, quota: DAY, allowance: 10, consumed: 10 });
      assert.equal(await store.getWorkOrder(org, rejected.workorderId), undefined);
      assert.deepEqual(await store.consumed(org, [{ quota: DAY, period: "2026-01-15" }, { quota: MONTH, period: "2026-01" }]), [10, 10]);
    });

    it("rejects the whole order when only the second quota would be exceeded", async () => {
      const org = "month@AdobeOrg";
      assert.deepEqual(await store.insertWorkOrder(workOrder(org), charges(5, 1000, 8)), { ok: true });
      const r = await store.insertWorkOrder(workOrder(org), charges(4, 1000, 8));
      assert.deepEqual(r, { ok: false, quota: MONTH, allowance: 8, consumed: 5 });
      // The daily counter, which alone would have allowed it, did not move either.
      assert.deepEqual(await store.consumed(org, [{ quota: DAY, period: "2026-01-15" }, { quota: MONTH, period: "2026-01" }]), [5, 5]);
      assert.equal((await store.listWorkOrders(org, listAll())).total, 1);
    });

    it("keeps periods and organizations apart", async () => {
      const a = "periods-a@AdobeOrg";
      const b = "periods-b@AdobeOrg";
      await store.insertWorkOrder(workOrder(a), charges(3, 10, 100, "2026-01-31", "2026-01"));
      await store.insertWorkOrder(workOrder(a), charges(4, 10, 100, "2026-02-01", "2026-02"));
      assert.deepEqual(
        await store.consumed(a, [
          { quota: DAY, period: "2026-01-31" },
          { quota: DAY, period: "2026-02-01" },
          { quota: MONTH, period: "2026-01" },
          { quota: MONTH, period: "2026-02" },
        ]),
        [3, 4, 3, 4],
      );
      assert.deepEqual(await store.consumed(b, [{ quota: DAY, period: "2026-01-31" }, { quota: MONTH, period: "2026-01" }]), [0, 0]);
      assert.equal((await store.listWorkOrders(b, listAll())).total, 0);
    });

    it("200 concurrent orders racing for the last 50 units, through two store handles: exactly the allowance is consumed", async () => {
      const org = "race@AdobeOrg";
      // Use up all but 50 of a 1000 allowance.
      assert.deepEqual(await store.insertWorkOrder(workOrder(org), charges(950, 1000, 5000)), { ok: true });
      const second = await t.reopen();
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? store : second).insertWorkOrder(workOrder(org), charges(1, 1000, 5000))),
      );
      assert.equal(results.filter((r) => r.ok).length, 50);
      assert.deepEqual(await store.consumed(org, [{ quota: DAY, period: "2026-01-15" }, { quota: MONTH, period: "2026-01" }]), [1000, 1000]);
      assert.equal((await store.listWorkOrders(org, listAll())).total, 51);
      for (const r of results) if (!r.ok) assert.deepEqual(r, { ok: false, quota: DAY, allowance: 1000, consumed: 1000 });
    });
  });

  describe("work orders", () => {
    it("replaces only the revision it read, from an expected status (compare-and-set)", async () => {
      const org = "cas@AdobeOrg";
      const o = workOrder(org);
      await store.insertWorkOrder(o, []);
      assert.equal(await store.replaceWorkOrder({ ...o, status: "submitted" }, ["received"]), true);
      // A second writer that read revision 0 loses, whatever it writes.
      assert.equal(await store.replaceWorkOrder({ ...o, status: "submitted" }, ["received"]), false);
      assert.equal(await store.replaceWorkOrder({ ...o, displayName: "renamed" }, ["received", "submitted"]), false);
      const stored = await store.getWorkOrder(org, o.workorderId);
      assert.equal(stored?.status, "submitted");
      assert.equal(stored?.displayName, "order");
      assert.equal(stored?.revision, 1);
      // The right revision but a status not expected also loses.
      assert.equal(await store.replaceWorkOrder({ ...stored!, status: "completed" }, ["received"]), false);
      assert.deepEqual(await store.unfinishedWorkOrders(1000).then((l) => l.filter((r) => r.orgId === org)), [{ orgId: org, id: o.workorderId }]);
      assert.equal(await store.replaceWorkOrder({ ...stored!, status: "completed" }, ["submitted"]), true);
      assert.deepEqual(await store.unfinishedWorkOrders(1000).then((l) => l.filter((r) => r.orgId === org)), []);
    });

    it("lists with filters, a total order and pages", async () => {
      const org = "list@AdobeOrg";
      const t0 = Date.UTC(2026, 2, 1);
      const orders = [
        workOrder(org, { createdAt: t0, displayName: "Alpha purge", status: "completed" }),
        workOrder(org, { createdAt: t0 + 1, displayName: "beta 100%_done", status: "failed", sandboxName: "dev" }),
        workOrder(org, { createdAt: t0 + 2, displayName: "Gamma", description: "ALPHA in description", action: "identity-update", updatedBy: "ann@x.com" }),
      ];
      for (const o of orders) await store.insertWorkOrder(o, []);
      const ids = (p: { items: Array<{ workorderId: string }> }) => p.items.map((o) => o.workorderId);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll())), orders.map((o) => o.workorderId));
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ orderBy: { field: "createdAt", direction: "desc" } }))), orders.map((o) => o.workorderId).reverse());
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ sandboxName: "dev" }))), [orders[1]!.workorderId]);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ statuses: ["completed", "failed"] }))), [orders[0]!.workorderId, orders[1]!.workorderId]);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ search: "alpha" }))), [orders[0]!.workorderId, orders[2]!.workorderId]);
      // % and _ are literal characters in a substring filter.
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ displayName: "100%_" }))), [orders[1]!.workorderId]);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ displayName: "100%x" }))), []);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ action: "identity-update" }))), [orders[2]!.workorderId]);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ author: "LIKE ann%" }))), [orders[2]!.workorderId]);
      assert.deepEqual(ids(await store.listWorkOrders(org, listAll({ author: "NOT LIKE ann%" }))), [orders[0]!.workorderId, orders[1]!.workorderId]);
      const page1 = await store.listWorkOrders(org, listAll({ limit: 2, offset: 2 }));
      assert.equal(page1.total, 3);
      assert.deepEqual(ids(page1), [orders[2]!.workorderId]);
    });
  });

  describe("dataset expirations", () => {
    it("allows one active expiration per dataset; a cancelled or completed one does not block", async () => {
      const org = "ttl-dup@AdobeOrg";
      const first = expiration(org, "ds1");
      assert.deepEqual(await store.insertExpiration(first, 10), { ok: true });
      const dup = await store.insertExpiration(expiration(org, "ds1"), 10);
      assert.equal(dup.ok, false);
      assert.equal(!dup.ok && dup.reason === "duplicate" && dup.existing.ttlId, first.ttlId);
      // Same dataset id in another sandbox is another dataset.
      assert.deepEqual(await store.insertExpiration(expiration(org, "ds1", { sandboxName: "dev" }), 10), { ok: true });
      assert.equal(await store.replaceExpiration({ ...first, status: "cancelled" }, ["pending"]), true);
      const again = expiration(org, "ds1");
      assert.deepEqual(await store.insertExpiration(again, 10), { ok: true });
      assert.equal((await store.expirationForDataset(org, "prod", "ds1"))?.ttlId, again.ttlId);
    });

    it("enforces the concurrency cap whatever the expiry, and a cancel frees a slot", async () => {
      const org = "ttl-cap@AdobeOrg";
      const made = [];
      for (let i = 0; i < 3; i++) {
        const e = expiration(org, `cap${i}`, { expiry: Date.UTC(2030 + i, 0, 1) });
        assert.deepEqual(await store.insertExpiration(e, 3), { ok: true });
        made.push(e);
      }
      assert.deepEqual(await store.insertExpiration(expiration(org, "cap3", { expiry: Date.UTC(2099, 0, 1) }), 3), { ok: false, reason: "quota", active: 3, allowance: 3 });
      assert.equal(await store.countActiveExpirations(org), 3);
      // Executing still occupies a slot.
      assert.equal(await store.replaceExpiration({ ...made[0]!, status: "executing" }, ["pending"]), true);
      // Stale revision: refused.
      assert.equal(await store.replaceExpiration({ ...made[0]!, status: "cancelled" }, ["pending", "executing"]), false);
      assert.equal((await store.insertExpiration(expiration(org, "cap3"), 3)).ok, false);
      assert.equal(await store.replaceExpiration({ ...made[1]!, status: "cancelled" }, ["pending"]), true);
      assert.equal(await store.countActiveExpirations(org), 2);
      assert.deepEqual(await store.insertExpiration(expiration(org, "cap3"), 3), { ok: true });
      assert.equal(await store.countActiveExpirations("other@AdobeOrg"), 0);
    });

    it("races many creations for the last slots: never more active than the allowance", async () => {
      const org = "ttl-race@AdobeOrg";
      const second = await t.reopen();
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? store : second).insertExpiration(expiration(org, `race${i}`), 5)));
      assert.equal(results.filter((r) => r.ok).length, 5);
      assert.equal(await store.countActiveExpirations(org), 5);
    });

    it("lists due expirations (pending and past expiry, or executing)", async () => {
      const org = "ttl-due@AdobeOrg";
      const now = Date.UTC(2040, 0, 1);
      const due = expiration(org, "due", { expiry: now });
      const later = expiration(org, "later", { expiry: now + 1 });
      const running = expiration(org, "running", { expiry: now + 10, status: "executing" });
      for (const e of [due, later, running]) await store.insertExpiration(e, 100);
      const found = (await store.dueExpirations(now, 1000)).filter((r) => r.orgId === org).map((r) => r.id).sort();
      assert.deepEqual(found, [due.ttlId, running.ttlId].sort());
    });
  });

  describe("sandbox scope of reads and replaces by id", () => {
    it("a read by id that names a sandbox finds only that sandbox's work order; a replace never moves one", async () => {
      const org = "scope-wo@AdobeOrg";
      const prod = workOrder(org);
      await store.insertWorkOrder(prod, []);
      assert.equal(await store.getWorkOrder(org, prod.workorderId, "dev"), undefined);
      assert.deepEqual(await store.getWorkOrder(org, prod.workorderId, "prod"), prod);
      // Without a sandbox (the runner), the org's order is found; another org's never is.
      assert.deepEqual(await store.getWorkOrder(org, prod.workorderId), prod);
      assert.equal(await store.getWorkOrder("other@AdobeOrg", prod.workorderId, "prod"), undefined);
      // The same id and revision claimed for another sandbox changes nothing.
      assert.equal(await store.replaceWorkOrder({ ...prod, sandboxName: "dev", displayName: "moved" }, ["received"]), false);
      assert.deepEqual(await store.getWorkOrder(org, prod.workorderId, "prod"), prod);
      assert.equal(await store.replaceWorkOrder({ ...prod, displayName: "renamed" }, ["received"]), true);
      assert.equal((await store.getWorkOrder(org, prod.workorderId, "prod"))?.displayName, "renamed");
    });

    it("a read by id that names a sandbox finds only that sandbox's expiration; a replace never moves one", async () => {
      const org = "scope-ttl@AdobeOrg";
      const prod = expiration(org, "ds1");
      assert.deepEqual(await store.insertExpiration(prod, 10), { ok: true });
      assert.equal(await store.getExpiration(org, prod.ttlId, "dev"), undefined);
      assert.deepEqual(await store.getExpiration(org, prod.ttlId, "prod"), prod);
      assert.deepEqual(await store.getExpiration(org, prod.ttlId), prod);
      assert.equal(await store.getExpiration("other@AdobeOrg", prod.ttlId, "prod"), undefined);
      assert.equal(await store.replaceExpiration({ ...prod, sandboxName: "dev", status: "cancelled" }, ["pending"]), false);
      assert.deepEqual(await store.getExpiration(org, prod.ttlId, "prod"), prod);
      assert.equal(await store.countActiveExpirations(org), 1);
    });
  });

  describe("entitlement overrides", () => {
    it("sets, reads and removes overrides per organization", async () => {
      await store.setEntitlementOverrides("ent@AdobeOrg", { datasetExpirationQuota: 3, dailyConsumerDeleteIdentitiesQuota: 0 });
      assert.deepEqual(await store.entitlementOverrides("ent@AdobeOrg"), { datasetExpirationQuota: 3, dailyConsumerDeleteIdentitiesQuota: 0 });
      await store.setEntitlementOverrides("ent@AdobeOrg", { datasetExpirationQuota: null, dailyConsumerDeleteIdentitiesQuota: 9 });
      assert.deepEqual(await store.entitlementOverrides("ent@AdobeOrg"), { dailyConsumerDeleteIdentitiesQuota: 9 });
      assert.deepEqual(await store.entitlementOverrides("other@AdobeOrg"), {});
    });
  });
});
