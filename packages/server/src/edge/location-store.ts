/**
 * Edge data of one location: for each profile seen there, the projection the
 * hub sent (attributes, memberships, recent events) and what the location
 * collected and decided itself (events, edge memberships). Data collected at a
 * location stays in that location's store; other locations only learn it
 * through the hub's projection.
 *
 * The interface is asynchronous and speaks plain data so that a location can
 * later run as its own process (behind NATS) without the interact service
 * changing; the embedded default keeps every location in this process, each
 * with its own separate in-memory store.
 */
import type { Identity, JsonObject } from "../profiles/types.js";
import type { MembershipEntry } from "../streaming/profile-state.js";

export interface EdgeEvent {
  /** The event's `_id`. */
  id: string;
  /** Event time, epoch ms. */
  ts: number;
  body: JsonObject;
}

/**
 * What the edge definitions read of a profile: the projected attributes with
 * `segmentMembership.ups` = the hub's memberships overlaid with this location's
 * own (edge results win); `ups` is that same object. The store keeps it current
 * as it changes the profile (projection, edge memberships), so that a request
 * reads it instead of copying attributes and memberships into a new one.
 * Read-only for everyone else.
 */
export interface EvaluationView {
  profile: Record<string, unknown>;
  ups: Record<string, MembershipEntry>;
  /** The store switched `ups` to V8's dictionary mode (applyEdgeMemberships); not data. */
  upsDictionary?: true;
}

/** Property names no definition id can take (ids never hold NUL): only used to switch an object's storage mode. */
const SCRATCH_A = "\u0000a";
const SCRATCH_B = "\u0000b";

/**
 * Puts `o` in V8's dictionary (hash table) mode, which it then keeps. A `ups` object gains a
 * property per new edge membership (applyEdgeMemberships, on the request path); in V8's default
 * "fast" mode every new key on every profile's object is a hidden-class transition, and with
 * 150 definitions over 100,000 profiles the transition tree explodes (measured: ≈ 3× the CPU per
 * write, plus the hidden classes for the garbage collector). Deleting a property that is not
 * the last one added is what makes V8 switch; the object's own properties, their order and its
 * prototype are unchanged (a plain object as before). Done on a profile's first edge membership
 * only: a dictionary takes more memory, and most projected profiles never get one.
 */
function dictionaryMode<T extends object>(o: T): T {
  const w = o as Record<string, unknown>;
  w[SCRATCH_A] = 0;
  w[SCRATCH_B] = 0;
  delete w[SCRATCH_A];
  delete w[SCRATCH_B];
  return o;
}

/** The view of attributes + memberships (`edge` overlaid on `hub`), built from copies: the view owns its objects. */
export function buildEvaluationView(attributes: JsonObject, hub: Record<string, MembershipEntry>, edge: ReadonlyMap<string, MembershipEntry>): EvaluationView {
  const ups: Record<string, MembershipEntry> = { ...hub };
  for (const [id, m] of edge) ups[id] = m;
  return { profile: { ...attributes, segmentMembership: { ups } }, ups };
}

export interface EdgeProfile {
  /** The hub's profile id, once the hub has projected the profile here. */
  profileId: string | null;
  identities: Identity[];
  /** Projected merged attributes (without segmentMembership). */
  attributes: JsonObject;
  optedOut: boolean;
  /** Memberships the hub projected (batch, streaming and earlier edge results). */
  hubMemberships: Record<string, MembershipEntry>;
  /** Memberships decided at this location since; they win over the projected ones. */
  edgeMemberships: Map<string, MembershipEntry>;
  /** Events known here, oldest first: collected here, or projected from the hub. */
  events: EdgeEvent[];
  /** When the hub last projected this profile here (epoch ms), null if never. */
  projectedAt: number | null;
  /** Bumped by the store whenever attributes or memberships change (not for events), so readers can cache views of them. */
  revision: number;
  /** Attributes + memberships as the definitions read them, kept current by the store. */
  view: EvaluationView;
  /**
   * A slot for the evaluation plan's cached results of this profile (evaluation-plan.ts),
   * held here rather than in a WeakMap keyed by the profile: one property instead of an
   * ephemeron per profile for the garbage collector to trace. Not data: never projected.
   */
  planCache?: unknown;
  /** When a request last collected an event into it (epoch ms): the store's recency, not data. */
  seenAt?: number;
}

export interface Projection {
  profileId: string;
  identities: Identity[];
  attributes: JsonObject;
  optedOut: boolean;
  memberships: Record<string, MembershipEntry>;
  /** The hub's recent events of the profile. */
  events: EdgeEvent[];
  at: number;
}

/** LocationStore.heldProfiles: the hub profiles a location holds, and identities not yet tied to one. */
export interface HeldProfiles {
  profileIds: string[];
  identities: Identity[];
}

export interface LocationStore {
  readonly location: string;
  lookup(tenantKey: string, identity: Identity): Promise<EdgeProfile | undefined>;
  /** Store an event collected here; creates the profile entry if the location did not hold it. */
  collect(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): Promise<void>;
  setEdgeMemberships(tenantKey: string, identity: Identity, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): Promise<void>;
  /**
   * Whether the location holds a profile with one of these identities, or (a location that knows
   * profiles by the hub's id) the hub profile `profileId`: projection targets.
   */
  holds(tenantKey: string, identities: readonly Identity[], profileId?: string): Promise<boolean>;
  /** Replace the projected part of a held profile (no-op when the location does not hold it, unless `adopt`). */
  project(tenantKey: string, projection: Projection, opts?: { adopt?: boolean }): Promise<void>;
  /**
   * Drop every entry projected from these hub profiles, with the events collected
   * here: a data-lifecycle delete removed them from the hub, and the edge must not
   * keep evaluating deleted data. Returns how many profiles were dropped.
   */
  forget(tenantKey: string, profileIds: ReadonlySet<string>): Promise<number>;
  /** Every profile held for a tenant (the disqualification pass walks them). */
  profiles(tenantKey: string): Promise<EdgeProfile[]>;
  /**
   * What a tenant's entries are, cheaply: the hub profile ids projected here, and the identities of
   * entries no projection named yet. A batch job's changes are matched against these (their work is
   * bounded by what a location holds, not by what a job changed).
   */
  heldProfiles?(tenantKey: string): Promise<HeldProfiles>;
  tenantKeys(): Promise<string[]>;
}

/**
 * A location store in this process (the embedded default) also answers the request path's
 * operations synchronously: no promise and no turn of the microtask queue per call, and the
 * profile entry found once serves the whole request. Same effects as the asynchronous methods.
 */
export interface LocalLocationStore extends LocationStore {
  lookupNow(tenantKey: string, identity: Identity): EdgeProfile | undefined;
  /** `collect`, returning the profile entry the event was stored in (created if needed). */
  collectNow(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): EdgeProfile;
  /** `setEdgeMemberships` on an entry this store returned in the same turn (lookupNow, collectNow). */
  applyEdgeMemberships(profile: EdgeProfile, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): void;
}

export function isLocalLocationStore(s: LocationStore): s is LocalLocationStore {
  const l = s as Partial<LocalLocationStore>;
  return typeof l.lookupNow === "function" && typeof l.collectNow === "function" && typeof l.applyEdgeMemberships === "function";
}

/** Edge-eligible windows are shorter than 24 h; keep a little more. */
export const EDGE_EVENT_RETENTION_MS = 25 * 60 * 60 * 1000;

function key(i: Identity): string {
  return `${i.namespace}\u0000${i.id}`;
}

/** Profiles a location keeps by default: bench:edge's 100,000 known profiles fit. */
export const DEFAULT_MAX_LOCATION_PROFILES = 100_000;

export interface LocationMemoryOptions {
  /** Profiles kept; beyond, the least recently requested are dropped (default 100,000). */
  maxProfiles?: number;
  /** A profile no request has touched for this long (ms) is dropped (default 25 h; 0 = never). */
  idleMs?: number;
}

/**
 * A location's profiles are a cache of the hub, bounded in memory: at most `maxProfiles`
 * profiles, and none that no request has touched for `idleMs`. Past the bound the least
 * recently requested profile goes first (a second-chance queue: a request only stamps its
 * profile's `seenAt`; the queue is reordered when a profile is added). A dropped profile is
 * missed like one the location never held: its next request is decided on what that request
 * carries, and once the event is forwarded the hub projects the profile here again
 * (`newAtLocation`), with the events this location had collected (the hub has them).
 */
export class InMemoryLocationStore implements LocalLocationStore {
  private readonly tenants = new Map<string, Map<string, EdgeProfile>>();
  /** Every profile held, oldest queued first, with its tenant and when it was (re)queued. */
  private readonly queue = new Map<EdgeProfile, { tenantKey: string; queuedAt: number }>();
  private readonly maxProfiles: number;
  private readonly idleMs: number;
  /** Profiles dropped for the bound or for idleness (diagnostics, metrics). */
  evicted = 0;

  constructor(readonly location: string, opts: LocationMemoryOptions = {}) {
    this.maxProfiles = Math.max(1, opts.maxProfiles ?? DEFAULT_MAX_LOCATION_PROFILES);
    this.idleMs = Math.max(0, opts.idleMs ?? EDGE_EVENT_RETENTION_MS);
  }

  /** Profiles held (over every tenant). */
  get size(): number {
    return this.queue.size;
  }

  /** A new profile entry joins the queue; then the oldest go while over the bound or idle. */
  private admit(tenantKey: string, p: EdgeProfile, now: number): void {
    p.seenAt = now;
    this.queue.set(p, { tenantKey, queuedAt: now });
    for (;;) {
      const first = this.queue.entries().next();
      if (first.done === true) return;
      const [oldest, slot] = first.value;
      if (oldest === p) return;
      const seenAt = oldest.seenAt ?? slot.queuedAt;
      if (seenAt > slot.queuedAt) {
        // Requested since it was queued: a second chance, at the young end.
        this.queue.delete(oldest);
        this.queue.set(oldest, { tenantKey: slot.tenantKey, queuedAt: now });
        continue;
      }
      const idle = this.idleMs > 0 && seenAt < now - this.idleMs;
      if (this.queue.size <= this.maxProfiles && !idle) return;
      this.drop(slot.tenantKey, oldest);
      this.evicted++;
    }
  }

  /** Removes a profile entry under every identity that maps to it. */
  private drop(tenantKey: string, p: EdgeProfile): void {
    this.queue.delete(p);
    const t = this.tenants.get(tenantKey);
    if (t === undefined) return;
    for (const i of p.identities) {
      const k = key(i);
      if (t.get(k) === p) t.delete(k);
    }
    if (t.size === 0) this.tenants.delete(tenantKey);
  }

  private table(tenantKey: string): Map<string, EdgeProfile> {
    let t = this.tenants.get(tenantKey);
    if (!t) this.tenants.set(tenantKey, (t = new Map()));
    return t;
  }

  async lookup(tenantKey: string, identity: Identity): Promise<EdgeProfile | undefined> {
    return this.lookupNow(tenantKey, identity);
  }

  lookupNow(tenantKey: string, identity: Identity): EdgeProfile | undefined {
    return this.tenants.get(tenantKey)?.get(key(identity));
  }

  async collect(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): Promise<void> {
    this.collectNow(tenantKey, identity, event, now);
  }

  collectNow(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): EdgeProfile {
    const t = this.table(tenantKey);
    const k = key(identity);
    let p = t.get(k);
    if (!p) {
      p = emptyProfile([identity]);
      t.set(k, p);
      this.admit(tenantKey, p, now);
    } else if (now > (p.seenAt ?? 0)) p.seenAt = now;
    insertEvent(p.events, event);
    trim(p.events, now - EDGE_EVENT_RETENTION_MS);
    return p;
  }

  async setEdgeMemberships(tenantKey: string, identity: Identity, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): Promise<void> {
    const p = this.tenants.get(tenantKey)?.get(key(identity));
    if (p) this.applyEdgeMemberships(p, changes);
  }

  applyEdgeMemberships(p: EdgeProfile, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): void {
    if (p.view.upsDictionary !== true && changes.length > 0) {
      dictionaryMode(p.view.ups);
      p.view.upsDictionary = true;
    }
    for (const c of changes) {
      p.edgeMemberships.set(c.definitionId, c.entry);
      // The view's ups is also what segmentMembership.ups points to: both see the change.
      p.view.ups[c.definitionId] = c.entry;
    }
    p.revision++;
  }

  async holds(tenantKey: string, identities: readonly Identity[]): Promise<boolean> {
    const t = this.tenants.get(tenantKey);
    return t !== undefined && identities.some((i) => t.has(key(i)));
  }

  async project(tenantKey: string, pr: Projection, opts: { adopt?: boolean } = {}): Promise<void> {
    const t = opts.adopt ? this.table(tenantKey) : this.tenants.get(tenantKey);
    if (!t) return;
    const held = pr.identities.map((i) => t.get(key(i))).filter((p): p is EdgeProfile => p !== undefined);
    let adopted = false;
    if (held.length === 0) {
      if (!opts.adopt || pr.identities.length === 0) return;
      held.push(emptyProfile(pr.identities));
      adopted = true;
    }
    // Entries of several identities of one graph become one profile.
    const target = held[0]!;
    for (const p of held.slice(1)) {
      if (p === target) continue;
      // Merged into the target: its identities outside the projection's go with it.
      this.queue.delete(p);
      for (const i of p.identities) if (t.get(key(i)) === p) t.delete(key(i));
    }
    const local = new Map<string, EdgeEvent>();
    for (const p of held) for (const e of p.events) local.set(e.id, e);
    for (const e of pr.events) local.set(e.id, e);
    for (const p of held.slice(1)) for (const [id, m] of p.edgeMemberships) if (!target.edgeMemberships.has(id)) target.edgeMemberships.set(id, m);
    target.profileId = pr.profileId;
    target.identities = pr.identities;
    target.attributes = pr.attributes;
    target.optedOut = pr.optedOut;
    target.hubMemberships = pr.memberships;
    target.view = buildEvaluationView(target.attributes, target.hubMemberships, target.edgeMemberships);
    target.events = [...local.values()].sort((a, b) => a.ts - b.ts);
    trim(target.events, pr.at - EDGE_EVENT_RETENTION_MS);
    target.projectedAt = pr.at;
    target.revision++;
    for (const i of pr.identities) t.set(key(i), target);
    // A projected profile no request asked for yet counts as seen at the projection.
    if (adopted) this.admit(tenantKey, target, pr.at);
  }

  async forget(tenantKey: string, profileIds: ReadonlySet<string>): Promise<number> {
    const t = this.tenants.get(tenantKey);
    if (!t || profileIds.size === 0) return 0;
    const dropped = new Set<EdgeProfile>();
    for (const [k, p] of t) {
      if (p.profileId !== null && profileIds.has(p.profileId)) {
        t.delete(k);
        dropped.add(p);
      }
    }
    for (const p of dropped) this.queue.delete(p);
    if (t.size === 0) this.tenants.delete(tenantKey);
    return dropped.size;
  }

  async profiles(tenantKey: string): Promise<EdgeProfile[]> {
    return [...new Set(this.tenants.get(tenantKey)?.values() ?? [])];
  }

  async heldProfiles(tenantKey: string): Promise<HeldProfiles> {
    const out: HeldProfiles = { profileIds: [], identities: [] };
    for (const p of new Set(this.tenants.get(tenantKey)?.values() ?? [])) {
      if (p.profileId !== null) out.profileIds.push(p.profileId);
      else out.identities.push(...p.identities);
    }
    return out;
  }

  async tenantKeys(): Promise<string[]> {
    return [...this.tenants.keys()];
  }

  /** Profiles, identity entries and events held, over every tenant (diagnostics: walks the profiles). */
  sizes(): { profiles: number; entries: number; events: number; evicted: number } {
    let entries = 0;
    let events = 0;
    for (const t of this.tenants.values()) entries += t.size;
    for (const p of this.queue.keys()) events += p.events.length;
    return { profiles: this.queue.size, entries, events, evicted: this.evicted };
  }
}

function emptyProfile(identities: Identity[]): EdgeProfile {
  const edgeMemberships = new Map<string, MembershipEntry>();
  // seenAt from the start: one object shape for every entry (the store sets it when it admits the entry).
  return { profileId: null, identities, attributes: {}, optedOut: false, hubMemberships: {}, edgeMemberships, events: [], projectedAt: null, revision: 0, view: buildEvaluationView({}, {}, edgeMemberships), seenAt: 0 };
}

function insertEvent(events: EdgeEvent[], e: EdgeEvent): void {
  for (let k = 0; k < events.length; k++) if (events[k]!.id === e.id) return;
  let i = events.length;
  while (i > 0 && events[i - 1]!.ts > e.ts) i--;
  // Events mostly arrive in time order: appended without splice's array of removed items.
  if (i === events.length) events.push(e);
  else events.splice(i, 0, e);
}

function trim(events: EdgeEvent[], since: number): void {
  let n = 0;
  while (n < events.length && events[n]!.ts < since) n++;
  if (n > 0) events.splice(0, n);
}
