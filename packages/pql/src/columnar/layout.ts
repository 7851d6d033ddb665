/**
 * The columnar layout the bulk back end evaluates over (reference: stack-notes §8 —
 * typed arrays + generated code beat row objects ~4× and use ~10× less memory).
 *
 * The language package defines only the SHAPE; the server's batch engine builds
 * instances from whatever store it reads. A table holds one column per dotted
 * path: objects are descended into, and the walk stops at anything else (scalars,
 * arrays, null), so `commerce.order.priceTotal` is a number column and
 * `productListItems` (an array) is a "mixed" column holding the array itself.
 *
 * What the columnar evaluator (compile-columnar.ts) relies on, beyond the types:
 * - a key containing "." gets no column (a PQL path `a.b` never names a key
 *   "a.b"; the row objects still carry it);
 * - `hasChildren(p)` is true when any row holds an object at p, an empty `{}`
 *   included: rows without a value in column(p) may then hold an object and are
 *   read from the row object when that matters;
 * - a mixed column keeps an explicit null as null and an absent value as
 *   undefined (treating null as absent is also correct, only slower);
 * - within each profile's event group, eventTime never decreases, except that
 *   rows with NaN (no readable timestamp) may be anywhere.
 */

/** NaN in a number column, -1 in a string column, -1 in a boolean column: no value (absent or null). */
export type Column =
  | { readonly kind: "number"; readonly values: Float64Array }
  | { readonly kind: "string"; readonly codes: Int32Array; readonly dict: readonly string[] }
  | { readonly kind: "boolean"; readonly values: Int8Array }
  /** Anything else at that path (arrays, null mixed with values, several types): the JSON value, or undefined when absent. */
  | { readonly kind: "mixed"; readonly values: readonly unknown[] };

export interface ColumnarTable {
  readonly length: number;
  /** The column of a dotted path, or undefined when no row has a value at (or under) that path. */
  column(path: string): Column | undefined;
  /** True when some row has an object at that path (the path is a prefix of other columns). */
  hasChildren(path: string): boolean;
  /**
   * Optional: every path that has a column. Only `inSegment` uses it, to learn
   * which segmentMembership namespaces other than `ups` could hold an id; a
   * table without it still gets exact results (those rows take the row path).
   */
  columnPaths?(): readonly string[];
}

export interface ColumnarData {
  /** One row per profile entry (the merged profile entity, with segmentMembership). */
  readonly profiles: ColumnarTable;
  /** Every event of every profile, grouped by profile, each group oldest first. */
  readonly events: ColumnarTable;
  /** Length profiles.length + 1: the events of profile i are rows [eventStart[i], eventStart[i + 1]). */
  readonly eventStart: Uint32Array;
  /** Epoch ms of each event's `timestamp` as PQL reads it (NaN when missing or unparseable). */
  readonly eventTime: Float64Array;
  /** Row i of `profiles` as the plain object it was built from (for evaluation the columns do not cover). */
  profile(i: number): Record<string, unknown>;
  /** Row r of `events` as a plain object. */
  event(r: number): Record<string, unknown>;
}

/** Sets out[i] = 1 for every profile i that qualifies (out has length data.profiles.length, zeroed by the caller). */
export type ColumnarPredicate = (data: ColumnarData, out: Uint8Array) => void;
