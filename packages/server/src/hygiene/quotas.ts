/**
 * The four data lifecycle quotas (spec "Quota list"), their descriptions, and
 * the two legacy job-type names accepted as `quotaType` aliases (decisions §3).
 */

export const QUOTA_NAMES = [
  "datasetExpirationQuota",
  "dailyConsumerDeleteIdentitiesQuota",
  "monthlyConsumerDeleteIdentitiesQuota",
  "monthlyUpdatedFieldIdentitiesQuota",
] as const;

export type QuotaName = (typeof QUOTA_NAMES)[number];

/** Quotas counted per calendar period (the expiration quota is a concurrency cap instead). */
export type PeriodicQuota = Exclude<QuotaName, "datasetExpirationQuota">;

export const QUOTA_ALIASES: Readonly<Record<string, QuotaName>> = {
  expirationDatasetQuota: "datasetExpirationQuota",
  deleteIdentityWorkOrderDatasetQuota: "monthlyConsumerDeleteIdentitiesQuota",
};

export const QUOTA_DESCRIPTIONS: Readonly<Record<QuotaName, string>> = {
  datasetExpirationQuota:
    "number of dataset expirations currently active (pending or executing) for the organization, and the maximum allowed at one time",
  dailyConsumerDeleteIdentitiesQuota:
    "consumed number of deleted identities in all work order requests for the organization for today (UTC)",
  monthlyConsumerDeleteIdentitiesQuota:
    "consumed number of deleted identities in all work order requests for the organization for this month (UTC)",
  monthlyUpdatedFieldIdentitiesQuota:
    "consumed number of updated identities in all record update work order requests for the organization for this month (UTC)",
};

/** Unit wording used in quota errors. */
export const QUOTA_PERIOD_WORDS: Readonly<Record<QuotaName, string>> = {
  datasetExpirationQuota: "active dataset expirations at one time",
  dailyConsumerDeleteIdentitiesQuota: "deleted identities per UTC day",
  monthlyConsumerDeleteIdentitiesQuota: "deleted identities per UTC month",
  monthlyUpdatedFieldIdentitiesQuota: "updated identities per UTC month",
};

export function isQuotaName(v: string): v is QuotaName {
  return (QUOTA_NAMES as readonly string[]).includes(v);
}

/** The canonical quota for a `quotaType` value (name or alias), or undefined when unknown. */
export function resolveQuotaType(value: string): QuotaName | undefined {
  if (isQuotaName(value)) return value;
  return Object.hasOwn(QUOTA_ALIASES, value) ? QUOTA_ALIASES[value] : undefined;
}

export const ALLOWED_QUOTA_TYPES: readonly string[] = [...QUOTA_NAMES, ...Object.keys(QUOTA_ALIASES)];
