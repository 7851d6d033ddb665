/** Computed attributes' bounds (AEP's where it states one) and error codes, in one place. */
import type { DurationUnit } from "../stores/computed-attributes.js";

/** Attributes that are not DISABLED, per sandbox, when the config sets none (`limits.computedAttributes`; AEP allows 25). */
export const DEFAULT_COMPUTED_ATTRIBUTE_LIMIT = 100;

/** LIST keeps at most this many values (AEP's example lists the last 50 orders). */
export const MAX_LIST_LENGTH = 50;

/** The lookback counts AEP accepts per unit. */
export const DURATION_BOUNDS: Record<DurationUnit, { min: number; max: number }> = {
  HOURS: { min: 1, max: 24 },
  DAYS: { min: 1, max: 7 },
  WEEKS: { min: 1, max: 4 },
  MONTHS: { min: 1, max: 6 },
};

/** The list's page size: default and largest (AEP: 20 and 40). */
export const LIST_DEFAULT_LIMIT = 20;
export const LIST_MAX_LIMIT = 40;

/** Names are one PQL field name: letters and digits (AEP: no spaces or underscores), a letter first. */
export const NAME_PATTERN = /^[A-Za-z][A-Za-z0-9]{0,99}$/;

export const COMPUTED_ERROR = {
  invalid: "SEGMENTD-CA-400",
  duplicate: "SEGMENTD-CA-DUPLICATE-400",
  transition: "SEGMENTD-CA-STATUS-400",
  notDeletable: "SEGMENTD-CA-DELETE-422",
  inUse: "SEGMENTD-CA-IN-USE-422",
  conflict: "SEGMENTD-CA-CONFLICT-409",
} as const;
