// The embedded profile store in a dedicated worker thread, behind the same
// ProfileStore interface.
//
// Why: better-sqlite3 is synchronous, so on the main thread every commit (and
// its fsync) stalls every request. Here the main thread only posts each call
// `{id, method, args}` to the worker (store-worker.ts), which runs one
// EmbeddedProfileStore and replies with the result (structured clone). Calls
// posted in the same turn arrive in the worker together and still share one
// group commit; a write's promise still resolves only after its COMMIT.
//
// - Errors cross by value and are re-created: StoreError keeps its class and
//   code (callers test `instanceof StoreError` and `code`), others keep their
//   name, message, stack and `code` (better-sqlite3's SqliteError is re-created).
// - scanProfiles streams chunks through a cursor in the worker, one chunk ahead;
//   an abandoned iteration (`break`, `return()`) closes the worker's iterator.
// - changesSince is synchronous: the proxy keeps a mirror of the worker's change
//   feed (feed-mirror.ts), started from the feed the worker read back from its
//   change log and fed by the delta the worker attaches to every reply, applied
//   before the call settles, so whoever sees a write resolved sees its changes.
// - Supervision: a worker that dies (an uncaught error, an exit, a reply that cannot be
//   read) is restarted with backoff; its pending calls, and every call until the new one
//   has opened the store, fail with StoreUnavailableError (a 503 with the reason), never
//   hang. status() says so for /readyz. A store that cannot open at all fails for good.
// - The worker is ref'ed only while calls are pending: an idle store never keeps
//   the process alive (as the direct store does not).
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import type { FeedHistory } from "../change-feed.js";
import { FeedMirror, type FeedDelta } from "./feed-mirror.js";
import { StoreError, StoreUnavailableError, type AppendOptions, type AppendResult, type DecidedAppendResult, type DecidedChanges, type CompletedBatch, type CompleteOptions, type DeleteCounts, type EventPage, type EventQuery, type FieldUpdate, type IngestBatch, type IngestBatchStatus, type LakeQuery, type LakeRecord, type MembershipChange, type MembershipSet, type MembershipSetCounts, type MembershipSetOptions, type MembershipTargets, type ProfileDataTimes, type ProfileStore, type ProfileWithFragments, type ScanOptions, type ScannedProfile, type StageOptions, type TransitionQuery, type LoggedTransition, type ProfileSelection } from "../store.js";
import type { Dataset, DatasetInput, Identity, Membership, MembershipStatus, MembershipTransition, MergedProfile, MergePolicySpec, TenantScope, ValidRecord } from "../types.js";
import type { EmbeddedStoreOptions } from "./sqlite-store.js";
import { withLazyBody } from "../lazy-body.js";
import { unwireSelections, type WireSelections } from "./wire-selections.js";
import { unwireTransitions, type WireTransitions } from "./wire-transitions.js";
import { unwireScan, type WireScan } from "./wire-scan.js";
import { QuarantineLog, type ProfileStoreObserver, type ProfileStoreStatus, type QuarantineEntry, type QuarantineQuery, type QuarantineReport } from "../quarantine.js";
import { sandboxNameKey } from "../../platform/tenant.js";

/** An error as it crosses the thread boundary. */
export interface WireError {
  storeError: boolean;
  name: string;
  message: string;
  stack?: string;
  code?: unknown;
}

export { FeedMirror, type FeedDelta } from "./feed-mirror.js";

export type WorkerReply =
  | { id: number; ok: true; value: unknown; feed?: FeedDelta }
  | { id: number; ok: false; error: WireError; feed?: FeedDelta }
  /** Sent once, when the store is open (with its change feed, read back from the log), or failed to open. */
  | { id: 0; ready: true; error?: WireError; history?: FeedHistory }
  /** Sent unasked when the worker's store quarantined a record. */
  | { id: -1; quarantine: QuarantineReport };

export interface WorkerCall {
  id: number;
  method: string;
  args: unknown[];
}

/**
 * Records as posted to the worker: cloning 50,000 record objects costs ~100 ms of the main
 * thread, so they travel as two strings — the fields as one JSON array and the records' JSON
 * texts joined by newlines (JSON.stringify never emits a raw newline; an array otherwise) —
 * and `body` is re-parsed from `json` in the worker on first use (only profile fragments read it).
 */
export interface WireRecords {
  n: number;
  /** Per record: index, kind, primary namespace, primary id, timestamp, eventId, size, identity count, then namespace, id per identity. */
  meta: string;
  json: string | string[];
}

export function wireRecords(records: readonly ValidRecord[]): WireRecords {
  const meta: Array<string | number | null> = [];
  const json: string[] = new Array<string>(records.length);
  let newline = false;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    json[i] = r.json;
    if (!newline && r.json.includes("\n")) newline = true;
    meta.push(r.index, r.kind, r.primary.namespace, r.primary.id, r.timestamp, r.eventId, r.size, r.identities.length);
    for (const x of r.identities) meta.push(x.namespace, x.id);
  }
  return { n: records.length, meta: JSON.stringify(meta), json: newline ? json : json.join("\n") };
}

export function unwireRecords(w: WireRecords): ValidRecord[] {
  const meta = JSON.parse(w.meta) as Array<string | number | null>;
  const json = typeof w.json === "string" ? (w.n === 0 ? [] : w.json.split("\n")) : w.json;
  const out: ValidRecord[] = new Array<ValidRecord>(w.n);
  let k = 0;
  for (let i = 0; i < w.n; i++) {
    const index = meta[k++] as number, kind = meta[k++] as ValidRecord["kind"];
    const primary = { namespace: meta[k++] as string, id: meta[k++] as string };
    const timestamp = meta[k++] as number | null, eventId = meta[k++] as string | null, size = meta[k++] as number;
    const count = meta[k++] as number;
    const identities = new Array<ValidRecord["primary"]>(count);
    for (let j = 0; j < count; j++) identities[j] = { namespace: meta[k++] as string, id: meta[k++] as string };
    out[i] = withLazyBody({ index, kind, primary, identities, timestamp, eventId, size, json: json[i]! });
  }
  return out;
}

/** Identities as posted to the worker: namespace, id, namespace, id… (an array of strings clones several times faster than as many objects). */
export function wireIdentities(identities: readonly Identity[]): string[] {
  const out = new Array<string>(2 * identities.length);
  for (let i = 0; i < identities.length; i++) {
    out[2 * i] = identities[i]!.namespace;
    out[2 * i + 1] = identities[i]!.id;
  }
  return out;
}

export function unwireIdentities(w: readonly string[]): Identity[] {
  const out = new Array<Identity>(w.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = { namespace: w[2 * i]!, id: w[2 * i + 1]! };
  return out;
}

/**
 * Membership changes as posted to the worker: a call carries thousands (the edge forwarder's
 * batches, ~5 per request), and the worker took ~0.9 µs per change object to re-create it from
 * its clone; as columns (the profile ids, the other strings by index, the times as numbers)
 * ~0.1 µs. `codes`: per change its definition, status, source and `from` as indexes into
 * `strings` (from: -1 = absent, -2 = null).
 */
export interface WireChanges {
  profileIds: string[];
  strings: string[];
  codes: Int32Array;
  at: Float64Array;
}

const FROM_ABSENT = -1;
const FROM_NULL = -2;

/** The changes as columns; null when one does not have the documented types (it travels as it is). */
export function wireChanges(changes: readonly MembershipChange[]): WireChanges | null {
  const n = changes.length;
  const profileIds = new Array<string>(n);
  const strings: string[] = [];
  const index = new Map<string, number>();
  const code = (v: string): number => {
    let k = index.get(v);
    if (k === undefined) {
      k = strings.length;
      index.set(v, k);
      strings.push(v);
    }
    return k;
  };
  const codes = new Int32Array(4 * n);
  const at = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const c = changes[i]!;
    const from: unknown = c.from;
    if (typeof c.profileId !== "string" || typeof c.definitionId !== "string" || typeof c.status !== "string" || typeof c.source !== "string"
      || typeof c.at !== "number" || (from !== undefined && from !== null && typeof from !== "string")) return null;
    profileIds[i] = c.profileId;
    codes[4 * i] = code(c.definitionId);
    codes[4 * i + 1] = code(c.status);
    codes[4 * i + 2] = code(c.source);
    codes[4 * i + 3] = from === undefined ? FROM_ABSENT : from === null ? FROM_NULL : code(from as string);
    at[i] = c.at;
  }
  return { profileIds, strings, codes, at };
}

export function unwireChanges(w: WireChanges): MembershipChange[] {
  const out = new Array<MembershipChange>(w.profileIds.length);
  const { strings, codes } = w;
  for (let i = 0; i < out.length; i++) {
    const c: MembershipChange = {
      profileId: w.profileIds[i]!,
      definitionId: strings[codes[4 * i]!]!,
      status: strings[codes[4 * i + 1]!] as MembershipStatus,
      source: strings[codes[4 * i + 2]!] as MembershipChange["source"],
      at: w.at[i]!,
    };
    const from = codes[4 * i + 3]!;
    if (from !== FROM_ABSENT) c.from = from === FROM_NULL ? null : strings[from] as MembershipStatus;
    out[i] = c;
  }
  return out;
}

export function toWire(e: unknown): WireError {
  if (e instanceof Error) {
    const w: WireError = { storeError: e instanceof StoreError, name: e.name, message: e.message };
    if (e.stack !== undefined) w.stack = e.stack;
    const code = (e as { code?: unknown }).code;
    if (code !== undefined) w.code = code;
    return w;
  }
  return { storeError: false, name: "Error", message: String(e) };
}

export function fromWire(w: WireError): Error {
  let e: Error;
  if (w.storeError) e = new StoreError(w.code as StoreError["code"], w.message);
  else if (w.name === "SqliteError" && typeof w.code === "string") e = new Database.SqliteError(w.message, w.code);
  else {
    e = new Error(w.message);
    e.name = w.name;
    if (w.code !== undefined) (e as Error & { code?: unknown }).code = w.code;
  }
  // The worker's stack says where it failed; the caller's is lost across the thread anyway.
  if (w.stack !== undefined) e.stack = w.stack;
  return e;
}

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export interface WorkerStoreOptions extends EmbeddedStoreOptions {
  /** Called each time the worker dies unexpectedly (it is restarted; the calls it had fail). */
  onCrash?: (err: Error) => void;
  /** First restart delay in ms (default 200); doubles per crash in a row, up to RESTART_MAX_MS. */
  restartDelayMs?: number;
}

const RESTART_DELAY_MS = 200;
const RESTART_MAX_MS = 5000;
/** A worker that served this long resets the backoff. */
const RESTART_STABLE_MS = 30_000;

/**
 * Starts the worker's entry file, next to this one: store-worker.js in dist; under the
 * TypeScript sources (tests, `npm run dev`: `node --conditions=source --import tsx`),
 * store-worker.ts. A worker inherits the execArgv (`--conditions=source` applies) but on
 * Node 20 not tsx's loader hooks from `--import tsx`, so a small bootstrap registers tsx in
 * the worker first, then imports the entry.
 */
function startWorker(workerData: unknown): Worker {
  if (!import.meta.url.endsWith(".ts")) return new Worker(new URL("./store-worker.js", import.meta.url), { workerData });
  const entry = new URL("./store-worker.ts", import.meta.url).href;
  const tsx = import.meta.resolve("tsx/esm/api");
  const bootstrap = `import(${JSON.stringify(tsx)}).then((api) => { api.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData });
}

/** Scan chunks requested ahead of the one the caller works on. */
const SCAN_AHEAD = 2;

export class WorkerProfileStore implements ProfileStore {
  readonly kind = "embedded" as const;
  private worker!: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly mirror: FeedMirror;
  /** Set when the store can never serve (it could not open at all): every call rejects with it. */
  private dead: Error | null = null;
  /** Why the store cannot serve right now (opening, or its worker restarting); null when it serves. */
  private down: string | null = "profile store worker starting";
  /** Bumped on every new worker: a scan cursor belongs to the worker that opened it. */
  private generation = 0;
  private restarts = 0;
  /** Crashes in a row (backoff), and when the current worker opened its store. */
  private crashesInRow = 0;
  private upSince = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  /** Quarantine reports of the workers, once per process (the worker's own log restarts with it). */
  private readonly quarantine = new QuarantineLog(() => undefined);
  private closing: Promise<void> | null = null;
  private closed = false;
  private refed = false;
  private readonly ready: Promise<void>;
  private readyResolve!: () => void;
  private readyReject!: (e: unknown) => void;
  private firstOpen = true;
  /** Workers already handled as lost (an error is followed by an exit). */
  private readonly gone = new WeakSet<Worker>();

  constructor(private readonly opts: WorkerStoreOptions) {
    this.ready = new Promise<void>((res, rej) => { this.readyResolve = res; this.readyReject = rej; });
    // Nobody may await `ready` (calls queue behind it in the worker anyway): never an unhandled rejection.
    this.ready.catch(() => undefined);
    this.mirror = new FeedMirror(opts.changeFeedCapacity);
    this.spawn();
  }

  private spawn(): void {
    const { onCrash: _onCrash, restartDelayMs: _delay, ...storeOptions } = this.opts;
    // The worker's versions continue above every version the mirror handed out (feed-mirror.ts).
    const from = this.generation === 0 ? this.mirror.current : this.mirror.current + 1;
    const w = startWorker({ options: { ...storeOptions, feedVersionFrom: from } });
    this.worker = w;
    this.generation++;
    this.refed = false;
    w.unref();
    w.on("message", (m: WorkerReply) => {
      if (w !== this.worker) return;
      if ("quarantine" in m) {
        this.quarantine.report(m.quarantine);
        return;
      }
      if ("ready" in m) {
        if (m.error !== undefined) this.openFailed(w, fromWire(m.error));
        else {
          if (m.history !== undefined) this.mirror.reset(m.history);
          this.opened();
        }
        return;
      }
      if (m.feed !== undefined) this.mirror.apply(m.feed);
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      this.updateRef();
      if (m.ok) p.resolve(m.value);
      else p.reject(fromWire(m.error));
    });
    w.on("error", (err) => this.lost(w, err));
    w.on("messageerror", (err) => this.lost(w, err));
    w.on("exit", (code) => this.lost(w, new Error(`the worker thread exited (code ${code})`)));
  }

  private opened(): void {
    this.firstOpen = false;
    this.down = null;
    this.upSince = Date.now();
    this.readyResolve();
    this.quarantine.notify((o) => o.availability?.(true, null));
  }

  private openFailed(w: Worker, err: Error): void {
    if (this.firstOpen) {
      // The store cannot open at all (a bad path, a file that is not a database): fail for good.
      this.readyReject(err);
      this.fail(err);
      return;
    }
    this.lost(w, err);
  }

  /** The worker `w` died (or could not reopen the store): fail what it had, restart it after a backoff. */
  private lost(w: Worker, cause: Error): void {
    if (w !== this.worker || this.closed || this.dead !== null) return;
    if (this.gone.has(w)) return;
    this.gone.add(w);
    if (this.firstOpen) {
      // Died before it ever opened the store: as an open failure.
      this.readyReject(cause);
      this.fail(cause);
      return;
    }
    if (this.upSince > 0 && Date.now() - this.upSince >= RESTART_STABLE_MS) this.crashesInRow = 0;
    this.upSince = 0;
    this.crashesInRow++;
    const reason = `profile store worker restarting: ${cause.message}`;
    const wasUp = this.down === null;
    this.down = reason;
    this.rejectPending(new StoreUnavailableError(reason));
    // Changes the dead worker committed but never reported come with the new worker's feed (its change log).
    this.opts.onCrash?.(new Error(`profile store worker failed (${this.opts.path}): ${cause.message}`, { cause }));
    if (wasUp) this.quarantine.notify((o) => o.availability?.(false, reason));
    void w.terminate().catch(() => undefined);
    if (this.closing !== null) return;
    const delay = Math.min((this.opts.restartDelayMs ?? RESTART_DELAY_MS) * 2 ** (this.crashesInRow - 1), RESTART_MAX_MS);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.closed || this.closing !== null) return;
      this.restarts++;
      this.spawn();
    }, delay);
    this.restartTimer.unref();
  }

  private rejectPending(err: Error): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.updateRef();
    for (const p of pending) p.reject(err);
  }

  /** Diagnostics of the worker (tests): scan cursors it holds open. */
  workerStats(): Promise<{ openCursors: number }> {
    return this.call("workerStats", []);
  }

  /** Resolves once the worker has opened the store (rejects when it could not). Calls need not wait for it. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  /** The worker thread serving now (tests kill it to see the store recover). */
  currentWorker(): Worker {
    return this.worker;
  }

  private fail(cause: Error): void {
    if (this.dead !== null) return;
    this.dead = new Error(`profile store worker failed (${this.opts.path}): ${cause.message}`, { cause });
    this.down = this.dead.message;
    this.gone.add(this.worker);
    this.rejectPending(this.dead);
    if (!this.closed) void this.worker.terminate().catch(() => undefined);
  }

  // ---- health and quarantine ------------------------------------------------------

  async status(): Promise<ProfileStoreStatus> {
    // A store still opening is answered once it has opened (normally milliseconds), within bounds.
    if (this.firstOpen && this.dead === null) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.ready.catch(() => undefined), new Promise<void>((res) => { timer = setTimeout(res, 5000); })]);
      clearTimeout(timer);
    }
    const error = this.closing !== null ? "the profile store is closed" : this.dead?.message ?? this.down;
    return { up: error === null, error, restarts: this.restarts, quarantined: this.quarantine.count };
  }

  observe(observer: ProfileStoreObserver): () => void {
    return this.quarantine.observe(observer);
  }

  listQuarantined(query?: QuarantineQuery): Promise<QuarantineEntry[]> {
    return this.call("listQuarantined", [query]);
  }

  private updateRef(): void {
    const want = this.pending.size > 0;
    if (want === this.refed) return;
    this.refed = want;
    if (want) this.worker.ref();
    else this.worker.unref();
  }

  private call<T>(method: string, args: unknown[], internal = false, transfer: readonly ArrayBuffer[] = []): Promise<T> {
    if (this.dead !== null) return Promise.reject(this.dead);
    // Before the first open, calls queue in the worker behind the open; after a crash they fail at once.
    if (this.down !== null && !this.firstOpen) return Promise.reject(new StoreUnavailableError(this.down));
    if (this.closing !== null && !internal) return Promise.reject(new Error("profile store is closed"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.updateRef();
      try {
        this.worker.postMessage({ id, method, args } satisfies WorkerCall, transfer.length === 0 ? undefined : [...transfer]);
      } catch (err) {
        // Arguments that cannot be cloned (a function, a symbol…): this call fails alone.
        this.pending.delete(id);
        this.updateRef();
        reject(err);
      }
    });
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      // Drain: every call already made settles first (writes commit), then the store closes in the worker.
      await Promise.allSettled([...this.pending.values()].map((p) => new Promise<void>((res) => {
        const { resolve, reject } = p;
        p.resolve = (v) => { resolve(v); res(); };
        p.reject = (e) => { reject(e); res(); };
      })));
      if (this.restartTimer !== null) clearTimeout(this.restartTimer);
      try {
        // Before the first open the call queues in the worker behind it; a restarting worker has nothing to close.
        if (this.dead === null && (this.down === null || this.firstOpen)) await this.call<void>("close", [], true);
      } finally {
        this.closed = true;
        await this.worker.terminate();
      }
    })();
    return this.closing;
  }

  // ---- datasets ---------------------------------------------------------------

  createDataset(scope: TenantScope, input: DatasetInput, now: number): Promise<Dataset> {
    return this.call("createDataset", [scope, input, now]);
  }
  getDataset(scope: TenantScope, id: string): Promise<Dataset | null> {
    return this.call("getDataset", [scope, id]);
  }
  listDatasets(scope: TenantScope, opts?: { limit?: number; start?: number }): Promise<Dataset[]> {
    return this.call("listDatasets", [scope, opts]);
  }
  deleteDataset(scope: TenantScope, id: string): Promise<DeleteCounts | null> {
    return this.call("deleteDataset", [scope, id]);
  }

  // ---- ingestion --------------------------------------------------------------

  append(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions): Promise<AppendResult> {
    return this.call("append", [scope, datasetId, wireRecords(records), opts]);
  }
  appendDecided(scope: TenantScope, datasetId: string, records: readonly ValidRecord[], opts: AppendOptions, decided: DecidedChanges): Promise<DecidedAppendResult> {
    const wire = wireChanges(decided.changes);
    return this.call("appendDecided", [scope, datasetId, wireRecords(records), opts, decided.expect, wire ?? decided.changes]);
  }
  createBatch(scope: TenantScope, datasetId: string, now: number): Promise<IngestBatch> {
    return this.call("createBatch", [scope, datasetId, now]);
  }
  getBatch(scope: TenantScope, id: string): Promise<IngestBatch | null> {
    return this.call("getBatch", [scope, id]);
  }
  listBatches(scope: TenantScope, opts?: { datasetId?: string; limit?: number }): Promise<IngestBatch[]> {
    return this.call("listBatches", [scope, opts]);
  }
  setBatchStatus(scope: TenantScope, id: string, status: IngestBatchStatus, now: number): Promise<IngestBatch> {
    return this.call("setBatchStatus", [scope, id, status, now]);
  }
  stageBatchRecords(scope: TenantScope, batchId: string, records: readonly ValidRecord[], opts: StageOptions): Promise<{ staged: number }> {
    return this.call("stageBatchRecords", [scope, batchId, wireRecords(records), opts]);
  }
  completeBatch(scope: TenantScope, batchId: string, opts: CompleteOptions): Promise<CompletedBatch> {
    return this.call("completeBatch", [scope, batchId, opts]);
  }
  abortBatch(scope: TenantScope, batchId: string, now: number): Promise<IngestBatch> {
    return this.call("abortBatch", [scope, batchId, now]);
  }

  // ---- identities and profiles ------------------------------------------------

  findProfileId(scope: TenantScope, identity: Identity): Promise<string | null> {
    return this.call("findProfileId", [scope, identity]);
  }
  findProfileIds(scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
    return this.call("findProfileIds", [scope, wireIdentities(identities)]);
  }
  graphIdentities(scope: TenantScope, profileId: string): Promise<Identity[]> {
    return this.call("graphIdentities", [scope, profileId]);
  }
  getProfile(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
    return this.call("getProfile", [scope, identity, policy]);
  }
  getProfileWithFragments(scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null> {
    return this.call("getProfileWithFragments", [scope, identity, policy]);
  }
  getEvents(scope: TenantScope, identity: Identity, policy: MergePolicySpec, query?: EventQuery): Promise<EventPage> {
    return this.call("getEvents", [scope, identity, policy, query]);
  }
  eventsStoredThrough(): Promise<number> {
    return this.call("eventsStoredThrough", []);
  }

  countProfiles(scope: TenantScope): Promise<number> {
    return this.call("countProfiles", [scope]);
  }
  listProfileIds(scope: TenantScope, opts?: { afterProfileId?: string; limit?: number }): Promise<string[]> {
    return this.call("listProfileIds", [scope, opts]);
  }
  profileDataTimes(scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
    return this.call("profileDataTimes", [scope, profileIds]);
  }
  listLakeRecords(scope: TenantScope, datasetId: string, opts?: LakeQuery): Promise<LakeRecord[]> {
    return this.call("listLakeRecords", [scope, datasetId, opts]);
  }

  scanProfiles(scope: TenantScope, policy: MergePolicySpec, opts?: ScanOptions): AsyncIterable<ScannedProfile[]> {
    return { [Symbol.asyncIterator]: () => this.scan(scope, policy, opts) };
  }

  /**
   * One cursor in the worker per iteration, opened on the first `next()`. Up to SCAN_AHEAD chunks
   * are requested ahead (the worker reads them while the caller works on this one; with one, the
   * worker sat idle 15 % of a 1M-profile snapshot build whenever the caller took longer over a
   * chunk than it did); ending early closes the cursor.
   */
  private async *scan(scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions | undefined): AsyncGenerator<ScannedProfile[]> {
    type Step = { done: boolean; value?: WireScan };
    const gen = this.generation;
    const cursor = await this.call<number>("scanOpen", [scope, policy, opts]);
    let finished = false;
    const ahead: Array<Promise<Step>> = [];
    const request = () => {
      const step = this.call<Step>("scanNext", [cursor]);
      // A prefetch that fails surfaces at its step; never unhandled in the meantime (nor one asked
      // for after the last chunk, which the worker may answer "not open").
      step.catch(() => undefined);
      ahead.push(step);
    };
    try {
      request();
      for (;;) {
        const step = await ahead.shift()!;
        if (step.done) {
          finished = true;
          return;
        }
        // A cursor dies with its worker: a restarted one does not know it.
        if (this.generation !== gen) throw new StoreUnavailableError(`profile store worker restarted during the scan`);
        while (ahead.length < SCAN_AHEAD) request();
        const chunk = unwireScan(step.value!);
        // A text that did not parse here is reported by the worker, as its own reads report one.
        if (chunk.unreadable.length > 0) await this.call("checkUnreadableEvents", [scope, chunk.unreadable]);
        yield chunk.profiles;
      }
    } finally {
      if (!finished) {
        await Promise.all(ahead.map((p) => p.catch(() => undefined)));
        // The worker drops a cursor that ended or failed by itself; closing it again is a no-op.
        if (this.generation === gen) await this.call("scanClose", [cursor], true).catch(() => undefined);
      }
    }
  }

  // ---- memberships --------------------------------------------------------------

  applyMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
    const wire = wireChanges(changes);
    return wire === null ? this.call("applyMembershipChanges", [scope, changes]) : this.call("applyMembershipChanges", [scope, changes.length, wire]);
  }
  writeMembershipChanges(scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
    const wire = wireChanges(changes);
    return wire === null ? this.call("writeMembershipChanges", [scope, changes]) : this.call("writeMembershipChanges", [scope, changes.length, wire]);
  }
  /** The id arrays are transferred, not copied (tens of MB for a job): the caller's arrays are detached. */
  applyMembershipSets(scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
    const buffers = new Set<ArrayBuffer>();
    for (const set of sets) {
      for (const list of [set.entered, set.reentered, set.exited]) {
        // Only an array that owns its whole buffer moves: a view into a larger one (a Buffer pool
        // slab, say) is copied, so that nothing else of the caller's is detached.
        if (list instanceof Float64Array && list.buffer instanceof ArrayBuffer && list.byteLength > 0 && list.byteOffset === 0 && list.byteLength === list.buffer.byteLength) {
          buffers.add(list.buffer);
        }
      }
    }
    return this.call("applyMembershipSets", [scope, sets, opts], false, [...buffers]);
  }
  applyMembershipTargets(scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet> {
    return this.call("applyMembershipTargets", [scope, targets, opts]);
  }
  getMemberships(scope: TenantScope, profileId: string): Promise<Membership[]> {
    return this.call("getMemberships", [scope, profileId]);
  }
  listMembers(scope: TenantScope, definitionId: string, opts?: { status?: MembershipStatus; limit?: number; afterProfileId?: string }): Promise<Membership[]> {
    return this.call("listMembers", [scope, definitionId, opts]);
  }
  countMembers(scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
    return this.call("countMembers", [scope, definitionId]);
  }
  listTransitions(scope: TenantScope, query?: TransitionQuery): Promise<MembershipTransition[]> {
    return this.call("listTransitions", [scope, query]);
  }
  listMemberIds(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
    return this.call("listMemberIds", [scope, definitionId, status]);
  }
  listMemberPids(scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
    return this.call("listMemberPids", [scope, definitionId, status]);
  }
  transitionLogSeqs(afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: null }> {
    return this.call("transitionLogSeqs", [afterSeq, limit]);
  }
  async transactionsInProgress(): Promise<string[]> {
    return [];
  }
  async readTransitionLog(scope: TenantScope, q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
    return unwireTransitions(await this.call<WireTransitions>("readTransitionLog", [scope, q]));
  }
  graphIdentitiesOf(scope: TenantScope, profileIds: readonly string[]): Promise<Identity[][]> {
    return this.call("graphIdentitiesOf", [scope, profileIds]);
  }
  async profileSelections(scope: TenantScope, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]> {
    return unwireSelections(await this.call<WireSelections>("profileSelections", [scope, profileIds, policy, paths]), paths.length);
  }

  // ---- change feed --------------------------------------------------------------

  changesSince(scope: TenantScope, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.mirror.changesSince(sandboxNameKey(scope), since);
  }

  /** Resolves once the mirror holds the feed the worker read back from its change log (versions from before the open are answered). */
  changesReady(): Promise<void> {
    return this.ready.catch(() => undefined);
  }

  // ---- data lifecycle -------------------------------------------------------------

  deleteByIdentities(scope: TenantScope, identities: readonly Identity[], datasets: readonly string[] | "ALL"): Promise<DeleteCounts> {
    return this.call("deleteByIdentities", [scope, identities, datasets]);
  }
  deleteDatasetRecords(scope: TenantScope, datasetId: string): Promise<DeleteCounts> {
    return this.call("deleteDatasetRecords", [scope, datasetId]);
  }
  updateFields(scope: TenantScope, update: FieldUpdate): Promise<{ updated: number; profileIds: string[] }> {
    return this.call("updateFields", [scope, update]);
  }
}
