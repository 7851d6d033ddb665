/**
 * Hygiene errors carry their own body shapes, as Adobe's data-hygiene OpenAPI
 * does (hygiene-api.md §1.4): a simple `{error_code, message}` body for most
 * errors, and the problem-style `HYGN-…-400` body for dataset-expiration 400s
 * and for quota rejections. Quota rejections are 400, never 429 (decisions §3:
 * clients retry 429 automatically).
 */
import type { QuotaName } from "./quotas.js";

export const HygieneCodes = {
  badRequest: "400001",
  notFound: "404003",
  /** Problem-style codes (segmentd's own numbers except HYGN-3102, which Adobe uses for a duplicate TTL). */
  ttlInvalid: "HYGN-3100-400",
  ttlDuplicate: "HYGN-3102-400",
  ttlWrongState: "HYGN-3103-400",
  quotaExceeded: "HYGN-3201-400",
  /** A concurrent change of the same expiration (optimistic concurrency). */
  conflict: "HYGN-3104-409",
} as const;

export type HygieneErrorShape = "simple" | "problem";

export class HygieneError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly shape: HygieneErrorShape = "simple",
    /** Machine-readable details (quota errors: quota, allowance, consumed, remaining, requested). */
    readonly details?: Record<string, string | number>,
  ) {
    super(message);
    this.name = "HygieneError";
  }
}

export function invalid(message: string): HygieneError {
  return new HygieneError(400, HygieneCodes.badRequest, message);
}

export function ttlInvalid(message: string): HygieneError {
  return new HygieneError(400, HygieneCodes.ttlInvalid, message, "problem");
}

export function notFound(message: string): HygieneError {
  return new HygieneError(404, HygieneCodes.notFound, message);
}

/**
 * The whole-order rejection of decisions §3: names the quota, its allowance
 * and what is left, and says that nothing was accepted.
 */
export function quotaExceeded(quota: QuotaName, allowance: number, consumed: number, requested: number, unitWords: string): HygieneError {
  const remaining = Math.max(0, allowance - consumed);
  const message =
    `Quota ${quota} exceeded: the allowance is ${allowance} ${unitWords}, ${remaining} remaining, ` +
    `and this request needs ${requested}. Nothing was accepted.`;
  return new HygieneError(400, HygieneCodes.quotaExceeded, message, "problem", { quota, allowance, consumed, remaining, requested });
}
