/**
 * Effective allowances of an organization: configuration, then operator
 * overrides from the store. Read on every quota decision (no cache), so an
 * operator's change applies to the very next request.
 */
import { configuredEntitlements, type Entitlements, type HygieneConfig } from "./entitlements.js";
import { invalid } from "./errors.js";
import { QUOTA_NAMES, isQuotaName, type QuotaName } from "./quotas.js";
import type { HygieneStore } from "./store/types.js";

export interface EntitlementView {
  orgId: string;
  /** What applies now. */
  effective: Entitlements;
  /** From configuration (defaults + the org's entry). */
  configured: Entitlements;
  /** Set at runtime by an operator. */
  overrides: Partial<Entitlements>;
}

export class EntitlementService {
  constructor(
    private readonly store: HygieneStore,
    private readonly config: HygieneConfig,
  ) {}

  async effective(orgId: string): Promise<Entitlements> {
    return { ...configuredEntitlements(this.config, orgId), ...(await this.store.entitlementOverrides(orgId)) };
  }

  async view(orgId: string): Promise<EntitlementView> {
    const configured = configuredEntitlements(this.config, orgId);
    const overrides = await this.store.entitlementOverrides(orgId);
    return { orgId, configured, overrides, effective: { ...configured, ...overrides } };
  }

  /**
   * Body: `{ "<quotaName>": <non-negative integer> | null, ... }`; null removes
   * the override. Lowering an allowance below what is consumed is allowed: it
   * blocks new orders, it does not undo accepted ones.
   */
  async update(orgId: string, body: unknown): Promise<EntitlementView> {
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("The request body must be a JSON object mapping quota names to allowances.");
    const entries = Object.entries(body as Record<string, unknown>);
    if (entries.length === 0) throw invalid(`Give at least one of: ${QUOTA_NAMES.join(", ")}.`);
    const values: Partial<Record<QuotaName, number | null>> = {};
    for (const [k, v] of entries) {
      if (!isQuotaName(k)) throw invalid(`Unknown quota '${k}'. Allowed: ${QUOTA_NAMES.join(", ")}.`);
      if (v !== null && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)) throw invalid(`'${k}' must be a non-negative integer or null.`);
      values[k] = v;
    }
    await this.store.setEntitlementOverrides(orgId, values);
    return this.view(orgId);
  }
}
