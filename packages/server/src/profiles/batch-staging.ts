// Staged batch records: the valid records of an ingestion batch are kept with the
// batch, outside profiles, until the batch completes (then applied in one
// transaction) or is aborted (then dropped). AEP semantics: a batch's data is not
// visible before the batch succeeded. A staged record is its validation result
// (meta) plus the record's JSON text, so completing needs no re-validation and
// the same limits that applied at upload time stay applied.
import { withLazyBody } from "./lazy-body.js";
import type { RecordError, SchemaClass, ValidRecord } from "./types.js";

/** Records applied per step while completing a batch (bounds memory, not the transaction). */
export const STAGED_CHUNK = 20_000;

interface StagedMeta {
  /** Record index in its file. */
  i: number;
  /** Primary identity and all identities, as [namespace, id]. */
  p: [string, string];
  ids: Array<[string, string]>;
  t: number | null;
  e: string | null;
  s: number;
}

export function encodeStaged(r: ValidRecord): { meta: string; body: string } {
  const meta: StagedMeta = { i: r.index, p: [r.primary.namespace, r.primary.id], ids: r.identities.map((x) => [x.namespace, x.id]), t: r.timestamp, e: r.eventId, s: r.size };
  return { meta: JSON.stringify(meta), body: r.json };
}

export function decodeStaged(meta: string, body: string, kind: SchemaClass): ValidRecord {
  const m = JSON.parse(meta) as StagedMeta;
  const identities = m.ids.map(([namespace, id]) => ({ namespace, id }));
  // Stores write events and lake records from `json`; only profile fragments (merged per
  // attribute) need the parsed body, so it is parsed on first use.
  return withLazyBody({ index: m.i, kind, primary: { namespace: m.p[0], id: m.p[1] }, identities, timestamp: m.t, eventId: m.e, size: m.s, json: body });
}

/** Error code of a staged record the store refused while applying its batch (the rest were applied). */
export const NOT_APPLIED = "RECORD_NOT_APPLIED";

/**
 * An error that comes from the data, not the moment: the same record fails the same way
 * on every retry (PostgreSQL data exceptions and program limits, SQLite's too-big and
 * mismatch, a stack overflow, unparsable staged text). A connection, lock or
 * serialization failure is not one: it is worth retrying as it is.
 */
export function isRecordDataError(err: unknown): boolean {
  if (!(err instanceof Error) || err.name === "StoreError") return false;
  if (err.name === "RangeError" || err.name === "SyntaxError") return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== "string") return false;
  if (/^(22|54)[0-9A-Z]{3}$/.test(code)) return true;
  return code === "SQLITE_TOOBIG" || code === "SQLITE_MISMATCH";
}

/** Savepoint statements of the store's open transaction. */
export interface Savepoints<V> {
  begin(): V;
  release(): V;
  rollback(): V;
}

export interface IsolatedApply<T> {
  /** The result of each part that was applied. */
  results: T[];
  /** One error per staged record the store refused (NOT_APPLIED), in staging order. */
  refused: RecordError[];
}

const refusal = (index: number, err: unknown): RecordError => ({
  index, code: NOT_APPLIED,
  message: `record ${index} could not be stored and was not applied: ${err instanceof Error ? err.message : String(err)}`,
});

/** The record index of a staged row, or -1 when its meta does not read. */
export function stagedIndex(meta: string): number {
  try {
    const i = (JSON.parse(meta) as Partial<StagedMeta>).i;
    return typeof i === "number" ? i : -1;
  } catch {
    return -1;
  }
}

/**
 * Applies one chunk of staged rows (inside the store's COMPLETE transaction) so that a
 * record the store refuses costs only that record, as AEP's partial ingestion does: the
 * chunk is applied whole under a savepoint; on a data error (isRecordDataError) it is rolled
 * back and its rows are applied one by one, each under its own savepoint, and each refused
 * row becomes an error. Any other error is thrown (the batch stays loading; COMPLETE can be
 * retried). `apply` must return its counts rather than add them to shared state, since a
 * rolled-back attempt's counts are dropped.
 */
export async function applyIsolated<R extends { meta: string }, T>(rows: readonly R[], sp: Savepoints<Promise<unknown>>,
  apply: (part: readonly R[]) => Promise<T>): Promise<IsolatedApply<T>> {
  const out: IsolatedApply<T> = { results: [], refused: [] };
  const attempt = async (part: readonly R[]): Promise<unknown> => {
    await sp.begin();
    try {
      out.results.push(await apply(part));
      await sp.release();
      return null;
    } catch (err) {
      if (!isRecordDataError(err)) throw err;
      await sp.rollback();
      return err;
    }
  };
  if ((await attempt(rows)) === null) return out;
  for (const row of rows) {
    const err = await attempt([row]);
    if (err !== null) out.refused.push(refusal(stagedIndex(row.meta), err));
  }
  return out;
}

/** applyIsolated for a synchronous store (better-sqlite3). */
export function applyIsolatedSync<R extends { meta: string }, T>(rows: readonly R[], sp: Savepoints<unknown>,
  apply: (part: readonly R[]) => T): IsolatedApply<T> {
  const out: IsolatedApply<T> = { results: [], refused: [] };
  const attempt = (part: readonly R[]): unknown => {
    sp.begin();
    try {
      out.results.push(apply(part));
      sp.release();
      return null;
    } catch (err) {
      if (!isRecordDataError(err)) throw err;
      sp.rollback();
      return err;
    }
  };
  if (attempt(rows) === null) return out;
  for (const row of rows) {
    const err = attempt([row]);
    if (err !== null) out.refused.push(refusal(stagedIndex(row.meta), err));
  }
  return out;
}
