// Ingestion service: validate every record, store the good ones durably in one
// append, report each bad one. A bad record never blocks or loses the good
// records of the same request or file. Used by batch file uploads and by the
// streaming collection endpoint alike.
import type { RefusedLinkReport } from "./append-plan.js";
import { StoreError, type AppendResult, type DecidedChanges, type ProfileStore } from "./store.js";
import type { Dataset, MembershipTransition, RecordError, SchemaClass, TenantScope, ValidRecord } from "./types.js";
import { DEFAULT_LIMITS, validateRecord, type ValidationLimits } from "./validate.js";

export interface IngestOptions {
  /** Ingestion time, epoch ms (from the platform clock). */
  now: number;
  limits?: Partial<ValidationLimits>;
  /** XDM class the sender declared (for example from a streaming envelope). */
  declaredClass?: SchemaClass;
  /** Account the records to this ingestion batch (batch API). */
  batch?: { id: string; file?: string };
  /** Errors found before validation (malformed lines of a file), reported with the rest. */
  priorErrors?: RecordError[];
  /** Records read before validation failed to parse (for batch `recordsRead`). */
  extraRead?: number;
  /**
   * Membership changes decided for the valid records before they are stored (the streaming
   * engine's decideAhead): written with them in one transaction (ProfileStore.appendDecided).
   */
  decideAhead?: (records: readonly ValidRecord[]) => Promise<AheadDecision | null>;
}

/** Changes decided ahead of an append, and how to tell the decider what became of them. */
export interface AheadDecision {
  readonly decided: DecidedChanges;
  /** Called once, when the append settled: the transitions it recorded (null: none applied), or its error. */
  settle(outcome: { transitions: MembershipTransition[] | null } | { error: unknown }): void;
}

export interface IngestResult {
  received: number;
  /** Records durably stored (duplicates of already-stored events count as stored: a retry is not an error). */
  accepted: number;
  duplicates: number;
  failed: RecordError[];
  refusedLinks: RefusedLinkReport[];
  profileIds: string[];
  /** The valid records handed to the store (now durable), for streaming evaluation. */
  stored: ValidRecord[];
  /** The profile id each of `stored` went to, when the store tells (AppendResult.recordPids). */
  storedPids?: Float64Array;
  /** The decision written with the records (IngestOptions.decideAhead), settled. */
  ahead?: AheadDecision;
}

export interface StageResult {
  received: number;
  /** Valid records kept with the batch; they reach profiles when the batch completes. */
  staged: number;
  failed: RecordError[];
}

/**
 * Batch file upload: validates every record and stages the good ones with the
 * batch (durably, before returning); nothing reaches profiles until the batch is
 * completed, and an aborted batch's records never do.
 */
export async function stageRecords(store: ProfileStore, scope: TenantScope, datasetId: string, batch: { id: string; file?: string },
  records: ReadonlyArray<{ index: number; value: unknown }>, opts: Omit<IngestOptions, "batch">): Promise<StageResult> {
  const dataset = await store.getDataset(scope, datasetId);
  if (dataset === null) throw new StoreError("DATASET_NOT_FOUND", `dataset ${datasetId} does not exist in sandbox ${scope.sandboxName}`);
  const limits: ValidationLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const { valid, failed } = validateAll(records, dataset, limits, opts);
  const read = records.length + (opts.extraRead ?? 0);
  const r = await store.stageBatchRecords(scope, batch.id, valid, { read, failed, now: opts.now, ...(batch.file === undefined ? {} : { file: batch.file }) });
  return { received: read, staged: r.staged, failed };
}

function validateAll(records: ReadonlyArray<{ index: number; value: unknown }>, dataset: Dataset, limits: ValidationLimits,
  opts: Pick<IngestOptions, "declaredClass" | "priorErrors">): { valid: ValidRecord[]; failed: RecordError[] } {
  const valid: ValidRecord[] = [];
  const failed: RecordError[] = [...(opts.priorErrors ?? [])];
  for (const { index, value } of records) {
    const r = validateRecord(value, index, dataset, limits, opts.declaredClass);
    if (r.ok) valid.push(r.record);
    else failed.push(...r.errors);
  }
  failed.sort((a, b) => a.index - b.index);
  return { valid, failed };
}

export async function ingestRecords(store: ProfileStore, scope: TenantScope, datasetId: string,
  records: ReadonlyArray<{ index: number; value: unknown }>, opts: IngestOptions): Promise<IngestResult> {
  const dataset = await store.getDataset(scope, datasetId);
  if (dataset === null) throw new StoreError("DATASET_NOT_FOUND", `dataset ${datasetId} does not exist in sandbox ${scope.sandboxName}`);
  return ingestIntoDataset(store, scope, dataset, records, opts);
}

/**
 * Validates the records against `dataset` (synchronously, before the first await: a caller
 * that starts the next chunk's ingestion while this one's append is in flight overlaps
 * validation with the store's write) and appends the valid ones. The store checks again
 * inside its write transaction that the dataset exists and holds the records' class.
 */
export async function ingestIntoDataset(store: ProfileStore, scope: TenantScope, dataset: Dataset,
  records: ReadonlyArray<{ index: number; value: unknown }>, opts: IngestOptions): Promise<IngestResult> {
  const limits: ValidationLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const { valid, failed } = validateAll(records, dataset, limits, opts);
  const read = records.length + (opts.extraRead ?? 0);
  const appendOpts = {
    ingestedAt: opts.now,
    maxIdentitiesPerGraph: limits.maxIdentitiesPerGraph,
    ...(opts.batch === undefined ? {} : { batch: { ...opts.batch, read, failed } }),
  };
  const ahead = opts.decideAhead !== undefined && valid.length > 0 ? await opts.decideAhead(valid) : null;
  let res: AppendResult;
  if (ahead === null) res = await store.append(scope, dataset.id, valid, appendOpts);
  else {
    try {
      const r = await store.appendDecided(scope, dataset.id, valid, appendOpts, ahead.decided);
      res = r.append;
      ahead.settle({ transitions: r.transitions });
    } catch (error) {
      ahead.settle({ error });
      throw error;
    }
  }
  return {
    received: read,
    accepted: res.fragments + res.events + res.lakeOnly + res.duplicates,
    duplicates: res.duplicates,
    failed,
    refusedLinks: res.refusedLinks,
    profileIds: res.profileIds,
    stored: valid,
    ...(res.recordPids === undefined ? {} : { storedPids: res.recordPids }),
    ...(ahead === null ? {} : { ahead }),
  };
}
