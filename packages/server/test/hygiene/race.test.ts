// 200 concurrent work orders over real HTTP racing for the last 50 units of a
// quota: consumption ends exactly at the allowance, every order is accepted or
// rejected whole, and the accepted identities add up to what is consumed.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { quotaMap, startTestServer, type TestServer } from "./helpers.js";

const WO = "/data/core/hygiene/workorder";
const T0 = Date.UTC(2026, 7, 20, 9);

function order(prefix: string, k: number) {
  return { action: "delete_identity", datasetId: "ALL", displayName: prefix, identities: Array.from({ length: k }, (_, i) => ({ namespace: { code: "email" }, id: `${prefix}-${i}@x.com` })) };
}

async function acceptedOrders(s: TestServer, prefixFilter: string): Promise<Array<{ displayName: string; operationCount: number }>> {
  const out: Array<{ displayName: string; operationCount: number }> = [];
  for (let page = 0; ; page++) {
    const r = await s.call("GET", `${WO}?limit=100&page=${page}&displayName=${encodeURIComponent(prefixFilter)}`);
    assert.equal(r.status, 200);
    out.push(...(r.body.results as Array<{ displayName: string; operationCount: number }>));
    if (!(r.body._links as { next?: unknown }).next) return out;
  }
}

describe("concurrent work orders racing for the last units of a quota (HTTP)", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({
      clockStart: T0,
      hygieneConfig: { defaults: { datasetExpirationQuota: 5, dailyConsumerDeleteIdentitiesQuota: 1000, monthlyConsumerDeleteIdentitiesQuota: 1_000_000, monthlyUpdatedFieldIdentitiesQuota: 0 } },
    });
  });
  after(async () => {
    await s.close();
  });

  it("200 one-identity orders for 50 remaining units: exactly 50 accepted, consumption exactly at the allowance", async () => {
    assert.equal((await s.call("POST", WO, order("warmup", 950))).status, 200);
    assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed, 950);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => s.call("POST", WO, order(`race1-${i}`, 1))));
    const statuses = results.map((r) => r.status);
    assert.equal(statuses.filter((x) => x === 200).length, 50);
    assert.equal(statuses.filter((x) => x === 400).length, 150);
    for (const r of results) if (r.status === 400) assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3201-400");
    const q = await quotaMap(s);
    assert.equal(q.dailyConsumerDeleteIdentitiesQuota!.consumed, 1000);
    assert.equal(q.monthlyConsumerDeleteIdentitiesQuota!.consumed, 1000);
    const stored = await acceptedOrders(s, "race1-");
    assert.equal(stored.length, 50);
    assert.deepEqual(
      stored.map((o) => o.displayName).sort(),
      results.map((r, i) => (r.status === 200 ? `race1-${i}` : null)).filter((x): x is string => x !== null).sort(),
    );
  });

  it("mixed sizes on a fresh day: accepted sizes sum to consumed, and no rejected order would have fitted", async () => {
    s.clock.set(T0 + 86_400_000);
    assert.equal((await s.call("POST", WO, order("warmup2", 950))).status, 200);
    const sizes = Array.from({ length: 200 }, (_, i) => 1 + ((i * 7) % 4));
    const results = await Promise.all(sizes.map((k, i) => s.call("POST", WO, order(`race2-${i}`, k))));
    const accepted = sizes.filter((_, i) => results[i]!.status === 200);
    const consumed = (await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed;
    assert.equal(consumed, 950 + accepted.reduce((a, b) => a + b, 0));
    assert.ok(consumed <= 1000, `consumed ${consumed} is over the allowance`);
    const remaining = 1000 - consumed;
    sizes.forEach((k, i) => {
      const r = results[i]!;
      assert.ok(r.status === 200 || r.status === 400, `status ${r.status}`);
      if (r.status === 400) assert.ok(k > remaining, `a rejected order of ${k} would fit in ${remaining}`);
      else assert.equal(r.body.operationCount, k);
    });
    const stored = await acceptedOrders(s, "race2-");
    assert.equal(stored.reduce((a, o) => a + o.operationCount, 0), consumed - 950);
    await s.hygiene.runner.idle();
    const done = await s.call("GET", `${WO}?status=completed&limit=1`);
    assert.equal(done.body.total, 2 + 50 + accepted.length);
  });
});
