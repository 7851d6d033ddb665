/**
 * The in-process forwarder's items, options, dependencies, dead letters and errors
 * (hub-forwarder.ts): kept apart so that the forwarder's file holds its behaviour only.
 */
import type { IdentityGraph, MembershipWrites, RecordAppends } from "../profiles/store.js";
import type { Identity, JsonObject, MembershipStatus, ValidRecord } from "../profiles/types.js";
import type { TenantContext } from "../services/tenancy.js";
import type { StreamingFeed } from "../streaming/engine.js";
import type { EdgeProjector } from "./projector.js";

export interface ForwardItem {
  tenant: TenantContext;
  datasetId: string;
  record: ValidRecord;
  identity: Identity;
  location: string;
  /** The location did not hold the profile before this request: it lacks the hub's data. */
  newAtLocation: boolean;
  edgeChanges: ReadonlyArray<{ definitionId: string; status: MembershipStatus; at: number }>;
}

export interface HubForwarderOptions {
  /** Most items in one batch (default 2,000). */
  maxBatch?: number;
  /** How long the first waiting item waits for companions before its batch is written (default 25 ms). */
  flushIntervalMs?: number;
  /** Most items waiting (queued + in flight) before `admit()` refuses (default 20,000). */
  maxQueue?: number;
  /** Attempts at writing one batch after a failure that is not transient (then bisected to single events), and after any failure while closing (default 5). */
  maxAttempts?: number;
  /** Delay before the first retry; doubles on each further one, at most 5 s (default 100 ms). */
  retryDelayMs?: number;
  /**
   * Milliseconds of the event loop that handing a batch to the store (posting its profile-id
   * reads, building its transitions, its appends) may take in one turn before it yields, so
   * that interact requests are served in between (default 2; 0 yields at every check: every
   * READ_CHECK reads or changes, every APPEND_SLICE events; Infinity never yields).
   */
  turnBudgetMs?: number;
  /** Dead letters kept for `deadLetters()`, oldest dropped first (default 1,000). */
  maxDeadLetters?: number;
  /** Serialized bytes of the dead letters' events kept at most, oldest dropped first (default 16 MiB). */
  maxDeadLetterBytes?: number;
  /**
   * How long an interact request waits for its event's hub write before it is answered 503
   * (the hub is away or far behind; default 10 s). Used by durableForwarding (acknowledged-forwarding.ts).
   */
  ackTimeoutMs?: number;
}

/** An event the hub refused (written alone, twice): kept for an operator, not retried. */
export interface DeadLetter {
  /** The event's `_id`. */
  eventId: string | null;
  orgId: string;
  sandboxName: string;
  datasetId: string;
  identity: Identity;
  location: string;
  /** The hub's error. */
  reason: string;
  /** When it was dead-lettered (epoch ms). */
  at: number;
  /** The event as the hub was asked to store it. */
  event: JsonObject;
}

export interface HubForwarderDeps extends HubForwarderOptions {
  /** The hub's profile store: events appended, identities looked up, edge memberships written. */
  hub: RecordAppends & IdentityGraph & MembershipWrites;
  projector: EdgeProjector;
  streaming?: StreamingFeed;
  maxIdentitiesPerGraph?: number;
  now: () => number;
  onError: (err: unknown) => void;
  /** Called once per dead-lettered event (the log line, the metric). */
  onDeadLetter?: (letter: DeadLetter) => void;
}

export interface HubForwarderStats {
  /** Items whose hub writes are committed. */
  forwarded: number;
  /** Batches written (hub write groups, one per tenant and batch). */
  batches: number;
  /** Failed attempts that were retried. */
  retries: number;
  /** Items given up after `maxAttempts` failed attempts (transient failures). */
  dropped: number;
  /** Items the hub refused, written alone (dead-lettered, not retried). */
  deadLettered: number;
  /** Requests refused by `admit()` (queue full or closed). */
  refused: number;
}

/** A hub write of the forwarder failed; `willRetry` says whether the items are still queued. */
export class HubForwardError extends Error {
  constructor(
    message: string,
    readonly items: number,
    readonly attempt: number,
    readonly willRetry: boolean,
    options: { cause: unknown },
  ) {
    super(message, options);
    this.name = "HubForwardError";
  }
}
