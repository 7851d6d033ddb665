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
  /** Lower-cased eventType of each event ("" when it has none), kept in step with `events`. */
  eventTypes: string[];
  /** eventBodies grouped by type, in time order; extended in place when an event arrives in order, else rebuilt lazily. */
  byType: Map<string, Record<string, unknown>[]> | null;
  optedOut: boolean;
  memberships: Map<string, MembershipEntry>;
  /** The object at `entity.segmentMembership.ups` (what inSegment reads), updated in place with `memberships`. */
  ups: Record<string, MembershipEntry>;
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
  const events = page.events.map((e): StateEvent => ({ ts: e.timestamp, id: e.eventId, body: e.body }));
  return newProfileState({
    profileId: profile.profileId,
    identity,
    entity: profile.entity,
    events,
    optedOut: profile.optedOut,
    memberships: memberships.map((m): [string, MembershipEntry] => [m.definitionId, { status: m.status, lastQualificationTime: m.lastQualificationTime }]),
  });
}

/** A state from its parts (events in time order); copies the entity, owns everything it returns. */
export function newProfileState(p: {
  profileId: string;
  identity: Identity;
  entity: Record<string, unknown>;
  events: StateEvent[];
  optedOut: boolean;
  memberships: Iterable<[string, MembershipEntry]>;
}): ProfileState {
  // The lists are filled by push, not built at their exact size (map): a state is usually loaded
  // right after the event that triggered the load was stored (so it holds that event), and the
  // next event's push would then reallocate all three lists at once. Pushed, they have room for
  // ~16 more events. That reallocation was the largest share of what the young generation
  // promoted under streaming load (bench:streaming --heap-profile: 36 %, 11 % after).
  const events: StateEvent[] = [];
  const eventBodies: Record<string, unknown>[] = [];
  const eventTypes: string[] = [];
  for (const e of p.events) {
    events.push(e);
    eventBodies.push(e.body);
    eventTypes.push(typeKeyOf(e.body));
  }
  const state: ProfileState = {
    profileId: p.profileId,
    identity: p.identity,
    entity: { ...p.entity },
    events,
    eventBodies,
    eventTypes,
    byType: null,
    optedOut: p.optedOut,
    memberships: new Map(p.memberships),
    ups: {},
  };
  syncMembershipField(state);
  return state;
}

/** The key an event body is grouped under: its lower-cased eventType, "" when it has no string type. */
export function typeKeyOf(body: Record<string, unknown>): string {
  const t = body["eventType"];
  return typeof t === "string" ? t.toLowerCase() : "";
}

/** Adds an event in time order; false when the state already holds it (a retry). */
export function addEvent(state: ProfileState, event: StateEvent): boolean {
  if (event.id !== null) {
    // A scan from the newest end (a retry is recent): cheaper than a Set per profile, which costs
    // more to grow and to garbage-collect than it saves on a few dozen events.
    const events = state.events;
    for (let j = events.length - 1; j >= 0; j--) if (events[j]!.id === event.id) return false;
  }
  const type = typeKeyOf(event.body);
  const n = state.events.length;
  let i = n;
  while (i > 0 && state.events[i - 1]!.ts > event.ts) i--;
  if (i === n) {
    // The common case: the newest event. Every list stays in time order by appending.
    state.events.push(event);
    state.eventBodies.push(event.body);
    state.eventTypes.push(type);
    if (state.byType !== null) {
      const list = state.byType.get(type);
      if (list) list.push(event.body);
      else state.byType.set(type, [event.body]);
    }
  } else {
    state.events.splice(i, 0, event);
    state.eventBodies.splice(i, 0, event.body);
    state.eventTypes.splice(i, 0, type);
    state.byType = null;
  }
  return true;
}

/** Drops events older than `since`: no streaming window reaches them. */
export function trimEvents(state: ProfileState, since: number): void {
  let n = 0;
  while (n < state.events.length && state.events[n]!.ts < since) n++;
  if (n > 0) {
    state.events.splice(0, n);
    state.eventBodies.splice(0, n);
    state.eventTypes.splice(0, n);
    state.byType = null;
  }
}

/** eventBodies grouped by type (built on first use after a change). */
export function eventsByType(state: ProfileState): Map<string, Record<string, unknown>[]> {
  let m = state.byType;
  if (m === null) {
    m = new Map();
    const bodies = state.eventBodies;
    const types = state.eventTypes;
    for (let i = 0; i < bodies.length; i++) {
      const list = m.get(types[i]!);
      if (list) list.push(bodies[i]!);
      else m.set(types[i]!, [bodies[i]!]);
    }
    state.byType = m;
  }
  return m;
}

/** Records a membership in the state and in the `segmentMembership.ups` mirror (in place, no copy). */
export function setMembership(state: ProfileState, definitionId: string, entry: MembershipEntry): void {
  state.memberships.set(definitionId, entry);
  state.ups[definitionId] = entry;
}

/**
 * Mirrors the memberships into `segmentMembership.ups`, which PQL's inSegment
 * reads: a fresh object owned by the state (after a load, or after the entity
 * was replaced), which `setMembership` then keeps up to date.
 */
export function syncMembershipField(state: ProfileState): void {
  const ups: Record<string, MembershipEntry> = {};
  for (const [id, m] of state.memberships) ups[id] = m;
  const sm = state.entity["segmentMembership"];
  const other = typeof sm === "object" && sm !== null && !Array.isArray(sm) ? (sm as Record<string, unknown>) : {};
  state.entity["segmentMembership"] = { ...other, ups };
  state.ups = ups;
}

/**
 * A size-bounded map that forgets a least recently used entry first — the
 * "second chance" (CLOCK) approximation of LRU: a read only marks its entry;
 * eviction takes the oldest entry, giving a marked one another round at the
 * young end instead. A read is one lookup, not a delete and a re-insert of a
 * map of 100,000s of entries.
 */
export class LruMap<V> {
  private readonly map = new Map<string, { value: V; used: boolean }>();

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.map.size;
  }

  get(key: string): V | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    e.used = true;
    return e.value;
  }

  set(key: string, value: V): void {
    const e = this.map.get(key);
    if (e !== undefined) {
      e.value = value;
      e.used = true;
      return;
    }
    // New entries start marked, so that one is never the next to go right after it arrives.
    this.map.set(key, { value, used: true });
    while (this.map.size > this.capacity) {
      const [k, oldest] = this.map.entries().next().value!;
      this.map.delete(k);
      if (oldest.used) {
        oldest.used = false;
        this.map.set(k, oldest);
      }
    }
  }

  delete(key: string): void {
    this.map.delete(key);
  }
}
