// Pipelined ingestion of a long sequence of chunks (bulk loads): while the store
// writes chunk n, the caller's thread already validates chunk n+1 and hands it
// over, so validation (main thread) and the durable append (the store's worker
// thread, or the database server) overlap instead of taking turns. Each chunk is
// still appended in its own durable transaction, in order, and a chunk's result
// is yielded only once its append has committed: acknowledged means durable.
import { ingestIntoDataset, type IngestOptions, type IngestResult, type IngestStore } from "./ingest.js";
import { StoreError } from "./store.js";
import type { TenantScope } from "./types.js";

export type RecordChunk = ReadonlyArray<{ index: number; value: unknown }>;

export interface PipelineOptions extends IngestOptions {
  /**
   * Chunks handed to the store before the oldest one's result is awaited (default 2: one
   * being written, one validated and queued behind it). 1 = no overlap.
   */
  depth?: number;
}

/**
 * Ingests the chunks in order and yields each chunk's result, in order, once durable. The
 * dataset is read once, up front; the store still checks inside every append that it exists.
 * If a chunk fails, the chunks after it that were already handed over are awaited (they may
 * commit) and the error is thrown.
 */
export async function* ingestChunks(store: IngestStore, scope: TenantScope, datasetId: string,
  chunks: Iterable<RecordChunk> | AsyncIterable<RecordChunk>, opts: PipelineOptions): AsyncGenerator<IngestResult> {
  const depth = opts.depth ?? 2;
  if (!Number.isSafeInteger(depth) || depth < 1) throw new RangeError(`depth must be a positive integer, got ${depth}`);
  const dataset = await store.getDataset(scope, datasetId);
  if (dataset === null) throw new StoreError("DATASET_NOT_FOUND", `dataset ${datasetId} does not exist in sandbox ${scope.sandboxName}`);
  const inflight: Array<Promise<IngestResult>> = [];
  try {
    for await (const chunk of chunks) {
      const p = ingestIntoDataset(store, scope, dataset, chunk, opts);
      // Awaited in order below; until then a rejection must not count as unhandled.
      p.catch(() => undefined);
      inflight.push(p);
      if (inflight.length >= depth) yield await inflight.shift()!;
    }
    while (inflight.length > 0) yield await inflight.shift()!;
  } finally {
    // An early exit (error, or the caller stopped iterating) leaves no append unobserved.
    await Promise.allSettled(inflight);
  }
}
