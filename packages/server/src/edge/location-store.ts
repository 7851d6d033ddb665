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

export interface LocationStore {
  readonly location: string;
  lookup(tenantKey: string, identity: Identity): Promise<EdgeProfile | undefined>;
  /** Store an event collected here; creates the profile entry if the location did not hold it. */
  collect(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): Promise<void>;
  setEdgeMemberships(tenantKey: string, identity: Identity, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): Promise<void>;
  /** Whether the location holds a profile with one of these identities (projection targets). */
  holds(tenantKey: string, identities: readonly Identity[]): Promise<boolean>;
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
  tenantKeys(): Promise<string[]>;
}

/** Edge-eligible windows are shorter than 24 h; keep a little more. */
export const EDGE_EVENT_RETENTION_MS = 25 * 60 * 60 * 1000;

function key(i: Identity): string {
  return `${i.namespace}\u0000${i.id}`;
}

export class InMemoryLocationStore implements LocationStore {
  private readonly tenants = new Map<string, Map<string, EdgeProfile>>();

  constructor(readonly location: string) {}

  private table(tenantKey: string): Map<string, EdgeProfile> {
    let t = this.tenants.get(tenantKey);
    if (!t) this.tenants.set(tenantKey, (t = new Map()));
    return t;
  }

  async lookup(tenantKey: string, identity: Identity): Promise<EdgeProfile | undefined> {
    return this.tenants.get(tenantKey)?.get(key(identity));
  }

  async collect(tenantKey: string, identity: Identity, event: EdgeEvent, now: number): Promise<void> {
    const t = this.table(tenantKey);
    let p = t.get(key(identity));
    if (!p) {
      p = { profileId: null, identities: [identity], attributes: {}, optedOut: false, hubMemberships: {}, edgeMemberships: new Map(), events: [], projectedAt: null, revision: 0 };
      t.set(key(identity), p);
    }
    insertEvent(p.events, event);
    trim(p.events, now - EDGE_EVENT_RETENTION_MS);
  }

  async setEdgeMemberships(tenantKey: string, identity: Identity, changes: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): Promise<void> {
    const p = this.tenants.get(tenantKey)?.get(key(identity));
    if (!p) return;
    for (const c of changes) p.edgeMemberships.set(c.definitionId, c.entry);
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
    if (held.length === 0) {
      if (!opts.adopt || pr.identities.length === 0) return;
      held.push({ profileId: null, identities: pr.identities, attributes: {}, optedOut: false, hubMemberships: {}, edgeMemberships: new Map(), events: [], projectedAt: null, revision: 0 });
    }
    // Entries of several identities of one graph become one profile.
    const target = held[0]!;
    const local = new Map<string, EdgeEvent>();
    for (const p of held) for (const e of p.events) local.set(e.id, e);
    for (const e of pr.events) local.set(e.id, e);
    for (const p of held.slice(1)) for (const [id, m] of p.edgeMemberships) if (!target.edgeMemberships.has(id)) target.edgeMemberships.set(id, m);
    target.profileId = pr.profileId;
    target.identities = pr.identities;
    target.attributes = pr.attributes;
    target.optedOut = pr.optedOut;
    target.hubMemberships = pr.memberships;
    target.events = [...local.values()].sort((a, b) => a.ts - b.ts);
    trim(target.events, pr.at - EDGE_EVENT_RETENTION_MS);
    target.projectedAt = pr.at;
    target.revision++;
    for (const i of pr.identities) t.set(key(i), target);
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
    return dropped.size;
  }

  async profiles(tenantKey: string): Promise<EdgeProfile[]> {
    return [...new Set(this.tenants.get(tenantKey)?.values() ?? [])];
  }

  async tenantKeys(): Promise<string[]> {
    return [...this.tenants.keys()];
  }
}

function insertEvent(events: EdgeEvent[], e: EdgeEvent): void {
  if (events.some((x) => x.id === e.id)) return;
  let i = events.length;
  while (i > 0 && events[i - 1]!.ts > e.ts) i--;
  events.splice(i, 0, e);
}

function trim(events: EdgeEvent[], since: number): void {
  let n = 0;
  while (n < events.length && events[n]!.ts < since) n++;
  if (n > 0) events.splice(0, n);
}
