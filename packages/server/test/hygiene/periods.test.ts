// Quota periods are UTC calendar days and months, read from the injected
// clock: an order at 23:59:59.999 counts for that day, one at 00:00:00 for the
// next; month ends and 29 February included.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { periodKey, utcDayKey, utcMonthKey } from "../../src/hygiene/periods.js";
import { ORG_A, quotaMap, startTestServer, type TestServer } from "./helpers.js";

const WO = "/data/core/hygiene/workorder";
const at = (iso: string) => Date.parse(iso);

function order(ids: string[], action = "delete_identity") {
  const body: Record<string, unknown> = { action, datasetId: "crm", displayName: "p", identities: ids.map((id) => ({ namespace: { code: "email" }, id })) };
  if (action === "update_identity") body.fieldUpdates = { set: { "loyalty.tier": "none" } };
  return body;
}

describe("period keys", () => {
  it("are UTC calendar days and months", () => {
    assert.equal(utcDayKey(at("2026-03-31T23:59:59.999Z")), "2026-03-31");
    assert.equal(utcDayKey(at("2026-04-01T00:00:00.000Z")), "2026-04-01");
    // 23:30 at UTC-05:00 is already the next UTC day.
    assert.equal(utcDayKey(at("2026-03-31T23:30:00-05:00")), "2026-04-01");
    assert.equal(utcMonthKey(at("2028-02-29T12:00:00Z")), "2028-02");
    assert.equal(utcDayKey(at("2028-02-29T00:00:00Z")), "2028-02-29");
    assert.equal(utcDayKey(at("2027-02-28T23:59:59.999Z") + 1), "2027-03-01");
    assert.equal(periodKey("dailyConsumerDeleteIdentitiesQuota", at("2026-12-31T23:59:59.999Z")), "2026-12-31");
    assert.equal(periodKey("monthlyConsumerDeleteIdentitiesQuota", at("2027-01-01T00:00:00Z")), "2027-01");
    assert.equal(periodKey("monthlyUpdatedFieldIdentitiesQuota", at("2026-12-31T23:59:59.999Z")), "2026-12");
  });
});

describe("quota periods over HTTP with a controllable clock", () => {
  let s: TestServer;
  let n = 0;
  const ids = (k: number) => Array.from({ length: k }, () => `p${n++}@x.com`);
  const consumed = async () => {
    const q = await quotaMap(s);
    return [q.dailyConsumerDeleteIdentitiesQuota!.consumed, q.monthlyConsumerDeleteIdentitiesQuota!.consumed, q.monthlyUpdatedFieldIdentitiesQuota!.consumed];
  };
  before(async () => {
    s = await startTestServer({
      clockStart: at("2026-01-01T00:00:00Z"),
      hygieneConfig: {
        defaults: { datasetExpirationQuota: 5, dailyConsumerDeleteIdentitiesQuota: 5, monthlyConsumerDeleteIdentitiesQuota: 12, monthlyUpdatedFieldIdentitiesQuota: 4 },
      },
    });
    await s.profiles.createDataset({ orgId: ORG_A, sandboxName: "prod" }, { id: "crm", name: "CRM", schemaClass: "profile", profileEnabled: true }, at("2025-12-01T00:00:00Z"));
  });
  after(async () => {
    await s.close();
  });

  it("an order at 23:59:59.999 counts for that day; at 00:00:00 the daily quota is fresh, the monthly is not", async () => {
    s.clock.set(at("2026-03-10T23:59:59.999Z"));
    assert.equal((await s.call("POST", WO, order(ids(5)))).status, 200);
    assert.deepEqual(await consumed(), [5, 5, 0]);
    // Still the same day: the daily allowance of 5 is used up.
    const refused = await s.call("POST", WO, order(ids(1)));
    assert.equal(refused.status, 400);
    assert.match(String(refused.body.title), /^Quota dailyConsumerDeleteIdentitiesQuota exceeded: the allowance is 5 deleted identities per UTC day, 0 remaining/);
    s.clock.set(at("2026-03-11T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 5, 0]);
    assert.equal((await s.call("POST", WO, order(ids(4)))).status, 200);
    assert.deepEqual(await consumed(), [4, 9, 0]);
  });

  it("the monthly quota runs out within the month and resets on the 1st at 00:00 UTC", async () => {
    s.clock.set(at("2026-03-31T23:59:59.999Z"));
    assert.deepEqual(await consumed(), [0, 9, 0]);
    assert.equal((await s.call("POST", WO, order(ids(3)))).status, 200);
    assert.deepEqual(await consumed(), [3, 12, 0]);
    const refused = await s.call("POST", WO, order(ids(1)));
    assert.equal(refused.status, 400);
    assert.equal(
      refused.body.title,
      "Quota monthlyConsumerDeleteIdentitiesQuota exceeded: the allowance is 12 deleted identities per UTC month, 0 remaining, and this request needs 1. Nothing was accepted.",
    );
    s.clock.set(at("2026-04-01T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 0, 0]);
    assert.equal((await s.call("POST", WO, order(ids(2)))).status, 200);
    assert.deepEqual(await consumed(), [2, 2, 0]);
  });

  it("29 February is its own day, and March starts a new month (leap year 2028)", async () => {
    s.clock.set(at("2028-02-28T23:59:59.999Z"));
    assert.equal((await s.call("POST", WO, order(ids(2)))).status, 200);
    assert.deepEqual(await consumed(), [2, 2, 0]);
    s.clock.set(at("2028-02-29T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 2, 0]);
    assert.equal((await s.call("POST", WO, order(ids(5)))).status, 200);
    s.clock.set(at("2028-02-29T23:59:59.999Z"));
    assert.deepEqual(await consumed(), [5, 7, 0]);
    assert.equal((await s.call("POST", WO, order(ids(1)))).status, 400);
    s.clock.set(at("2028-03-01T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 0, 0]);
  });

  it("a non-leap February ends on the 28th (2027)", async () => {
    s.clock.set(at("2027-02-28T23:59:59.999Z"));
    assert.equal((await s.call("POST", WO, order(ids(1)))).status, 200);
    assert.deepEqual(await consumed(), [1, 1, 0]);
    s.clock.set(at("2027-03-01T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 0, 0]);
  });

  it("record updates draw on the monthly update quota only, with the same month boundary", async () => {
    s.clock.set(at("2026-12-31T23:59:59.999Z"));
    assert.equal((await s.call("POST", WO, order(ids(4), "update_identity"))).status, 200);
    assert.deepEqual(await consumed(), [0, 0, 4]);
    const refused = await s.call("POST", WO, order(ids(1), "update_identity"));
    assert.equal(refused.status, 400);
    assert.equal(
      refused.body.title,
      "Quota monthlyUpdatedFieldIdentitiesQuota exceeded: the allowance is 4 updated identities per UTC month, 0 remaining, and this request needs 1. Nothing was accepted.",
    );
    s.clock.set(at("2027-01-01T00:00:00.000Z"));
    assert.deepEqual(await consumed(), [0, 0, 0]);
    assert.equal((await s.call("POST", WO, order(ids(4), "update_identity"))).status, 200);
    assert.deepEqual(await consumed(), [0, 0, 4]);
  });
});
