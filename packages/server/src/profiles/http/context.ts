// What the profile data plane's route plugins need from the server: the
// foundation's auth dependencies, the profile store, a clock, validation limits
// and a way to turn a mergePolicyId (or none) into merge semantics.
import type { AuthDeps } from "../../http/auth.js";
import { tenantOf } from "../../http/request-context.js";
import type { Clock } from "../../platform/clock.js";
import { tenantRef, type TenantRef } from "../../platform/tenant.js";
import type { MergePolicyService } from "../../services/merge-policies.js";
import type { TenantContext } from "../../services/tenancy.js";
import type { FastifyRequest } from "fastify";
import { ApiError, ErrorCodes } from "../../services/errors.js";
import { StoreError, type DatasetCatalog, type IdentityGraph, type IngestBatches, type LifecycleWrites, type ProfileReads, type RecordAppends, type StoreHealth } from "../store.js";
import { NO_MERGE_POLICY, type IdentityFieldDescriptor, type JsonObject, type MergePolicySpec, type SchemaClass, type ValidRecord } from "../types.js";
import type { ValidationLimits } from "../validate.js";
import type { AheadDecision, IngestResult } from "../ingest.js";

export interface MergePolicyResolver {
  /** The policy with this id, or the sandbox's default when id is undefined. */
  resolve(tenant: TenantContext, id: string | undefined): Promise<MergePolicySpec>;
}

/** A tenant schema as a dataset takes it: its `$id`, class and identity descriptors. */
export interface DatasetSchema {
  id: string;
  schemaClass: SchemaClass;
  identityFields: IdentityFieldDescriptor[];
}

/**
 * The Schema Registry as the catalog sees it (services/schema-registry.ts): a dataset created
 * from a tenant schema takes its class and identity fields, and stays linked to the schema.
 */
export interface DatasetSchemas {
  /** The tenant schema with this `$id` or `meta:altId`; null when the sandbox has none. */
  resolveForDataset(tenant: TenantContext, id: string): Promise<DatasetSchema | null>;
  /** False when the schema is gone. */
  linkDataset(tenant: TenantContext, datasetId: string, schemaId: string): Promise<boolean>;
  unlinkDataset(tenant: TenantContext, datasetId: string): Promise<void>;
  /** Dataset id → schema `$id`, for the datasets created from a schema. */
  schemasOfDatasets(tenant: TenantContext, datasetIds: readonly string[]): Promise<Map<string, string>>;
}

/** Every role the profile routes call between them (each route plugin names only its own). */
export type ProfileRoutesStore = DatasetCatalog & IngestBatches & RecordAppends & IdentityGraph & ProfileReads & LifecycleWrites & StoreHealth;

export interface ProfileRoutesOptions<S = ProfileRoutesStore> extends AuthDeps {
  profiles: S;
  clock: Clock;
  policies: MergePolicyResolver;
  limits?: Partial<ValidationLimits>;
  /** Datasets from tenant schemas; without it, schemaRef.id names a class only. */
  schemas?: DatasetSchemas;
  /**
   * Called after records from the streaming collection endpoint are durable,
   * before the response: streaming evaluation and edge projection. A failure is
   * logged, not reported as an ingestion failure (the records are stored), unless it
   * is an ApiError (the streaming workers' feed did not take them: 503, send again).
   */
  onStored?: (tenant: TenantContext, result: IngestResult) => Promise<void>;
  /**
   * Called after a batch completed, before the response, with the profiles its records were
   * written to: streaming evaluation and edge projection follow them as they follow streamed
   * records. A failure is logged (the batch is complete; it cannot be sent again).
   */
  onBatchCompleted?: (tenant: TenantContext, profileIds: readonly string[]) => Promise<void>;
  /**
   * Membership changes decided for the valid records of a streaming request before they are
   * stored, written with them in one transaction (IngestOptions.decideAhead; the streaming
   * engine's decideAhead). onStored then gets the settled decision in `result.ahead`.
   */
  decideAhead?: (tenant: TenantContext, records: readonly ValidRecord[]) => Promise<AheadDecision | null>;
  /**
   * Fields computed from a profile's events at `now` (computed attributes: `{_<TENANT_ID>:
   * {ComputedAttributes: {...}}}`), added to the merged profile the entities API returns; null
   * when there are none. `readEvents` reads the profile's events in a time range.
   */
  computedValues?: (tenant: TenantContext, readEvents: (since: number, until: number) => Promise<readonly Record<string, unknown>[]>, now: number) => Promise<JsonObject | null>;
}

export function profileScope(request: FastifyRequest): TenantRef {
  return tenantRef(tenantOf(request));
}

/**
 * Resolver over the merge policy service. Without a default policy, AEP's rule
 * applies: no stitching, timestamp-ordered (profile.yaml, mergePolicyId).
 */
export function policiesFromService(svc: MergePolicyService): MergePolicyResolver {
  return {
    async resolve(tenant, id) {
      if (id !== undefined) return svc.get(tenant, id);
      const page = await svc.list(tenant, { filters: { default: true }, order: { field: "name", direction: "asc" }, offset: 0, limit: 1 });
      return page.items[0] ?? NO_MERGE_POLICY;
    },
  };
}

/** Maps a store error to the UPS error the HTTP layer renders; other errors pass through. */
export function toApiError(err: unknown): unknown {
  if (!(err instanceof StoreError)) return err;
  switch (err.code) {
    case "DATASET_NOT_FOUND":
    case "BATCH_NOT_FOUND":
      return new ApiError(404, ErrorCodes.notFound, err.message);
    case "DATASET_EXISTS":
      return new ApiError(409, PROFILE_ERROR_CODES.conflict, err.message);
    case "BATCH_NOT_OPEN":
    case "INVALID_CURSOR":
      return new ApiError(400, ErrorCodes.badRequest, err.message);
  }
}

export const PROFILE_ERROR_CODES = {
  conflict: "SEGMENTD-CONFLICT-409",
  allRecordsFailed: "SEGMENTD-INGESTION-400",
} as const;

export async function mapStoreErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toApiError(err);
  }
}
