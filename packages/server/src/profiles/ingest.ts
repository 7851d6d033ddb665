// Ingestion service: validate every record, store the good ones durably in one
// append, report each bad one. A bad record never blocks or loses the good
// records of the same request or file. Used by batch file uploads and by the
// streaming collection endpoint alike.
import type { RefusedLinkReport } from "./append-plan.js";
import { StoreError, type AppendResult, type DatasetCatalog, type DecidedChanges, type IngestBatches, type RecordAppends } from "./store.js";
import type { Dataset, MembershipTransition, RecordError, SchemaClass, TenantScope, ValidRecord } from "./types.js";
import type { StreamItem } from "./record-stream.js";
import { DEFAULT_LIMITS, validateRecord, type ValidationLimits } from "./validate.js";

/** Batch uploads: the dataset read, the records staged with their batch. */
export type StagingStore = DatasetCatalog & IngestBatches;
/** Streaming ingestion: the dataset read, the records appended. */
export type IngestStore = DatasetCatalog & RecordAppends;

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
   * engine's decideAhead): written with them in one transaction (RecordAppends.appendDecided).
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
export async function stageRecords(store: StagingStore, scope: TenantScope, datasetId: string, batch: { id: string; file?: string },
  records: ReadonlyArray<{ index: number; value: unknown }>, opts: Omit<IngestOptions, "batch">): Promise<StageResult> {
  const dataset = await requireDataset(store, scope, datasetId);
  const limits: ValidationLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const { valid, failed } = validateAll(records, dataset, limits, opts);
  const read = records.length + (opts.extraRead ?? 0);
  const r = await store.stageBatchRecords(scope, batch.id, valid, { read, failed, now: opts.now, ...(batch.file === undefined ? {} : { file: batch.file }) });
  return { received: read, staged: r.staged, failed };
}

async function requireDataset(store: DatasetCatalog, scope: TenantScope, datasetId: string): Promise<Dataset> {
  const dataset = await store.getDataset(scope, datasetId);
  if (dataset === null) throw new StoreError("DATASET_NOT_FOUND", `dataset ${datasetId} does not exist in sandbox ${scope.sandboxName}`);
  return dataset;
}

export interface StreamStageOptions extends Pick<IngestOptions, "now" | "limits" | "declaredClass"> {
  /** Records (good and bad) per staging transaction (default STAGE_CHUNK_RECORDS). */
  chunkRecords?: number;
  /** Record text per staging transaction, UTF-16 code units (default STAGE_CHUNK_CHARS). */
  chunkChars?: number;
  /** Errors kept for the result (default 100); every one still reaches the batch's accounting. */
  keepErrors?: number;
}

export interface StreamStageResult extends StageResult {
  /** Records with at least one error (failed holds only the first keepErrors errors). */
  failedRecords: number;
}

/** Records per staging transaction of a streamed file upload. */
export const STAGE_CHUNK_RECORDS = 1_000;
/** Record text per staging transaction (bounds memory for large records: 1,000 × 100 KB would be 100 MB). */
export const STAGE_CHUNK_CHARS = 8 * 1024 * 1024;

/**
 * stageRecords for a file read as a stream (record-stream.ts): records are validated and
 * staged chunk by chunk, each chunk in its own staging transaction, while the next chunk is
 * validated, so memory held is about two chunks, never the file. Items that are already
 * errors (malformed lines) are accounted with their chunk. A store error stops the stream;
 * the chunks staged before it stay staged.
 */
export async function stageRecordStream(store: StagingStore, scope: TenantScope, datasetId: string, batch: { id: string; file?: string },
  items: Iterable<StreamItem> | AsyncIterable<StreamItem>, opts: StreamStageOptions): Promise<StreamStageResult> {
  const dataset = await requireDataset(store, scope, datasetId);
  const limits: ValidationLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const maxRecords = opts.chunkRecords ?? STAGE_CHUNK_RECORDS;
  const maxChars = opts.chunkChars ?? STAGE_CHUNK_CHARS;
  const keep = opts.keepErrors ?? 100;
  const file = batch.file === undefined ? {} : { file: batch.file };
  const kept: RecordError[] = [];
  let received = 0, staged = 0, failedRecords = 0;
  let records: Array<{ index: number; value: unknown }> = [];
  let prior: RecordError[] = [];
  let chars = 0;
  let inflight: Promise<void> | null = null;
  const flush = async (): Promise<void> => {
    const { valid, failed } = validateAll(records, dataset, limits, { ...(opts.declaredClass === undefined ? {} : { declaredClass: opts.declaredClass }), priorErrors: prior });
    const read = records.length + prior.filter((e) => e.index >= 0).length;
    records = [];
    prior = [];
    chars = 0;
    received += read;
    failedRecords += new Set(failed.map((e) => e.index)).size;
    for (const e of failed) if (kept.length < keep) kept.push(e);
    // One staging transaction in flight while the next chunk is read and validated.
    if (inflight !== null) await inflight;
    const p = store.stageBatchRecords(scope, batch.id, valid, { read, failed, now: opts.now, ...file }).then((r) => { staged += r.staged; });
    p.catch(() => undefined); // awaited below; until then its rejection must not count as unhandled
    inflight = p;
  };
  try {
    for await (const item of items) {
      if ("error" in item) prior.push(item.error);
      else {
        records.push(item);
        chars += item.chars ?? 0;
      }
      if (records.length + prior.length >= maxRecords || chars >= maxChars) await flush();
    }
    if (records.length > 0 || prior.length > 0 || received === 0) await flush();
    if (inflight !== null) await inflight;
  } finally {
    if (inflight !== null) await Promise.allSettled([inflight]);
  }
  return { received, staged, failed: kept, failedRecords };
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

export async function ingestRecords(store: IngestStore, scope: TenantScope, datasetId: string,
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
export async function ingestIntoDataset(store: RecordAppends, scope: TenantScope, dataset: Dataset,
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
