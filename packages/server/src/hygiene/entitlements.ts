/**
 * Allowances ("license entitlements", decisions §3): built-in defaults, then
 * configuration defaults, then per-organization configuration, then operator
 * overrides stored at runtime (highest precedence, effective on the next
 * request because nothing is cached).
 */
import { QUOTA_NAMES, isQuotaName, type QuotaName } from "./quotas.js";

export type Entitlements = Record<QuotaName, number>;

/**
 * Defaults from hygiene-api.md §7: 20 concurrent expirations (RT-CDP/AJO/CJA
 * without Shield), 1,000,000 deleted identities per day and 2,000,000 per
 * month (RT-CDP/AJO without Shield). Record updates have no published number;
 * they get the same monthly allowance as deletes so that the feature works out
 * of the box.
 */
export const DEFAULT_ENTITLEMENTS: Readonly<Entitlements> = {
  datasetExpirationQuota: 20,
  dailyConsumerDeleteIdentitiesQuota: 1_000_000,
  monthlyConsumerDeleteIdentitiesQuota: 2_000_000,
  monthlyUpdatedFieldIdentitiesQuota: 2_000_000,
};

/** Largest identity list in one work order (hygiene-api.md §4.1: 100,000 through the API). */
export const DEFAULT_MAX_IDENTITIES_PER_WORK_ORDER = 100_000;

export interface HygieneConfig {
  /** Allowances for organizations without their own entry. */
  defaults: Entitlements;
  /** Per-organization allowances (only the listed quotas differ from `defaults`). */
  organizations: Record<string, Partial<Entitlements>>;
  maxIdentitiesPerWorkOrder: number;
  /** How often the scheduler looks for due expirations and unfinished work orders. */
  pollIntervalMs: number;
}

export function defaultHygieneConfig(): HygieneConfig {
  return {
    defaults: { ...DEFAULT_ENTITLEMENTS },
    organizations: {},
    maxIdentitiesPerWorkOrder: DEFAULT_MAX_IDENTITIES_PER_WORK_ORDER,
    pollIntervalMs: 60_000,
  };
}

export class HygieneConfigError extends Error {}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function allowance(v: unknown, where: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw new HygieneConfigError(`${where} must be a non-negative integer`);
  return v;
}

/** Parses a partial allowance object; unknown keys are errors so that typos do not pass silently. */
export function parseEntitlements(raw: unknown, where: string): Partial<Entitlements> {
  if (!isRecord(raw)) throw new HygieneConfigError(`${where} must be an object`);
  const out: Partial<Entitlements> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (!isQuotaName(k)) throw new HygieneConfigError(`${where}: unknown quota "${k}" (allowed: ${QUOTA_NAMES.join(", ")})`);
    out[k] = allowance(v, `${where}.${k}`);
  }
  return out;
}

/**
 * The `hygiene` section of segmentd's configuration file:
 * `{ defaults?: {quota: n}, organizations?: {orgId: {quota: n}}, maxIdentitiesPerWorkOrder?, pollIntervalMs? }`.
 */
export function parseHygieneConfig(raw: unknown): HygieneConfig {
  const c = defaultHygieneConfig();
  if (raw === undefined) return c;
  if (!isRecord(raw)) throw new HygieneConfigError("hygiene must be an object");
  for (const k of Object.keys(raw)) {
    if (!["defaults", "organizations", "maxIdentitiesPerWorkOrder", "pollIntervalMs"].includes(k)) throw new HygieneConfigError(`hygiene: unknown key "${k}"`);
  }
  if (raw.defaults !== undefined) c.defaults = { ...c.defaults, ...parseEntitlements(raw.defaults, "hygiene.defaults") };
  if (raw.organizations !== undefined) {
    if (!isRecord(raw.organizations)) throw new HygieneConfigError("hygiene.organizations must be an object keyed by organization id");
    for (const [org, v] of Object.entries(raw.organizations)) c.organizations[org] = parseEntitlements(v, `hygiene.organizations.${org}`);
  }
  if (raw.maxIdentitiesPerWorkOrder !== undefined) c.maxIdentitiesPerWorkOrder = allowance(raw.maxIdentitiesPerWorkOrder, "hygiene.maxIdentitiesPerWorkOrder");
  if (raw.pollIntervalMs !== undefined) c.pollIntervalMs = allowance(raw.pollIntervalMs, "hygiene.pollIntervalMs");
  return c;
}

/** Configured allowances of one organization, before operator overrides. */
export function configuredEntitlements(config: HygieneConfig, orgId: string): Entitlements {
  return { ...config.defaults, ...(config.organizations[orgId] ?? {}) };
}
