/**
 * GET /quota: per organization, consumed units of the current UTC day/month
 * and the number of active expirations, against the effective allowances.
 */
import type { Clock } from "../platform/clock.js";
import type { EntitlementService } from "./entitlement-service.js";
import { invalid } from "./errors.js";
import { periodKey } from "./periods.js";
import { ALLOWED_QUOTA_TYPES, QUOTA_DESCRIPTIONS, QUOTA_NAMES, resolveQuotaType, type PeriodicQuota, type QuotaName } from "./quotas.js";
import type { HygieneStore } from "./store/types.js";

export interface QuotaEntry {
  name: QuotaName;
  description: string;
  consumed: number;
  quota: number;
}

export class QuotaService {
  constructor(
    private readonly store: HygieneStore,
    private readonly entitlements: EntitlementService,
    private readonly clock: Clock,
  ) {}

  /** `quotaType` undefined → all four; an alias answers with the canonical entry. */
  async report(orgId: string, quotaType?: string): Promise<{ quotas: QuotaEntry[] }> {
    let names: readonly QuotaName[] = QUOTA_NAMES;
    if (quotaType !== undefined) {
      const resolved = resolveQuotaType(quotaType);
      if (!resolved) throw invalid(`Invalid quotaType '${quotaType}'. Allowed values: ${ALLOWED_QUOTA_TYPES.join(", ")}.`);
      names = [resolved];
    }
    // One clock reading for the whole answer, so that the entries agree on the period.
    const now = this.clock.now();
    const allowances = await this.entitlements.effective(orgId);
    const periodic = names.filter((n): n is PeriodicQuota => n !== "datasetExpirationQuota");
    const used = await this.store.consumed(orgId, periodic.map((quota) => ({ quota, period: periodKey(quota, now) })));
    const consumedOf = new Map<QuotaName, number>(periodic.map((n, i) => [n, used[i]!]));
    if (names.includes("datasetExpirationQuota")) consumedOf.set("datasetExpirationQuota", await this.store.countActiveExpirations(orgId));
    return {
      quotas: names.map((name) => ({ name, description: QUOTA_DESCRIPTIONS[name], consumed: consumedOf.get(name) ?? 0, quota: allowances[name] })),
    };
  }
}
