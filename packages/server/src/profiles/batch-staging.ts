// Staged batch records: the valid records of an ingestion batch are kept with the
// batch, outside profiles, until the batch completes (then applied in one
// transaction) or is aborted (then dropped). AEP semantics: a batch's data is not
// visible before the batch succeeded. A staged record is its validation result
// (meta) plus the record's JSON text, so completing needs no re-validation and
// the same limits that applied at upload time stay applied.
import { withLazyBody } from "./lazy-body.js";
import type { SchemaClass, ValidRecord } from "./types.js";

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
