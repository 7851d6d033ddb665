/**
 * What the streaming engine keeps in memory per profile: the merged attributes,
 * the recent events (only as far back as the longest window needs) and the
 * memberships. Evaluating a definition is then a function call on memory
 * (stack-notes §8: ~0.5 µs) instead of a store read per event. States are
 * loaded from the hub on first use and evicted least-recently-used first.
 */
import type { MembershipReads, ProfileReads } from "../profiles/store.js";
import type { Identity, JsonObject, MergePolicySpec, MembershipStatus, TenantScope } from "../profiles/types.js";

/** An event as it is given to a state (loaded from the hub, or just stored). */
export interface StateEvent {
  ts: number;
  id: string | null;
  body: JsonObject;
  /** The body as JSON text when the caller has it already (a validated record's `json`). */
  json?: string;
}

export interface MembershipEntry {
  status: MembershipStatus;
  /** ISO-8601. */
  lastQualificationTime: string;
}

/**
 * A profile's state. Its events are kept as columns — time, id, type key and the body as JSON
 * text — not as parsed objects: a parsed event is a tree of ~10 heap objects (its body, the
 * identityMap's objects and array, its strings, a record around it), and 100,000 profiles with
 * a few events each made the old generation tens of millions of objects, which every major GC
 * marks (V8 paces that marking to end within ~0.5 s: on two cores it then takes most of the
 * main thread for that long, and every event in flight waits). A JSON string is one object with
 * nothing to trace. A definition that reads events gets them parsed on demand (eventBodiesOfType,
 * allEventBodies), once per state per turn (the memo below), ~1 µs per event.
 */
export interface ProfileState {
  profileId: string;
  identity: Identity;
  entity: Record<string, unknown>;
  /** Event times (epoch ms), oldest first; eventIds, eventTypes and eventJson are kept in step. */
  eventTs: number[];
  eventIds: Array<string | null>;
  /** Lower-cased eventType of each event ("" when it has none). */
  eventTypes: string[];
  /** Each event's body as JSON text. */
  eventJson: string[];
  /** Bumped by every change to the events: the parsed-body memo is only good for one version. */
  eventsVersion: number;
  optedOut: boolean;
  memberships: Map<string, MembershipEntry>;
  /** The object at `entity.segmentMembership.ups` (what inSegment reads), updated in place with `memberships`. */
  ups: Record<string, MembershipEntry>;
}

/** Hard cap of events loaded per profile from the hub (one page). */
export const MAX_LOADED_EVENTS = 1000;

export async function loadProfileState(
  hub: ProfileReads & MembershipReads,
  scope: TenantScope,
  identity: Identity,
  policy: MergePolicySpec,
  since: number,
  /** Only the events the store held at this mark (EventQuery.storedThrough; default: all). */
  storedThrough?: number,
): Promise<ProfileState | null> {
  const profile = await hub.getProfile(scope, identity, policy);
  if (!profile) return null;
  const [page, memberships] = await Promise.all([
    hub.getEvents(scope, identity, policy, { startTime: since, ...(storedThrough === undefined ? {} : { storedThrough }), order: "asc", limit: MAX_LOADED_EVENTS }),
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
  // The columns are filled by push, not built at their exact size: a state is usually loaded
  // right after the event that triggered the load was stored (so it holds that event), and the
  // next event's push would then reallocate every column at once (bench:streaming --heap-profile
  // showed that reallocation as the largest share of what the young generation promoted).
  const state: ProfileState = {
    profileId: p.profileId,
    identity: p.identity,
    entity: { ...p.entity },
    eventTs: [],
    eventIds: [],
    eventTypes: [],
    eventJson: [],
    eventsVersion: 0,
    optedOut: p.optedOut,
    memberships: new Map(p.memberships),
    ups: {},
  };
  for (const e of p.events) {
    state.eventTs.push(e.ts);
    state.eventIds.push(e.id);
    state.eventTypes.push(typeKeyOf(e.body));
    state.eventJson.push(e.json ?? JSON.stringify(e.body));
  }
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
    const ids = state.eventIds;
    for (let j = ids.length - 1; j >= 0; j--) if (ids[j] === event.id) return false;
  }
  const type = typeKeyOf(event.body);
  const json = event.json ?? JSON.stringify(event.body);
  const times = state.eventTs;
  const n = times.length;
  let i = n;
  while (i > 0 && times[i - 1]! > event.ts) i--;
  if (i === n) {
    // The common case: the newest event, appended to every column.
    times.push(event.ts);
    state.eventIds.push(event.id);
    state.eventTypes.push(type);
    state.eventJson.push(json);
  } else {
    times.splice(i, 0, event.ts);
    state.eventIds.splice(i, 0, event.id);
    state.eventTypes.splice(i, 0, type);
    state.eventJson.splice(i, 0, json);
  }
  state.eventsVersion++;
  return true;
}

/** Drops events older than `since`: no streaming window reaches them. */
export function trimEvents(state: ProfileState, since: number): void {
  const times = state.eventTs;
  let n = 0;
  while (n < times.length && times[n]! < since) n++;
  if (n > 0) {
    times.splice(0, n);
    state.eventIds.splice(0, n);
    state.eventTypes.splice(0, n);
    state.eventJson.splice(0, n);
    state.eventsVersion++;
  }
}

const NO_BODIES: Record<string, unknown>[] = [];

/**
 * Parsed bodies of ONE state's events at one version: the definitions evaluated for a record
 * (about ten, several reading the same events) parse each event once. Module-wide and single:
 * evaluation is synchronous, and what a turn parsed becomes garbage as soon as another state is
 * read (young garbage, which the scavenger reclaims without copying), so nothing parsed outlives
 * the evaluations that needed it.
 */
const memo = {
  state: null as ProfileState | null,
  version: -1,
  bodies: [] as Array<Record<string, unknown> | undefined>,
  all: null as Record<string, unknown>[] | null,
  byType: new Map<string, Record<string, unknown>[]>(),
};

function memoOf(state: ProfileState): typeof memo {
  if (memo.state !== state || memo.version !== state.eventsVersion) {
    memo.state = state;
    memo.version = state.eventsVersion;
    memo.bodies = [];
    memo.all = null;
    memo.byType = new Map();
  }
  return memo;
}

function bodyAt(m: typeof memo, state: ProfileState, i: number): Record<string, unknown> {
  let b = m.bodies[i];
  if (b === undefined) m.bodies[i] = b = JSON.parse(state.eventJson[i]!) as Record<string, unknown>;
  return b;
}

/** Every event's body, in time order (parsed on demand; read-only, good until the state changes). */
export function allEventBodies(state: ProfileState): readonly Record<string, unknown>[] {
  if (state.eventJson.length === 0) return NO_BODIES;
  const m = memoOf(state);
  if (m.all === null) {
    const all: Record<string, unknown>[] = [];
    for (let i = 0; i < state.eventJson.length; i++) all.push(bodyAt(m, state, i));
    m.all = all;
  }
  return m.all;
}

/** The bodies of the events whose type key is `type` (lower-cased), in time order. */
export function eventBodiesOfType(state: ProfileState, type: string): readonly Record<string, unknown>[] {
  const types = state.eventTypes;
  if (types.length === 0) return NO_BODIES;
  const m = memoOf(state);
  let list = m.byType.get(type);
  if (list === undefined) {
    list = NO_BODIES;
    for (let i = 0; i < types.length; i++) {
      if (types[i] !== type) continue;
      if (list === NO_BODIES) list = [];
      list.push(bodyAt(m, state, i));
    }
    m.byType.set(type, list);
  }
  return list;
}

/** The bodies of the events whose type key is one of `types`, in time order (one pass, no sort). */
export function eventBodiesOfTypes(state: ProfileState, types: ReadonlySet<string>): readonly Record<string, unknown>[] {
  const keys = state.eventTypes;
  if (keys.length === 0) return NO_BODIES;
  const m = memoOf(state);
  let picked: Record<string, unknown>[] | null = null;
  for (let i = 0; i < keys.length; i++) if (types.has(keys[i]!)) (picked ??= []).push(bodyAt(m, state, i));
  return picked ?? NO_BODIES;
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
