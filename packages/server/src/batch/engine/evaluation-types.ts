/**
 * What a batch evaluation takes and returns, shared by both engines: the scan-per-job
 * engine (evaluate-job.ts, the "sql" and "js" back ends) and the columnar one
 * (columnar-engine.ts). Kept apart so that neither engine file imports the other's
 * types back (evaluate-job.ts calls columnar-engine.ts).
 */
import type { EvaluationLimits } from "../../services/evaluation-budget.js";
import type { Query } from "@segmentd/pql";
import type { MembershipReads, MembershipSet } from "../../profiles/store.js";
import type { MergePolicySpec } from "../../profiles/types.js";
import type { SnapshotCache } from "../columnar/cache.js";
import type { SnapshotStore } from "../columnar/snapshot.js";
import type { ColumnarCompiled } from "../columnar/predicate.js";

/** What either engine reads: profiles (scans or the snapshot and its change feed) and stored memberships. */
export type EvaluationStore = SnapshotStore & MembershipReads;

export interface JobDefinition {
  id: string;
  query: Query;
  /** Ids named by inSegment in the expression. */
  references: readonly string[];
  excludeOptOut: boolean;
  /** The definition's merge policy; `id` names it in metrics. */
  policy: MergePolicySpec & { id: string };
}

export type Backend = "columnar" | "sql" | "js";

export interface EvaluationOptions {
  /** The job's evaluation instant (epoch ms); also the qualification time written. */
  now: number;
  /**
   * "columnar" (default): compileColumnar over the resident snapshot. "sql": one scan, SQL where
   * covered, compiled evaluator otherwise. "js": one scan, compiled evaluator only.
   */
  backend?: Backend;
  /** Resident snapshots for the columnar back end (kept between jobs); a fresh one per call otherwise. */
  snapshots?: SnapshotCache;
  chunkSize?: number;
  /** Checked between chunks; when it returns true the evaluation stops with JobCancelledError. */
  isCancelled?: () => boolean;
  /** Called after each chunk with the number of profiles processed so far (all scans). */
  onProgress?: (profilesProcessed: number) => void;
  /** Per-profile budgets of the columnar back end (evaluationCost, evaluationMsPerProfile); the defaults otherwise. */
  limits?: EvaluationLimits;
  /**
   * The columnar back end's compiled definitions by id, shared by several evaluations of the same
   * definitions at the same `now` (a worker's partitions: each definition compiled once).
   */
  compiled?: Map<string, ColumnarCompiled>;
  /** The outcome split by profile-keyed partition as well (a worker's shard): `byPartition`. */
  split?: EvaluationSplit;
}

export interface EvaluationSplit {
  /** The partitions evaluated: every profile read is in one of them. */
  partitions: readonly number[];
  /** A profile's partition. */
  of: (profileId: string) => number;
}

/** One partition's part of an outcome. */
export interface PartitionOutcome {
  memberships: MembershipSet[];
  counters: Map<string, DefinitionCounters>;
  /** The partition's profiles in the evaluation's largest scan (its share of `totalProfiles`). */
  profiles: number;
  /** The partition's entries per merge policy id (its share of `profilesByPolicy`). */
  profilesByPolicy: Record<string, number>;
}

export interface DefinitionCounters {
  /** Profiles that qualify after this job (realized + existing). */
  qualified: number;
  /** Qualified profiles per identity namespace (a profile counts once per namespace it has). */
  byNamespace: Record<string, number>;
  realized: number;
  existing: number;
  exited: number;
}

/** A definition's counters before any profile is counted. */
export function emptyCounters(): DefinitionCounters {
  return { qualified: 0, byNamespace: {}, realized: 0, existing: 0, exited: 0 };
}

export interface EvaluationOutcome {
  /**
   * Per definition with changes, the profiles that enter, re-enter or exit, for ONE
   * applyMembershipSets call at the job's `now` (membership-output.ts).
   */
  memberships: MembershipSet[];
  /** Membership writes (transitions) in `memberships`. */
  writes: number;
  counters: Map<string, DefinitionCounters>;
  /** Distinct profiles scanned (the largest scan: every scan covers every profile). */
  totalProfiles: number;
  profilesByPolicy: Record<string, number>;
  /** Definitions evaluated by the SQL back end. */
  sqlDefinitions: string[];
  /** Definitions evaluated in memory, with the reason SQL (or the columnar compiler) did not cover them. */
  inMemoryDefinitions: Record<string, string>;
  /** Definitions evaluated over columns (columnar back end). */
  columnarDefinitions?: string[];
  /** Columnar back end: wall time per definition (ms), predicate and statuses/changes included. */
  definitionMs?: Record<string, number>;
  /** With `split`: per partition asked for, its memberships and counters (which sum to the totals). */
  byPartition?: Map<number, PartitionOutcome>;
}

export class JobCancelledError extends Error {
  constructor() {
    super("job cancelled");
  }
}
