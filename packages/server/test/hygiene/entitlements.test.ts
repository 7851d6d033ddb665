// The `hygiene` configuration section: defaults, per-organization allowances,
// and refusal of typos.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_ENTITLEMENTS, HygieneConfigError, configuredEntitlements, parseHygieneConfig } from "../../src/hygiene/entitlements.js";

describe("hygiene configuration", () => {
  it("defaults to hygiene-api.md's standard numbers", () => {
    const c = parseHygieneConfig(undefined);
    assert.deepEqual(c.defaults, { datasetExpirationQuota: 20, dailyConsumerDeleteIdentitiesQuota: 1_000_000, monthlyConsumerDeleteIdentitiesQuota: 2_000_000, monthlyUpdatedFieldIdentitiesQuota: 2_000_000 });
    assert.equal(c.maxIdentitiesPerWorkOrder, 100_000);
  });

  it("layers defaults, then the organization's own allowances", () => {
    const c = parseHygieneConfig({ defaults: { datasetExpirationQuota: 50 }, organizations: { "shield@AdobeOrg": { monthlyConsumerDeleteIdentitiesQuota: 15_000_000 } } });
    assert.deepEqual(configuredEntitlements(c, "shield@AdobeOrg"), { ...DEFAULT_ENTITLEMENTS, datasetExpirationQuota: 50, monthlyConsumerDeleteIdentitiesQuota: 15_000_000 });
    assert.deepEqual(configuredEntitlements(c, "other@AdobeOrg"), { ...DEFAULT_ENTITLEMENTS, datasetExpirationQuota: 50 });
  });

  it("refuses unknown keys, unknown quotas and bad numbers", () => {
    assert.throws(() => parseHygieneConfig({ default: {} }), new HygieneConfigError('hygiene: unknown key "default"'));
    assert.throws(() => parseHygieneConfig({ defaults: { weekly: 1 } }), /hygiene.defaults: unknown quota "weekly"/);
    assert.throws(() => parseHygieneConfig({ organizations: { o: { datasetExpirationQuota: -1 } } }), new HygieneConfigError("hygiene.organizations.o.datasetExpirationQuota must be a non-negative integer"));
    assert.throws(() => parseHygieneConfig({ maxIdentitiesPerWorkOrder: 1.5 }), new HygieneConfigError("hygiene.maxIdentitiesPerWorkOrder must be a non-negative integer"));
  });
});
