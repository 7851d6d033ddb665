/**
 * Messages between the evaluation pool (evaluation-pool.ts, main thread) and its workers
 * (evaluation-worker.ts). Everything large is shared memory: the part's arrays, the inSegment
 * status codes and the flags the worker writes.
 */
import type { Query } from "@segmentd/pql";
import type { EvaluationLimits } from "../../services/evaluation-budget.js";
import type { SharedPartDescriptor } from "../columnar/snapshot-file.js";

/** One status column `inSegment` reads (codes on shared memory). */
export interface SharedOverride {
  path: string;
  codes: Int32Array;
  dict: readonly string[];
}

/**
 * A part handed to a worker: its arrays (shared) now, its string lists after it in `ListChunk`s
 * (a million strings cloned at once would hold the main thread for seconds).
 */
export interface PartMessage {
  type: "part";
  key: number;
  buffers: SharedPartDescriptor["buffers"];
  part: SharedPartDescriptor["part"];
  lists: number;
}

export interface ListChunk {
  type: "list";
  key: number;
  list: number;
  strings: string[];
}

export interface RunRequest {
  type: "run";
  id: number;
  /** The part's key in the worker's cache (handed over before when the worker did not hold it). */
  part: number;
  /** Parts the worker drops first (the pool mirrors its cache). */
  drop: number[];
  /** The parsed expression (a plain tree; structured clone keeps it exact). */
  query: Query;
  now: number;
  overrides: SharedOverride[];
  /** One flag per entry row, written by the worker. */
  out: Uint8Array;
  limits: EvaluationLimits;
  /** Milliseconds left of the request's deadline; null for none (jobs). */
  deadlineInMs: number | null;
}

export type RunReply =
  | { id: number; ok: true; ms: number; columnar: boolean }
  | { id: number; ok: false; status?: number; code?: string; message: string };
