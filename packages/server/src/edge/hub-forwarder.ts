/**
 * Every event collected at an edge location goes to the hub (architecture
 * flow 3, last step), together with the edge memberships the request decided.
 * In the all-in-one the interact request waits for it (`forward()`): it is
 * answered 200 only once its batch's hub writes are committed, so a process
 * killed with kill -9 loses no acknowledged event (issue #37). The hub's own
 * consumer of the edge sites' stream (hub-ingest.ts) uses `enqueue()` + `idle()`.
 *
 * The forwarder is a bounded FIFO queue written to the hub in large batches:
 *
 *  - **Rate and size.** A batch is written at once (next event-loop turn) when
 *    a caller waits for one of its items (`forward()`, `idle()`) or `maxBatch`
 *    items wait (default 2,000), else `flushIntervalMs` after the first item
 *    that waits (default 25 ms). One batch at a time, so the requests that
 *    arrive while one is written share the next one's commit: per tenant one
 *    `append` per dataset with all its events, one `writeMembershipChanges`
 *    with all the edge transitions in arrival order. So the hub pays one
 *    durable commit per batch, not per request: when every event is of a
 *    profile the hub knows and carries one identity (the usual case), both
 *    calls are made in the same turn and the store group-commits them together.
 *  - **Backpressure.** `admit()` says whether a request may be accepted: at
 *    most `maxQueue` items wait (default 20,000, queued + in flight). The
 *    interact service asks before it stores anything and answers 503 when the
 *    queue is full, so memory stays bounded while the hub is slow or down.
 *  - **Order.** Items are written in arrival order, batch after batch; a batch
 *    that fails is retried before anything behind it, so the hub sees each
 *    profile's events and membership changes in the order the edge decided them.
 *  - **Acknowledgements.** A `forward()` resolves once the item's hub writes
 *    are committed (before the streaming and projection follow-ups), and
 *    rejects when the item is dead-lettered (`DeadLetteredError`) or dropped.
 *  - **Failures.** One event the hub refuses must not cost the others theirs
 *    (issue #22): when a hub write fails with anything but a transient error
 *    (hub-write-errors.ts: connection lost, store unavailable, busy), the
 *    items are written again in halves, and each half that fails in halves
 *    again, down to single events; an event that fails alone, twice in a row,
 *    while the hub accepts other writes, is refused: it is dead-lettered (kept,
 *    bounded, in `deadLetters()`, counted in `stats.deadLettered`, handed to
 *    `onDeadLetter` for the log line and the metric) and everything else is
 *    delivered, in arrival order. A transient failure (a transient error, or
 *    bisection where no write succeeds) is reported (`onError`, a
 *    `HubForwardError`) and the items not yet delivered are retried from the
 *    step that failed, with exponential backoff (at most 5 s apart); the queue
 *    keeps filling meanwhile (and backpressure applies). A transient error is
 *    retried for as long as the forwarder runs: a hub that is away turns into
 *    503s at the edge, never into lost events. Any other failure gets
 *    `maxAttempts` attempts; the last bisects all the way down, and single
 *    events refused are dead-lettered. Only once the forwarder is closing are
 *    items still failing after `maxAttempts` dropped, counted in
 *    `stats.dropped` and reported with `willRetry: false`.
 *  - **Shutdown.** `close()` writes everything still queued (without waiting
 *    for the interval) and resolves when the queue is empty.
 *
 * After each batch's hub writes: the streaming engine evaluates the stored
 * events, and the hub projects the profiles to the other locations that hold
 * them. Failures there are reported and not retried (the hub has the data; the
 * next event or ingestion re-runs them).
 */
import type { MembershipChange } from "../profiles/store.js";
import type { Identity, ValidRecord } from "../profiles/types.js";
import { tenantKey } from "../platform/tenant.js";
import { scopeOf } from "../services/tenancy.js";
import { DeadLetteredError, isTransientHubError } from "./hub-write-errors.js";
import { HubForwardError, type DeadLetter, type ForwardItem, type HubForwarderDeps, type HubForwarderStats } from "./forward-types.js";

export type { DeadLetter, ForwardItem, HubForwarderDeps, HubForwarderOptions, HubForwarderStats } from "./forward-types.js";
export { HubForwardError } from "./forward-types.js";

const MAX_RETRY_DELAY_MS = 5000;

/** Progress of one tenant's share of a batch, so that a retry resumes at the step that failed. */
interface GroupProgress {
  appended: Set<string>;
  profileIds: Array<string | null> | null;
  membershipsWritten: boolean;
}

export class HubForwarder {
  private readonly maxBatch: number;
  private readonly flushIntervalMs: number;
  private readonly maxQueue: number;
  private readonly maxAttempts: number;
  private readonly retryDelayMs: number;
  private readonly turnBudgetMs: number;

  private queue: ForwardItem[] = [];
  private inFlight = 0;
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  /** Errors thrown by the onError handler itself (tests throw there): the next idle() rejects with them. */
  private handlerErrors: unknown[] = [];
  private closed = false;
  readonly stats: HubForwarderStats = { forwarded: 0, batches: 0, retries: 0, dropped: 0, deadLettered: 0, refused: 0 };
  private readonly maxDeadLetters: number;
  private readonly maxDeadLetterBytes: number;
  private letters: Array<{ letter: DeadLetter; bytes: number }> = [];
  private letterBytes = 0;
  /** The callers of forward() waiting for their item's hub write, by item. */
  private readonly acks = new Map<ForwardItem, (err?: unknown) => void>();
  /** Queued items (not yet in a batch) a caller waits for: the next batch goes at once. */
  private awaitedQueued = 0;

  constructor(private readonly deps: HubForwarderDeps) {
    this.maxBatch = Math.max(1, deps.maxBatch ?? 2000);
    this.flushIntervalMs = Math.max(0, deps.flushIntervalMs ?? 25);
    this.maxQueue = Math.max(1, deps.maxQueue ?? 20_000);
    this.maxAttempts = Math.max(1, deps.maxAttempts ?? 5);
    this.retryDelayMs = Math.max(0, deps.retryDelayMs ?? 100);
    this.turnBudgetMs = Math.max(0, deps.turnBudgetMs ?? TURN_BUDGET_MS);
    this.maxDeadLetters = Math.max(0, deps.maxDeadLetters ?? 1000);
    this.maxDeadLetterBytes = Math.max(0, deps.maxDeadLetterBytes ?? 16 * 1024 * 1024);
  }

  /** The dead letters kept, oldest first (copies of the list, not of the letters). */
  deadLetters(): DeadLetter[] {
    return this.letters.map((l) => l.letter);
  }

  /** Items waiting for the hub: queued + in the batch being written. */
  get pending(): number {
    return this.queue.length + this.inFlight;
  }

  /**
   * Whether one more request may be accepted (call before storing anything).
   * Requests already past this check are still enqueued, so the queue can
   * exceed `maxQueue` by at most the number of requests in flight.
   */
  admit(): boolean {
    if (this.closed || this.pending >= this.maxQueue) {
      this.stats.refused++;
      return false;
    }
    return true;
  }

  /** Queue an item; it is written to the hub later, never in the caller's synchronous turn. */
  enqueue(item: ForwardItem): void {
    this.queue.push(item);
    this.kick();
  }

  /**
   * Queue an item and resolve once its hub writes (event appended, edge transitions written)
   * are committed; the batch goes at once, with whatever else waits. Rejects with a
   * DeadLetteredError when the hub refuses the event, with the HubForwardError when it is
   * dropped (closing with the hub away). Never settles in the caller's synchronous turn.
   */
  forward(item: ForwardItem): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.acks.set(item, (err) => (err === undefined ? resolve() : reject(err)));
      this.awaitedQueued++;
      this.enqueue(item);
    });
  }

  /** Answers the forward() callers of these items (those not answered yet). */
  private settle(items: Iterable<ForwardItem>, err?: unknown): void {
    if (this.acks.size === 0) return;
    for (const it of items) {
      const ack = this.acks.get(it);
      if (ack === undefined) continue;
      this.acks.delete(it);
      ack(err);
    }
  }

  /**
   * Write everything queued now (without waiting for the interval) and resolve
   * when the queue is empty and no batch is in flight. Rejects with an error
   * the `onError` handler threw, if any did since the last call.
   */
  idle(): Promise<void> {
    if (this.pending === 0 && this.running === null) return this.settled();
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.kick();
    });
  }

  /** Stop admitting requests, write everything still queued, resolve when done. */
  async close(): Promise<void> {
    this.closed = true;
    await this.idle();
  }

  private settled(): Promise<void> {
    if (this.handlerErrors.length === 0) return Promise.resolve();
    const err = this.handlerErrors[0];
    this.handlerErrors = [];
    return Promise.reject(err);
  }

  private report(err: unknown): void {
    try {
      this.deps.onError(err);
    } catch (thrown) {
      this.handlerErrors.push(thrown);
    }
  }

  /** Schedule the next batch: at once when a full batch waits or someone waits (forward(), idle()), else after the interval. */
  private kick(): void {
    if (this.running !== null || this.queue.length === 0) return;
    const urgent = this.queue.length >= this.maxBatch || this.waiters.length > 0 || this.awaitedQueued > 0 || this.closed;
    if (urgent) {
      if (this.timer !== null) {
        clearTimeout(this.timer);
        this.timer = null;
      }
      this.immediate ??= setImmediate(() => {
        this.immediate = null;
        this.startBatch();
      });
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = null;
        this.startBatch();
      }, this.flushIntervalMs);
    }
  }

  private startBatch(): void {
    if (this.running !== null) return;
    if (this.queue.length === 0) {
      this.wakeWaiters();
      return;
    }
    const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
    this.queue = batch === this.queue ? [] : this.queue.slice(this.maxBatch);
    this.inFlight = batch.length;
    if (this.awaitedQueued > 0) for (const it of batch) if (this.acks.has(it)) this.awaitedQueued--;
    this.running = this.writeBatch(batch)
      .catch((err: unknown) => {
        this.report(err);
        // Not written as far as anyone knows: no caller of this batch may take it for stored.
        this.settle(batch, err);
      })
      .finally(() => {
        this.running = null;
        this.inFlight = 0;
        if (this.queue.length === 0) this.wakeWaiters();
        else this.kick();
      });
  }

  private wakeWaiters(): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    const err = this.handlerErrors.length > 0 ? this.handlerErrors[0] : undefined;
    this.handlerErrors = [];
    for (const w of waiters) {
      if (err === undefined) w.resolve();
      else w.reject(err);
    }
  }

  private async writeBatch(batch: ForwardItem[]): Promise<void> {
    // Per tenant, in arrival order (a profile belongs to one tenant).
    const byTenant = new Map<string, ForwardItem[]>();
    for (const it of batch) {
      const k = tenantKey(it.tenant);
      const list = byTenant.get(k);
      if (list) list.push(it);
      else byTenant.set(k, [it]);
    }
    for (const items of byTenant.values()) {
      const written = await this.writeWithRetry(items);
      if (written.items.length === 0) continue;
      try {
        await this.followUps(written.items, written.profileIds);
      } catch (err) {
        this.report(err);
      }
    }
  }

  /**
   * The hub writes of one tenant's items: the items the hub took (in arrival order) with their
   * profile ids. Refused items are dead-lettered; after a transient failure the rest is retried
   * from the failed step; what is still undelivered after the last attempt is dropped.
   */
  private async writeWithRetry(items: ForwardItem[]): Promise<{ items: ForwardItem[]; profileIds: Array<string | null> }> {
    const delivered: ForwardItem[] = [];
    const profileIds: Array<string | null> = [];
    let pending = items;
    let progress: GroupProgress = { appended: new Set(), profileIds: null, membershipsWritten: false };
    for (let attempt = 1; ; attempt++) {
      let failure: unknown;
      try {
        await this.writeToHub(pending, progress);
        this.stats.forwarded += pending.length;
        this.stats.batches++;
        this.settle(pending);
        delivered.push(...pending);
        profileIds.push(...(progress.profileIds ?? pending.map(() => null)));
        return { items: delivered, profileIds };
      } catch (err) {
        failure = err;
      }
      // A hub that is away (a transient failure: a restarting store, a database restart) is waited
      // for while the server runs — the queue fills and interact answers 503 meanwhile — so nothing
      // acknowledged is dropped; maxAttempts bounds the attempts on an unexplained failure, and on
      // any failure once the forwarder is closing (a shutdown with the hub away).
      const last = attempt >= this.maxAttempts && (this.closed || !isTransientHubError(failure));
      if (last || !isTransientHubError(failure)) {
        // Which items does the hub refuse? Bisect; the last attempt goes all the way down.
        const pass = await this.isolate(pending, progress, failure, last);
        for (const [it, pid] of pass.delivered) {
          delivered.push(it);
          profileIds.push(pid);
        }
        this.stats.forwarded += pass.delivered.length;
        this.settle(pass.delivered.map(([it]) => it));
        for (const [it, err] of pass.refused) this.deadLetter(it, err);
        if (pass.remaining.length === 0) return { items: delivered, profileIds };
        // Nothing delivered what is left: retried as a whole, from the step of the first failure
        // when nothing of it was written since, else from the start (the hub keeps one copy of
        // an event, and a membership step already done for the group stays done).
        if (pass.remaining.length !== pending.length) progress = { appended: new Set(progress.appended), profileIds: null, membershipsWritten: progress.membershipsWritten };
        pending = pass.remaining;
        failure = pass.failure ?? failure;
      }
      const willRetry = !last;
      const what = `${pending.length} edge event(s)`;
      const error = new HubForwardError(
        willRetry ? `hub write of ${what} failed (attempt ${attempt}); retrying` : `hub write of ${what} failed ${attempt} time(s); the events are dropped`,
        pending.length,
        attempt,
        willRetry,
        { cause: failure },
      );
      this.report(error);
      if (!willRetry) {
        this.stats.dropped += pending.length;
        this.settle(pending, error);
        return { items: delivered, profileIds };
      }
      this.stats.retries++;
      await sleep(Math.min(this.retryDelayMs * 2 ** (attempt - 1), MAX_RETRY_DELAY_MS));
    }
  }

  /**
   * One bisection pass over items whose write just failed with `failure` (progress: what the
   * failed write did). Halves are written in arrival order; a half that fails is split again;
   * a single event that fails is written alone once more, and refused when that fails too while
   * the hub took some other write of the pass (or on the last attempt, `exhaustive`, with a
   * non-transient error). The pass stops early — the store, not an event, is failing — on a
   * transient error, or when the first writes all fail: more than twice the depth of the
   * bisection in a row before any success. `remaining`: the items neither delivered nor refused.
   */
  private async isolate(items: ForwardItem[], progress: GroupProgress, failure: unknown, exhaustive: boolean): Promise<{ delivered: Array<[ForwardItem, string | null]>; refused: Array<[ForwardItem, unknown]>; remaining: ForwardItem[]; failure: unknown }> {
    const delivered = new Map<ForwardItem, string | null>();
    const suspects = new Map<ForwardItem, unknown>();
    const limit = exhaustive ? Infinity : 2 * Math.ceil(Math.log2(items.length + 1)) + 2;
    let successes = 0;
    let streak = 0;
    let stop: unknown = undefined;
    const attempt = async (part: ForwardItem[], pr: GroupProgress): Promise<unknown> => {
      try {
        await this.writeToHub(part, pr);
      } catch (err) {
        return err ?? new Error("hub write failed");
      }
      successes++;
      streak = 0;
      this.stats.batches++;
      part.forEach((it, n) => delivered.set(it, pr.profileIds?.[n] ?? null));
      return undefined;
    };
    const visit = async (part: ForwardItem[], pr: GroupProgress, known: unknown): Promise<void> => {
      if (stop !== undefined) return;
      let err = known ?? (await attempt(part, pr));
      if (err === undefined) return;
      if (part.length === 1) {
        // Alone: once more (a refusal fails again), at once, so that its profile's order holds.
        if (!isTransientHubError(err)) err = await attempt(part, inherit(pr));
        if (err === undefined) return;
      }
      if (isTransientHubError(err) || (successes === 0 && ++streak > limit)) {
        stop = err;
        return;
      }
      if (part.length === 1) {
        suspects.set(part[0]!, err);
        return;
      }
      const mid = Math.ceil(part.length / 2);
      await visit(part.slice(0, mid), inherit(pr), undefined);
      await visit(part.slice(mid), inherit(pr), undefined);
    };
    await visit(items, progress, failure);
    const sure = stop === undefined && (successes > 0 || exhaustive);
    const refused: Array<[ForwardItem, unknown]> = sure ? [...suspects] : [];
    const remaining = items.filter((it) => !delivered.has(it) && !(sure && suspects.has(it)));
    return { delivered: [...delivered], refused, remaining, failure: stop };
  }

  private deadLetter(item: ForwardItem, err: unknown): void {
    this.stats.deadLettered++;
    const reason = (err instanceof Error ? err.message : String(err)).slice(0, 1000);
    const letter: DeadLetter = {
      eventId: item.record.eventId,
      orgId: item.tenant.orgId,
      sandboxName: item.tenant.sandbox.sandboxName,
      datasetId: item.datasetId,
      identity: item.identity,
      location: item.location,
      reason,
      at: this.deps.now(),
      event: item.record.body,
    };
    const bytes = item.record.size + reason.length;
    this.letters.push({ letter, bytes });
    this.letterBytes += bytes;
    while (this.letters.length > 0 && (this.letters.length > this.maxDeadLetters || this.letterBytes > this.maxDeadLetterBytes)) {
      this.letterBytes -= this.letters.shift()!.bytes;
    }
    this.settle([item], new DeadLetteredError(letter.eventId, reason));
    try {
      this.deps.onDeadLetter?.(letter);
    } catch (thrown) {
      this.handlerErrors.push(thrown);
    }
  }

  /**
   * The hub's profile id of each item's identity: each distinct identity read once, in calls
   * of READ_CHUNK identities (hub.findProfileIds: on the embedded store one worker message and
   * one answer per call; one findProfileId per identity, each its own message, answer and
   * change-feed look-up, cost the store's worker more than the reads, and this thread ~3 µs
   * per answer). A chunk is posted as soon as it is
   * full, so the store reads while this thread gathers the next one; gathering yields to the
   * event loop whenever it has taken `turnBudgetMs` (checked every READ_CHECK items).
   */
  private async readProfileIds(items: readonly ForwardItem[]): Promise<Array<string | null>> {
    const hub = this.deps.hub;
    const scope = scopeOf(items[0]!.tenant);
    const distinct = new Map<string, number>();
    const slots = new Array<number>(items.length);
    const reads: Array<Promise<Array<string | null>>> = [];
    let chunk: Identity[] = [];
    const post = () => {
      const read = hub.findProfileIds(scope, chunk);
      // Settled by the Promise.all below; until then a rejection must not count as unhandled.
      read.catch(() => undefined);
      reads.push(read);
      chunk = [];
    };
    let turnStart = performance.now();
    for (let n = 0; n < items.length; n++) {
      if (n > 0 && n % READ_CHECK === 0 && performance.now() - turnStart >= this.turnBudgetMs) {
        await yieldToLoop();
        turnStart = performance.now();
      }
      const identity = items[n]!.identity;
      const k = `${identity.namespace}\u0000${identity.id}`;
      let slot = distinct.get(k);
      if (slot === undefined) {
        distinct.set(k, (slot = distinct.size));
        chunk.push(identity);
        if (chunk.length === READ_CHUNK) post();
      }
      slots[n] = slot;
    }
    if (chunk.length > 0) post();
    const answers = await Promise.all(reads);
    return slots.map((slot) => answers[Math.floor(slot / READ_CHUNK)]![slot % READ_CHUNK] ?? null);
  }

  private writeToHub(items: ForwardItem[], progress: GroupProgress): Promise<void> {
    return progress.appended.size === 0 && !progress.membershipsWritten && items.every((it) => it.record.identities.length === 1)
      ? this.writeTogether(items, progress)
      : this.writeInSteps(items, progress);
  }

  /**
   * The common case (every event of a known profile, carrying one identity, so the append
   * cannot create or merge graphs and the profile ids are known before it): the events and
   * the transitions are handed to the store together, which commits them in one transaction
   * (one fsync) instead of two. Otherwise, or for what failed, the steps.
   *
   * The events go as appends of APPEND_SLICE records, yielding to the event loop between two
   * of them once the turn has taken `turnBudgetMs` (handing a store thousands of records
   * costs milliseconds of this thread, during which no interact request is served); the
   * transitions go in ONE call, in the last append's turn, so that one profile's changes
   * keep their order on every store. (Splitting the transitions too, one call per slice,
   * made the embedded store's worker ~1.7 times slower per item, and the forwarder fell
   * behind.) A failure after some appends is retried from the append: the hub keeps one copy
   * of an event (its `_id`), so the appends already stored are not doubled.
   */
  private async writeTogether(items: ForwardItem[], progress: GroupProgress): Promise<void> {
    const datasetId = items[0]!.datasetId;
    if (items.some((it) => it.datasetId !== datasetId)) return this.writeInSteps(items, progress);
    const before = await this.readProfileIds(items);
    if (before.some((pid) => pid === null)) return this.writeInSteps(items, progress);
    const scope = scopeOf(items[0]!.tenant);
    // Built before the writes' turns, under the same budget as the reads (≈ 1 µs per change).
    const changes = await this.changesInTurns(items, before);
    const opts = { ingestedAt: this.deps.now(), maxIdentitiesPerGraph: this.deps.maxIdentitiesPerGraph ?? 50 };
    const appends: Array<Promise<unknown>> = [];
    let turnStart = performance.now();
    for (let start = 0; start < items.length; start += APPEND_SLICE) {
      if (start > 0 && performance.now() - turnStart >= this.turnBudgetMs) {
        await yieldToLoop();
        turnStart = performance.now();
      }
      const appended = this.deps.hub.append(scope, datasetId, items.slice(start, start + APPEND_SLICE).map((i) => i.record), opts);
      // Settled by allSettled below; a slice that fails before then must not count as unhandled.
      appended.catch(() => undefined);
      appends.push(appended);
    }
    const applied = changes.length > 0 ? this.deps.hub.writeMembershipChanges(scope, changes) : Promise.resolve(0);
    const [a, m] = await Promise.allSettled([Promise.all(appends), applied]);
    if (a.status === "fulfilled") progress.appended.add(datasetId);
    if (m.status === "fulfilled") progress.membershipsWritten = true;
    if (a.status === "rejected") throw a.reason;
    if (m.status === "rejected") throw m.reason;
    progress.profileIds = before;
  }

  /** changesOf, yielding to the event loop whenever the turn has taken `turnBudgetMs` (checked every READ_CHECK items). */
  private async changesInTurns(items: readonly ForwardItem[], profileIds: ReadonlyArray<string | null>): Promise<MembershipChange[]> {
    const changes: MembershipChange[] = [];
    let turnStart = performance.now();
    for (let start = 0; start < items.length; start += READ_CHECK) {
      if (start > 0 && performance.now() - turnStart >= this.turnBudgetMs) {
        await yieldToLoop();
        turnStart = performance.now();
      }
      const end = Math.min(items.length, start + READ_CHECK);
      for (let n = start; n < end; n++) pushChanges(changes, items[n]!, profileIds[n]);
    }
    return changes;
  }

  private async writeInSteps(items: ForwardItem[], progress: GroupProgress): Promise<void> {
    const hub = this.deps.hub;
    const scope = scopeOf(items[0]!.tenant);
    // 1. Events: one append per dataset (usually one), in arrival order.
    const byDataset = new Map<string, ValidRecord[]>();
    for (const it of items) {
      if (progress.appended.has(it.datasetId)) continue;
      const list = byDataset.get(it.datasetId);
      if (list) list.push(it.record);
      else byDataset.set(it.datasetId, [it.record]);
    }
    for (const [datasetId, records] of byDataset) {
      await hub.append(scope, datasetId, records, { ingestedAt: this.deps.now(), maxIdentitiesPerGraph: this.deps.maxIdentitiesPerGraph ?? 50 });
      progress.appended.add(datasetId);
    }
    // 2. The hub's profile ids, read after the append (an event can create or link graphs).
    const profileIds = progress.profileIds ?? (progress.profileIds = await this.readProfileIds(items));
    // 3. Edge transitions, all in one call, in the order the edge decided them.
    if (!progress.membershipsWritten) {
      const changes = changesOf(items, profileIds);
      if (changes.length > 0) await hub.writeMembershipChanges(scope, changes);
      progress.membershipsWritten = true;
    }
  }

  private async followUps(items: ForwardItem[], profileIds: ReadonlyArray<string | null>): Promise<void> {
    const tenant = items[0]!.tenant;
    const streamed = this.deps.streaming ? await this.deps.streaming.onRecordsStored(tenant, items.map((i) => i.record)) : [];
    // Projection goes to every location holding the profile. The collecting location is
    // skipped when it already held the profile (earlier projections, its own events and its
    // own edge decisions keep it current) and the hub changed nothing else (no streaming
    // transition); the other holders always get it, since they lack this location's event.
    const hubChanged = new Set(streamed.map((t) => t.profileId));
    const bySkip = new Map<string, string[]>();
    items.forEach((it, n) => {
      const pid = profileIds[n];
      if (!pid) return;
      const skip = hubChanged.has(pid) || it.newAtLocation ? "" : it.location;
      const list = bySkip.get(skip);
      if (list) list.push(pid);
      else bySkip.set(skip, [pid]);
    });
    for (const [skip, pids] of bySkip) await this.deps.projector.project(tenant, pids, skip === "" ? new Set() : new Set([skip]));
  }
}

/**
 * The edge transitions of these items, in the order the edge decided them. No `from`: the
 * edge does not know the hub's previous status for sure (other locations, the streaming and
 * batch engines and the data lifecycle write the same memberships), and a wrong one would
 * record a false transition; the store reads it (one indexed read per change).
 */
function changesOf(items: readonly ForwardItem[], profileIds: ReadonlyArray<string | null>): MembershipChange[] {
  const changes: MembershipChange[] = [];
  for (let n = 0; n < items.length; n++) pushChanges(changes, items[n]!, profileIds[n]);
  return changes;
}

function pushChanges(changes: MembershipChange[], item: ForwardItem, profileId: string | null | undefined): void {
  if (!profileId) return;
  for (const c of item.edgeChanges) changes.push({ profileId, definitionId: c.definitionId, status: c.status, source: "edge", at: c.at });
}

/**
 * The default share of one event-loop turn for posting reads: long enough that a batch of a
 * few thousand items needs a handful of turns (each yield waits for a round of interact
 * requests, and the forwarder must keep up with them), short against the 10 ms p99 target.
 */
export const TURN_BUDGET_MS = 2;
/** Items whose identities are gathered between two looks at the clock (≈ 0.3 µs of main-thread work each). */
export const READ_CHECK = 32;
/**
 * Identities per findProfileIds call: a batch of a few thousand items makes a handful of
 * calls, each answered in one message of this many ids (tens of microseconds of main-thread
 * work), and the store's reads start before the whole batch is gathered.
 */
export const READ_CHUNK = 500;
/** Events per append call of a batch of known profiles (≈ 3 µs of main-thread work each). */
export const APPEND_SLICE = 256;

/** The progress of a part of a group: the steps the group's write completed are done for every part of it. */
function inherit(p: GroupProgress): GroupProgress {
  return { appended: new Set(p.appended), profileIds: null, membershipsWritten: p.membershipsWritten };
}

function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
