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
 */
import type { Clock } from "../platform/clock.js";
import type { MembershipChange, ProfileStore } from "../profiles/store.js";
import type { Identity, JsonObject, MembershipTransition, TenantScope as ProfileScope } from "../profiles/types.js";
import type { TenantContext } from "../services/tenancy.js";
import type { DefinitionCatalog, LiveDefinition, LiveSet } from "./definition-catalog.js";
import { KeyedQueue } from "./keyed-queue.js";
import { MembershipWriter } from "./membership-writer.js";
import { addEvent, loadProfileState, LruMap, syncMembershipField, trimEvents, type ProfileState } from "./profile-state.js";
import { eventsFor, groupEventsByType } from "./reverse-index.js";
import { nextWindowChange, SweepSchedule } from "./sweep-schedule.js";

const DAY_MS = 24 * 60 * 60 * 1000;

/** A record the ingestion path has durably stored (a ValidRecord fits). */
export interface StoredRecord {
  kind: "profile" | "experienceevent";
  primary: Identity;
  body: JsonObject;
  /** Event time, epoch ms (events); null = ingestion time. */
  timestamp: number | null;
  eventId: string | null;
}

export interface StreamingEngineOptions {
  catalog: DefinitionCatalog;
  hub: ProfileStore;
  clock: Clock;
  /** Profiles kept in memory (default 200,000). */
  maxCachedProfiles?: number;
  sweepIntervalMs?: number;
  onError?: (err: unknown) => void;
}

export function profileScopeOf(tenant: TenantContext): ProfileScope {
  return { orgId: tenant.orgId, sandboxName: tenant.sandbox.sandboxName };
}

function tenantKeyOf(tenant: TenantContext): string {
  return `${tenant.orgId}\u0000${tenant.sandbox.sandboxId}`;
}

function policyKey(d: LiveDefinition): string {
  return d.policy.id ?? "none";
}

function eventTypeOf(body: JsonObject): string | null {
  const t = body["eventType"];
  return typeof t === "string" ? t : null;
}

export class StreamingEngine {
  private readonly states: LruMap<ProfileState>;
  private readonly queue = new KeyedQueue();
  private readonly writer: MembershipWriter;
  private readonly schedule = new SweepSchedule();
  private readonly tenants = new Map<string, TenantContext>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: StreamingEngineOptions) {
    this.states = new LruMap(opts.maxCachedProfiles ?? 200_000);
    this.writer = new MembershipWriter(opts.hub);
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

  /**
   * Evaluate the continuous definitions these stored records can affect.
   * Resolves with the transitions written (already durable).
   */
  async onRecordsStored(tenant: TenantContext, records: readonly StoredRecord[]): Promise<MembershipTransition[]> {
    const set = await this.opts.catalog.get(tenant, "continuous");
    if (set.definitions.length === 0) return [];
    this.tenants.set(tenantKeyOf(tenant), tenant);
    const scope = profileScopeOf(tenant);
    const results = await Promise.all(
      records.map(async (record) => {
        const profileId = await this.opts.hub.findProfileId(scope, record.primary);
        if (profileId === null) return [];
        return this.queue.run(`${tenantKeyOf(tenant)}\u0000${profileId}`, () => this.processRecord(tenant, set, profileId, record));
      }),
    );
    return results.flat();
  }

  /**
   * Re-evaluate every continuous definition for profiles whose data changed in
   * a way the records do not describe (deletes, lifecycle updates). Drops the
   * cached state first so that it is reloaded from the hub.
   */
  async onProfilesChanged(tenant: TenantContext, profileIds: readonly string[]): Promise<MembershipTransition[]> {
    const set = await this.opts.catalog.get(tenant, "continuous");
    if (set.definitions.length === 0) return [];
    this.tenants.set(tenantKeyOf(tenant), tenant);
    const scope = profileScopeOf(tenant);
    const out: MembershipTransition[] = [];
    for (const profileId of profileIds) {
      const identities = await this.opts.hub.graphIdentities(scope, profileId);
      const identity = identities[0];
      const qk = `${tenantKeyOf(tenant)}\u0000${profileId}`;
      out.push(
        ...(await this.queue.run(qk, async () => {
          const changes: MembershipChange[] = [];
          const now = this.opts.clock.now();
          for (const group of groupByPolicy(set.definitions)) {
            const key = this.stateKey(tenant, group[0]!, profileId);
            this.states.delete(key);
            // A profile deleted from the hub exits everything it was in.
            const state = identity ? await this.stateFor(tenant, set, group[0]!, profileId, identity) : null;
            for (const d of group) {
              const inNow = state ? this.holds(d, state, now) : false;
              const was = state?.memberships.get(d.id)?.status === "realized";
              if (inNow !== was && state) changes.push(this.change(state, d, inNow, now));
            }
          }
          return this.commit(tenant, set, changes, now);
        })),
      );
    }
    return out;
  }

  /** Turn closed windows into exits. Resolves with the transitions written. */
  async sweep(now: number = this.opts.clock.now()): Promise<MembershipTransition[]> {
    const due = this.schedule.popDue(now);
    const out: MembershipTransition[] = [];
    await Promise.all(
      due.map((entry) => {
        const tenant = this.tenants.get(entry.tenantKey);
        if (!tenant) return Promise.resolve();
        return this.queue.run(`${entry.tenantKey}\u0000${entry.profileId}`, async () => {
          const set = await this.opts.catalog.get(tenant, "continuous");
          const d = set.byId.get(entry.definitionId);
          if (!d) return;
          const key = this.stateKey(tenant, d, entry.profileId);
          let state = this.states.get(key);
          if (!state) {
            const identities = await this.opts.hub.graphIdentities(profileScopeOf(tenant), entry.profileId);
            if (identities[0]) state = (await this.stateFor(tenant, set, d, entry.profileId, identities[0])) ?? undefined;
          }
          if (!state || state.memberships.get(d.id)?.status !== "realized") return;
          trimEvents(state, now - retentionOf(set));
          if (this.holds(d, state, now)) {
            this.scheduleCheck(tenant, state, d, now);
            return;
          }
          out.push(...(await this.commit(tenant, set, [this.change(state, d, false, now)], now)));
        });
      }),
    );
    return out;
  }

  private stateKey(tenant: TenantContext, d: LiveDefinition, profileId: string): string {
    return `${tenantKeyOf(tenant)}\u0000${policyKey(d)}\u0000${profileId}`;
  }

  private async stateFor(tenant: TenantContext, set: LiveSet, d: LiveDefinition, profileId: string, identity: Identity): Promise<ProfileState | null> {
    const key = this.stateKey(tenant, d, profileId);
    const cached = this.states.get(key);
    if (cached) return cached;
    const now = this.opts.clock.now();
    const loaded = await loadProfileState(this.opts.hub, profileScopeOf(tenant), identity, d.policy, now - retentionOf(set));
    if (loaded) this.states.set(key, loaded);
    return loaded;
  }

  private holds(d: LiveDefinition, state: ProfileState, now: number): boolean {
    if (d.excludeOptOut && state.optedOut) return false;
    state.byType ??= groupEventsByType(state.eventBodies);
    return d.predicate({ profile: state.entity, events: eventsFor(d.footprint, state.eventBodies, state.byType), now });
  }

  private change(state: ProfileState, d: LiveDefinition, qualifies: boolean, now: number): MembershipChange {
    return { profileId: state.profileId, definitionId: d.id, status: qualifies ? "realized" : "exited", source: "streaming", at: now };
  }

  private async processRecord(tenant: TenantContext, set: LiveSet, profileId: string, record: StoredRecord): Promise<MembershipTransition[]> {
    const now = this.opts.clock.now();
    const isEvent = record.kind === "experienceevent";
    const candidates = isEvent ? set.index.forEvent(eventTypeOf(record.body)) : set.index.forProfileKeys(Object.keys(record.body));
    const groups = groupByPolicy(set.definitions);
    const changes: MembershipChange[] = [];
    for (const group of groups) {
      const key = this.stateKey(tenant, group[0]!, profileId);
      let state = this.states.get(key);
      if (state) {
        // A cached state learns the record; a freshly loaded one already holds it (the append was durable first).
        if (isEvent) addEvent(state, { ts: record.timestamp ?? now, id: record.eventId, body: record.body });
        else await this.reloadAttributes(tenant, state, group[0]!);
        trimEvents(state, now - retentionOf(set));
      }
      const mine = candidates.filter((d) => policyKey(d) === policyKey(group[0]!));
      if (mine.length === 0) continue;
      state ??= (await this.stateFor(tenant, set, group[0]!, profileId, record.primary)) ?? undefined;
      if (!state) continue;
      for (const d of mine) {
        const inNow = this.holds(d, state, now);
        const was = state.memberships.get(d.id)?.status === "realized";
        if (inNow !== was) changes.push(this.change(state, d, inNow, now));
        else if (inNow && d.windowMs !== null) this.scheduleCheck(tenant, state, d, now);
      }
    }
    return this.commit(tenant, set, changes, now);
  }

  private async reloadAttributes(tenant: TenantContext, state: ProfileState, d: LiveDefinition): Promise<void> {
    const p = await this.opts.hub.getProfile(profileScopeOf(tenant), state.identity, d.policy);
    if (!p) return;
    state.entity = { ...p.entity };
    state.optedOut = p.optedOut;
    syncMembershipField(state);
  }

  /**
   * Write the changes, apply them to the cached states, then evaluate the
   * definitions that reference a changed one through inSegment (a change can
   * cascade; the depth is bounded by the number of definitions).
   */
  private async commit(tenant: TenantContext, set: LiveSet, first: MembershipChange[], now: number): Promise<MembershipTransition[]> {
    const out: MembershipTransition[] = [];
    let changes = first;
    for (let round = 0; changes.length > 0 && round <= set.definitions.length; round++) {
      out.push(...(await this.writer.write(profileScopeOf(tenant), changes)));
      const next: MembershipChange[] = [];
      const touched = new Map<string, Set<string>>();
      for (const c of changes) {
        const iso = new Date(c.at).toISOString();
        for (const group of groupByPolicy(set.definitions)) {
          const d = group[0]!;
          const st = this.states.get(this.stateKey(tenant, d, c.profileId));
          if (!st) continue;
          const prev = st.memberships.get(c.definitionId);
          st.memberships.set(c.definitionId, { status: c.status, lastQualificationTime: c.status === "realized" ? iso : (prev?.lastQualificationTime ?? iso) });
          syncMembershipField(st);
          const d0 = set.byId.get(c.definitionId);
          if (d0 && c.status === "realized" && d0.windowMs !== null && policyKey(d0) === policyKey(d)) this.scheduleCheck(tenant, st, d0, now);
        }
        let s = touched.get(c.profileId);
        if (!s) touched.set(c.profileId, (s = new Set()));
        s.add(c.definitionId);
      }
      for (const [profileId, ids] of touched) {
        for (const d of set.index.dependentsOf(ids)) {
          const st = this.states.get(this.stateKey(tenant, d, profileId));
          if (!st) continue;
          const inNow = this.holds(d, st, now);
          const was = st.memberships.get(d.id)?.status === "realized";
          if (inNow !== was) next.push(this.change(st, d, inNow, now));
        }
      }
      changes = next;
    }
    return out;
  }

  private scheduleCheck(tenant: TenantContext, state: ProfileState, d: LiveDefinition, now: number): void {
    if (d.windowMs === null) return;
    this.schedule.add({
      due: nextWindowChange(now, state.events.map((e) => e.ts), d.windowMs),
      tenantKey: tenantKeyOf(tenant),
      profileId: state.profileId,
      definitionId: d.id,
    });
  }
}

function retentionOf(set: LiveSet): number {
  // Streaming windows are shorter than a day (decisions §1); keep a day at least.
  return Math.max(DAY_MS, set.maxWindowMs) + 60 * 60 * 1000;
}

const groupCache = new WeakMap<readonly LiveDefinition[], LiveDefinition[][]>();

/** Definitions by merge policy (each policy has its own merged view of a profile); computed once per set. */
function groupByPolicy(definitions: readonly LiveDefinition[]): LiveDefinition[][] {
  const cached = groupCache.get(definitions);
  if (cached) return cached;
  const m = new Map<string, LiveDefinition[]>();
  for (const d of definitions) {
    const k = policyKey(d);
    const g = m.get(k);
    if (g) g.push(d);
    else m.set(k, [d]);
  }
  const groups = [...m.values()];
  groupCache.set(definitions, groups);
  return groups;
}
