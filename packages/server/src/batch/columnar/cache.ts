/**
 * Resident snapshots, one per (tenant, merge policy semantics), kept between
 * jobs and previews and brought up to date before each use through the
 * profile store's change feed (`refreshSnapshot`). Refreshes of one key are
 * serialised; readers keep the Snapshot object they were given (refreshing
 * creates a new one), so a preview and a job never disturb each other.
 *
 * With a directory (issue #26), every base built is also written to a file
 * there, in the background, and a cache with nothing in memory for a key
 * loads that file and refreshes it from the file's change-feed version
 * instead of scanning the store again (snapshot-file.ts). A file the feed
 * cannot answer for, or that fails a check, is ignored with a warning.
 */
import { createHash } from "node:crypto";
import path from "node:path";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import { buildSnapshot, changeFeedOf, refreshSnapshot, Snapshot, SnapshotPart, type BuildOptions, type SnapshotStore } from "./snapshot.js";
import { EvaluationPool } from "../pool/evaluation-pool.js";
import { openSnapshotFile, readSnapshotPart, removeStaleTemps, SnapshotFileError, writeSnapshotFile, type OpenSnapshotFile } from "./snapshot-file.js";

export interface SnapshotStats {
  /** "loaded": read from the snapshot file, then refreshed (`changed` profiles re-read). */
  mode: "built" | "unchanged" | "incremental" | "rebuilt" | "loaded";
  /** Profiles re-read incrementally (-1 for a full build). */
  changed: number;
  ms: number;
  /** Time spent reading the snapshot file (mode "loaded"). */
  loadMs?: number;
}

/** The last background write of a key's file. */
export interface SnapshotWriteStats {
  file: string;
  bytes: number;
  ms: number;
}

function policyKey(p: MergePolicySpec): string {
  return JSON.stringify([p.identityGraph.type, p.attributeMerge.type, p.attributeMerge.order ?? null]);
}

export interface SnapshotCacheOptions {
  /** Overlay share of the base above which a refresh rebuilds (default 0.05). */
  maxOverlayShare?: number;
  /** Where snapshot files are kept (one per key); none: snapshots live in memory only. */
  dir?: string;
  /**
   * Names the profile store (e.g. its file or database); a file written for another store is ignored.
   * A function when what the snapshots hold can change (a worker's held partitions): asked as each
   * `get` starts, for the file it may load and the one it writes.
   */
  storeIdentity?: string | (() => string);
  /** Told when a file is ignored or cannot be written (jobs go on either way). */
  onWarning?: (message: string, err?: unknown) => void;
  /** Worker threads that evaluate over the snapshots (batch/pool/); 0 or absent: on the main thread. */
  evaluationWorkers?: number;
}

/** Temporary files of writes older than this are leftovers of a crash. */
const STALE_TEMP_MS = 3_600_000;

export class SnapshotCache {
  private readonly entries = new Map<string, { snapshot: Snapshot | null; lock: Promise<unknown> }>();
  /** What the last `get` did, per key (benchmarks, logs). */
  readonly lastStats = new Map<string, SnapshotStats>();
  /** The last file written, per key. */
  readonly lastWrites = new Map<string, SnapshotWriteStats>();
  /** Per key: the newest base waiting to be written, and the chain of writes. */
  private readonly pendingWrite = new Map<string, { snap: Snapshot; identity: string | null }>();
  private readonly writing = new Map<string, Promise<void>>();
  private tempsChecked = false;
  private evaluation: EvaluationPool | null = null;

  constructor(private readonly o: SnapshotCacheOptions = {}) {
    // Started now: a worker's start-up (its module graph) is not paid by the first request's deadline.
    if ((o.evaluationWorkers ?? 0) > 0) this.evaluation = new EvaluationPool(o.evaluationWorkers!);
  }

  /** The store's identity as files record it (a hash), now. */
  private identity(): string | null {
    const id = this.o.storeIdentity;
    if (id === undefined) return null;
    return createHash("sha256").update(typeof id === "string" ? id : id()).digest("hex").slice(0, 32);
  }

  private key(scope: TenantScope, policy: MergePolicySpec): string {
    return `${scope.orgId}\u0000${scope.sandboxName}\u0000${policyKey(policy)}`;
  }

  private fileFor(k: string): string | null {
    // A hash: org and sandbox names may hold anything a file name cannot.
    return this.o.dir === undefined ? null : path.join(this.o.dir, `${createHash("sha256").update(k).digest("hex").slice(0, 40)}.snapshot`);
  }

  /** The pool that evaluates over these snapshots, or null: evaluate in process. */
  get pool(): EvaluationPool | null {
    const n = this.o.evaluationWorkers ?? 0;
    if (n <= 0) return null;
    this.evaluation ??= new EvaluationPool(n);
    return this.evaluation;
  }

  /** The snapshot file of a key (null without a directory). */
  fileOf(scope: TenantScope, policy: MergePolicySpec): string | null {
    return this.fileFor(this.key(scope, policy));
  }

  /** The current snapshot (built or loaded on first use, refreshed otherwise). */
  async get(store: SnapshotStore, scope: TenantScope, policy: MergePolicySpec, o: BuildOptions): Promise<Snapshot> {
    const k = this.key(scope, policy);
    let e = this.entries.get(k);
    if (e === undefined) {
      e = { snapshot: null, lock: Promise.resolve() };
      this.entries.set(k, e);
    }
    const entry = e;
    const share = this.o.maxOverlayShare === undefined ? {} : { maxOverlayShare: this.o.maxOverlayShare };
    const run = entry.lock.then(async () => {
      const t0 = performance.now();
      const identity = this.identity();
      const previous = entry.snapshot;
      if (previous === null) {
        const loaded = await this.load(store, scope, policy, k, o, identity);
        if (loaded !== null) {
          const loadMs = performance.now() - t0;
          const r = await refreshSnapshot(store, scope, loaded, { ...o, events: o.events || loaded.withEvents, ...share });
          entry.snapshot = r.snapshot;
          this.lastStats.set(k, r.mode === "rebuilt" ? { mode: "rebuilt", changed: -1, ms: performance.now() - t0 } : { mode: "loaded", changed: r.changed, ms: performance.now() - t0, loadMs });
        } else {
          // Events are read whenever the policy keeps them relevant, so one snapshot serves every later definition.
          entry.snapshot = await buildSnapshot(store, scope, policy, o);
          this.lastStats.set(k, { mode: "built", changed: -1, ms: performance.now() - t0 });
        }
      } else {
        const r = await refreshSnapshot(store, scope, previous, { ...o, events: o.events || previous.withEvents, ...share });
        if (r.snapshot !== previous) previous.releaseUnshared(r.snapshot);
        entry.snapshot = r.snapshot;
        this.lastStats.set(k, { mode: r.mode, changed: r.changed, ms: performance.now() - t0 });
      }
      const snap = entry.snapshot;
      if (this.o.dir !== undefined && snap.base !== previous?.base && this.lastStats.get(k)!.mode !== "loaded") this.persist(k, snap, identity);
      return snap;
    });
    entry.lock = run.catch(() => undefined);
    return run;
  }

  /** The file's snapshot when it is usable (else null, with a warning naming why). */
  private async load(store: SnapshotStore, scope: TenantScope, policy: MergePolicySpec, k: string, o: BuildOptions, identity: string | null): Promise<Snapshot | null> {
    const file = this.fileFor(k);
    if (file === null) return null;
    let f: OpenSnapshotFile;
    try {
      f = await openSnapshotFile(file);
    } catch (e) {
      // No file (or no directory yet): nothing to say; a directory that cannot be written is reported by the write.
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "ENOTDIR") this.ignored(file, e);
      return null;
    }
    try {
      const h = f.header;
      if (h.key !== k) throw new SnapshotFileError(`written for another key (${JSON.stringify(h.key)})`);
      if (h.store !== identity) throw new SnapshotFileError("written for another profile store");
      // Not an error: the file is fine but this use needs events it does not hold; the build replaces it.
      if (o.events && !h.withEvents) {
        await f.fh.close();
        return null;
      }
      const feed = changeFeedOf(store);
      if (feed === null) throw new SnapshotFileError("the profile store has no change feed");
      // Asked before the body is read: a version below what the store's change log keeps cannot be answered.
      if ((await feed.changesSince(scope, h.version)).profileIds === null) throw new SnapshotFileError(`the change feed cannot tell what changed since version ${h.version} (its history was trimmed, or the file is older than the store's change log)`);
      const base = await readSnapshotPart(f);
      return new Snapshot(policy, base, SnapshotPart.empty(), new Uint8Array(base.ordinals), new Map(), h.version, h.withEvents);
    } catch (e) {
      await f.fh.close().catch(() => undefined);
      this.ignored(file, e);
      return null;
    }
  }

  private ignored(file: string, e: unknown): void {
    const why = e instanceof SnapshotFileError ? e.message : `unreadable: ${(e as Error).message}`;
    this.o.onWarning?.(`snapshot file ${file} ignored (${why}); building the snapshot from the store`, e instanceof SnapshotFileError ? undefined : e);
  }

  /** Writes a key's base in the background, after the caller got its snapshot; only the newest waiting base is written. */
  private persist(k: string, snap: Snapshot, identity: string | null): void {
    if (snap.version === null) return; // no feed: a file could never be refreshed
    const file = this.fileFor(k)!;
    this.pendingWrite.set(k, { snap, identity });
    const prior = this.writing.get(k) ?? Promise.resolve();
    const next = prior.then(async () => {
      // setImmediate: the caller's continuation (the job) runs before the first byte is encoded.
      await new Promise((r) => setImmediate(r));
      const w = this.pendingWrite.get(k);
      if (w === undefined) return;
      const s = w.snap;
      this.pendingWrite.delete(k);
      const t0 = performance.now();
      try {
        if (!this.tempsChecked) {
          this.tempsChecked = true;
          await removeStaleTemps(this.o.dir!, STALE_TEMP_MS);
        }
        const bytes = await writeSnapshotFile(file, { key: k, store: w.identity, version: s.version!, withEvents: s.withEvents, policy: s.policy }, s.base);
        this.lastWrites.set(k, { file, bytes, ms: performance.now() - t0 });
      } catch (e) {
        this.o.onWarning?.(`snapshot file ${file} not written: ${(e as Error).message}`, e);
      }
    });
    this.writing.set(k, next);
    void next.then(() => {
      if (this.writing.get(k) === next) this.writing.delete(k);
    });
  }

  /** Resolves once every file write started so far has finished. */
  async idle(): Promise<void> {
    while (this.writing.size > 0) await Promise.all([...this.writing.values()]);
  }

  /** Stats of the last `get` for a key. */
  stats(scope: TenantScope, policy: MergePolicySpec): SnapshotStats | undefined {
    return this.lastStats.get(this.key(scope, policy));
  }

  /** Forgets every snapshot (tests; memory). Writes in progress go on (`idle`). */
  clear(): void {
    this.entries.clear();
  }

  /** Waits for the writes in progress, then forgets every snapshot. */
  async close(): Promise<void> {
    await this.idle();
    this.clear();
    await this.evaluation?.close();
    this.evaluation = null;
  }
}
