// The profile data plane's storage interface. Every method is scoped to one
// tenant (org + sandbox) and async, so the embedded (SQLite) and PostgreSQL
// implementations are interchangeable; one conformance suite tests both.
//
// Durability contract: a promise from a write method resolves only after the
// write is committed (and, for the embedded store, fsynced to its WAL), so an
// acknowledgement sent after it survives kill -9.
import type { RecordError } from "./types.js";
import type {
  Dataset,
  DatasetInput,
  Identity,
  JsonObject,
  JsonValue,
  Membership,
  MembershipSource,
  MembershipStatus,
  MembershipTransition,
  MergedProfile,
  MergePolicySpec,
  ProfileFragment,
  StoredEvent,
  TenantScope,
  ValidRecord,
} from "./types.js";
import type { RefusedLinkReport } from "./append-plan.js";
import { ApiError } from "../services/errors.js";
import type { ProfileStoreObserver, ProfileStoreStatus, QuarantineEntry, QuarantineQuery } from "./quarantine.js";
import type { MembershipSet, MembershipSetCounts, MembershipSetOptions, MembershipTargets } from "./membership-sets.js";

export type { MembershipSet, MembershipSetCounts, MembershipSetOptions, MembershipTargets } from "./membership-sets.js";
export type { ProfileStoreObserver, ProfileStoreStatus, QuarantineEntry, QuarantineQuery, QuarantineReport, QuarantinedRecord } from "./quarantine.js";

export interface AppendOptions {
  /** Ingestion time (epoch ms): fragment timestamp when a record has no _repo.modifyDate. */
  ingestedAt: number;
  /** Identities per graph guardrail (AEP default 50). */
  maxIdentitiesPerGraph: number;
  /**
   * Ingestion batch to account this append to, in the same transaction: `read` records
   * were read from the file/request, `failed` are their validation errors.
   */
  batch?: { id: string; read: number; failed: RecordError[]; file?: string };
}

export interface AppendResult {
  /** Profile records written (several records of one identity merge into one fragment). */
  fragments: number;
  /** Events written. */
  events: number;
  /** Events not written because the dataset already holds an event with that _id (idempotent retries). */
  duplicates: number;
  /** Records of a dataset that is not profile-enabled: kept in the dataset only, not in profiles. */
  lakeOnly: number;
  /** Identity links refused by the per-graph guardrail. */
  refusedLinks: RefusedLinkReport[];
  /** Profiles whose data changed (for profile.changed notifications). */
  profileIds: string[];
  /**
   * The profile id each record was stored under, in the order of the records given (profile-
   * enabled datasets; numbers, as both stores' ids are integers). Streaming evaluation reads it
   * instead of looking the records' primary identities up again after the append.
   */
  recordPids?: Float64Array;
}

export interface EventQuery {
  /** Inclusive, epoch ms. */
  startTime?: number;
  /** Exclusive, epoch ms. */
  endTime?: number;
  /** Page size; default 1000 (AEP's default). */
  limit?: number;
  order?: "asc" | "desc";
  /** Opaque cursor from a previous page's `next`. */
  cursor?: string;
  /** Only events the store held at this mark (`eventsStoredThrough`): what was stored later is left out. */
  storedThrough?: number;
}

export interface EventPage {
  events: StoredEvent[];
  next: string | null;
}

export interface ScanOptions {
  /** Profiles per chunk; default 1000. */
  chunkSize?: number;
  /** Include events; default true. */
  events?: boolean;
  /** Only events at or after this time (epoch ms). */
  eventsSince?: number;
  /**
   * Only these profiles, in the scan's order; ids the store does not hold are skipped. What a
   * snapshot refresh reads for the profiles that changed: one call per chunk, not several per
   * profile.
   */
  profileIds?: readonly string[];
  /**
   * Keep each event's stored JSON text beside its body (embedded store; wire-scan.ts): the
   * store's worker thread sends the text across, not the parsed object.
   */
  eventTexts?: boolean;
}

export interface ScannedProfile extends MergedProfile {
  /** Events of the profile, oldest first. */
  events: StoredEvent[];
  /** For identityGraph none: the identity this entry stands for (one entry per identity). */
  identity: Identity | null;
}

export interface MembershipChange {
  profileId: string;
  definitionId: string;
  status: MembershipStatus;
  source: MembershipSource;
  /** Epoch ms. */
  at: number;
  /**
   * The caller's knowledge of the previous status (null = no membership). When present the
   * store does not read it (bulk fast path); a transition is recorded when it differs from
   * `status`. Within one call a later change of the same profile and definition starts from
   * the status the earlier change set, whatever its `from` says.
   */
  from?: MembershipStatus | null;
}

/** Membership changes decided for records ahead of their append (ProfileStore.appendDecided). */
export interface DecidedChanges {
  /** Per record, the profile id the changes assumed it is stored under; NaN: no assumption. */
  expect: Float64Array;
  changes: readonly MembershipChange[];
}

export interface DecidedAppendResult {
  append: AppendResult;
  /** The transitions the changes recorded; null when a record went elsewhere and none was applied. */
  transitions: MembershipTransition[] | null;
}

/** Whether every record with an expectation was stored under the profile it was decided for. */
export function landedAsDecided(expect: Float64Array, stored: Float64Array | undefined): boolean {
  for (let i = 0; i < expect.length; i++) {
    if (Number.isNaN(expect[i]!)) continue;
    if (stored === undefined || stored[i] !== expect[i]) return false;
  }
  return true;
}

export interface TransitionQuery {
  definitionId?: string;
  /** Several definitions' transitions (a profile's memberships across audiences). */
  definitionIds?: readonly string[];
  /**
   * These profiles' transitions (explain, members, a profile's memberships): read through the
   * (definition, profile) index, so name the definitions too — without them the log is scanned.
   */
  profileIds?: readonly string[];
  /** Only the most recent this many of each profile and definition (before `limit`; the result stays oldest first). */
  latestPerMembership?: number;
  sources?: MembershipSource[];
  /** Inclusive, epoch ms. */
  since?: number;
  /** Exclusive, epoch ms. */
  until?: number;
  limit?: number;
}

export interface DeleteCounts {
  fragments: number;
  events: number;
  /** Records of non-profile datasets. */
  lakeRecords: number;
  /** Identities removed from identity graphs (deletes across all datasets only). */
  identities: number;
  /** Profiles whose data changed, so engines can re-evaluate them. */
  profileIds: string[];
}

export interface FieldUpdate {
  datasetId: string;
  /** Records whose primary identity is one of these are updated. */
  identities: Identity[];
  /** Dotted path → new value. */
  set?: Record<string, JsonValue>;
  /** Dotted paths to remove. */
  remove?: string[];
}

export type IngestBatchStatus = "loading" | "processing" | "success" | "failed" | "aborted";

export interface IngestBatch {
  id: string;
  datasetId: string;
  status: IngestBatchStatus;
  created: number;
  updated: number;
  completed: number | null;
  recordsRead: number;
  recordsWritten: number;
  recordsFailed: number;
  files: string[];
  /** Per-record failures (the first 1000 are kept). */
  errors: Array<RecordError & { file?: string }>;
}

export const MAX_BATCH_ERRORS = 1000;

export interface StageOptions {
  /** Records read from the file (valid, invalid and unparsable). */
  read: number;
  failed: RecordError[];
  file?: string;
  now: number;
}

export interface CompleteOptions {
  /** Ingestion time (epoch ms) of the applied records. */
  ingestedAt: number;
  maxIdentitiesPerGraph: number;
}

export interface CompletedBatch {
  batch: IngestBatch;
  /** Identity links refused by the per-graph guardrail (the first MAX_BATCH_ERRORS). */
  refusedLinks: RefusedLinkReport[];
  /** The profiles the batch's records were written to, each once (streaming evaluation and the edge locations follow them). */
  profileIds: string[];
}

/**
 * When a profile's data last changed, as far as the store records it (export job filters).
 * The store keeps the ingestion time of profile fragments but not of events (an event keeps
 * only its own `timestamp`).
 */
export interface ProfileDataTimes {
  /** Newest ingestion time (epoch ms) of the profile's fragments; null = no profile fragment. */
  lastFragmentIngestedAt: number | null;
  /** Newest event timestamp (epoch ms) of the profile; null = no event. */
  lastEventAt: number | null;
}

/** A record of a dataset that is not profile-enabled (kept in the dataset only). */
export interface LakeQuery {
  afterSeq?: number;
  limit?: number;
  eids?: readonly string[];
}

export interface LakeRecord {
  /** Position in the dataset (write order); pass the last one as `afterSeq` for the next page. */
  seq: number;
  body: JsonObject;
}

export class StoreError extends Error {
  constructor(readonly code: "DATASET_NOT_FOUND" | "DATASET_EXISTS" | "BATCH_NOT_FOUND" | "BATCH_NOT_OPEN" | "INVALID_CURSOR", message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/**
 * The profile store cannot serve right now (its worker thread is restarting, say). An ApiError,
 * so that every route answers it as a 503 with this code and the reason, never a 500.
 */
export class StoreUnavailableError extends ApiError {
  static readonly CODE = "SEGMENTD-PROFILE-STORE-UNAVAILABLE-503";
  constructor(reason: string) {
    super(503, StoreUnavailableError.CODE, `The profile store is unavailable: ${reason}. Retry shortly`);
    this.name = "StoreUnavailableError";
  }
}

/**
 * The store's narrow roles, named for what their users do. Each engine, service and route
 * depends only on the roles it calls (an edge node runs with none of them: its location store
 * and the hub link are its own); ProfileStore, every role at once, is what the two stores
 * implement and what the server opens.
 */

/** Health and quarantine (quarantine.ts): readiness, metrics and the quarantine listing. */
export interface StoreHealth {
  readonly kind: "embedded" | "postgres";
  /** Whether the store can serve now (readiness) and its supervision counters (metrics). */
  status(): Promise<ProfileStoreStatus>;
  /** Quarantined records (skipped at read), oldest first; one tenant's or all. */
  listQuarantined(query?: QuarantineQuery): Promise<QuarantineEntry[]>;
  /** Quarantine reports and availability changes as they happen; returns the unsubscribe. */
  observe(observer: ProfileStoreObserver): () => void;
}

/** Datasets (Catalog). */
export interface DatasetCatalog {
  createDataset(scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset>;
  getDataset(scope: TenantScope, id: string): Promise<Dataset | null>;
  /** Newest first. */
  listDatasets(scope: TenantScope, opts?: { limit?: number; start?: number }): Promise<Dataset[]>;
  /** Removes the dataset and all its records; null when it does not exist in this sandbox. */
  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null>;
}

/** Streaming ingestion: records appended to a dataset, stitched into profiles, in one commit. */
export interface RecordAppends {
  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult>;
  /**
   * `append`, and in the same transaction membership changes decided for these records before
   * they were stored (the streaming engine evaluates a known profile's event ahead of its append,
   * so that the event and its transitions are made durable by one commit). The changes are
   * applied only if every record with an expectation (`expect[i]`, a profile id; NaN for none)
   * was stored under that profile; otherwise none is, and `transitions` is null: the caller
   * evaluates again against what was stored. The records are appended either way.
   */
  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult>;
}

/** Batch ingestion: files staged with a loading batch, applied together on COMPLETE. */
export interface IngestBatches {
  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch>;
  getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null>;
  listBatches(scope: TenantScope, opts?: { datasetId?: string; limit?: number }): Promise<IngestBatch[]>;
  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch>;
  /**
   * Keeps a file's valid records with a loading batch, not yet in profiles (AEP: a
   * batch's data is visible only once the batch succeeded), and accounts the file's
   * read records and failures. BATCH_NOT_FOUND / BATCH_NOT_OPEN otherwise.
   */
  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }>;
  /**
   * Applies every staged record of a loading batch in one transaction (stitching,
   * guardrail and _id dedup exactly as append) and closes it: success when any
   * record was written or none failed, else failed.
   */
  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch>;
  /** Drops the staged records of a loading batch and marks it aborted; nothing reaches profiles. */
  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch>;
}

/** The identity graph: which profile an identity belongs to, and a profile's identities. */
export interface IdentityGraph {
  findProfileId(scope: TenantScope, identity: Identity): Promise<string | null>;
  /**
   * findProfileId of each identity, answered in order (null = not in any graph; an identity
   * may appear more than once). One call for many: the embedded worker store answers in one
   * message, PostgreSQL in one statement (the edge forwarder reads thousands per batch, and one
   * call per identity cost more than the reads).
   */
  findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>>;
  graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]>;
}

/** A merged profile and the fragments it was merged from (those of its graph the policy's identity graph keeps). */
export interface ProfileWithFragments {
  profile: MergedProfile;
  fragments: ProfileFragment[];
}

/** Explain's read: which fragment supplied each attribute of a profile (merge.ts attributeSource). */
export interface ProfileSources {
  /** getProfile, with the fragments of the same read: the merge they give is the profile's. */
  getProfileWithFragments(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null>;
}

/**
 * Merged profiles and their events, one at a time or scanned in chunks. Every reader of profiles
 * serves their sources too (the hub handles the audience routes are given are ProfileReads).
 */
export interface ProfileReads extends ProfileSources {
  getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null>;
  getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query?: EventQuery): Promise<EventPage>;
  /** Every merged profile with its events, chunk by chunk (never all in memory). */
  scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts?: ScanOptions): AsyncIterable<ScannedProfile[]>;
  countProfiles(scope: TenantScope): Promise<number>;
  /**
   * A mark of the events stored so far (the newest one's store sequence, over every tenant):
   * `EventQuery.storedThrough` then reads the events as they were at this point. A streaming
   * worker reads behind the hub; the hub marks each change it publishes with this.
   */
  eventsStoredThrough(): Promise<number>;
  /**
   * The sandbox's profile (graph) ids in ascending order, `limit` (default 1,000) after
   * `afterProfileId`: one per identity graph, nothing merged or read but the id.
   */
  listProfileIds(scope: TenantScope, opts?: { afterProfileId?: string; limit?: number }): Promise<string[]>;
  /**
   * profileDataTimes of each profile (graph) id, answered in order; an unknown id answers
   * both null. One call for many (one worker message; one PostgreSQL statement).
   */
  profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]>;
  /**
   * The records of a dataset that is not profile-enabled (export destinations), in write
   * order, `limit` (default 1000) after `afterSeq`. A profile-enabled or unknown dataset has none.
   * `eids`: only the records written with these record ids (an export file's, Data Access API).
   */
  listLakeRecords(scope: TenantScope, datasetId: string, opts?: LakeQuery): Promise<LakeRecord[]>;
}

/** Membership writes (the batch, streaming and edge engines). */
export interface MembershipWrites {
  /** Applies changes; records a transition for each status change; returns those transitions. */
  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]>;
  /**
   * applyMembershipChanges for a caller that does not read the transitions (the edge
   * forwarder): the same writes, answering only how many transitions were recorded. Building
   * the transition objects and, from the worker store, copying them back to the caller's
   * thread cost about as much as writing them.
   */
  writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number>;
  /**
   * A batch job's changes in bulk (membership-sets.ts), in one transaction: the stored result
   * of applyMembershipChanges with the same changes and `from`, without transition objects.
   * The arrays may be transferred to another thread (the embedded worker store): the caller
   * must not use them afterwards. Invalid sets reject with a RangeError/TypeError, writing nothing.
   */
  applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts>;
  /**
   * A backfill's chunk: the status each listed profile of one definition must end with. Reads
   * their stored statuses and writes the net change set-based, in one transaction: the result
   * and transitions of applyMembershipChanges with the same changes without `from`. Resolves with
   * the transitions recorded, as a set. Invalid targets reject with a RangeError/TypeError, writing nothing.
   */
  applyMembershipTargets(scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet>;
}

/** Membership reads: a profile's memberships, an audience's members, counts and transitions. */
export interface MembershipReads {
  getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]>;
  listMembers(scope: TenantScope, definitionId: string, opts?: { status?: MembershipStatus; limit?: number; afterProfileId?: string }): Promise<Membership[]>;
  countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }>;
  listTransitions(scope: TenantScope, query?: TransitionQuery): Promise<MembershipTransition[]>;
  /** All profile ids with that status for a definition, in one query (ascending numeric order). */
  listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]>;
  /**
   * listMemberIds as numbers (both stores' profile ids are integers): a batch job reads every
   * definition's members (millions) and locates them by number, so no string is made per member
   * (nor cloned across the embedded store's thread).
   */
  listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array>;
}

/** One transition as the delivery outbox reads it: its log position and what changed. */
export interface LoggedTransition {
  seq: number;
  profileId: string;
  definitionId: string;
  from: MembershipStatus | null;
  to: MembershipStatus;
  /** epoch ms */
  at: number;
}

/**
 * The transitions table read as an outbox (activation/delivery/log-horizon.ts). On PostgreSQL a
 * bigserial is taken before commit, so `snapshot` carries the reading snapshot's xmax and
 * in-progress transactions (xid8 as text) for the reader to tell an uncommitted sequence from one never to appear;
 * embedded SQLite has one writer (seq order is commit order) and answers null.
 */
export interface TransitionLog {
  /** Sequences after `afterSeq` over every tenant, ascending, at most `limit`, and the snapshot they were read in. */
  transitionLogSeqs(afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: { xmax: string; xip: string[] } | null }>;
  /** Which of these transactions (xid8 as text) are still in progress (PostgreSQL; embedded: none). */
  transactionsInProgress(xids: readonly string[]): Promise<string[]>;
  /** A tenant's transitions of these definitions with afterSeq < seq <= throughSeq, ascending, at most `limit`. */
  readTransitionLog(scope: TenantScope, q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]>;
  /** graphIdentities of each profile id, answered in order, in one read (a delivery unit's profiles). */
  graphIdentitiesOf(scope: TenantScope, profileIds: readonly string[]): Promise<Identity[][]>;
  /**
   * What a delivery payload reads of each profile id, answered in order: graphIdentitiesOf and the
   * values at the dotted attribute `paths` of the profile merged by `policy` exactly as getProfile
   * merges it (profile-selection.ts). For all the listed profiles at once — one statement for
   * their identities, one for their fragments —, without memberships or events, and only the
   * selected values copied back (the embedded store's thread). Under identityGraph none a
   * profile is getProfile of its first identity (namespace, id order): that identity's fragments.
   */
  profileSelections(scope: TenantScope, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]>;
}

/** One profile of TransitionLog.profileSelections. */
export interface ProfileSelection {
  /** The profile's graph identities (namespace, id order); none when it has no graph (deleted). */
  identities: Identity[];
  /**
   * Per path asked, the value there in the merged profile's attributes (getProfile's entity but
   * its identityMap and segmentMembership, which the payload has of its own); undefined: absent.
   */
  values: Array<JsonValue | undefined>;
}

/** The change feed (the batch engine's resident snapshot and its files): in memory, primed from the store's change log when it opens. */
export interface ProfileChanges {
  /** Profiles whose data (identities, fragments, events) changed since `since` (a version from an earlier call, also one from before the store was reopened), including removed ones (graphs merged away, deleted). profileIds null = cannot tell (since is null, or older than what is kept): the caller re-reads everything. Membership writes do not count. */
  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null };
  /** Resolves once changesSince answers for versions from before the open (a store that reads its change log back asynchronously). */
  changesReady?(): Promise<void>;
}

/** Data lifecycle (hygiene): record deletes and field updates. */
export interface LifecycleWrites {
  /** Deletes records whose primary identity is given, in the listed datasets or all ("ALL" also unlinks the identities from their graphs). */
  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts>;
  /** Deletes every record of a dataset but keeps the dataset (expirations delete the dataset with deleteDataset). */
  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts>;
  /** Sets / removes fields on the records of the given primary identities in one dataset. */
  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }>;
}

/** A partition's position before and after a streaming workers' batch (PartitionWrites). */
export interface PartitionFence {
  /** The partition's name (e.g. `pev.17`). */
  partition: string;
  /** The position the worker read: the batch applies only if it is still the stored one. */
  after: number;
  /** The last stream sequence the batch covers: the new position. */
  through: number;
}

export interface PartitionBatchWrite {
  scope: TenantScope;
  changes: readonly MembershipChange[];
}

export interface PartitionBatchResult {
  /** False: the position was not `after` (redelivered, or another worker moved on); nothing was written. */
  applied: boolean;
  /** The stored position now. */
  position: number;
  transitions: Array<{ scope: TenantScope; transitions: MembershipTransition[] }>;
}

/**
 * The streaming workers' writes (PostgreSQL only: workers are processes sharing its store): a
 * partition's membership changes over any tenants and its new position, in one transaction,
 * fenced on the position the worker read.
 */
export interface PartitionWrites {
  applyPartitionBatch(fence: PartitionFence, writes: readonly PartitionBatchWrite[]): Promise<PartitionBatchResult>;
  partitionPosition(partition: string): Promise<number>;
  /** Every partition's position (those never written are absent: 0). */
  partitionPositions(): Promise<Map<string, number>>;
}

/** One partition's part of a segment job, evaluated by the worker holding the partition (#44). */
export interface JobPartitionWrite {
  scope: TenantScope;
  jobId: string;
  partition: number;
  /** Who evaluated it (a worker id). */
  worker: string;
  /** Its membership changes (source `batch`), written at `at`: the job's evaluation instant. */
  sets: readonly MembershipSet[];
  at: number;
  /** What the hub sums into the job's metrics (its counters), stored as JSON. */
  report: unknown;
}

export interface JobPartitionReport {
  partition: number;
  worker: string;
  report: unknown;
  /** Transitions written with it. */
  transitions: number;
}

/**
 * The batch fan-out's fenced write (#44, PostgreSQL: the store workers share): a job's partition
 * is written once whoever evaluates it — its owner, or the next one after the owner died.
 */
export interface JobPartitionWrites {
  /**
   * The part's memberships and transitions and its report in one transaction, with a row naming
   * (job, partition): false, and nothing written, when that row exists (the part was written).
   */
  applyJobPartition(w: JobPartitionWrite): Promise<boolean>;
  /** The parts of a job written so far, by ascending partition. */
  jobPartitionReports(scope: TenantScope, jobId: string): Promise<JobPartitionReport[]>;
  /**
   * A job given up: each of its `partitions` not yet written gets a row of no worker (worker ""),
   * so that no part of it is written afterwards; how many.
   */
  closeJobPartitions(scope: TenantScope, jobId: string, partitions: number, at: number): Promise<number>;
  /** Removes the rows of the sandbox's jobs whose instant is before `before` (epoch ms); how many. */
  pruneJobPartitions(scope: TenantScope, before: number): Promise<number>;
}

/** Every role at once: what the embedded and PostgreSQL stores implement. */
export interface ProfileStore
  extends StoreHealth,
    DatasetCatalog,
    RecordAppends,
    IngestBatches,
    IdentityGraph,
    ProfileReads,
    MembershipWrites,
    MembershipReads,
    ProfileChanges,
    LifecycleWrites,
    TransitionLog {
  close(): Promise<void>;
}
