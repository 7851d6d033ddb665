/**
 * Backfill of continuous and edge definitions (issue #40): when one is created, enabled or its
 * expression, merge policy or consent rule changes, its memberships over the existing profiles are
 * computed at once and written as transitions with source `backfill` — only the net change, so
 * profiles that stay are not written and keep their qualification time.
 *
 * One run, per definition:
 * 1. The live engine has the new version first: the runner follows the definition catalog
 *    (streaming/definition-catalog.ts `follow`), which calls it after dropping its cached set,
 *    and waits until the evaluations that may have taken the previous set have committed
 *    (LiveGate.settled): one committing after step 3 read the stored statuses would stand.
 * 2. The fence F: the change feed's version, read before the evaluation.
 * 3. The definition runs as a batch job runs it (evaluateJob over the resident snapshot, refreshed
 *    through at least F; in the evaluation pool when there is one), against the stored statuses:
 *    the net change.
 * 4. The net change is written in chunks, two at a time (one decided here while the other is
 *    written on the store's thread), each while the live engine holds none of the chunk's
 *    profiles (LiveGate.holdIdle): a profile whose data changed after F is decided by the engine's
 *    own verdict on its current state instead of the snapshot's, and so is one of a windowed
 *    definition whose events left a window (or a UTC midnight passed) since the evaluation: the
 *    sweep may have exited it since (snapshot-event-times.ts). The chunk is written set-based
 *    (applyMembershipTargets: the store reads the stored statuses and writes the net change in one
 *    transaction, never from a `from` of ours), and the engine's cached states learn what was
 *    written; a windowed membership realized is scheduled for the sweep's re-check. So nothing the
 *    live stream wrote is overwritten, and nothing is written twice.
 * 5. Then the profiles that changed after F and were not in the net change get the same verdict
 *    (an event evaluated ahead of its append against the old catalog can land after F).
 * 6. Without a live verdict (an edge-only definition, or no engine in process) those profiles are
 *    decided by a second evaluation over the refreshed snapshot.
 *
 * On a hub whose streaming workers evaluate, step 1 is a message to every partition that each
 * owner must have applied (its catalog then holds the version: every membership it writes from
 * there on is this version's, so the statuses the evaluation reads cannot be moved by the previous
 * one), and steps 4–6 of a continuous definition are the workers'
 * (`partitioned`, cluster/partition-backfill.ts): the net change goes to each partition's owner in
 * band, on the partition's ordered stream, with the version and the fence F; the owner writes it
 * in the batch that moves the partition's position (so exactly once, a kill -9 included), a
 * profile changed after F on its own live verdict, then the partition's other profiles changed
 * after F. The runner waits until every partition's stored position has passed its last chunk.
 *
 * Backfills of one sandbox run one at a time, in order; a change to a definition whose backfill is
 * queued changes nothing (it evaluates the version current when it starts), one to a running
 * backfill stops it at its next chunk and queues it again. The state is stored (batch repository,
 * kind `backfill`, one per definition): a restart runs a queued or interrupted backfill again from
 * the start, which writes only what is still to change.
 */
import { parse } from "@segmentd/pql";
import type { Clock } from "../../platform/clock.js";
import { claimedElsewhere } from "../../platform/roles.js";
import type { TenantRef } from "../../platform/tenant.js";
import type { Logger } from "../../platform/logger.js";
import type { MembershipChange } from "../../profiles/store.js";
import { NO_MERGE_POLICY, type TenantScope } from "../../profiles/types.js";
import type { EvaluationLimits } from "../../services/evaluation-budget.js";
import { eventWindowsMs } from "../../services/pql.js";
import { scopeOf, type TenantContext } from "../../services/tenancy.js";
import { isPublished, type SegmentDefinition } from "../../stores/records.js";
import type { DefinitionRecord, MetadataStore } from "../../stores/types.js";
import type { SnapshotCache } from "../columnar/cache.js";
import { evaluateJob } from "../engine/evaluate-job.js";
import type { JobDefinition } from "../engine/evaluation-types.js";
import { evaluatedPolicy } from "../jobs/job-runner.js";
import type { BatchRepository, StoredResource } from "../store/types.js";
import { NetChange } from "./net-change.js";
import { SnapshotEventTimes } from "./snapshot-event-times.js";
import type { BackfillReason, BackfillStore, BackfillView, LiveGate, PartitionedBackfill, StoredBackfill, Verdict } from "./backfill-types.js";

const KIND = "backfill" as const;
/** Changes per write (and profiles held from the live engine at once). */
const DEFAULT_CHUNK = 2_000;
/** Chunks being decided or written at once (one decided here while the other is written on the store's thread). */
const CHUNKS_IN_FLIGHT = 2;
/** Engine verdicts (state loads) in flight at once, for the profiles the snapshot cannot decide. */
const VERDICTS_AT_ONCE = 8;
/** Minimum interval between progress writes of the stored state (ms). */
const PROGRESS_MS = 1_000;

export interface BackfillRunnerOptions {
  metadata: MetadataStore;
  profiles: BackfillStore;
  repo: BatchRepository;
  clock: Clock;
  snapshots: SnapshotCache;
  /** The sandbox's request context (the live gate keys its engine by it); undefined: not configured any more. */
  tenantOf: (scope: TenantScope) => TenantContext | undefined;
  /** The live streaming engine in process; absent: no live verdict (profiles changed after the fence are evaluated again). */
  live?: LiveGate;
  /** A hub whose streaming workers evaluate: they write a continuous definition's net change (steps 4–6). */
  partitioned?: PartitionedBackfill;
  /**
   * Told of the profiles each chunk changed (the edge projector copies their memberships to the
   * locations that hold them): for an edge definition, or one an edge definition reads with inSegment.
   */
  project?: (tenant: TenantContext, profileIds: readonly string[]) => Promise<unknown>;
  limits?: (scope: TenantScope) => EvaluationLimits | undefined;
  logger?: Pick<Logger, "info" | "error">;
  chunkSize?: number;
  /**
   * Several hubs: this hub's id, recorded on the backfills it queues and runs, so that recovery
   * (another hub starting, or the schedules holder's pass) leaves a live hub's backfills alone.
   */
  runnerId?: string;
  /** Told of every transition written and every run that ends (metrics). */
  onWritten?: (entered: number, exited: number) => void;
  onFinished?: (view: BackfillView) => void;
}

/** A definition is backfilled when something evaluates it live: streaming or edge, published. */
export function isLiveDefinition(d: SegmentDefinition): boolean {
  return isPublished(d) && ((d.evaluationInfo.continuous.enabled && d.classification.continuous) || (d.evaluationInfo.synchronous.enabled && d.classification.synchronous));
}

/** What evaluation depends on: an edit that changes none of it (a rename) needs no backfill. */
export function signatureOf(rec: DefinitionRecord): string {
  const d = rec.definition;
  return JSON.stringify([rec.canonicalText, d.mergePolicyId, d.dataGovernancePolicy.excludeOptOut, isLiveDefinition(d)]);
}

class Superseded extends Error {}

interface Item {
  tenant: TenantContext;
  definitionId: string;
}

function sandboxKey(scope: TenantScope): string {
  return `${scope.orgId}\u0000${scope.sandboxName}`;
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export class BackfillRunner {
  /** Per sandbox: the definition running and those queued behind it. */
  private readonly sandboxes = new Map<string, { running: Item | null; queue: Item[] }>();
  /** Running backfills to stop and queue again ("org\0sandbox\0id" → why they run again). */
  private readonly superseded = new Map<string, BackfillReason>();
  private readonly running = new Set<Promise<void>>();
  /** Definition changes being decided (definitionChanged), by "org\0sandbox\0id". */
  private readonly deciding = new Map<string, Promise<void>>();
  private idleWaiters: Array<() => void> = [];
  private stopped = false;
  /** The running backfills' views (metrics read progress from them). */
  readonly active = new Map<string, BackfillView>();

  constructor(private readonly o: BackfillRunnerOptions) {}

  /**
   * A definition changed (the catalog's follower, called as the change is published, before the
   * write is answered): queues a backfill when its live evaluation changed. The decision is
   * registered at once, so a GET that follows the write waits for it instead of finding nothing.
   */
  definitionChanged(tenant: TenantContext, definitionId: string, change: "created" | "updated" | "deleted"): Promise<void> {
    const k = `${sandboxKey(scopeOf(tenant))}\u0000${definitionId}`;
    // One decision at a time per definition, in the order of its changes.
    const p = (this.deciding.get(k) ?? Promise.resolve()).then(() => this.decide(tenant, definitionId, change));
    const tracked: Promise<void> = p.catch(() => undefined).finally(() => {
      if (this.deciding.get(k) === tracked) this.deciding.delete(k);
    });
    this.deciding.set(k, tracked);
    return p;
  }

  private async decide(tenant: TenantContext, definitionId: string, change: "created" | "updated" | "deleted"): Promise<void> {
    const scope = scopeOf(tenant);
    const rec = await this.o.metadata.definitions.get(scope, definitionId);
    const stored = await this.o.repo.get<StoredBackfill>(KIND, scope, definitionId);
    if (rec === undefined || !isLiveDefinition(rec.definition)) {
      // Deleted or no longer live: a queued backfill is dropped, a running one stops at its next chunk.
      const running = this.isRunning(scope, definitionId);
      if (running) this.superseded.set(`${sandboxKey(scope)}\u0000${definitionId}`, "updated");
      if (rec === undefined && stored !== null && !running) await this.o.repo.delete(KIND, scope, definitionId);
      else if (stored !== null && stored.status === "queued") await this.finish(stored, "failed", "the definition is no longer evaluated live");
      return;
    }
    const signature = signatureOf(rec);
    if (stored !== null && stored.status === "queued") return;
    if (stored !== null && this.isRunning(scope, definitionId)) {
      // The run stops at its next chunk and queues the newest version (run()).
      if (stored.doc.signature !== signature) this.superseded.set(`${sandboxKey(scope)}\u0000${definitionId}`, "updated");
      return;
    }
    if (stored !== null && stored.doc.doneSignature === signature) return;
    await this.enqueue(tenant, rec, change === "created" ? "created" : "updated");
  }

  /** POST …/backfill (or a change of the merge policy it uses): runs one now, queued behind the sandbox's others. */
  async request(tenant: TenantContext, rec: DefinitionRecord, reason: BackfillReason = "requested"): Promise<BackfillView> {
    const scope = scopeOf(tenant);
    const stored = await this.o.repo.get<StoredBackfill>(KIND, scope, rec.definition.id);
    if (stored !== null && stored.status === "queued") return stored.doc.view;
    if (stored !== null && this.isRunning(scope, rec.definition.id)) {
      this.superseded.set(`${sandboxKey(scope)}\u0000${rec.definition.id}`, reason);
      return stored.doc.view;
    }
    return this.enqueue(tenant, rec, reason);
  }

  async get(scope: TenantScope, definitionId: string): Promise<BackfillView | null> {
    await this.deciding.get(`${sandboxKey(scope)}\u0000${definitionId}`);
    return (await this.o.repo.get<StoredBackfill>(KIND, scope, definitionId))?.doc.view ?? null;
  }

  /**
   * Start-up: queued and interrupted backfills run again, in the order they were queued.
   * `liveRunners` (several hubs): those another live hub queued or runs are left to it (and so is
   * one queued or started moments ago: its hub may have joined after the heartbeats were read).
   */
  async recover(liveRunners?: ReadonlySet<string>): Promise<void> {
    for (const r of await this.o.repo.listAllByStatus<StoredBackfill>(KIND, ["running", "queued"])) {
      const tenant = this.o.tenantOf(r.scope);
      if (tenant === undefined) continue;
      if (liveRunners !== undefined) {
        if (this.isHere(r.scope, r.id)) continue;
        if (claimedElsewhere({ by: r.doc.runBy, self: this.o.runnerId, live: liveRunners, at: Date.parse(r.doc.view.startedAt ?? r.doc.view.queuedAt), now: this.o.clock.now() })) continue;
      }
      const from = r.status;
      if (r.status === "running") {
        r.status = "queued";
        r.doc.view = { ...r.doc.view, state: "queued", phase: "queued", reason: "restarted" };
      }
      if (this.o.runnerId !== undefined) r.doc.runBy = this.o.runnerId;
      // Compare-and-set: of two hubs recovering it at once, one takes it.
      if (from !== r.status || liveRunners !== undefined) {
        if (!(await this.o.repo.updateIf(KIND, r, [from]))) continue;
      }
      this.push({ tenant, definitionId: r.id });
    }
  }

  /** Queued and running backfills of every sandbox. */
  counts(): { queued: number; running: number } {
    let queued = 0;
    let running = 0;
    for (const s of this.sandboxes.values()) {
      queued += s.queue.length;
      if (s.running !== null) running++;
    }
    return { queued, running };
  }

  /** Resolves when nothing is queued or running (tests, shutdown). */
  idle(): Promise<void> {
    const { queued, running } = this.counts();
    if (queued === 0 && running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Takes nothing more from the queues; the running backfills stop at their next chunk (a restart runs them again). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const s of this.sandboxes.values()) if (s.running !== null) this.superseded.set(`${sandboxKey(scopeOf(s.running.tenant))}\u0000${s.running.definitionId}`, "restarted");
    await Promise.allSettled([...this.running]);
  }

  /** Queued or running in this process. */
  private isHere(scope: TenantScope, id: string): boolean {
    const s = this.sandboxes.get(sandboxKey(scope));
    return s !== undefined && ((s.running !== null && s.running.definitionId === id) || s.queue.some((q) => q.definitionId === id));
  }

  private isRunning(scope: TenantScope, id: string): boolean {
    const r = this.sandboxes.get(sandboxKey(scope))?.running;
    return r !== null && r !== undefined && r.definitionId === id;
  }

  private async enqueue(tenant: TenantContext, rec: DefinitionRecord, reason: BackfillReason): Promise<BackfillView> {
    const scope = scopeOf(tenant);
    const id = rec.definition.id;
    const now = this.o.clock.now();
    const previous = await this.o.repo.get<StoredBackfill>(KIND, scope, id);
    const view: BackfillView = {
      definitionId: id, state: "queued", phase: "queued", reason, definitionVersion: rec.definition.updateTime, fence: null,
      total: 0, processed: 0, entered: 0, exited: 0, fenced: 0, queuedAt: iso(now)!, startedAt: null, evaluatedAt: null, finishedAt: null, attempts: 0, error: null,
    };
    const doc: StoredBackfill = { view, signature: signatureOf(rec), doneSignature: previous?.doc.doneSignature ?? null, ...(this.o.runnerId === undefined ? {} : { runBy: this.o.runnerId }) };
    const r: StoredResource<StoredBackfill> = { scope, id, status: "queued", creationTime: now, doc };
    if (previous === null) await this.o.repo.insert(KIND, r);
    else await this.o.repo.update(KIND, r);
    this.push({ tenant, definitionId: id });
    return view;
  }

  private push(item: Item): void {
    const k = sandboxKey(scopeOf(item.tenant));
    let s = this.sandboxes.get(k);
    if (s === undefined) this.sandboxes.set(k, (s = { running: null, queue: [] }));
    if (!s.queue.some((q) => q.definitionId === item.definitionId)) s.queue.push(item);
    this.pump(k);
  }

  private pump(k: string): void {
    const s = this.sandboxes.get(k);
    if (s === undefined || s.running !== null || this.stopped) return;
    const next = s.queue.shift();
    if (next === undefined) {
      this.sandboxes.delete(k);
      if (this.sandboxes.size === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
      return;
    }
    s.running = next;
    const p = this.run(next)
      .catch((err: unknown) => this.o.logger?.error({ err, definitionId: next.definitionId }, "backfill runner error"))
      .finally(() => {
        this.running.delete(p);
        s.running = null;
        this.pump(k);
      });
    this.running.add(p);
  }

  private async finish(r: StoredResource<StoredBackfill>, state: "succeeded" | "failed", error: string | null): Promise<void> {
    const v = r.doc.view;
    r.status = state;
    r.doc.view = { ...v, state, phase: "done", finishedAt: iso(this.o.clock.now()), error };
    if (state === "succeeded") r.doc.doneSignature = r.doc.signature;
    await this.o.repo.update(KIND, r);
    this.o.onFinished?.(r.doc.view);
  }

  private async run(item: Item): Promise<void> {
    const scope = scopeOf(item.tenant);
    const key = `${sandboxKey(scope)}\u0000${item.definitionId}`;
    const r = await this.o.repo.get<StoredBackfill>(KIND, scope, item.definitionId);
    if (r === null || r.status !== "queued") return;
    const rec = await this.o.metadata.definitions.get(scope, item.definitionId);
    if (rec === undefined || !isLiveDefinition(rec.definition)) {
      await this.finish(r, "failed", "the definition was deleted or is no longer evaluated live");
      return;
    }
    this.superseded.delete(key);
    const view = r.doc.view;
    Object.assign(view, { state: "running", phase: "evaluating", startedAt: iso(this.o.clock.now()), definitionVersion: rec.definition.updateTime, attempts: view.attempts + 1, total: 0, processed: 0, entered: 0, exited: 0, fenced: 0, fence: null, evaluatedAt: null, finishedAt: null, error: null });
    r.status = "running";
    r.doc.signature = signatureOf(rec);
    if (this.o.runnerId !== undefined) r.doc.runBy = this.o.runnerId;
    // Compare-and-set: a backfill another hub took meanwhile is its own.
    if (!(await this.o.repo.updateIf(KIND, r, ["queued"]))) return;
    this.active.set(key, view);
    const t0 = performance.now();
    try {
      await this.backfill(item.tenant, rec, r, () => this.superseded.has(key));
      // A change that came after the last chunk: this version's memberships are written, the newer one runs next.
      if (this.superseded.has(key)) throw new Superseded();
      await this.finish(r, "succeeded", null);
      // The definitions reading this one with inSegment (evaluated live) follow it: no engine cascades these writes.
      if (view.entered + view.exited > 0) await this.queueDependents(item.tenant, item.definitionId);
      this.o.logger?.info({ definitionId: item.definitionId, entered: view.entered, exited: view.exited, fenced: view.fenced, ms: Math.round(performance.now() - t0) }, "backfill succeeded");
    } catch (err) {
      // A change that came during the evaluation stops it as a cancel (JobCancelledError).
      if (err instanceof Superseded || this.superseded.has(key)) {
        // A newer version runs next (queued by its change), or the definition is gone; at shutdown it stays running (a restart resumes it).
        if (this.stopped) return;
        const latest = await this.o.metadata.definitions.get(scope, item.definitionId);
        if (latest !== undefined && isLiveDefinition(latest.definition)) {
          await this.enqueue(item.tenant, latest, this.superseded.get(key) ?? "updated");
        } else await this.finish(r, "failed", "the definition was deleted or is no longer evaluated live");
        return;
      }
      await this.finish(r, "failed", err instanceof Error ? err.message : String(err));
      this.o.logger?.error({ err, definitionId: item.definitionId }, "backfill failed");
    } finally {
      this.active.delete(key);
      this.superseded.delete(key);
    }
  }

  private async backfill(tenant: TenantContext, rec: DefinitionRecord, r: StoredResource<StoredBackfill>, isSuperseded: () => boolean): Promise<void> {
    const scope = scopeOf(tenant);
    const { profiles } = this.o;
    const view = r.doc.view;
    const definitionId = rec.definition.id;
    const check = () => {
      if (isSuperseded()) throw new Superseded();
    };
    let lastSave = 0;
    const save = async (force = false) => {
      const t = this.o.clock.now();
      if (!force && t - lastSave < PROGRESS_MS) return;
      lastSave = t;
      await this.o.repo.updateIf(KIND, r, ["running"]);
    };

    // 1. With streaming workers: every partition's owner evaluates this version before the fence is read.
    const d = rec.definition;
    const partitioned = this.o.partitioned !== undefined && d.evaluationInfo.continuous.enabled && d.classification.continuous ? this.o.partitioned : undefined;
    await partitioned?.switchTo({ tenant, definitionId, version: d.updateTime, isCancelled: isSuperseded });
    check();

    // In process: the engine's evaluations that may hold the previous version commit first (LiveGate.settled).
    if (partitioned === undefined) await this.o.live?.settled(tenant);
    check();

    // 2. The fence, read before the snapshot is refreshed: the snapshot holds everything through it.
    await profiles.changesReady?.();
    const fence = (await profiles.changesSince(scope, null)).version;
    view.fence = fence;
    await save(true);

    // 3. The net change, as a batch job computes it.
    const def = await this.jobDefinition(rec);
    const now = this.o.clock.now();
    const evaluate = (at: number) => evaluateJob(profiles, scope, [def], { now: at, snapshots: this.o.snapshots, isCancelled: isSuperseded, ...limitsOf(this.o.limits?.(scope)) });
    const outcome = await evaluate(now);
    check();
    const net = new NetChange(outcome.memberships);
    view.total = net.size;
    view.phase = "writing";
    view.evaluatedAt = iso(this.o.clock.now());
    await save(true);

    // 4–6 on a hub with streaming workers: theirs, in band on each partition's stream.
    if (partitioned !== undefined) {
      const desired = net.toMap();
      await this.ensureVersion(scope, rec);
      const res = await partitioned.write({
        tenant, definitionId, version: d.updateTime, fence, desired, isCancelled: isSuperseded,
        onProgress: async (processed) => {
          view.processed = processed;
          await save();
        },
      });
      check();
      Object.assign(view, { entered: res.entered, exited: res.exited, fenced: res.fenced, processed: desired.size });
      this.o.onWritten?.(res.entered, res.exited);
      const project = (await this.readOnEdge(scope, rec)) ? this.o.project : undefined;
      // The edge locations holding these profiles get their memberships as the workers wrote them.
      if (project !== undefined) {
        const ids = [...desired.keys(), ...((await profiles.changesSince(scope, fence)).profileIds ?? [])];
        for (let i = 0; i < ids.length; i += DEFAULT_CHUNK) await project(tenant, ids.slice(i, i + DEFAULT_CHUNK));
      }
      return;
    }

    // 4. Written under the live engine's fence.
    /** Profiles the live engine gave no verdict for: decided by a second evaluation (6). */
    const late = new Set<string>();
    const changedAfterFence = async (): Promise<ReadonlySet<string>> => {
      const c = await profiles.changesSince(scope, fence);
      // The feed no longer reaches back to the fence (its history was trimmed): every profile is treated as changed.
      return c.profileIds ?? { has: () => true } as unknown as ReadonlySet<string>;
    };
    // A windowed definition (its verdict depends on now): the snapshot's event times say until when its verdicts hold.
    const windows = eventWindowsMs(def.query);
    const times = windows.length === 0 ? null : new SnapshotEventTimes(await this.o.snapshots.get(profiles, scope, def.policy, { events: true }));
    const decide = async (held: readonly string[], verdict: Verdict, force: boolean): Promise<MembershipChange[]> => {
      const changed = force ? null : await changedAfterFence();
      // The engine's now while it holds these profiles: no sweep of theirs runs until the write is done.
      const heldAt = this.o.clock.now();
      const realized: number[] = [];
      const exited: number[] = [];
      const again: string[] = [];
      /** Windowed: when the sweep is to re-check each profile realized from the snapshot. */
      const due = new Map<number, number>();
      for (const id of held) {
        const k = changed === null || changed.has(id) ? -1 : net.indexOf(id);
        if (k < 0) {
          again.push(id);
          continue;
        }
        const pid = net.ids[k]!;
        const enters = net.enters[k] === 1;
        if (times !== null) {
          // A windowed verdict is stale once one of the profile's events left a window (or a UTC midnight
          // passed) since the evaluation: the sweep may have exited it since. The engine decides those on now.
          const next = times.nextChange(pid, now, windows);
          if (next <= heldAt) {
            again.push(id);
            continue;
          }
          // Nothing changes in (now, heldAt]: the first change after heldAt is this one.
          if (enters) due.set(pid, next);
        }
        (enters ? realized : exited).push(pid);
      }
      if (again.length > 0) view.fenced += again.length;
      const changes: MembershipChange[] = [];
      // A few at a time: each loads the profile's state and memberships from the store.
      for (let i = 0; i < again.length; i += VERDICTS_AT_ONCE) {
        await Promise.all(again.slice(i, i + VERDICTS_AT_ONCE).map(async (pid) => {
          const qualifies = await verdict(pid, definitionId);
          if (qualifies === null) {
            late.add(pid);
            return;
          }
          const stored = (await profiles.getMemberships(scope, pid)).find((m) => m.definitionId === definitionId)?.status ?? null;
          if (qualifies && stored !== "realized") changes.push({ profileId: pid, definitionId, status: "realized", source: "backfill", at: this.o.clock.now() });
          else if (!qualifies && stored === "realized") changes.push({ profileId: pid, definitionId, status: "exited", source: "backfill", at: this.o.clock.now() });
        }));
      }
      // What was written, as the engine's cached states learn it.
      const written: MembershipChange[] = [];
      /** Windowed: the realized memberships written, for the sweep's re-check. */
      const recheck: Array<{ profileId: string; definitionId: string; due: number }> = [];
      if (realized.length + exited.length > 0) {
        // Set-based: the store reads the stored statuses and writes only the net change, in one transaction.
        const set = await profiles.applyMembershipTargets(scope, { definitionId, realized: Float64Array.from(realized), exited: Float64Array.from(exited) }, { source: "backfill", at: now });
        for (const list of [set.entered, set.reentered]) {
          for (const pid of list) {
            const profileId = String(pid);
            written.push({ profileId, definitionId, status: "realized", source: "backfill", at: now });
            if (times !== null) recheck.push({ profileId, definitionId, due: due.get(pid) ?? 0 });
          }
        }
        for (const pid of set.exited) written.push({ profileId: String(pid), definitionId, status: "exited", source: "backfill", at: now });
      }
      // No `from`: the store reads each stored status, so a change someone else made meanwhile is never recorded twice.
      if (changes.length > 0) {
        for (const t of await profiles.applyMembershipChanges(scope, changes)) {
          written.push({ profileId: t.profileId, definitionId, status: t.to, source: "backfill", at: Date.parse(t.at) });
          if (times !== null && t.to === "realized") recheck.push({ profileId: t.profileId, definitionId, due: 0 });
        }
      }
      let entered = 0;
      for (const c of written) if (c.status === "realized") entered++;
      view.entered += entered;
      view.exited += written.length - entered;
      this.o.onWritten?.(entered, written.length - entered);
      // A windowed membership's exit is the sweep's: it re-checks these when their next event leaves a window (the engine decided on its own: at its next tick).
      if (recheck.length > 0) this.o.live?.recheck?.(tenant, recheck);
      return written;
    };
    const project = (await this.readOnEdge(scope, rec)) ? this.o.project : undefined;
    const gate: LiveGate = this.o.live ?? { settled: async () => {}, holdIdle: async (_t, ids, write) => { await write(ids, async () => null); return { busy: [] }; } };
    const chunk = this.o.chunkSize ?? DEFAULT_CHUNK;
    /** Wall time of the last progress write (performance.now()). */
    let progressAt = Number.NEGATIVE_INFINITY;
    const writeAll = async (pids: string[], force: boolean) => {
      let pending = pids;
      while (pending.length > 0) {
        const busy: string[] = [];
        const writeChunk = async (part: string[]) => {
          let written: readonly MembershipChange[] = [];
          const res = await gate.holdIdle(tenant, part, async (held, verdict) => (written = await decide(held, verdict, force)));
          if (written.length > 0) await project?.(tenant, written.map((c) => c.profileId));
          for (const b of res.busy) busy.push(b);
          view.processed += part.length - res.busy.length;
          // What a restart finds says how far the killed run had got: after the first chunk, then at
          // most every PROGRESS_MS of wall time (one write per chunk cost about as much as the chunk's own; bench/backfill.ts).
          if (performance.now() - progressAt >= PROGRESS_MS) {
            progressAt = performance.now();
            await save(true);
          }
        };
        // Chunks hold disjoint profiles: while one is written on the store's thread, the next is
        // decided here. A failure (or a change superseding the run) starts no further chunk; the
        // ones in flight settle before it is thrown, so none rejects unobserved.
        let failure: { error: unknown } | null = null;
        const inFlight = new Set<Promise<void>>();
        for (let i = 0; i < pending.length && failure === null; i += chunk) {
          try {
            check();
            await this.ensureVersion(scopeOf(tenant), rec);
          } catch (error) {
            failure ??= { error };
            break;
          }
          const p: Promise<void> = writeChunk(pending.slice(i, i + chunk))
            .catch((error: unknown) => void (failure ??= { error }))
            .finally(() => inFlight.delete(p));
          inFlight.add(p);
          if (inFlight.size >= CHUNKS_IN_FLIGHT) await Promise.race(inFlight);
        }
        await Promise.all(inFlight);
        if (failure !== null) throw failure.error;
        pending = busy;
        // Profiles the engine is evaluating right now: tried again once it is done with them.
        if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    await writeAll(net.names, false);

    // 5. Profiles changed after the fence that were not in the net change.
    view.phase = "fencing";
    const changed = await profiles.changesSince(scope, fence);
    // Every profile of the net change was decided by now (busy ones were tried again until held).
    const rest = changed.profileIds === null ? [] : [...changed.profileIds].filter((p) => net.indexOf(p) < 0);
    view.total += rest.length;
    await save(true);
    await writeAll(rest, true);

    // 6. No live verdict: the second evaluation, over the snapshot refreshed through the newest changes.
    if (late.size > 0) {
      check();
      const second = await evaluate(this.o.clock.now());
      const changes: MembershipChange[] = [];
      const at = this.o.clock.now();
      for (const set of second.memberships) {
        for (const pid of set.entered) if (late.has(String(pid))) changes.push({ profileId: String(pid), definitionId, status: "realized", source: "backfill", at });
        for (const pid of set.reentered) if (late.has(String(pid))) changes.push({ profileId: String(pid), definitionId, status: "realized", source: "backfill", at });
        for (const pid of set.exited) if (late.has(String(pid))) changes.push({ profileId: String(pid), definitionId, status: "exited", source: "backfill", at });
      }
      for (let i = 0; i < changes.length; i += chunk) {
        const part = changes.slice(i, i + chunk);
        const transitions = await profiles.applyMembershipChanges(scope, part);
        await project?.(tenant, part.map((c) => c.profileId));
        const entered = transitions.filter((t) => t.to === "realized").length;
        view.entered += entered;
        view.exited += transitions.length - entered;
        this.o.onWritten?.(entered, transitions.length - entered);
      }
    }
  }

  /** Whether edge evaluation reads this definition's memberships: it is an edge one, or an edge one names it with inSegment. */
  private async readOnEdge(scope: TenantRef, rec: DefinitionRecord): Promise<boolean> {
    if (this.o.project === undefined) return false;
    if (rec.definition.evaluationInfo.synchronous.enabled) return true;
    for (let offset = 0; ; offset += 1000) {
      const page = await this.o.metadata.definitions.list(scope, { filters: { synchronous: true }, sort: [{ field: "id", direction: "asc" }], offset, limit: 1000 });
      if (page.items.some((r) => r.references.includes(rec.definition.id))) return true;
      if (page.items.length < 1000) return false;
    }
  }

  private async queueDependents(tenant: TenantContext, definitionId: string): Promise<void> {
    const scope = scopeOf(tenant);
    for (let offset = 0; ; offset += 1000) {
      const page = await this.o.metadata.definitions.list(scope, { filters: {}, sort: [{ field: "id", direction: "asc" }], offset, limit: 1000 });
      for (const rec of page.items) {
        if (!rec.references.includes(definitionId) || !isLiveDefinition(rec.definition)) continue;
        const stored = await this.o.repo.get<StoredBackfill>(KIND, scope, rec.definition.id);
        if (stored?.status === "queued") continue;
        if (this.isRunning(scope, rec.definition.id)) this.superseded.set(`${sandboxKey(scope)}\u0000${rec.definition.id}`, "referenced");
        else await this.enqueue(tenant, rec, "referenced");
      }
      if (page.items.length < 1000) return;
    }
  }

  /** The definition has not changed since the run started (else a newer backfill runs instead). */
  private async ensureVersion(scope: TenantRef, rec: DefinitionRecord): Promise<void> {
    const now = await this.o.metadata.definitions.get(scope, rec.definition.id);
    if (now === undefined || signatureOf(now) !== signatureOf(rec)) throw new Superseded();
  }

  /** The definition as a job evaluates it (job-runner.ts definitionsOf). */
  private async jobDefinition(rec: DefinitionRecord): Promise<JobDefinition> {
    const d = rec.definition;
    const p = (await this.o.metadata.mergePolicies.get({ orgId: d.imsOrgId, sandboxId: d.sandbox.sandboxId }, d.mergePolicyId))?.policy;
    const policy = p === undefined ? { ...NO_MERGE_POLICY, id: d.mergePolicyId || "none" } : { id: p.id, ...evaluatedPolicy(p) };
    return { id: d.id, query: parse(rec.canonicalText), references: rec.references, excludeOptOut: d.dataGovernancePolicy.excludeOptOut, policy };
  }
}

function limitsOf(limits: EvaluationLimits | undefined): { limits?: EvaluationLimits } {
  return limits === undefined ? {} : { limits };
}
