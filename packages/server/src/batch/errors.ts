/**
 * Error codes of the batch area (segmentd's own, `SEGMENTD-BATCH-*`; AEP
 * documents none for these cases). Rendered in the UPS error shape by the
 * foundation's error handler.
 */
export const BatchErrorCodes = {
  badJob: "SEGMENTD-BATCH-JOB-400",
  unknownDefinition: "SEGMENTD-BATCH-UNKNOWN-DEFINITION-400",
  cycle: "SEGMENTD-BATCH-CYCLE-400",
  badFilter: "SEGMENTD-BATCH-FILTER-400",
  badSchedule: "SEGMENTD-BATCH-SCHEDULE-400",
  scheduleExists: "SEGMENTD-BATCH-SCHEDULE-EXISTS-400",
  badPreview: "SEGMENTD-BATCH-PREVIEW-400",
  badExport: "SEGMENTD-BATCH-EXPORT-400",
} as const;
