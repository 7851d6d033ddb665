// GET /data/core/hygiene/quota over real HTTP, and the quota accounting of
// work orders: each quota rises by exactly what accepted orders use, rejected
// orders consume nothing and get an exact 400.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { QUOTA_DESCRIPTIONS } from "../../src/hygiene/quotas.js";
import { ORG_A, ORG_B, OPERATOR_TOKEN, TOKEN_A, TOKEN_B, quotaMap, startTestServer, type TestServer } from "./helpers.js";

const T0 = Date.UTC(2026, 5, 10, 12);
const Q = "/data/core/hygiene/quota";
const WO = "/data/core/hygiene/workorder";
const ALLOWED = "datasetExpirationQuota, dailyConsumerDeleteIdentitiesQuota, monthlyConsumerDeleteIdentitiesQuota, monthlyUpdatedFieldIdentitiesQuota, expirationDatasetQuota, deleteIdentityWorkOrderDatasetQuota";

function deleteOrder(ids: string[], datasetId = "crm") {
  return { action: "delete_identity", datasetId, displayName: "purge", identities: ids.map((id) => ({ namespace: { code: "email" }, id })) };
}

describe("GET /quota and quota accounting over HTTP", () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({
      clockStart: T0,
      hygieneConfig: {
        defaults: { datasetExpirationQuota: 5, dailyConsumerDeleteIdentitiesQuota: 20, monthlyConsumerDeleteIdentitiesQuota: 100, monthlyUpdatedFieldIdentitiesQuota: 30 },
        organizations: { [ORG_B]: { dailyConsumerDeleteIdentitiesQuota: 7 } },
        maxIdentitiesPerWorkOrder: 10,
      },
    });
    await s.profiles.createDataset({ orgId: ORG_A, sandboxName: "prod" }, { id: "crm", name: "CRM", schemaClass: "profile", profileEnabled: true }, T0);
    await s.profiles.createDataset({ orgId: ORG_B, sandboxName: "prod" }, { id: "crm-b", name: "CRM B", schemaClass: "profile", profileEnabled: true }, T0);
  });
  after(async () => {
    await s.close();
  });

  it("returns the four quotas, in the spec's shape, with no sandbox header", async () => {
    const r = await s.call("GET", Q, undefined, { sandbox: null });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, {
      quotas: [
        { name: "datasetExpirationQuota", description: QUOTA_DESCRIPTIONS.datasetExpirationQuota, consumed: 0, quota: 5 },
        { name: "dailyConsumerDeleteIdentitiesQuota", description: QUOTA_DESCRIPTIONS.dailyConsumerDeleteIdentitiesQuota, consumed: 0, quota: 20 },
        { name: "monthlyConsumerDeleteIdentitiesQuota", description: QUOTA_DESCRIPTIONS.monthlyConsumerDeleteIdentitiesQuota, consumed: 0, quota: 100 },
        { name: "monthlyUpdatedFieldIdentitiesQuota", description: QUOTA_DESCRIPTIONS.monthlyUpdatedFieldIdentitiesQuota, consumed: 0, quota: 30 },
      ],
    });
  });

  it("accepts a sandbox header of the org, and refuses one the org does not have", async () => {
    assert.equal((await s.call("GET", Q, undefined, { sandbox: "dev" })).status, 200);
    const r = await s.call("GET", Q, undefined, { sandbox: "nope" });
    assert.equal(r.status, 403);
    assert.equal((r.body.errors as Record<string, Array<{ code: string }>>)["403"]![0]!.code, "SEGMENTD-SANDBOX-403");
  });

  it("filters by quotaType, and maps the two aliases to their quota", async () => {
    for (const [type, name] of [
      ["monthlyUpdatedFieldIdentitiesQuota", "monthlyUpdatedFieldIdentitiesQuota"],
      ["expirationDatasetQuota", "datasetExpirationQuota"],
      ["deleteIdentityWorkOrderDatasetQuota", "monthlyConsumerDeleteIdentitiesQuota"],
    ] as const) {
      const r = await s.call("GET", `${Q}?quotaType=${type}`, undefined, { sandbox: null });
      assert.equal(r.status, 200);
      assert.deepEqual((r.body.quotas as Array<{ name: string }>).map((q) => q.name), [name]);
    }
  });

  it("refuses an unknown quotaType with a 400 listing the allowed values", async () => {
    const r = await s.call("GET", `${Q}?quotaType=weeklyQuota`, undefined, { sandbox: null });
    assert.equal(r.status, 400);
    assert.deepEqual(r.body, { error_code: "400001", message: `Invalid quotaType 'weeklyQuota'. Allowed values: ${ALLOWED}.` });
  });

  it("needs the gateway headers", async () => {
    const noToken = await fetch(`${s.url}${Q}`, { headers: { "x-api-key": "test-client", "x-gw-ims-org-id": ORG_A } });
    assert.equal(noToken.status, 403);
    assert.deepEqual(await noToken.json(), { error_code: "403010", message: "Oauth token is missing" });
    const wrongOrg = await s.call("GET", Q, undefined, { org: ORG_B, sandbox: null });
    assert.equal(wrongOrg.status, 403);
    const operator = await s.call("GET", Q, undefined, { token: OPERATOR_TOKEN, sandbox: null });
    assert.equal(operator.status, 401);
  });

  it("rises by exactly the identities of accepted orders; rejected orders consume nothing", async () => {
    const before = await quotaMap(s);
    const ok = await s.call("POST", WO, deleteOrder(["a@x.com", "b@x.com", "B@x.com", "a@x.com"]));
    assert.equal(ok.status, 200);
    // Duplicates inside one order count once ("B@x.com" and "b@x.com" are distinct ids).
    assert.equal(ok.body.operationCount, 3);
    let q = await quotaMap(s);
    assert.equal(q.dailyConsumerDeleteIdentitiesQuota!.consumed, before.dailyConsumerDeleteIdentitiesQuota!.consumed + 3);
    assert.equal(q.monthlyConsumerDeleteIdentitiesQuota!.consumed, before.monthlyConsumerDeleteIdentitiesQuota!.consumed + 3);
    assert.equal(q.monthlyUpdatedFieldIdentitiesQuota!.consumed, 0);

    const rejections: Array<[unknown, Record<string, unknown>]> = [
      [{ ...deleteOrder([]), identities: [{ namespace: { code: "email" }, id: "" }] }, { error_code: "400001", message: "identities[0]: the identity value must be a non-empty string." }],
      [{ ...deleteOrder(["c@x.com"]), identities: [{ namespace: {}, id: "c@x.com" }] }, { error_code: "400001", message: "identities[0]: 'namespace.code' must be a non-empty string." }],
      [deleteOrder(["c@x.com"], "no-such-dataset"), { error_code: "400001", message: "Dataset 'no-such-dataset' was not found in sandbox 'prod'." }],
      [deleteOrder(["c@x.com"], "crm-b"), { error_code: "400001", message: "Dataset 'crm-b' was not found in sandbox 'prod'." }],
      [deleteOrder(Array.from({ length: 11 }, (_, i) => `u${i}@x.com`)), { error_code: "400001", message: "A work order may contain at most 10 identities; this one has 11." }],
      [{ action: "delete_identity", datasetId: "crm" }, { error_code: "400001", message: "Identities are Empty for Delete Identity request." }],
      [{ ...deleteOrder(["c@x.com"]), namespacesIdentities: [] }, { error_code: "400001", message: "Identities and NamespacesIdentities are not allowed at the same time" }],
    ];
    for (const [body, expected] of rejections) {
      const r = await s.call("POST", WO, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.deepEqual(r.body, expected);
    }
    q = await quotaMap(s);
    assert.equal(q.dailyConsumerDeleteIdentitiesQuota!.consumed, before.dailyConsumerDeleteIdentitiesQuota!.consumed + 3);
    assert.equal(q.monthlyConsumerDeleteIdentitiesQuota!.consumed, before.monthlyConsumerDeleteIdentitiesQuota!.consumed + 3);
    const list = await s.call("GET", WO);
    assert.equal(list.body.total, 1);
  });

  it("rejects a whole order that would exceed a quota with a 400 naming the quota, its allowance and what is left (not 429)", async () => {
    const used = (await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed;
    const left = 20 - used;
    // Fill to 2 below the allowance, in orders within the 10-identity limit.
    for (let done = 0; done < left - 2; done += 10) {
      const n = Math.min(10, left - 2 - done);
      const fill = await s.call("POST", WO, deleteOrder(Array.from({ length: n }, (_, i) => `fill${done + i}@x.com`)));
      assert.equal(fill.status, 200);
    }
    const r = await s.call("POST", WO, deleteOrder(["p@x.com", "q@x.com", "r@x.com"]));
    assert.equal(r.status, 400);
    assert.equal(r.body.type, "http://ns.adobe.com/aep/errors/HYGN-3201-400");
    assert.equal(r.body.status, 400);
    assert.equal(
      r.body.title,
      "Quota dailyConsumerDeleteIdentitiesQuota exceeded: the allowance is 20 deleted identities per UTC day, 2 remaining, and this request needs 3. Nothing was accepted.",
    );
    const report = r.body.report as { additionalContext: Record<string, unknown>; tenantInfo: Record<string, unknown> };
    assert.deepEqual({ ...report.additionalContext, "Invoking Client ID": undefined }, {
      "Invoking Client ID": undefined, quota: "dailyConsumerDeleteIdentitiesQuota", allowance: 20, consumed: 18, remaining: 2, requested: 3,
    });
    assert.equal(report.tenantInfo.imsOrgId, ORG_A);
    assert.equal((r.body["error-chain"] as Array<{ errorCode: string }>)[0]!.errorCode, "HYGN-3201-400");
    const q = await quotaMap(s);
    assert.equal(q.dailyConsumerDeleteIdentitiesQuota!.consumed, 18);
    // Exactly the remainder still fits.
    assert.equal((await s.call("POST", WO, deleteOrder(["p@x.com", "q@x.com"]))).status, 200);
    assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed, 20);
  });

  it("keeps organizations apart: B's quotas, orders and allowances are its own", async () => {
    const b = await quotaMap(s, ORG_B, TOKEN_B);
    assert.equal(b.dailyConsumerDeleteIdentitiesQuota!.consumed, 0);
    assert.equal(b.dailyConsumerDeleteIdentitiesQuota!.quota, 7);
    assert.equal((await s.call("GET", WO, undefined, { org: ORG_B, token: TOKEN_B })).body.total, 0);
    const r = await s.call("POST", WO, deleteOrder(["z@x.com"], "crm-b"), { org: ORG_B, token: TOKEN_B });
    assert.equal(r.status, 200);
    assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).dailyConsumerDeleteIdentitiesQuota!.consumed, 1);
    assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.consumed, 20);
    // A's token cannot read B's order.
    const other = await s.call("GET", `${WO}/${r.body.workorderId as string}`);
    assert.equal(other.status, 404);
    assert.deepEqual(other.body, { error_code: "404003", message: `Work order ${r.body.workorderId as string} not found.` });
  });

  describe("entitlements at runtime", () => {
    const path = `/admin/orgs/${encodeURIComponent(ORG_A)}/entitlements`;

    it("is operator-only: an org token gets 403 and changes nothing", async () => {
      const r = await s.call("PUT", path, { dailyConsumerDeleteIdentitiesQuota: 1000 }, { token: TOKEN_A });
      assert.equal(r.status, 403);
      assert.equal((r.body.errors as Record<string, Array<{ code: string; message: string }>>)["403"]![0]!.code, "SEGMENTD-OPERATOR-403");
      assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.quota, 20);
    });

    it("applies an operator's change to the very next request, and null restores the configured value", async () => {
      assert.equal((await s.call("POST", WO, deleteOrder(["more@x.com"]))).status, 400);
      const r = await s.call("PUT", path, { dailyConsumerDeleteIdentitiesQuota: 21 }, { token: OPERATOR_TOKEN });
      assert.equal(r.status, 200);
      assert.equal((r.body.effective as Record<string, number>).dailyConsumerDeleteIdentitiesQuota, 21);
      assert.equal((r.body.configured as Record<string, number>).dailyConsumerDeleteIdentitiesQuota, 20);
      assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.quota, 21);
      assert.equal((await s.call("POST", WO, deleteOrder(["more@x.com"]))).status, 200);
      assert.equal((await s.call("POST", WO, deleteOrder(["more2@x.com"]))).status, 400);
      await s.call("PUT", path, { dailyConsumerDeleteIdentitiesQuota: null }, { token: OPERATOR_TOKEN });
      assert.equal((await quotaMap(s)).dailyConsumerDeleteIdentitiesQuota!.quota, 20);
      // B is unaffected.
      assert.equal((await quotaMap(s, ORG_B, TOKEN_B)).dailyConsumerDeleteIdentitiesQuota!.quota, 7);
    });

    it("validates the body and the organization", async () => {
      const bad = await s.call("PUT", path, { weeklyQuota: 3 }, { token: OPERATOR_TOKEN });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.title, "Unknown quota 'weeklyQuota'. Allowed: datasetExpirationQuota, dailyConsumerDeleteIdentitiesQuota, monthlyConsumerDeleteIdentitiesQuota, monthlyUpdatedFieldIdentitiesQuota.");
      const neg = await s.call("PUT", path, { datasetExpirationQuota: -1 }, { token: OPERATOR_TOKEN });
      assert.equal(neg.status, 400);
      assert.equal(neg.body.title, "'datasetExpirationQuota' must be a non-negative integer or null.");
      const unknown = await s.call("GET", "/admin/orgs/nobody@AdobeOrg/entitlements", undefined, { token: OPERATOR_TOKEN });
      assert.equal(unknown.status, 404);
      assert.equal((await quotaMap(s)).datasetExpirationQuota!.quota, 5);
    });
  });
});
