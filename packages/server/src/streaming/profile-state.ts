/**
 * What the streaming engine keeps in memory per profile: the merged attributes,
 * the recent events (only as far back as the longest window needs) and the
 * memberships. Evaluating a definition is then a function call on memory
 * (stack-notes §8: ~0.5 µs) instead of a store read per event. States are
 * loaded from the hub on first use and evicted least-recently-used first.
 */
import type { ProfileStore } from "../profiles/store.js";
import type { Identity, JsonObject, MergePolicySpec, MembershipStatus, TenantScope } from "../profiles/types.js";

export interface StateEvent {
  ts: number;
  id: string | null;
  body: JsonObject;
}

export interface MembershipEntry {
  status: MembershipStatus;
  /** ISO-8601. */
  lastQualificationTime: string;
}

export interface ProfileState {
  profileId: string;
  identity: Identity;
  entity: Record<string, unknown>;
  events: StateEvent[];
  /** The event bodies as PQL's xEvent sees them (kept in step with `events`). */
  eventBodies: Record<string, unknown>[];
  /** eventBodies grouped by type; rebuilt lazily after the events change. */
  byType: Map<string, Record<string, unknown>[]> | null;
  optedOut: boolean;
  memberships: Map<string, MembershipEntry>;
}

/** Hard cap of events loaded per profile from the hub (one page). */
export const MAX_LOADED_EVENTS = 1000;

export async function loadProfileState(
  hub: ProfileStore,
  scope: TenantScope,
  identity: Identity,
  policy: MergePolicySpec,
  since: number,
): Promise<ProfileState | null> {
  const profile = await hub.getProfile(scope, identity, policy);
  if (!profile) return null;
  const [page, memberships] = await Promise.all([
    hub.getEvents(scope, identity, policy, { startTime: since, order: "asc", limit: MAX_LOADED_EVENTS }),
    hub.getMemberships(scope, profile.profileId),
  ]);
  const state: ProfileState = {
    profileId: profile.profileId,
    identity,
    entity: { ...profile.entity },
    events: page.events.map((e) => ({ ts: e.timestamp, id: e.eventId, body: e.body })),
    eventBodies: [],
    byType: null,
    optedOut: profile.optedOut,
    memberships: new Map(memberships.map((m) => [m.definitionId, { status: m.status, lastQualificationTime: m.lastQualificationTime }])),
  };
  state.eventBodies = state.events.map((e) => e.body);
  syncMembershipField(state);
  return state;
}

/** Adds an event in time order; false when the state already holds it (a retry). */
export function addEvent(state: ProfileState, event: StateEvent): boolean {
  if (event.id !== null && state.events.some((e) => e.id === event.id)) return false;
  let i = state.events.length;
  while (i > 0 && state.events[i - 1]!.ts > event.ts) i--;
  state.events.splice(i, 0, event);
  state.eventBodies.splice(i, 0, event.body);
  state.byType = null;
  return true;
}

/** Drops events older than `since`: no streaming window reaches them. */
export function trimEvents(state: ProfileState, since: number): void {
  let n = 0;
  while (n < state.events.length && state.events[n]!.ts < since) n++;
  if (n > 0) {
    state.events.splice(0, n);
    state.eventBodies.splice(0, n);
    state.byType = null;
  }
}

/** Mirrors the memberships into `segmentMembership.ups`, which PQL's inSegment reads. */
export function syncMembershipField(state: ProfileState): void {
  const ups: Record<string, MembershipEntry> = {};
  for (const [id, m] of state.memberships) ups[id] = { status: m.status, lastQualificationTime: m.lastQualificationTime };
  const sm = state.entity["segmentMembership"];
  const other = typeof sm === "object" && sm !== null && !Array.isArray(sm) ? (sm as Record<string, unknown>) : {};
  state.entity["segmentMembership"] = { ...other, ups };
}

/** A size-bounded map that forgets the least recently used entry first. */
export class LruMap<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.map.size;
  }

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
  }

  delete(key: string): void {
    this.map.delete(key);
  }
}
