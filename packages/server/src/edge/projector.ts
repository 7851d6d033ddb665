/**
 * Hub → edge projection: the hub's merged attributes, memberships and recent
 * events of a profile are copied to every location that holds the profile
 * (architecture-sketch flow 3). Until a projection reaches a location, that
 * location knows only what it collected itself.
 */
import type { Clock } from "../platform/clock.js";
import type { IdentityGraph, MembershipReads, ProfileReads } from "../profiles/store.js";
import { NO_MERGE_POLICY, type Identity, type JsonObject, type MergedProfile, type MergePolicySpec, type StoredEvent } from "../profiles/types.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import { tenantKey } from "../platform/tenant.js";
import type { MetadataStore } from "../stores/types.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import { EDGE_EVENT_RETENTION_MS, type Projection } from "./location-store.js";
import type { EdgeLocations } from "./locations.js";

/** Identities looked up in one identity-graph read. */
const LOOKUP_CHUNK = 1000;

export class EdgeProjector {
  constructor(
    private readonly hub: ProfileReads & IdentityGraph & MembershipReads,
    private readonly meta: MetadataStore,
    private readonly locations: EdgeLocations,
    private readonly clock: Clock,
  ) {}

  /** The merge policy active on edge decides what the edge sees of a profile (AEP's default when none is). */
  private async edgePolicy(tenant: TenantContext): Promise<MergePolicySpec> {
    const page = await this.meta.mergePolicies.list(scopeOf(tenant), {
      filters: { isActiveOnEdge: true },
      order: { field: "name", direction: "asc" },
      offset: 0,
      limit: 1,
    });
    const p = page.items[0]?.policy;
    if (!p) return NO_MERGE_POLICY;
    return { id: p.id, identityGraph: { type: p.identityGraph.type }, attributeMerge: p.attributeMerge.order ? { type: p.attributeMerge.type, order: p.attributeMerge.order } : { type: p.attributeMerge.type } };
  }

  /**
   * Project these profiles to the locations that hold them, except `skip`
   * (the location whose own event is the only change: it has that already).
   * Returns how many (profile, location) projections were written.
   */
  async project(tenant: TenantContext, profileIds: readonly string[], skip: ReadonlySet<string> = new Set()): Promise<number> {
    if (profileIds.length === 0) return 0;
    // Nothing to do (and no store reads) when every location is skipped: one location, its own event.
    if (this.locations.all().every((l) => skip.has(l.location))) return 0;
    const scope = scopeOf(tenant);
    const tk = tenantKey(tenant);
    const policy = await this.edgePolicy(tenant);
    let written = 0;
    for (const profileId of new Set(profileIds)) {
      const identities = await this.hub.graphIdentities(scope, profileId);
      if (identities.length === 0) continue;
      const targets = [];
      for (const loc of this.locations.all()) if (!skip.has(loc.location) && (await loc.holds(tk, identities, profileId))) targets.push(loc);
      if (targets.length === 0) continue;
      const now = this.clock.now();
      const profile = await this.hub.getProfile(scope, identities[0]!, policy);
      if (!profile) continue;
      const [page, memberships] = await Promise.all([
        this.hub.getEvents(scope, identities[0]!, policy, { startTime: now - EDGE_EVENT_RETENTION_MS, order: "asc", limit: 1000 }),
        this.hub.getMemberships(scope, profileId),
      ]);
      const projection = projectionOf(profile, memberships.map((m) => [m.definitionId, { status: m.status, lastQualificationTime: m.lastQualificationTime }]), page.events, now);
      for (const loc of targets) {
        await loc.project(tk, projection);
        written++;
      }
    }
    return written;
  }

  /**
   * The hub profile ids some location holds (entries no projection named yet are looked up by
   * their identities): what a batch job's changes are matched against, so that the work is bounded
   * by the locations' sizes. Null when a location cannot list what it holds.
   */
  async heldProfileIds(tenant: TenantContext): Promise<Set<string> | null> {
    const tk = tenantKey(tenant);
    const ids = new Set<string>();
    const unnamed: Identity[] = [];
    for (const loc of this.locations.all()) {
      if (loc.heldProfiles === undefined) return null;
      const held = await loc.heldProfiles(tk);
      for (const id of held.profileIds) ids.add(id);
      for (const i of held.identities) unnamed.push(i);
    }
    for (let i = 0; i < unnamed.length; i += LOOKUP_CHUNK) {
      for (const id of await this.hub.findProfileIds(scopeOf(tenant), unnamed.slice(i, i + LOOKUP_CHUNK))) if (id !== null) ids.add(id);
    }
    return ids;
  }

  /**
   * Remove profiles that a data-lifecycle delete made vanish from the hub from
   * every location (their projections and the events collected there).
   */
  async forget(tenant: TenantContext, profileIds: readonly string[]): Promise<number> {
    if (profileIds.length === 0) return 0;
    const ids = new Set(profileIds);
    let dropped = 0;
    for (const loc of this.locations.all()) dropped += await loc.forget(tenantKey(tenant), ids);
    return dropped;
  }

  /**
   * Give a location (this process's, or an edge node's) the projection of every profile of the
   * sandbox (a new or restarted location; the benchmark's warm start). Reads the hub in chunks.
   */
  async projectAll(tenant: TenantContext, location: string): Promise<number> {
    const loc = this.locations.get(location) ?? this.locations.remoteStore(location);
    if (!loc) throw new Error(`unknown edge location ${location}`);
    const scope = scopeOf(tenant);
    const tk = tenantKey(tenant);
    const policy = await this.edgePolicy(tenant);
    const now = this.clock.now();
    let n = 0;
    for await (const chunk of this.hub.scanProfiles(scope, policy, { eventsSince: now - EDGE_EVENT_RETENTION_MS })) {
      for (const p of chunk) {
        const ups = p.entity["segmentMembership"];
        const upsMap = typeof ups === "object" && ups !== null && !Array.isArray(ups) ? (ups as Record<string, unknown>)["ups"] : undefined;
        const memberships = typeof upsMap === "object" && upsMap !== null ? Object.entries(upsMap as Record<string, MembershipEntry>) : [];
        await loc.project(tk, projectionOf(p, memberships, p.events, now), { adopt: true });
        n++;
      }
    }
    return n;
  }
}

function projectionOf(profile: MergedProfile, memberships: Array<[string, MembershipEntry]>, events: readonly StoredEvent[], now: number): Projection {
  const attributes: JsonObject = { ...profile.entity };
  delete attributes["segmentMembership"];
  return {
    profileId: profile.profileId,
    identities: profile.identities,
    attributes,
    optedOut: profile.optedOut,
    memberships: Object.fromEntries(memberships),
    events: events.map((e) => ({ id: e.eventId, ts: e.timestamp, body: e.body })),
    at: now,
  };
}
