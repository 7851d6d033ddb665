/**
 * A backfill's persisted state (issue #40) and what it needs of the rest of the service: the
 * profile store's reads and writes, and — in process — the live streaming engine's gate, given
 * structurally so that batch/ imports nothing of streaming/ (docs/architecture.md).
 */
import type { MembershipChange, MembershipReads, MembershipWrites } from "../../profiles/store.js";
import type { TenantContext } from "../../services/tenancy.js";
import type { EvaluationStore } from "../engine/evaluation-types.js";

export type BackfillStateName = "queued" | "running" | "succeeded" | "failed";
export type BackfillPhase = "queued" | "evaluating" | "writing" | "fencing" | "done";
/**
 * Why it runs: the definition was created, edited (or enabled), asked for again over the API,
 * resumed after a restart, a definition it reads with inSegment had its memberships backfilled, or
 * the content of the merge policy it uses changed.
 */
export type BackfillReason = "created" | "updated" | "requested" | "restarted" | "referenced" | "mergePolicy";

/** What GET /segment/definitions/{id}/backfill answers (times ISO-8601). */
export interface BackfillView {
  definitionId: string;
  state: BackfillStateName;
  phase: BackfillPhase;
  reason: BackfillReason;
  /** updateTime (epoch ms) of the definition version evaluated. */
  definitionVersion: number;
  /** The change feed's position the evaluation read through; null until it is taken. */
  fence: number | null;
  /** Membership changes to decide: the net change of the evaluation plus the profiles changed after the fence. */
  total: number;
  processed: number;
  /** Transitions written: profiles that entered (or re-entered) and that exited. */
  entered: number;
  exited: number;
  /** Profiles whose data changed after the fence, decided again under the live engine's lock. */
  fenced: number;
  queuedAt: string;
  startedAt: string | null;
  /** When the evaluation (the snapshot refreshed, the definition run over it) was done and the writes began. */
  evaluatedAt: string | null;
  finishedAt: string | null;
  /** Runs of this backfill (a restart runs it again from the start: it writes only what is still to change). */
  attempts: number;
  error: string | null;
}

/** The stored document: the view plus what decides whether a definition change needs a backfill. */
export interface StoredBackfill {
  view: BackfillView;
  /** What evaluation depends on, of the version queued or running. */
  signature: string;
  /** Of the last version a backfill completed for: an edit that changes none of it needs none. */
  doneSignature: string | null;
  /** Several hubs: the hub that queued or runs it (recovery leaves a live hub's alone). */
  runBy?: string;
}

/** The verdict the live engine gives of a held profile: null when it does not evaluate the definition (or the profile is gone). */
export type Verdict = (profileId: string, definitionId: string) => Promise<boolean | null>;

/**
 * The streaming engine's fence (StreamingEngine.holdIdle): while `write` runs, no evaluation of the
 * held profiles runs, and what it wrote is applied to the engine's cached states afterwards.
 */
export interface LiveGate {
  /**
   * Resolves once every evaluation of the sandbox's profiles queued or running when called has
   * finished, its writes included. Called after the catalog took the new version and before the
   * fence: an evaluation that took the previous version could otherwise commit after the
   * evaluation read the stored statuses, and its membership would never be corrected.
   */
  settled(tenant: TenantContext): Promise<void>;
  holdIdle(tenant: TenantContext, profileIds: readonly string[], write: (held: readonly string[], verdict: Verdict) => Promise<readonly MembershipChange[]>): Promise<{ busy: string[] }>;
  /**
   * Realized memberships of a windowed definition the backfill wrote, for the engine's sweep to
   * re-check at `due` (0: at its next tick): the engine schedules only the states it holds.
   */
  recheck?(tenant: TenantContext, memberships: ReadonlyArray<{ profileId: string; definitionId: string; due: number }>): void;
}

/** What a backfill reads and writes of the profile store. */
export type BackfillStore = EvaluationStore & MembershipReads & MembershipWrites;

/**
 * On a hub whose streaming workers evaluate (cluster/partition-backfill.ts, reached through
 * `app.streaming.backfill`, typed structurally): the net change goes to each partition's owner in
 * band, on the partition's ordered stream, and the owner writes it fenced against that partition's
 * position; resolves once every partition applied it, with what was written.
 */
export interface PartitionedBackfill {
  /**
   * Before the fence: every partition's owner has taken this version of the definition (a message on
   * each partition, applied). From then on the workers write its memberships only with this version,
   * as the in-process engine does once the catalog told the runner (step 1).
   */
  switchTo(run: { tenant: TenantContext; definitionId: string; version: number; isCancelled(): boolean }): Promise<void>;
  write(run: {
    tenant: TenantContext;
    definitionId: string;
    /** updateTime of the definition version evaluated: a worker skips a chunk of another version. */
    version: number;
    fence: number;
    desired: ReadonlyMap<string, "realized" | "exited">;
    isCancelled(): boolean;
    onProgress(processed: number): Promise<void>;
  }): Promise<{ entered: number; exited: number; fenced: number }>;
}
