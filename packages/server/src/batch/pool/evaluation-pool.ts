/**
 * The evaluation pool (issue #37): worker threads that run a definition's columnar predicate over
 * snapshot parts, so that a preview, a builder estimate, an edit impact or a job over a million
 * profiles never holds the event loop that serves /healthz, the edge and other tenants.
 *
 * A part's arrays live on shared memory (columnar/shared-arrays.ts): a worker is sent the part's
 * descriptor once (snapshot-file.ts lists every array; only string lists travel by value, in slices
 * with a yield between them) and keeps the rebuilt part by key; the pool mirrors each worker's cache, so it knows what to send. The
 * worker writes one flag per entry row into a shared Uint8Array.
 *
 * Budgets hold as in process: the worker runs under the request's limits and the time left of
 * its deadline (422 / 503 come back with their codes); a worker still busy `GRACE_MS` after the
 * deadline (a loop with no checkpoint) is terminated and replaced, and the request answers the
 * deadline's 503. A request still queued at its deadline is answered the same way.
 */
import { Worker } from "node:worker_threads";
import type { Query } from "@segmentd/pql";
import { ApiError } from "../../services/errors.js";
import type { EvaluationBudget } from "../../services/evaluation-budget.js";
import type { Column } from "../columnar/layout.js";
import { describeSharedPart, type SharedPartDescriptor } from "../columnar/snapshot-file.js";
import type { SnapshotPart } from "../columnar/snapshot.js";
import { sharedArray, sharedCopy } from "../columnar/shared-arrays.js";
import type { ListChunk, PartMessage, RunReply, RunRequest, SharedOverride } from "./protocol.js";

/** How long past its deadline a busy worker may go before it is terminated. */
export const GRACE_MS = 100;
/** Strings of a part's lists sent to a worker per message (each clone a few ms of the main thread). */
const HAND_OVER_STRINGS = 16_384;
/** Parts a worker keeps rebuilt (base and overlay of a few merge policies). */
const PARTS_PER_WORKER = 6;

interface Job {
  id: number;
  part: SnapshotPart;
  key: number;
  query: Query;
  now: number;
  overrides: SharedOverride[];
  out: Uint8Array;
  budget: EvaluationBudget;
  resolve: (out: Uint8Array) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout | null;
  slot: Slot | null;
}

interface Slot {
  worker: Worker;
  job: Job | null;
  /** Keys of the parts the worker holds, least recently used first. */
  held: Map<number, true>;
  /** Keys of parts gone on the main thread, dropped with the next request. */
  gone: number[];
}

/**
 * A worker thread: the build's evaluation-worker.js, or under tsx (tests, benches: this file is
 * TypeScript) a bootstrap that registers tsx in the thread, then imports the source.
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith(".ts")) return new Worker(new URL("./evaluation-worker.js", import.meta.url));
  const source = new URL("./evaluation-worker.ts", import.meta.url).href;
  const tsx = import.meta.resolve("tsx/esm/api");
  return new Worker(`import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(source)}); });`, { eval: true });
}

export interface PoolStats {
  runs: number;
  descriptorsSent: number;
  /** Bytes of arrays that were not on shared memory yet and were copied there. */
  copiedBytes: number;
  terminated: number;
}

export class EvaluationPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private readonly keys = new WeakMap<SnapshotPart, number>();
  private readonly descriptors = new WeakMap<SnapshotPart, SharedPartDescriptor>();
  /** Parts collected on the main thread: their keys are dropped from every worker. */
  private readonly collected = new FinalizationRegistry<number>((key) => {
    for (const s of this.slots) if (s.held.delete(key)) s.gone.push(key);
  });
  private nextKey = 1;
  private nextId = 1;
  private closed = false;
  readonly stats: PoolStats = { runs: 0, descriptorsSent: 0, copiedBytes: 0, terminated: 0 };

  constructor(readonly size: number) {
    if (!(Number.isInteger(size) && size >= 1)) throw new Error(`an evaluation pool needs at least one worker, got ${size}`);
    for (let i = 0; i < size; i++) this.slots.push(this.spawn());
  }

  private spawn(): Slot {
    const worker = startWorker();
    // Idle workers do not keep the process alive (a request in flight holds its own handles).
    worker.unref();
    const slot: Slot = { worker, job: null, held: new Map(), gone: [] };
    worker.on("message", (r: RunReply) => this.replied(slot, r));
    worker.on("error", (e) => this.lost(slot, e));
    worker.on("exit", (code) => this.lost(slot, new Error(`evaluation worker exited with code ${code}`)));
    return slot;
  }

  /**
   * Flags of every entry row of `part` for `query` (1 where it holds), computed by a worker under
   * `budget` (its limits and the time left of its deadline). `overrides`: the status columns
   * inSegment reads.
   */
  run(part: SnapshotPart, query: Query, now: number, overrides: ReadonlyMap<string, Column>, budget: EvaluationBudget): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new Error("the evaluation pool is closed"));
    budget.check();
    let key = this.keys.get(part);
    if (key === undefined) {
      key = this.nextKey++;
      this.keys.set(part, key);
      this.collected.register(part, key);
    }
    const shared: SharedOverride[] = [];
    for (const [path, c] of overrides) {
      if (c.kind !== "string") throw new Error(`an inSegment override of kind ${c.kind} cannot be shared`);
      shared.push({ path, codes: sharedCopy(c.codes), dict: c.dict });
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      const job: Job = { id: this.nextId++, part, key, query, now, overrides: shared, out: sharedArray(Uint8Array, part.rows), budget, resolve, reject, timer: null, slot: null };
      const left = budget.remainingMs();
      if (Number.isFinite(left)) job.timer = setTimeout(() => this.overdue(job), Math.max(0, left) + GRACE_MS);
      this.queue.push(job);
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job !== null || this.queue.length === 0) continue;
      // A worker that already holds a job's part takes that job first (no descriptor to send).
      let k = this.queue.findIndex((j) => slot.held.has(j.key));
      if (k < 0) k = 0;
      const job = this.queue.splice(k, 1)[0]!;
      this.start(slot, job);
    }
  }

  private start(slot: Slot, job: Job): void {
    const drop = slot.gone.splice(0);
    let handOver: SharedPartDescriptor | null = null;
    if (slot.held.has(job.key)) slot.held.delete(job.key);
    else {
      handOver = this.descriptors.get(job.part) ?? null;
      if (handOver === null) {
        handOver = describeSharedPart(job.part);
        this.descriptors.set(job.part, handOver);
        this.stats.copiedBytes += handOver.copiedBytes;
      }
      this.stats.descriptorsSent++;
    }
    slot.held.set(job.key, true);
    while (slot.held.size > PARTS_PER_WORKER) {
      const oldest = slot.held.keys().next().value!;
      slot.held.delete(oldest);
      drop.push(oldest);
    }
    slot.job = job;
    job.slot = slot;
    // A request in flight keeps the process alive until it is answered.
    slot.worker.ref();
    this.stats.runs++;
    const send = async () => {
      if (handOver !== null) await this.handOver(slot, job, handOver);
      if (slot.job !== job) return; // answered meanwhile (its deadline)
      const left = job.budget.remainingMs();
      const m: RunRequest = { type: "run", id: job.id, part: job.key, drop, query: job.query, now: job.now, overrides: job.overrides, out: job.out, limits: job.budget.evaluationLimits, deadlineInMs: Number.isFinite(left) ? Math.max(0, left) : null };
      slot.worker.postMessage(m);
    };
    send().catch((e: unknown) => {
      if (slot.job !== job) return;
      slot.held.delete(job.key);
      this.finish(slot, job);
      job.reject(e);
      this.dispatch();
    });
  }

  /** Sends a part: its arrays at once (shared), its string lists in slices with a yield between them. */
  private async handOver(slot: Slot, job: Job, d: SharedPartDescriptor): Promise<void> {
    const part: PartMessage = { type: "part", key: job.key, buffers: d.buffers, part: d.part, lists: d.lists.length };
    slot.worker.postMessage(part);
    for (const [i, list] of d.lists.entries()) {
      for (let k = 0; k < list.length; k += HAND_OVER_STRINGS) {
        if (slot.job !== job) return;
        const chunk: ListChunk = { type: "list", key: job.key, list: i, strings: list.slice(k, k + HAND_OVER_STRINGS) };
        slot.worker.postMessage(chunk);
        await new Promise((r) => setImmediate(r));
      }
    }
  }

  private finish(slot: Slot, job: Job): void {
    if (job.timer !== null) clearTimeout(job.timer);
    slot.job = null;
    job.slot = null;
    slot.worker.unref();
  }

  private replied(slot: Slot, r: RunReply): void {
    const job = slot.job;
    if (job === null || job.id !== r.id) return;
    this.finish(slot, job);
    if (r.ok) job.resolve(job.out);
    else {
      // The worker may not hold the part (it failed to rebuild it): sent again next time.
      slot.held.delete(job.key);
      job.reject(r.status !== undefined && r.code !== undefined ? new ApiError(r.status, r.code, r.message) : new Error(r.message));
    }
    this.dispatch();
  }

  /** A request at its deadline plus the grace: answered with the deadline's 503; its worker, if busy with it, replaced. */
  private overdue(job: Job): void {
    job.timer = null;
    let err: unknown;
    try {
      job.budget.check();
      err = new ApiError(503, "SEGMENTD-EVALUATION-BUDGET-503", "Evaluation stopped at its deadline");
    } catch (e) {
      err = e;
    }
    const slot = job.slot;
    if (slot === null) {
      const k = this.queue.indexOf(job);
      if (k >= 0) this.queue.splice(k, 1);
      job.reject(err);
      return;
    }
    this.replace(slot);
    job.reject(err);
    this.dispatch();
  }

  /** Terminates a slot's worker and puts a fresh one in its place. */
  private replace(slot: Slot): void {
    const old = slot.worker;
    old.removeAllListeners();
    old.on("error", () => undefined);
    void old.terminate();
    this.stats.terminated++;
    const fresh = this.spawn();
    const k = this.slots.indexOf(slot);
    if (k >= 0) this.slots[k] = fresh;
    if (slot.job !== null) this.finish(slot, slot.job);
  }

  /** A worker died (not terminated by the pool): its request fails, a new worker takes its place. */
  private lost(slot: Slot, e: Error): void {
    if (this.closed || !this.slots.includes(slot)) return;
    const job = slot.job;
    this.replace(slot);
    this.stats.terminated--;
    job?.reject(new Error(`evaluation worker failed: ${e.message}`));
    this.dispatch();
  }

  /** Terminates every worker; queued requests fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      if (job.timer !== null) clearTimeout(job.timer);
      job.reject(new Error("the evaluation pool is closed"));
    }
    await Promise.all(
      this.slots.map(async (s) => {
        s.worker.removeAllListeners();
        s.job?.reject(new Error("the evaluation pool is closed"));
        if (s.job !== null) this.finish(s, s.job);
        await s.worker.terminate();
      }),
    );
  }
}
