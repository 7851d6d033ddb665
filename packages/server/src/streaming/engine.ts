/**
 * Streaming (continuous) evaluation — architecture-sketch data flow 2.
 *
 * After the ingestion path has stored records durably it hands them here
 * (`onRecordsStored`). For each record the reverse index picks the continuous
 * definitions the record can affect (by event type, or by the profile fields a
 * profile record sets); only those are evaluated, against the profile's
 * in-memory state; status changes are written to the hub at once as
 * memberships + transitions with source `streaming` (group-committed).
 *
 * Exits without a new event come from the sweep: every realized membership of
 * a windowed definition is scheduled for a re-check when one of the profile's
 * events leaves the window (or at UTC midnight for calendar windows). `start()`
 * runs the sweep every `sweepIntervalMs` (default 30 s, so an exit is written
 * within 30 s of the window closing); tests call `sweep()` after moving a
 * ManualClock.
 *
 * The `from` rule. The profile store trusts a change's `from` (the previous
 * status, null = no membership) and then skips its read; a wrong `from` would
 * be recorded as a wrong transition. So the engine sets `from` — the status its
 * state holds — only where that state is authoritative:
 * - the definition is streaming-only (continuous enabled, batch and edge
 *   disabled), so no other evaluator writes its memberships; for every other
 *   definition `from` is left out and the store reads the stored status, so a
 *   membership changed behind the engine's back cannot give a wrong transition;
 * - the state was loaded from the hub and has since changed only through this
 *   engine's committed writes (a write that fails, even one that may have been
 *   committed, drops the profile's states: they are reloaded from the hub);
 *   lifecycle changes come through `onProfilesChanged`, which reloads them;
 * - this is the only engine evaluating the sandbox (`passFrom: false` otherwise);
 * - the change comes from a record or `onProfilesChanged`, not from the sweep:
 *   the sweep's exits are few, and a vanished profile's state is stale between
 *   the lifecycle job's exits and `onProfilesChanged`.
 * Not covered: a batch job that names a streaming-only definition explicitly
 * writes its memberships without telling the engine.
 */
import type { Clock } from "../platform/clock.js";
import type { AheadDecision } from "../profiles/ingest.js";
import type { IdentityGraph, MembershipChange, MembershipReads, MembershipWrites, ProfileReads } from "../profiles/store.js";
import type { Identity, JsonObject, MembershipTransition, TenantScope, ValidRecord } from "../profiles/types.js";
import { tenantKey, type TenantRef } from "../platform/tenant.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { DefinitionCatalog, LiveDefinition, LiveSet, PredicateContext } from "./definition-catalog.js";
import { KeyedQueue } from "./keyed-queue.js";
import { MembershipWriter } from "./membership-writer.js";
import {
  addEvent,
  loadProfileState,
  LruMap,
  setMembership,
  syncMembershipField,
  trimEvents,
  type MembershipEntry,
  type ProfileState,
} from "./profile-state.js";
import { candidatesOf, eventsOf, NO_EVENTS, policyGroups, policyKey, retentionOf } from "./live-groups.js";
import { nextWindowChangeOf, SweepSchedule } from "./sweep-schedule.js";


/** A record the ingestion path has durably stored (a ValidRecord fits). */
export interface StoredRecord {
  kind: "profile" | "experienceevent";
  primary: Identity;
  body: JsonObject;
  /** Event time, epoch ms (events); null = ingestion time. */
  timestamp: number | null;
  eventId: string | null;
  /** The body as JSON text, when the caller has it (a ValidRecord does): the state keeps the text. */
  json?: string;
}

/**
 * What the rest of the service hands streaming evaluation: the engine below, or on a hub whose
 * workers evaluate (cluster/partition-feed.ts) the feed that publishes the changes to them.
 */
export interface StreamingFeed {
  onRecordsStored(tenant: TenantContext, records: readonly StoredRecord[], pids?: Float64Array, ahead?: AheadDecision): Promise<MembershipTransition[]>;
  decideAhead(tenant: TenantContext, records: readonly ValidRecord[]): Promise<AheadDecision | null>;
  onProfilesChanged(tenant: TenantContext, profileIds: readonly string[]): Promise<MembershipTransition[]>;
  idle(): Promise<void>;
  /** Memberships awaiting a sweep re-check, profile states held (0 where nothing is held). */
  readonly scheduled: number;
  readonly cachedStates: number;
  /** In process only (StreamingEngine.settled): the evaluations of a sandbox queued or running now, finished. */
  settled?(tenant: TenantContext): Promise<void>;
  /** In process only (StreamingEngine.holdIdle): another writer's changes fenced against the engine. */
  holdIdle?(tenant: TenantContext, profileIds: readonly string[], write: HeldWrite): Promise<{ busy: string[] }>;
  /** In process only (StreamingEngine.recheck): realized memberships another writer wrote, for the sweep to re-check. */
  recheck?(tenant: TenantContext, memberships: ReadonlyArray<{ profileId: string; definitionId: string; due?: number }>): void;
}

/**
 * What a writer other than the engine does while it holds profiles' queue slots (holdIdle): it
 * may ask the engine's own verdict of a continuous definition for a held profile (null: the
 * definition is not live or the profile is gone) and answers the changes it wrote.
 */
export type HeldWrite = (held: readonly string[], verdict: (profileId: string, definitionId: string) => Promise<boolean | null>) => Promise<readonly MembershipChange[]>;

/** Where the engine's membership changes are written; resolves with the transitions written. */
export interface MembershipSink {
  write(scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]>;
  idle(): Promise<void>;
}

/** What streaming evaluation reads and writes of the hub's profile store. */
export type StreamingHub = IdentityGraph & ProfileReads & MembershipReads & MembershipWrites;

export interface StreamingEngineOptions {
  catalog: DefinitionCatalog;
  hub: StreamingHub;
  clock: Clock;
  /** Profiles kept in memory (default 200,000). */
  maxCachedProfiles?: number;
  sweepIntervalMs?: number;
  /**
   * Pass the state's previous status as `from` (default true; see "The `from`
   * rule"). Set false when another process may also evaluate this sandbox's
   * continuous definitions against the same hub (its writes would make this
   * engine's states stale): the store then reads every previous status.
   */
  passFrom?: boolean;
  /** Membership writes committing at once (membership-writer.ts; default 4, 1 = one at a time). */
  maxWritesInFlight?: number;
  /**
   * Where changes go instead of the hub's group commit: a streaming worker collects them for the
   * fenced write of its partition's batch (cluster/partition-worker.ts).
   */
  sink?: MembershipSink;
  /**
   * Load a profile's events only as the store held them at this mark (eventsStoredThrough): a
   * worker reads its partition behind the hub, whose store already holds later events; each
   * change it reads carries the hub's mark from when it was published.
   */
  storedThrough?: () => number | undefined;
  onError?: (err: unknown) => void;
}

function eventTypeOf(body: JsonObject): string | null {
  const t = body["eventType"];
  return typeof t === "string" ? t : null;
}

export class StreamingEngine implements StreamingFeed {
  private readonly states: LruMap<ProfileState>;
  /** The profile id each record's primary identity was last stored under (decideAhead's guess; the store checks it). */
  private readonly pids: LruMap<string>;
  private readonly queue = new KeyedQueue();
  private readonly writer: MembershipSink;
  private readonly schedule = new SweepSchedule();
  private readonly tenants = new Map<string, { tenant: TenantContext; scope: TenantRef }>();
  /** One context object reused for every predicate call (predicates are synchronous and keep nothing). */
  private readonly ctx: PredicateContext = { profile: {}, events: NO_EVENTS, now: 0 };
  private readonly passFrom: boolean;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: StreamingEngineOptions) {
    this.passFrom = opts.passFrom ?? true;
    this.states = new LruMap(opts.maxCachedProfiles ?? 200_000);
    this.pids = new LruMap(opts.maxCachedProfiles ?? 200_000);
    this.writer = opts.sink ?? new MembershipWriter(opts.hub, opts.maxWritesInFlight);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.sweep().catch((err: unknown) => this.opts.onError?.(err));
    }, this.opts.sweepIntervalMs ?? 30_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.idle();
  }

  /** Resolves when all queued evaluations and writes are done. */
  async idle(): Promise<void> {
    await this.queue.idle();
    await this.writer.idle();
  }

  /** Memberships awaiting a sweep re-check (for tests and metrics). */
  get scheduled(): number {
    return this.schedule.size;
  }

  /** Profile states held in memory (for tests and metrics). */
  get cachedStates(): number {
    return this.states.size;
  }

  /**
   * Evaluate the continuous definitions these stored records can affect.
   * Resolves with the transitions written (already durable).
   */
  async onRecordsStored(tenant: TenantContext, records: readonly StoredRecord[], pids?: Float64Array, ahead?: AheadDecision): Promise<MembershipTransition[]> {
    // Records evaluated ahead of their append (decideAhead): their transitions were written with
    // them; the others (and all, if the store did not apply the changes) are evaluated now.
    let decided: MembershipTransition[] = NO_TRANSITIONS;
    let covered: Uint8Array | null = null;
    if (ahead instanceof Ahead) {
      await Promise.allSettled(ahead.slots);
      const outcome = await ahead.outcome;
      if ("transitions" in outcome && outcome.transitions !== null) {
        decided = outcome.transitions;
        covered = ahead.covered;
      }
    }
    const set = await this.opts.catalog.get(tenant, "continuous");
    if (set.definitions.length === 0 || records.length === 0) return decided;
    const tk = this.remember(tenant);
    const scope = this.tenants.get(tk)!.scope;
    // The profile of each record as the append stored it (AppendResult.recordPids); else one read
    // for the request's records (on the worker store one message, queued behind other requests'
    // writes: the append's own answer saves that wait).
    const known = pids !== undefined && pids.length === records.length;
    const profileIds: ReadonlyArray<string | null> = known
      ? Array.from(pids, String)
      : await this.opts.hub.findProfileIds(scope, records.map((r) => r.primary));
    if (known) for (let i = 0; i < records.length; i++) this.pids.set(identityKeyOf(tk, records[i]!.primary), profileIds[i]!);
    const results = await Promise.all(
      records.map((record, i) => {
        const profileId = profileIds[i] ?? null;
        if (profileId === null || (covered !== null && covered[i] === 1)) return NO_TRANSITIONS;
        // The set as it is when the slot is ours: one taken before may predate a definition's change
        // whose backfill held this profile meanwhile, and would undo what the backfill wrote.
        return this.queue.run(`${tk}\u0000${profileId}`, async () => this.processRecord(tk, await this.opts.catalog.get(tenant, "continuous"), profileId, record));
      }),
    );
    return decided.length === 0 ? flatten(results) : flatten([decided, ...results]);
  }

  /**
   * Evaluates events ahead of their append, so that the store writes them and their transitions
   * in one transaction (ProfileStore.appendDecided): one commit on the event's way instead of
   * two. Only for what is sure to be evaluated as after the append: single-identity events (such
   * an append cannot create or merge graphs) of profiles whose states are cached, under their
   * last known profile id, when no definition reads another (no inSegment cascade). The store
   * applies the changes only if every such event is stored under that profile; if not, or if
   * the write fails, the profiles' states (which took the events and the changes) are dropped,
   * and onRecordsStored evaluates the stored records as usual. Each evaluated profile's queue
   * slot is held until the append settles, so its next records wait for this one.
   * Null when nothing can be decided ahead.
   */
  async decideAhead(tenant: TenantContext, records: readonly ValidRecord[]): Promise<AheadDecision | null> {
    if (records.length === 0) return null;
    const setNow = this.opts.catalog.get(tenant, "continuous");
    const set = await setNow;
    if (set.definitions.length === 0 || set.index.hasDependents) return null;
    for (const r of records) if (r.kind !== "experienceevent" || r.identities.length !== 1) return null;
    const tk = this.remember(tenant);
    const groups = policyGroups(set);
    const byProfile = new Map<string, number[]>();
    for (let i = 0; i < records.length; i++) {
      const pid = this.pids.get(identityKeyOf(tk, records[i]!.primary));
      // The store checks the guess by number (both stores' ids are integers).
      if (pid === undefined || !Number.isSafeInteger(Number(pid))) continue;
      if (!groups.every((g) => this.states.get(this.stateKey(tk, g[0]!, pid)) !== undefined)) continue;
      const list = byProfile.get(pid);
      if (list) list.push(i);
      else byProfile.set(pid, [i]);
    }
    if (byProfile.size === 0) return null;
    const ahead = new Ahead(records.length);
    const evaluated: Array<Promise<MembershipChange[] | null>> = [];
    for (const [pid, idx] of byProfile) {
      let took!: (changes: MembershipChange[] | null) => void;
      evaluated.push(new Promise((resolve) => (took = resolve)));
      ahead.slots.push(this.queue.run(`${tk}\u0000${pid}`, async () => {
        let changes: MembershipChange[] | null = null;
        try {
          // The catalog changed while the slot waited (a backfill held the profile): the records are evaluated after the append, on the new set.
          if (this.opts.catalog.get(tenant, "continuous") === setNow) changes = this.evaluateAhead(tk, set, pid, records, idx);
        } catch (err) {
          // The states may hold part of it: reloaded next time; the records are evaluated after the append.
          this.forget(tk, set, pid);
          this.opts.onError?.(err);
        } finally {
          took(changes);
        }
        if (changes === null) return;
        // Not written: the states hold events and memberships the hub does not (as it stands).
        const outcome = await ahead.outcome;
        if ("error" in outcome || outcome.transitions === null) this.forget(tk, set, pid);
      }));
    }
    const lists = await Promise.all(evaluated);
    const changes: MembershipChange[] = [];
    let i = 0;
    for (const [pid, idx] of byProfile) {
      const list = lists[i++]!;
      if (list === null) continue;
      for (const k of idx) {
        ahead.decided.expect[k] = Number(pid);
        ahead.covered[k] = 1;
      }
      for (const c of list) changes.push(c);
    }
    ahead.decided.changes = changes;
    return ahead;
  }

  /**
   * decideAhead's evaluation of one profile's records (its queue slot is held), as processRecord
   * and commit would do it: each event added to the cached states, the candidate definitions
   * evaluated, and the record's changes applied to the states before the next record (as after
   * their commit). If they are not written after all, the states are dropped (decideAhead).
   * Null when a state is no longer cached (the records are then evaluated after the append).
   */
  private evaluateAhead(tk: string, set: LiveSet, profileId: string, records: readonly ValidRecord[], idx: readonly number[]): MembershipChange[] | null {
    const groups = policyGroups(set);
    const states: ProfileState[] = [];
    for (const g of groups) {
      const st = this.states.get(this.stateKey(tk, g[0]!, profileId));
      if (st === undefined) return null;
      states.push(st);
    }
    const now = this.opts.clock.now();
    const since = now - retentionOf(set);
    const all: MembershipChange[] = [];
    for (const k of idx) {
      const record = records[k]!;
      const candidates = set.index.forEvent(eventTypeOf(record.body));
      let changes: MembershipChange[] | null = null;
      for (let g = 0; g < groups.length; g++) {
        const state = states[g]!;
        learnEvent(state, record, now);
        trimEvents(state, since);
        changes = this.evaluateOn(tk, state, candidatesOf(groups, groups[g]!, candidates), now, changes);
      }
      if (changes === null) continue;
      this.applyToStates(tk, set, changes, now);
      for (const c of changes) all.push(c);
    }
    return all;
  }

  /**
   * Re-evaluate every continuous definition for profiles whose data changed in
   * a way the records do not describe (deletes, lifecycle updates). Drops the
   * cached state first so that it is reloaded from the hub.
   */
  async onProfilesChanged(tenant: TenantContext, profileIds: readonly string[]): Promise<MembershipTransition[]> {
    const set = await this.opts.catalog.get(tenant, "continuous");
    if (set.definitions.length === 0) return [];
    const tk = this.remember(tenant);
    const scope = this.tenants.get(tk)!.scope;
    const out: MembershipTransition[] = [];
    for (const profileId of profileIds) {
      const identities = await this.opts.hub.graphIdentities(scope, profileId);
      const identity = identities[0];
      const written = await this.queue.run(`${tk}\u0000${profileId}`, async () => {
        // The set as it is when the slot is ours (onRecordsStored says why).
        const current = await this.opts.catalog.get(tenant, "continuous");
        const changes: MembershipChange[] = [];
        const now = this.opts.clock.now();
        for (const group of policyGroups(current)) {
          this.states.delete(this.stateKey(tk, group[0]!, profileId));
          // A profile deleted from the hub has no state: the lifecycle job has written its exits.
          const state = identity ? await this.stateFor(tk, current, group[0]!, profileId, identity) : null;
          if (!state) continue;
          for (const d of group) {
            const inNow = this.holds(d, state, now);
            const prev = state.memberships.get(d.id);
            if (inNow !== (prev?.status === "realized")) changes.push(this.change(state, d, inNow, now, prev));
          }
        }
        return this.commit(tk, current, changes, now);
      });
      for (const t of written) out.push(t);
    }
    return out;
  }

  /**
   * For a writer of memberships other than this engine (a backfill, batch/backfill/): holds the
   * queue slots of those of `profileIds` that no evaluation is using now, so none of them is
   * evaluated while `write` runs, then applies what it wrote to their cached states (they stay
   * what the hub holds: the `from` rule). Busy profiles are answered back for the caller to try
   * again: waiting for one while holding others could deadlock with a decideAhead holding it.
   */
  async holdIdle(tenant: TenantContext, profileIds: readonly string[], write: HeldWrite): Promise<{ busy: string[] }> {
    const tk = this.remember(tenant);
    const set = await this.opts.catalog.get(tenant, "continuous");
    const hold = this.queue.hold(profileIds.map((pid) => `${tk}\u0000${pid}`));
    const busy = hold.busy.map((i) => profileIds[i]!);
    let held: readonly string[] = profileIds;
    if (busy.length > 0) {
      const taken = new Set(hold.busy);
      held = profileIds.filter((_, i) => !taken.has(i));
    }
    try {
      const verdict = async (profileId: string, definitionId: string): Promise<boolean | null> => {
        const d = set.byId.get(definitionId);
        if (d === undefined) return null;
        let state = this.states.get(this.stateKey(tk, d, profileId));
        if (state === undefined) {
          const identity = (await this.opts.hub.graphIdentities(this.tenants.get(tk)!.scope, profileId))[0];
          if (identity === undefined) return null;
          // Not cached: the records stored meanwhile are still to be learnt by processRecord, which a fresh state already holds.
          state = (await loadProfileState(this.opts.hub, this.tenants.get(tk)!.scope, identity, d.policy, this.opts.clock.now() - retentionOf(set), this.opts.storedThrough?.())) ?? undefined;
          if (state === undefined) return null;
        }
        return this.holds(d, state, this.opts.clock.now());
      };
      const written = await write(held, verdict);
      if (written.length > 0) this.applyToStates(tk, set, written, this.opts.clock.now());
    } catch (err) {
      // What the hub holds of these profiles is unknown now: reloaded next time.
      for (const pid of held) this.forget(tk, set, pid);
      throw err;
    } finally {
      hold.release();
    }
    return { busy };
  }

  /** Once the sandbox's evaluations queued or running now have committed (later ones read the catalog in their slot): a backfill's wait before its fence. */
  async settled(tenant: TenantContext): Promise<void> {
    await this.queue.settled(`${tenantKey(tenant)}\u0000`);
  }

  /** Turn closed windows into exits. Resolves with the transitions written. */
  async sweep(now: number = this.opts.clock.now()): Promise<MembershipTransition[]> {
    const due = this.schedule.popDue(now);
    const out: MembershipTransition[] = [];
    await Promise.all(
      due.map((entry) => {
        const known = this.tenants.get(entry.tenantKey);
        if (!known) return Promise.resolve();
        const tk = entry.tenantKey;
        return this.queue.run(`${tk}\u0000${entry.profileId}`, async () => {
          const set = await this.opts.catalog.get(known.tenant, "continuous");
          const d = set.byId.get(entry.definitionId);
          if (!d) return;
          let state = this.states.get(this.stateKey(tk, d, entry.profileId));
          if (!state) {
            const identities = await this.opts.hub.graphIdentities(known.scope, entry.profileId);
            if (identities[0]) state = (await this.stateFor(tk, set, d, entry.profileId, identities[0])) ?? undefined;
          }
          const prev = state?.memberships.get(d.id);
          if (!state || prev?.status !== "realized") return;
          trimEvents(state, now - retentionOf(set));
          if (this.holds(d, state, now)) {
            this.scheduleCheck(tk, state, d, now);
            return;
          }
          // No `from` for the sweep's exits: they are few, and the state may be one that a lifecycle job made
          // stale (a vanished profile's exits are written before onProfilesChanged drops its state).
          for (const t of await this.commit(tk, set, [this.change(state, d, false, now, prev, false)], now)) out.push(t);
        });
      }),
    );
    return out;
  }

  /**
   * Schedules a re-check of these realized memberships at the next sweep (a worker taking a
   * partition over: the previous owner's schedule went with it). The sweep loads each profile's
   * state, writes the exits of those that no longer hold, and schedules the others as usual.
   * `due`: not before then (a backfill that knows when the profile's next event leaves a window).
   */
  recheck(tenant: TenantContext, memberships: ReadonlyArray<{ profileId: string; definitionId: string; due?: number }>): void {
    const tk = this.remember(tenant);
    // By definition, as runs of the schedule (a backfill's or a partition's many memberships).
    const byDefinition = new Map<string, { ids: string[]; dues: number[] }>();
    for (const m of memberships) {
      let g = byDefinition.get(m.definitionId);
      if (g === undefined) byDefinition.set(m.definitionId, (g = { ids: [], dues: [] }));
      g.ids.push(m.profileId);
      g.dues.push(m.due ?? 0);
    }
    for (const [definitionId, g] of byDefinition) this.schedule.scheduleMany(tk, definitionId, g.ids, g.dues);
  }

  /** Records the tenant (for the sweep) and its profile scope; returns its key. */
  private remember(tenant: TenantContext): string {
    const tk = tenantKey(tenant);
    const known = this.tenants.get(tk);
    if (known === undefined || known.tenant !== tenant) this.tenants.set(tk, { tenant, scope: scopeOf(tenant) });
    return tk;
  }

  /**
   * The key of a profile's state in the cache: one flat string. (A template literal makes a tree
   * of concatenated strings, and the cache keeps each key as that tree: ~4 heap objects per state
   * for every major GC to mark, instead of one.)
   */
  private stateKey(tk: string, d: LiveDefinition, profileId: string): string {
    return [tk, policyKey(d), profileId].join("\u0000");
  }

  private async stateFor(tk: string, set: LiveSet, d: LiveDefinition, profileId: string, identity: Identity): Promise<ProfileState | null> {
    const key = this.stateKey(tk, d, profileId);
    const cached = this.states.get(key);
    if (cached) return cached;
    const now = this.opts.clock.now();
    const loaded = await loadProfileState(this.opts.hub, this.tenants.get(tk)!.scope, identity, d.policy, now - retentionOf(set), this.opts.storedThrough?.());
    if (loaded) this.states.set(key, loaded);
    return loaded;
  }

  private holds(d: LiveDefinition, state: ProfileState, now: number): boolean {
    if (d.excludeOptOut && state.optedOut) return false;
    const ctx = this.ctx;
    ctx.profile = state.entity;
    ctx.events = eventsOf(d.footprint, state);
    ctx.now = now;
    const r = d.predicate(ctx);
    ctx.events = NO_EVENTS;
    return r;
  }

  /** A change of `d` for this profile; `prev` is the state's membership (for `from`, see the rule above; `mayPassFrom` false for the sweep). */
  private change(state: ProfileState, d: LiveDefinition, qualifies: boolean, now: number, prev: MembershipEntry | undefined, mayPassFrom = true): MembershipChange {
    const c: MembershipChange = { profileId: state.profileId, definitionId: d.id, status: qualifies ? "realized" : "exited", source: "streaming", at: now };
    if (mayPassFrom && d.streamingOnly && this.passFrom) c.from = prev?.status ?? null;
    return c;
  }

  private async processRecord(tk: string, set: LiveSet, profileId: string, record: StoredRecord): Promise<MembershipTransition[]> {
    const now = this.opts.clock.now();
    const isEvent = record.kind === "experienceevent";
    const candidates = isEvent ? set.index.forEvent(eventTypeOf(record.body)) : set.index.forProfileKeys(Object.keys(record.body));
    const groups = policyGroups(set);
    const since = now - retentionOf(set);
    let changes: MembershipChange[] | null = null;
    for (const group of groups) {
      const first = group[0]!;
      let state = this.states.get(this.stateKey(tk, first, profileId));
      if (state) {
        // A cached state learns the record; a freshly loaded one already holds it (the append was durable first).
        if (isEvent) learnEvent(state, record, now);
        else await this.reloadAttributes(tk, state, first);
        trimEvents(state, since);
      }
      const mine = candidatesOf(groups, group, candidates);
      if (mine.length === 0) continue;
      state ??= (await this.stateFor(tk, set, first, profileId, record.primary)) ?? undefined;
      if (!state) continue;
      changes = this.evaluateOn(tk, state, mine, now, changes);
    }
    return changes === null ? NO_TRANSITIONS : this.commit(tk, set, changes, now);
  }

  /**
   * Evaluates `mine` on a profile's state: a definition whose result differs from the state's
   * membership gives a change (pushed onto `changes`, created if null); a realized windowed one
   * that still holds gets its sweep re-check scheduled. Returns `changes`.
   */
  private evaluateOn(tk: string, state: ProfileState, mine: readonly LiveDefinition[], now: number, changes: MembershipChange[] | null): MembershipChange[] | null {
    for (const d of mine) {
      const inNow = this.holds(d, state, now);
      const prev = state.memberships.get(d.id);
      if (inNow !== (prev?.status === "realized")) (changes ??= []).push(this.change(state, d, inNow, now, prev));
      else if (inNow && d.windowMs !== null) this.scheduleCheck(tk, state, d, now);
    }
    return changes;
  }

  private async reloadAttributes(tk: string, state: ProfileState, d: LiveDefinition): Promise<void> {
    const p = await this.opts.hub.getProfile(this.tenants.get(tk)!.scope, state.identity, d.policy);
    if (!p) return;
    state.entity = { ...p.entity };
    state.optedOut = p.optedOut;
    syncMembershipField(state);
  }

  /** Forget a profile's cached states (every policy): the next use reloads them from the hub. */
  private forget(tk: string, set: LiveSet, profileId: string): void {
    for (const group of policyGroups(set)) this.states.delete(this.stateKey(tk, group[0]!, profileId));
  }

  /**
   * Write the changes, apply them to the cached states, then evaluate the
   * definitions that reference a changed one through inSegment (a change can
   * cascade; the depth is bounded by the number of definitions).
   */
  private async commit(tk: string, set: LiveSet, first: MembershipChange[], now: number): Promise<MembershipTransition[]> {
    if (first.length === 0) return NO_TRANSITIONS;
    const scope = this.tenants.get(tk)!.scope;
    let out: MembershipTransition[] = NO_TRANSITIONS;
    let changes = first;
    for (let round = 0; changes.length > 0 && round <= set.definitions.length; round++) {
      let written: MembershipTransition[];
      try {
        written = await this.writer.write(scope, changes);
      } catch (err) {
        // The hub's state of these memberships is unknown now: reload it next time instead of trusting the cache.
        for (const c of changes) this.forget(tk, set, c.profileId);
        throw err;
      }
      if (written.length > 0) out = out.length === 0 ? written : out.concat(written);
      this.applyToStates(tk, set, changes, now);
      if (!set.index.hasDependents) break;
      const next: MembershipChange[] = [];
      const touched = new Map<string, Set<string>>();
      for (const c of changes) {
        let ids = touched.get(c.profileId);
        if (!ids) touched.set(c.profileId, (ids = new Set()));
        ids.add(c.definitionId);
      }
      for (const [profileId, ids] of touched) {
        for (const d of set.index.dependentsOf(ids)) {
          const st = this.states.get(this.stateKey(tk, d, profileId));
          if (!st) continue;
          const inNow = this.holds(d, st, now);
          const prev = st.memberships.get(d.id);
          if (inNow !== (prev?.status === "realized")) next.push(this.change(st, d, inNow, now, prev));
        }
      }
      changes = next;
    }
    return out;
  }

  /**
   * Changes as the cached states take them: a membership is the profile's, whatever the merge
   * policy, so every state of the profile learns it; a realized windowed one is scheduled for its
   * sweep re-check on the state of its own policy.
   */
  private applyToStates(tk: string, set: LiveSet, changes: readonly MembershipChange[], now: number): void {
    const groups = policyGroups(set);
    let isoAt = NaN;
    let iso = "";
    for (const c of changes) {
      if (c.at !== isoAt) {
        isoAt = c.at;
        iso = new Date(c.at).toISOString();
      }
      const d0 = set.byId.get(c.definitionId);
      for (const group of groups) {
        const d = group[0]!;
        const st = this.states.get(this.stateKey(tk, d, c.profileId));
        if (!st) continue;
        const prev = st.memberships.get(c.definitionId);
        setMembership(st, c.definitionId, { status: c.status, lastQualificationTime: c.status === "realized" ? iso : (prev?.lastQualificationTime ?? iso) });
        if (d0 && c.status === "realized" && d0.windowMs !== null && policyKey(d0) === policyKey(d)) this.scheduleCheck(tk, st, d0, now);
      }
    }
  }

  /** Schedule the sweep's re-check of a realized membership for when one of its events leaves a window (or midnight). */
  private scheduleCheck(tk: string, state: ProfileState, d: LiveDefinition, now: number): void {
    if (d.windowMs === null) return;
    const due = nextWindowChangeOf(now, state.eventTs, state.eventTypes, d.footprint.eventTypes, d.windowsMs);
    this.schedule.schedule(due, tk, state.profileId, d.id);
  }
}

const NO_TRANSITIONS: MembershipTransition[] = [];

type AheadOutcome = { transitions: MembershipTransition[] | null } | { error: unknown };

/** What decideAhead decided for a request's records (AheadDecision), with what onRecordsStored needs to finish it. */
class Ahead implements AheadDecision {
  readonly decided: { expect: Float64Array; changes: readonly MembershipChange[] };
  /** Per record: 1 when it was evaluated ahead. */
  readonly covered: Uint8Array;
  /** The profiles' queue slots, released once the append settled and the states are up to date. */
  readonly slots: Array<Promise<void>> = [];
  readonly outcome: Promise<AheadOutcome>;
  private resolve!: (o: AheadOutcome) => void;
  private settled = false;

  constructor(records: number) {
    this.decided = { expect: new Float64Array(records).fill(NaN), changes: [] };
    this.covered = new Uint8Array(records);
    this.outcome = new Promise((resolve) => (this.resolve = resolve));
  }

  settle(outcome: AheadOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.resolve(outcome);
  }
}

/** A record's event added to a state (its JSON text kept as it came, when the record has it). */
function learnEvent(state: ProfileState, record: StoredRecord, now: number): void {
  addEvent(state, { ts: record.timestamp ?? now, id: record.eventId, body: record.body, ...(record.json !== undefined ? { json: record.json } : {}) });
}

function identityKeyOf(tk: string, i: Identity): string {
  return [tk, i.namespace, i.id].join("\u0000");
}

function flatten(lists: MembershipTransition[][]): MembershipTransition[] {
  let n = 0;
  for (const l of lists) n += l.length;
  if (n === 0) return [];
  const out: MembershipTransition[] = [];
  for (const l of lists) for (const t of l) out.push(t);
  return out;
}

