// Public API of the profile data plane, for the HTTP layer, the engines, the
// hygiene jobs and the CLI.
export * from "./types.js";
export { DEFAULT_LIMITS, ERROR_CODES, validateRecord, validateRecords, parseTimestamp, identityKey, normalizeNamespace, type ValidationLimits, type ValidationTarget, type ValidationResult } from "./validate.js";
export { GraphWorkspace, GRAPH_LIMIT_CODE, type RefusedLink, type StitchResult } from "./identity-graph.js";
export { buildMergedProfile, mergeAttributes, selectFragments, selectEvents, precedenceOrder } from "./merge.js";
export { isOptedOut } from "./consent.js";
export * from "./store.js";
export type { RefusedLinkReport } from "./append-plan.js";
export { ingestRecords, type IngestOptions, type IngestResult } from "./ingest.js";
export { parseRecordFile, detectRecordFileFormat, FILE_ERROR_CODES, type RecordFileFormat, type ParsedFile } from "./record-files.js";
export { EmbeddedProfileStore, type EmbeddedStoreOptions } from "./embedded/sqlite-store.js";
export { PostgresProfileStore, type PostgresStoreOptions } from "./postgres/pg-store.js";
export { DEMO_DATASETS, demoProfiles, demoEvents, demoProfile, demoEvent, demoEcid, demoEmail, demoCrmId, type DemoOptions } from "./demo.js";
export { loadDemoOverHttp, loadDemoIfEmpty, type DemoTarget, type DemoLoadResult } from "./demo-loader.js";
export { registerProfileRoutes, policiesFromService, type MergePolicyResolver, type ProfileRoutesOptions } from "./http/index.js";
