// One dataflow's delivery loop: its own queue, sender, timers and limits, so a slow or dead
// receiver holds only its own flow. Each step: snapshot jobs first (an added audience's members
// as `existing`, "Activate now"), else the next delivery unit cut from the transition log (up to
// maxBatchSize profiles, each (profile, audience) once, sent early only when full or after
// maxWaitMs); units are stored before their first request and retried until acknowledged or
// dead. A profile that is in an unacknowledged unit is not put in another one: per-profile order
// is log order even with several requests in flight.
import { createHash, randomUUID } from "node:crypto";
import type { ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { Dataflow, WebhookTarget } from "../types.js";
import type { DeliveryMetrics } from "./metrics.js";
import { buildPayload } from "./payload.js";
import { nextRetry } from "./retry.js";
import type { DeliveryStateStore, DeliveryUnit, SnapshotJob, UnitItem } from "./state-store.js";
import { WebhookSender } from "./webhook-sender.js";

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

export class FlowRunner {
  private readonly pending = new Map<string, DeliveryUnit>();
  private readonly inFlight = new Set<string>();
  private readonly busy = new Map<string, number>();
  /** Log positions after `enqueued` already in a unit (a unit may take rows past one it defers). */
  private readonly taken = new Set<number>();
  private jobs: SnapshotJob[] = [];
  private enqueued = 0;
  private enqueuedWritten = 0;
  private enqueuedWrittenAt = 0;
  private audiences: string[] = [];
  private partial: { seq: number; since: number } | null = null;
  private sender: WebhookSender | null = null;
  private senderTimeout = 0;
  private lastStart = 0;
  private running = false;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private runsSeen = new Set<string>();

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
    this.wake();
  }

  update(flow: Dataflow): void {
    this.flow = flow;
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
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
    return this.jobs.length === 0 && this.pending.size === 0 && this.partial === null && h !== null && this.enqueued >= h;
  }

  /** Live figures: transitions waiting for a retry, and the age of the oldest one not yet delivered. */
  live(): { retrying: number; lagSeconds: number } {
    let retrying = 0;
    let oldest = Infinity;
    for (const u of this.pending.values()) {
      if (u.attempts > 0) retrying += u.items.length;
      oldest = Math.min(oldest, u.createdAt);
    }
    if (this.partial !== null) oldest = Math.min(oldest, this.partial.since);
    return { retrying, lagSeconds: oldest === Infinity ? 0 : Math.max(0, (this.deps.now() - oldest) / 1000) };
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.loop();
  }

  private selected(): string[] {
    return [...new Set(this.flow.segmentSelectors.map((s) => s.audienceId))];
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
    this.timer = delay === null ? null : setTimeout(() => this.wake(), Math.max(1, delay));
  }

  /** One pass; returns when to look again (null: when woken). */
  private async step(): Promise<number | null> {
    await this.reconcileAudiences();
    const concurrency = Math.max(1, this.flow.delivery.concurrency);
    let wait: number | null = this.dispatch();
    while (this.pending.size < concurrency && !this.stopped) {
      const built = await this.buildUnit();
      if (built === true) {
        wait = min(wait, this.dispatch());
        continue;
      }
      wait = min(wait, built);
      break;
    }
    await this.writeEnqueued(false);
    return wait;
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

  private senderFor(): WebhookSender {
    const timeout = this.flow.delivery.timeoutMs;
    if (this.sender === null || this.senderTimeout !== timeout) {
      this.sender?.close();
      this.sender = new WebhookSender({ allowPrivateNetworks: this.deps.allowPrivateNetworks, timeoutMs: timeout, userAgent: "segmentd-webhooks/1" });
      this.senderTimeout = timeout;
    }
    return this.sender;
  }

  private async send(u: DeliveryUnit): Promise<void> {
    const { state, metrics } = this.deps;
    const scope = this.flow.scope;
    const flow = { flow: this.flowId };
    try {
      if (this.flow.target.kind !== "webhook") throw new Error(`${this.flow.target.kind} destinations are not delivered yet`);
      const target: WebhookTarget = this.flow.target;
      const body = JSON.stringify(await buildPayload(this.deps.profiles, scope, u.items, this.flow.profileSelectors, await this.deps.mergePolicy(scope)));
      const now = this.deps.now();
      const outcome = await this.senderFor().send(target, webhookId(this.flowId, u.unitId), body, now);
      if (this.stopped) return;
      if (outcome.ok) {
        await state.delivered(scope, this.flowId, u, this.deps.now());
        this.untrack(u);
        metrics.sent.inc(flow, u.items.length);
        return;
      }
      const at = this.deps.now();
      const first = u.firstAttemptAt ?? now;
      const decision = nextRetry(u.attempts + 1, first, at, this.flow.delivery.retryPeriodMs, outcome.retryAfterMs);
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

  private track(u: DeliveryUnit): void {
    this.pending.set(u.unitId, u);
    for (const p of new Set(u.items.map((i) => i.profileId))) this.busy.set(p, (this.busy.get(p) ?? 0) + 1);
  }

  private untrack(u: DeliveryUnit): void {
    if (!this.pending.delete(u.unitId)) return;
    for (const p of new Set(u.items.map((i) => i.profileId))) {
      const n = (this.busy.get(p) ?? 1) - 1;
      if (n <= 0) this.busy.delete(p);
      else this.busy.set(p, n);
    }
  }

  /** Cuts and stores the next unit: true when one was stored, else when to look again (null: when woken). */
  private async buildUnit(): Promise<true | number | null> {
    const job = this.jobs[0];
    if (job !== undefined) return this.buildSnapshotUnit(job);
    const through = this.deps.horizon();
    if (through === null || through <= this.enqueued || this.audiences.length === 0) {
      if (through !== null && this.audiences.length === 0) this.moveCut(through);
      return null;
    }
    const max = Math.max(1, this.flow.delivery.maxBatchSize);
    const limit = Math.max(100, max * 4);
    const rows = await this.deps.profiles.readTransitionLog(this.flow.scope, { afterSeq: this.enqueued, throughSeq: through, definitionIds: this.audiences, limit });
    if (rows.length === 0) {
      this.moveCut(through);
      this.partial = null;
      return null;
    }
    // Rows of a profile that is in an unacknowledged unit (and every later row of that profile)
    // are deferred, not cut: the unit takes the rows after them, and the cut position stays
    // before the first deferred row (the rows taken past it are remembered in `taken`).
    const items: UnitItem[] = [];
    const profiles = new Set<string>();
    const pairs = new Set<string>();
    const deferred = new Set<string>();
    let firstDeferred: number | null = null;
    let last = this.enqueued;
    let full = false;
    for (const r of rows) {
      if (this.taken.has(r.seq)) {
        last = r.seq;
        continue;
      }
      const pair = `${r.profileId}\u0000${r.definitionId}`;
      if (!profiles.has(r.profileId) && profiles.size >= max) {
        full = true;
        firstDeferred ??= r.seq;
        break;
      }
      if (deferred.has(r.profileId) || this.busy.has(r.profileId) || pairs.has(pair)) {
        deferred.add(r.profileId);
        firstDeferred ??= r.seq;
        last = r.seq;
        continue;
      }
      items.push({ seq: r.seq, profileId: r.profileId, audienceId: r.definitionId, status: r.to, at: r.at });
      profiles.add(r.profileId);
      pairs.add(pair);
      last = r.seq;
    }
    const readAll = !full && rows.length < limit;
    const cutTo = firstDeferred !== null ? firstDeferred - 1 : readAll ? through : last;
    if (items.length === 0) {
      this.moveCut(cutTo);
      return null; // every row waits for a unit not yet acknowledged
    }
    if (readAll && firstDeferred === null && profiles.size < max) {
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
    const enqueuedThrough = Math.max(this.enqueued, cutTo);
    await this.deps.state.addUnit(this.flow.scope, this.flowId, unit, { enqueuedThrough });
    this.enqueuedWritten = enqueuedThrough;
    for (const it of items) this.taken.add(it.seq);
    this.moveCut(enqueuedThrough);
    this.partial = null;
    this.track(unit);
    return true;
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
    await this.deps.state.addUnit(this.flow.scope, this.flowId, unit, { job: { ...job, next } });
    job.afterProfileId = next;
    job.page += 1;
    this.track(unit);
    return true;
  }

  /** One flow run per flow and hour collects that hour's deliveries (AEP's streaming flow runs). */
  private async hourlyRun(now: number): Promise<string> {
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    const h = createHash("sha256").update(`${this.flow.scope.orgId}\u0000${this.flow.scope.sandboxName}\u0000${this.flowId}\u0000${hour}`).digest("hex");
    const runId = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
    if (!this.runsSeen.has(runId)) {
      await this.deps.state.ensureRun(this.flow.scope, this.flowId, runId, hour);
      this.runsSeen.add(runId);
    }
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

/** The Standard Webhooks message id: one per delivery unit, the same on every attempt and after restarts. */
export function webhookId(flowId: string, unitId: string): string {
  return `msg_${flowId}_${unitId}`;
}

function min(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}
