/**
 * The hub's view of a location served by an edge node: a projection target. It learns which
 * profiles the site holds from the events the site forwards (the site holds every profile it
 * collected an event of), and publishes their projections, or that they must be forgotten, to
 * the site's subjects of the hub's last-value projection stream. The site's node reads them
 * from where it left off. Interact is never served here: the edge node serves it.
 */
import type { Identity } from "../profiles/types.js";
import type { EdgeProfile, EdgeEvent, HeldProfiles, LocationStore, Projection } from "../edge/location-store.js";
import type { MembershipEntry } from "../streaming/profile-state.js";
import { projectionSubject } from "./subjects.js";
import type { ProjectionMessage } from "./wire.js";

export type PublishProjection = (subject: string, message: ProjectionMessage) => Promise<void>;

function key(i: Identity): string {
  return `${i.namespace}\u0000${i.id}`;
}

/** Projections being published at once. */
const MAX_IN_FLIGHT = 1024;

/** Identity keys remembered per tenant; beyond, the oldest are forgotten (the site's own bound is 100,000 profiles). */
const MAX_IDENTITIES = 1_000_000;

export class RemoteLocationStore implements LocationStore {
  /** Per tenant: identity key → the hub profile id it was projected under (null: not yet). */
  private readonly held = new Map<string, Map<string, string | null>>();
  private size = 0;
  private readonly inFlight = new Set<Promise<void>>();
  /** Per tenant: hub profile ids the site was sent a projection of. */
  private readonly projected = new Map<string, Set<string>>();
  /** Projections whose publish failed (reported on the first and every 1,000th). */
  failed = 0;

  constructor(
    readonly location: string,
    private readonly publish: PublishProjection,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  /** The site collected an event of this identity: it holds the profile from now on. */
  note(tenantKey: string, identity: Identity): void {
    let m = this.held.get(tenantKey);
    if (!m) this.held.set(tenantKey, (m = new Map()));
    const k = key(identity);
    if (m.has(k)) return;
    m.set(k, null);
    if (++this.size > MAX_IDENTITIES) this.dropOldest();
  }

  private dropOldest(): void {
    for (const m of this.held.values()) {
      const first = m.keys().next();
      if (first.done !== true) {
        m.delete(first.value);
        this.size--;
        return;
      }
    }
  }

  async holds(tenantKey: string, identities: readonly Identity[], profileId?: string): Promise<boolean> {
    if (profileId !== undefined && this.projected.get(tenantKey)?.has(profileId) === true) return true;
    const m = this.held.get(tenantKey);
    return m !== undefined && identities.some((i) => m.has(key(i)));
  }

  /**
   * A profile the site was sent a projection of (as the projection stream still holds it): it is
   * held. The hub learns these again from the stream when it starts, so a restart does not stop
   * the site's profiles from being kept current.
   */
  noteProjected(tenantKey: string, profileId: string): void {
    let set = this.projected.get(tenantKey);
    if (!set) this.projected.set(tenantKey, (set = new Set()));
    set.add(profileId);
  }

  /** Another hub told the site to forget this profile: no longer held (nothing is published). */
  unnoteProjected(tenantKey: string, profileId: string): void {
    this.projected.get(tenantKey)?.delete(profileId);
    const m = this.held.get(tenantKey);
    for (const [k, pid] of m ?? []) {
      if (pid === profileId) {
        m!.delete(k);
        this.size--;
      }
    }
  }

  async project(tenantKey: string, projection: Projection, opts?: { adopt?: boolean }): Promise<void> {
    if (opts?.adopt !== true && !(await this.holds(tenantKey, projection.identities, projection.profileId))) return;
    let m = this.held.get(tenantKey);
    if (!m) this.held.set(tenantKey, (m = new Map()));
    for (const i of projection.identities) {
      if (!m.has(key(i))) this.size++;
      m.set(key(i), projection.profileId);
    }
    this.noteProjected(tenantKey, projection.profileId);
    await this.send(projectionSubject(this.location, tenantKey, projection.profileId), { v: 1, tenantKey, projection, adopt: true });
  }

  /**
   * Publishes without making the caller (the hub forwarder's follow-ups) wait for each
   * acknowledgement: up to MAX_IN_FLIGHT at once, waiting only beyond that. A projection is a
   * cache of the hub: one lost to an outage is replaced by the profile's next change.
   */
  private async send(subject: string, message: ProjectionMessage): Promise<void> {
    while (this.inFlight.size >= MAX_IN_FLIGHT) await Promise.race(this.inFlight);
    const p: Promise<void> = this.publish(subject, message)
      .catch((err: unknown) => {
        this.failed++;
        if (this.failed === 1 || this.failed % 1000 === 0) this.onError(err);
      })
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  /** Waits for the projections sent so far (tests, benches). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  async forget(tenantKey: string, profileIds: ReadonlySet<string>): Promise<number> {
    const m = this.held.get(tenantKey);
    const gone = new Set<string>();
    for (const [k, pid] of m ?? []) {
      if (pid !== null && profileIds.has(pid)) {
        m!.delete(k);
        this.size--;
        gone.add(pid);
      }
    }
    for (const pid of profileIds) if (this.projected.get(tenantKey)?.delete(pid) === true) gone.add(pid);
    for (const pid of gone) await this.send(projectionSubject(this.location, tenantKey, pid), { v: 1, tenantKey, forget: pid });
    return gone.size;
  }

  // Served by the edge node, not here.
  async lookup(): Promise<EdgeProfile | undefined> {
    throw new Error(`edge location '${this.location}' is served by its edge node`);
  }
  async collect(_tk: string, _i: Identity, _e: EdgeEvent): Promise<void> {
    throw new Error(`edge location '${this.location}' is served by its edge node`);
  }
  async setEdgeMemberships(_tk: string, _i: Identity, _c: ReadonlyArray<{ definitionId: string; entry: MembershipEntry }>): Promise<void> {
    throw new Error(`edge location '${this.location}' is served by its edge node`);
  }
  /** The profiles the site was sent, and the identities it reported that no projection named yet. */
  async heldProfiles(tenantKey: string): Promise<HeldProfiles> {
    const ids = new Set(this.projected.get(tenantKey) ?? []);
    const identities: Identity[] = [];
    for (const [k, pid] of this.held.get(tenantKey) ?? []) {
      if (pid !== null) ids.add(pid);
      else {
        const cut = k.indexOf("\u0000");
        identities.push({ namespace: k.slice(0, cut), id: k.slice(cut + 1) });
      }
    }
    return { profileIds: [...ids], identities };
  }

  /** The 24-hourly pass runs on the edge node. */
  async profiles(): Promise<EdgeProfile[]> {
    return [];
  }
  async tenantKeys(): Promise<string[]> {
    return [];
  }
}
