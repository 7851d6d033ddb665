/**
 * The 24-hourly disqualification pass for edge segment-of-segments audiences
 * (spec: "Profile disqualification then happens every 24 hours"). Requests
 * only ever qualify a profile for such an audience; this pass re-evaluates
 * every profile held at every location that is in one, and writes the exits
 * (at the location, and to the hub as edge transitions).
 */
import type { Clock } from "../platform/clock.js";
import type { MembershipChange, MembershipWrites } from "../profiles/store.js";
import { tenantKey } from "../platform/tenant.js";
import { scopeOf, type TenantDirectory } from "../services/tenancy.js";
import type { DefinitionCatalog } from "../streaming/definition-catalog.js";
import { evaluationProfile } from "./interact.js";
import type { EdgeLocations } from "./locations.js";

export const DISQUALIFICATION_INTERVAL_MS = 24 * 60 * 60 * 1000;

export interface DisqualificationResult {
  /** Exits written, per location. */
  exits: Array<{ location: string; profileId: string | null; definitionId: string }>;
}

export class SegmentOfSegmentsPass {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly deps: { tenants: TenantDirectory; catalog: DefinitionCatalog; locations: EdgeLocations; hub: MembershipWrites; clock: Clock; onError: (err: unknown) => void },
  ) {}

  start(intervalMs: number = DISQUALIFICATION_INTERVAL_MS): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.run().catch(this.deps.onError);
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  async run(now: number = this.deps.clock.now()): Promise<DisqualificationResult> {
    const exits: DisqualificationResult["exits"] = [];
    for (const tenant of this.deps.tenants.all()) {
      const set = await this.deps.catalog.get(tenant, "synchronous");
      const sos = set.definitions.filter((d) => d.queryType === "segment-of-segments");
      if (sos.length === 0) continue;
      const tk = tenantKey(tenant);
      const hubChanges: MembershipChange[] = [];
      for (const loc of this.deps.locations.all()) {
        for (const p of await loc.profiles(tk)) {
          const { profile } = evaluationProfile(p);
          const events = p.events.map((e) => e.body);
          const changes = [];
          for (const d of sos) {
            const status = p.edgeMemberships.get(d.id)?.status ?? p.hubMemberships[d.id]?.status;
            if (status !== "realized") continue;
            const stays = !(d.excludeOptOut && p.optedOut) && d.predicate({ profile, events, now });
            if (stays) continue;
            const prev = p.edgeMemberships.get(d.id) ?? p.hubMemberships[d.id];
            changes.push({ definitionId: d.id, entry: { status: "exited" as const, lastQualificationTime: prev?.lastQualificationTime ?? new Date(now).toISOString() } });
            exits.push({ location: loc.location, profileId: p.profileId, definitionId: d.id });
            if (p.profileId) hubChanges.push({ profileId: p.profileId, definitionId: d.id, status: "exited", source: "edge", at: now });
          }
          if (changes.length > 0) await loc.setEdgeMemberships(tk, p.identities[0]!, changes);
        }
      }
      // The hub records each exit once, even when several locations held the profile.
      if (hubChanges.length > 0) await this.deps.hub.applyMembershipChanges(scopeOf(tenant), hubChanges);
    }
    return { exits };
  }
}
