// One dataflow's delivery loop: its own queue, sender, timers and limits, so a slow or dead
// receiver holds only its own flow. Each step: snapshot jobs first (an added audience's members
// as `existing`, "Activate now"), else the next delivery unit cut from the transition log (up to
// maxBatchSize profiles, each (profile, audience) once, sent early only when full or after
// maxWaitMs); units are stored before their first request and retried until acknowledged or
// dead. A profile that is in an unacknowledged unit is not put in another one: per-profile order
// is log order even with several requests in flight.
import { createHash, randomUUID } from "node:crypto";
import type { LoggedTransition, ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { Dataflow } from "../types.js";
import type { DeliveryMetrics } from "./metrics.js";
import { buildPayload } from "./payload.js";
import { nextRetry } from "./retry.js";
import { SelectionCache } from "./selection-cache.js";
import type { DeliveryStateStore, DeliveryUnit, SnapshotJob, UnitItem } from "./state-store.js";
import { NatsSender } from "./nats-sender.js";
import { WebhookUnitSender, type UnitSender } from "./unit-sender.js";

export interface FlowDeps {
  profiles: ProfileStore;
  state: DeliveryStateStore;
  metrics: DeliveryMetrics;
  /** How far the transition log is settled (log-horizon.ts). */
  horizon(): number | null;
  mergePolicy(scope: TenantScope): Promise<MergePolicySpec>;
  allowPrivateNetworks: boolean;
  now(): number;
  onError(err: unknown, what: string): void;
}

/** How long a step that failed (the store unreachable, say) waits before the next. */
const STEP_RETRY_MS = 1000;
/** The cut-through position is written at most this often when no unit carries it. */
const ENQUEUED_WRITE_MS = 1000;
/** Units held per request slot, most of them waiting for a retry. */
const PENDING_PER_SLOT = 16;
/** The furthest a unit is cut past the log rows that wait for their profile's unit. */
const MAX_READ_AHEAD = 10_000;
/** Log rows read per store call (at least 8 units' worth): one round trip per several units. */
const READ_CHUNK = 2000;
/**
 * Acknowledgements are written with the next unit stored (one commit), else together once this
 * many wait or the oldest has waited ACK_WRITE_MS, or when nothing else is in flight.
 */
const ACK_BATCH = 16;
const ACK_WRITE_MS = 25;

export class FlowRunner {
  private readonly pending = new Map<string, DeliveryUnit>();
  private readonly inFlight = new Set<string>();
  private readonly busy = new Map<string, number>();
  /** Log positions after `enqueued` already in a unit (a unit may take rows past one it defers). */
  private taken = new Set<number>();
  private jobs: SnapshotJob[] = [];
  private enqueued = 0;
  private enqueuedWritten = 0;
  private enqueuedWrittenAt = 0;
  private audiences: string[] = [];
  private partial: { seq: number; since: number } | null = null;
  private sender: UnitSender | null = null;
  private senderKey = "";
  private lastStart = 0;
  private running = false;
  private again = false;
  private stopped = false;
  private started = false;
  private timer: NodeJS.Timeout | null = null;
  private runsSeen = new Set<string>();
  /** The current hour's flow run id (hourlyRun), so that a unit hashes nothing. */
  private hourRun: { hour: number; runId: string } | null = null;
  /**
   * Log rows read ahead of the cut (seq in (enqueued, through]) for these audiences: a row that
   * waits (its profile busy) is read once, not again by every unit cut after it.
   */
  private ahead: { audiences: readonly string[]; rows: LoggedTransition[]; through: number } | null = null;
  /**
   * Units the receiver acknowledged (2xx) whose acknowledgement is not yet stored: written with
   * the next unit stored, or on their own (writeAcks). Until then a restart sends them again
   * (same webhook-id); their profiles are free for new units, which are stored in the same
   * commit as these acknowledgements, so a restart never sends a profile's older unit after a newer one.
   */
  private acks: DeliveryUnit[] = [];
  /** Log units cut in this step and not yet stored (the cut has moved past them): not idle. */
  private readonly unstored: DeliveryUnit[] = [];
  private acksSince = 0;
  /** The flow's webhook bodies, from profile parts kept between requests (selection-cache.ts). */
  private bodies: SelectionCache | null = null;

  constructor(public flow: Dataflow, private readonly deps: FlowDeps) {}

  get flowId(): string {
    return this.flow.flowId;
  }

  async start(): Promise<void> {
    const { state } = this.deps;
    const scope = this.flow.scope;
    let s = await state.flow(scope, this.flowId);
    if (s === null) {
      const through = this.deps.horizon();
      if (through === null) throw new Error("the transition log is not settled yet");
      await state.createFlow(scope, this.flowId, through, this.selected(), randomUUID(), this.deps.now());
      s = (await state.flow(scope, this.flowId))!;
    }
    this.enqueued = this.enqueuedWritten = s.enqueuedThrough;
    this.audiences = s.audiences;
    this.jobs = await state.snapshotJobs(scope, this.flowId);
    for (const u of await state.units(scope, this.flowId, "pending")) this.track(u);
    for (const seq of await state.takenAfter(scope, this.flowId, this.enqueued)) this.taken.add(seq);
    this.started = true;
    this.wake();
  }

  update(flow: Dataflow): void {
    this.flow = flow;
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    // What was acknowledged is stored (else sent again after the restart, under the same webhook-ids).
    await this.writeAcks().catch((err: unknown) => this.deps.onError(err, `dataflow ${this.flowId} acknowledgements`));
    this.sender?.close();
    this.deps.metrics.retrying.remove({ flow: this.flowId });
    this.deps.metrics.lag.remove({ flow: this.flowId });
  }

  /** "Activate now" for these audiences (all selected when absent): their members again, as a new run. */
  async resend(audienceIds: readonly string[] | undefined): Promise<string> {
    const runId = randomUUID();
    const list = (audienceIds ?? this.selected()).filter((a) => this.selected().includes(a));
    await this.deps.state.setAudiences(this.flow.scope, this.flowId, this.audiences, list, runId, "resend", this.deps.now());
    this.jobs = await this.deps.state.snapshotJobs(this.flow.scope, this.flowId);
    this.wake();
    return runId;
  }

  /** Dead letters back to the queue. */
  async replay(unitIds?: readonly string[]): Promise<number> {
    const n = await this.deps.state.replayDead(this.flow.scope, this.flowId, this.deps.now(), unitIds);
    for (const u of await this.deps.state.units(this.flow.scope, this.flowId, "pending")) if (!this.pending.has(u.unitId)) this.track(u);
    this.wake();
    return n;
  }

  /** Nothing left to do: no snapshot job, no unacknowledged unit, the log cut through the horizon. */
  idle(): boolean {
    const h = this.deps.horizon();
    return this.jobs.length === 0 && this.pending.size === 0 && this.unstored.length === 0 && this.acks.length === 0 && this.partial === null && h !== null && this.enqueued >= h;
  }

  /** Live figures: transitions waiting for a retry, and the age of the oldest one not yet delivered. */
  live(): { retrying: number; lagSeconds: number } {
    let retrying = 0;
    let oldest = Infinity;
    for (const u of this.pending.values()) {
      if (u.attempts > 0) retrying += u.items.length;
      oldest = Math.min(oldest, u.createdAt);
    }
    for (const u of this.unstored) oldest = Math.min(oldest, u.createdAt);
    if (this.partial !== null) oldest = Math.min(oldest, this.partial.since);
    return { retrying, lagSeconds: oldest === Infinity ? 0 : Math.max(0, (this.deps.now() - oldest) / 1000) };
  }

  wake(): void {
    // Not before start() has loaded the stored state: a step on a half-loaded runner would
    // take every audience for added (a second snapshot) or race the crash recovery.
    if (this.stopped || !this.started) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.loop();
  }

  /** Audiences whose start time (AEP's schedule.startDate) has come: before it an audience sends nothing. */
  private selected(): string[] {
    const now = this.deps.now();
    return [...new Set(this.flow.segmentSelectors.filter((s) => s.startTime <= now).map((s) => s.audienceId))];
  }

  /** When the next audience starts (ms from now), null when none waits. */
  private nextStart(): number | null {
    const now = this.deps.now();
    let next: number | null = null;
    for (const s of this.flow.segmentSelectors) if (s.startTime > now) next = min(next, s.startTime - now);
    return next;
  }

  private async loop(): Promise<void> {
    let delay: number | null = null;
    try {
      do {
        this.again = false;
        delay = await this.step();
      } while (this.again && !this.stopped);
    } catch (err) {
      this.deps.onError(err, `dataflow ${this.flowId}`);
      delay = STEP_RETRY_MS;
    } finally {
      this.running = false;
    }
    const live = this.live();
    this.deps.metrics.retrying.set({ flow: this.flowId }, live.retrying);
    this.deps.metrics.lag.set({ flow: this.flowId }, live.lagSeconds);
    if (this.stopped) return;
    if (this.timer !== null) clearTimeout(this.timer);
    // Capped: a start time weeks away would overflow the timer (it is looked at again hourly).
    this.timer = delay === null ? null : setTimeout(() => this.wake(), Math.min(Math.max(1, delay), 3_600_000));
  }

  /** One pass; returns when to look again (null: when woken). */
  private async step(): Promise<number | null> {
    await this.reconcileAudiences();
    const concurrency = Math.max(1, this.flow.delivery.concurrency);
    let wait: number | null = this.dispatch();
    // A unit waiting for its retry holds no request slot. Log units are cut ahead: once no stored
    // unit waits for a slot, up to `concurrency` more are cut and stored in one commit (with the
    // acknowledgements waiting), so a commit carries several units, not one per request. At most
    // PENDING_PER_SLOT × concurrency units are held in all (a receiver that is down).
    let active = this.dueOrInFlight();
    if (active > concurrency && this.jobs.length === 0) return this.afterCut(wait);
    const cut = this.unstored;
    let saved: { enqueued: number; taken: Set<number> } | null = null;
    try {
      while (active + cut.length < 2 * concurrency && this.pending.size + cut.length < concurrency * PENDING_PER_SLOT && !this.stopped) {
        const job = this.jobs[0];
        if (job !== undefined) {
          if (cut.length > 0) break; // jobs go first; log units cut before one arrived are stored now
          await this.buildSnapshotUnit(job);
          wait = min(wait, this.dispatch());
          active = this.dueOrInFlight();
          continue;
        }
        saved ??= { enqueued: this.enqueued, taken: new Set(this.taken) };
        const u = await this.cutLogUnit();
        if (typeof u !== "object" || u === null) {
          wait = min(wait, u);
          break;
        }
        cut.push(u);
      }
      if (cut.length > 0) {
        // The units' profiles are read (one store call for the batch) while they are stored.
        void this.prefetch([...cut]); // the bodies' reads queue behind it (selection-cache.ts)
        await this.storeUnits(cut, { enqueuedThrough: this.enqueued });
        this.enqueuedWritten = Math.max(this.enqueuedWritten, this.enqueued);
        for (const u of cut) this.pending.set(u.unitId, u);
        cut.length = 0;
        wait = min(wait, this.dispatch());
      }
    } catch (err) {
      // Nothing cut in this step was stored: the cut goes back to where it was (read again next step).
      if (saved !== null) {
        this.enqueued = saved.enqueued;
        this.taken = saved.taken;
        for (const u of cut) this.release(u);
        cut.length = 0;
        this.ahead = null;
        this.partial = null;
      }
      throw err;
    }
    return this.afterCut(wait);
  }

  /** The rest of a step: the cut position and the acknowledgements written when due. */
  private async afterCut(wait: number | null): Promise<number | null> {
    await this.writeEnqueued(false);
    if (this.acks.length > 0) {
      const left = this.acksSince + ACK_WRITE_MS - this.deps.now();
      if (this.acks.length >= ACK_BATCH || left <= 0 || this.inFlight.size === 0 || this.stopped) await this.writeAcks();
      else wait = min(wait, left);
    }
    return min(wait, this.nextStart());
  }

  /** Stores the acknowledgements not yet written (one commit). */
  private async writeAcks(): Promise<void> {
    if (this.acks.length === 0) return;
    // A copy: acknowledgements arriving while these are written are pushed to `this.acks` and
    // must stay there (counted as written, they were never stored: the flow's count fell short).
    const acks = [...this.acks];
    await this.deps.state.delivered(this.flow.scope, this.flowId, acks, this.deps.now());
    this.acksWritten(acks);
  }

  /** These acknowledgements are stored: counted, and no longer waiting. */
  private acksWritten(acks: readonly DeliveryUnit[]): void {
    if (acks.length === 0) return;
    const written = new Set(acks);
    this.acks = this.acks.filter((u) => !written.has(u));
    let n = 0;
    for (const u of acks) n += u.items.length;
    this.deps.metrics.sent.inc({ flow: this.flowId }, n);
    if (this.acks.length > 0) this.acksSince = this.deps.now();
  }

  /** Stores units before their first request, with the acknowledgements waiting (one commit). */
  private async storeUnits(units: readonly DeliveryUnit[], progress: Parameters<DeliveryStateStore["addUnits"]>[3]): Promise<void> {
    const acks = [...this.acks];
    await this.deps.state.addUnits(this.flow.scope, this.flowId, units, progress, acks, this.deps.now());
    this.acksWritten(acks);
  }

  private async reconcileAudiences(): Promise<void> {
    const selected = this.selected();
    const added = selected.filter((a) => !this.audiences.includes(a));
    const removed = this.audiences.filter((a) => !selected.includes(a));
    if (added.length === 0 && removed.length === 0) return;
    // Members of an added audience go first (existing), from the log position reached so far:
    // its transitions after that position follow them (docs/activation.md "Adding an audience").
    await this.writeEnqueued(true);
    await this.deps.state.setAudiences(this.flow.scope, this.flowId, selected, added, randomUUID(), "added", this.deps.now());
    this.audiences = selected;
    this.jobs = await this.deps.state.snapshotJobs(this.flow.scope, this.flowId);
  }

  /** Starts requests for due units within concurrency and rate; returns when the next one is due. */
  private dispatch(): number | null {
    const { delivery } = this.flow;
    const now = this.deps.now();
    let wait: number | null = null;
    for (const u of this.pending.values()) {
      if (this.inFlight.has(u.unitId)) continue;
      if (this.inFlight.size >= Math.max(1, delivery.concurrency)) break;
      if (u.nextAt > now) {
        wait = min(wait, u.nextAt - now);
        continue;
      }
      if (delivery.ratePerSecond > 0) {
        const gap = 1000 / delivery.ratePerSecond;
        if (now - this.lastStart < gap) {
          wait = min(wait, gap - (now - this.lastStart));
          break;
        }
      }
      this.lastStart = now;
      this.inFlight.add(u.unitId);
      void this.send(u);
    }
    return wait;
  }

  /** The flow's sender, made again when its kind or timeout changes. */
  private senderFor(): UnitSender {
    const timeout = this.flow.delivery.timeoutMs;
    const kind = this.flow.target.kind;
    const key = `${kind}|${timeout}`;
    if (this.sender === null || this.senderKey !== key) {
      this.sender?.close();
      if (kind === "webhook") this.sender = new WebhookUnitSender(this.deps.allowPrivateNetworks, timeout);
      else if (kind === "nats") this.sender = new NatsSender({ flowId: this.flowId, allowPrivateNetworks: this.deps.allowPrivateNetworks, timeoutMs: timeout });
      else throw new Error(`${kind} destinations are not delivered by a flow runner`);
      this.senderKey = key;
    }
    return this.sender;
  }

  /** Webhook bodies: the parts of these units' profiles read ahead in one store call (a failed read is read again by the body). */
  private async prefetch(units: readonly DeliveryUnit[]): Promise<void> {
    if (this.flow.target.kind !== "webhook") return;
    try {
      const ids: string[] = [];
      for (const u of units) for (const p of profilesOf(u)) ids.push(p);
      const bodies = this.bodies ??= new SelectionCache(this.deps.profiles, this.flow.scope);
      await bodies.prefetch(ids, this.flow.profileSelectors, await this.deps.mergePolicy(this.flow.scope));
    } catch {
      // The body's own read reports it.
    }
  }

  private async send(u: DeliveryUnit): Promise<void> {
    const { state, metrics } = this.deps;
    const scope = this.flow.scope;
    const flow = { flow: this.flowId };
    try {
      const flowNow = this.flow;
      const payload = async (items: readonly UnitItem[]) => buildPayload(this.deps.profiles, scope, items, flowNow.profileSelectors, await this.deps.mergePolicy(scope));
      const bodies = this.bodies ??= new SelectionCache(this.deps.profiles, scope);
      const body = async (items: readonly UnitItem[]) => bodies.body(items, flowNow.profileSelectors, await this.deps.mergePolicy(scope));
      const now = this.deps.now();
      const outcome = await this.senderFor().send(u, { flow: flowNow, now, payload, body });
      if (this.stopped) return;
      if (outcome.ok) {
        // Stored with the next unit (or by step): see `acks`.
        if (this.acks.length === 0) this.acksSince = this.deps.now();
        this.acks.push(u);
        this.untrack(u);
        return;
      }
      const at = this.deps.now();
      const first = u.firstAttemptAt ?? now;
      const decision = nextRetry(u.attempts + 1, first, at, this.flow.delivery.retryPeriodMs, outcome.retryAfterMs ?? null);
      const error = { at: new Date(at).toISOString(), message: outcome.message, ...(outcome.status !== undefined ? { status: outcome.status } : {}) };
      await state.failed(scope, this.flowId, u, error, { dead: decision.dead, nextAt: decision.nextAt, firstAttemptAt: first }, at);
      metrics.failed.inc(flow);
      u.attempts += 1;
      u.firstAttemptAt = first;
      u.nextAt = decision.nextAt;
      u.lastError = JSON.stringify(error);
      if (decision.dead) {
        this.untrack(u);
        metrics.dead.inc(flow, u.items.length);
      }
    } catch (err) {
      // The state could not be written (or the payload read): the unit stays as stored and is tried again.
      this.deps.onError(err, `dataflow ${this.flowId} unit ${u.unitId}`);
      u.nextAt = this.deps.now() + STEP_RETRY_MS;
    } finally {
      this.inFlight.delete(u.unitId);
      this.wake();
    }
  }

  /** Units in flight or due now (not waiting for a retry). */
  private dueOrInFlight(): number {
    const now = this.deps.now();
    let n = 0;
    for (const u of this.pending.values()) if (this.inFlight.has(u.unitId) || u.nextAt <= now) n++;
    return n;
  }

  private track(u: DeliveryUnit): void {
    this.pending.set(u.unitId, u);
    this.hold(u);
  }

  private untrack(u: DeliveryUnit): void {
    if (this.pending.delete(u.unitId)) this.release(u);
  }

  /** The unit's profiles are busy (no later row of theirs is cut) until it is acknowledged or dead. */
  private hold(u: DeliveryUnit): void {
    for (const p of profilesOf(u)) this.busy.set(p, (this.busy.get(p) ?? 0) + 1);
  }

  private release(u: DeliveryUnit): void {
    for (const p of profilesOf(u)) {
      const n = (this.busy.get(p) ?? 1) - 1;
      if (n <= 0) this.busy.delete(p);
      else this.busy.set(p, n);
    }
  }

  /**
   * Cuts the next log unit in memory: its rows taken, its profiles held, the cut moved past it.
   * Returns the unit (stored by step before it is sent), else when to look again (null: when woken).
   */
  private async cutLogUnit(): Promise<DeliveryUnit | number | null> {
    const through = this.deps.horizon();
    if (through === null || through <= this.enqueued || this.audiences.length === 0) {
      if (through !== null && this.audiences.length === 0) this.moveCut(through);
      return null;
    }
    const max = Math.max(1, this.flow.delivery.maxBatchSize);
    const a = this.aheadOfCut();
    // Rows of a profile that is in an unacknowledged unit (and every later row of that profile)
    // are deferred, not cut: the unit takes the rows after them (read on, up to MAX_READ_AHEAD
    // rows past the cut), and the cut position stays before the first deferred row (the rows
    // taken past it are remembered in `taken`). One pass over the rows read ahead.
    const items: UnitItem[] = [];
    /** Indexes in a.rows of the rows the unit takes. */
    const picked: number[] = [];
    /** The unit's profiles, each with its audiences (no pair key made per row). */
    const inUnit = new Map<string, string[]>();
    const deferred = new Set<string>();
    let firstDeferred: number | null = null;
    let last = this.enqueued;
    let full = false;
    let i = 0;
    for (;; i++) {
      if (i === a.rows.length) {
        if (a.through >= through || i >= MAX_READ_AHEAD) break;
        await this.readMore(a, through, Math.min(MAX_READ_AHEAD - i, Math.max(READ_CHUNK, 8 * max)));
        if (i === a.rows.length) break;
      }
      const r = a.rows[i]!;
      if (this.taken.has(r.seq)) {
        last = r.seq;
        continue;
      }
      const audiences = inUnit.get(r.profileId);
      if (audiences === undefined && inUnit.size >= max) {
        full = true;
        firstDeferred ??= r.seq;
        break;
      }
      if (deferred.has(r.profileId) || this.busy.has(r.profileId) || (audiences !== undefined && audiences.includes(r.definitionId))) {
        deferred.add(r.profileId);
        firstDeferred ??= r.seq;
        last = r.seq;
        continue;
      }
      items.push({ seq: r.seq, profileId: r.profileId, audienceId: r.definitionId, status: r.to, at: r.at });
      picked.push(i);
      if (audiences === undefined) inUnit.set(r.profileId, [r.definitionId]);
      else audiences.push(r.definitionId);
      last = r.seq;
    }
    const readAll = !full && i === a.rows.length && a.through >= through;
    const cutTo = firstDeferred !== null ? firstDeferred - 1 : readAll ? through : last;
    if (items.length === 0) {
      this.moveCut(cutTo);
      this.partial = null;
      return null; // no row left, or every row waits for a unit not yet acknowledged
    }
    if (readAll && firstDeferred === null && inUnit.size < max) {
      // A partial unit waits up to maxWaitMs for more.
      const now = this.deps.now();
      if (this.partial === null || this.partial.seq !== items[0]!.seq) this.partial = { seq: items[0]!.seq, since: now };
      const left = this.partial.since + this.flow.delivery.maxWaitMs - now;
      if (left > 0) return left;
    }
    const now = this.deps.now();
    const runId = await this.hourlyRun(now);
    const unit: DeliveryUnit = { unitId: `l${items[0]!.seq}`, kind: "log", items, state: "pending", attempts: 0, firstAttemptAt: null, nextAt: now,
      createdAt: this.partial?.seq === items[0]!.seq ? this.partial.since : now, lastError: null, runId };
    for (const it of items) this.taken.add(it.seq);
    // The unit's rows leave the read-ahead: the next cuts scan the rows still waiting (their
    // profiles busy) and the new ones, not every row taken since the cut position.
    let w = 0;
    for (let k = 0, n = 0; k < a.rows.length; k++) {
      if (n < picked.length && picked[n] === k) n++;
      else a.rows[w++] = a.rows[k]!;
    }
    a.rows.length = w;
    this.moveCut(Math.max(this.enqueued, cutTo));
    this.partial = null;
    this.hold(unit);
    return unit;
  }

  /** The rows read ahead of the cut for the flow's audiences (read anew when they changed). */
  private aheadOfCut(): { audiences: readonly string[]; rows: LoggedTransition[]; through: number } {
    let a = this.ahead;
    if (a === null || a.audiences !== this.audiences || a.through < this.enqueued) a = this.ahead = { audiences: this.audiences, rows: [], through: this.enqueued };
    let drop = 0;
    while (drop < a.rows.length && a.rows[drop]!.seq <= this.enqueued) drop++;
    if (drop > 0) a.rows.splice(0, drop);
    return a;
  }

  /** Up to `want` more log rows after what was read ahead, through `through` (one store call). */
  private async readMore(a: { audiences: readonly string[]; rows: LoggedTransition[]; through: number }, through: number, want: number): Promise<void> {
    const more = await this.deps.profiles.readTransitionLog(this.flow.scope, { afterSeq: a.through, throughSeq: through, definitionIds: a.audiences, limit: want });
    for (const r of more) a.rows.push(r);
    a.through = more.length < want ? through : more[more.length - 1]!.seq;
  }

  /** The log is cut through `seq`: positions at or below it need no remembering. */
  private moveCut(seq: number): void {
    if (seq <= this.enqueued) return;
    this.enqueued = seq;
    for (const s of this.taken) if (s <= seq) this.taken.delete(s);
  }

  private async buildSnapshotUnit(job: SnapshotJob): Promise<true> {
    const max = Math.max(1, this.flow.delivery.maxBatchSize);
    const members = this.selected().includes(job.audienceId)
      ? await this.deps.profiles.listMembers(this.flow.scope, job.audienceId, { status: "realized", afterProfileId: job.afterProfileId, limit: max })
      : [];
    if (members.length === 0) {
      await this.deps.state.endSnapshot(this.flow.scope, this.flowId, job);
      this.jobs.shift();
      return true;
    }
    const now = this.deps.now();
    const unit: DeliveryUnit = { unitId: `s${job.runId}.${job.audienceId}.${job.page}`, kind: "snapshot", state: "pending", attempts: 0, firstAttemptAt: null, nextAt: now,
      createdAt: now, lastError: null, runId: job.runId,
      items: members.map((m) => ({ seq: 0, profileId: m.profileId, audienceId: job.audienceId, status: "existing" as const, at: Date.parse(m.lastQualificationTime) })) };
    const next = members[members.length - 1]!.profileId;
    await this.storeUnits([unit], { job: { ...job, next } });
    job.afterProfileId = next;
    job.page += 1;
    this.track(unit);
    return true;
  }

  /** One flow run per flow and hour collects that hour's deliveries (AEP's streaming flow runs). */
  private async hourlyRun(now: number): Promise<string> {
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    if (this.hourRun?.hour === hour) return this.hourRun.runId;
    const h = createHash("sha256").update(`${this.flow.scope.orgId}\u0000${this.flow.scope.sandboxName}\u0000${this.flowId}\u0000${hour}`).digest("hex");
    const runId = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
    if (!this.runsSeen.has(runId)) {
      await this.deps.state.ensureRun(this.flow.scope, this.flowId, runId, hour);
      this.runsSeen.add(runId);
    }
    this.hourRun = { hour, runId };
    return runId;
  }

  /** Stores how far the log was read when no unit carried it (rows of other audiences, say). */
  private async writeEnqueued(force: boolean): Promise<void> {
    if (this.enqueued <= this.enqueuedWritten || this.partial !== null) return;
    const now = this.deps.now();
    if (!force && now - this.enqueuedWrittenAt < ENQUEUED_WRITE_MS) return;
    await this.deps.state.setEnqueued(this.flow.scope, this.flowId, this.enqueued);
    this.enqueuedWritten = this.enqueued;
    this.enqueuedWrittenAt = now;
  }
}


/** A unit's profiles, each once (a unit's items never change: worked out once). */
const unitProfiles = new WeakMap<DeliveryUnit, string[]>();
function profilesOf(u: DeliveryUnit): string[] {
  let out = unitProfiles.get(u);
  if (out === undefined) unitProfiles.set(u, out = [...new Set(u.items.map((i) => i.profileId))]);
  return out;
}

function min(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}
