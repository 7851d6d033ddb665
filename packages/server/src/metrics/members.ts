/**
 * An audience's members, a page at a time (issue #28): each member's identities,
 * status, last qualification time and the transition that gave it the status
 * (source batch / streaming / edge, and when), read from the membership store.
 */
import type { IdentityGraph, MembershipReads } from "../profiles/store.js";
import type { Identity, MembershipStatus } from "../profiles/types.js";
import { notFound } from "../services/errors.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";

export const MEMBERS_DEFAULT_LIMIT = 20;
export const MEMBERS_MAX_LIMIT = 100;

export interface Member {
  profileId: string;
  identities: Identity[];
  status: MembershipStatus;
  lastQualificationTime: string;
  /** The transition that set the status; null when the log no longer holds it. */
  since: { source: string; at: string } | null;
}

export interface MemberPage {
  segmentId: string;
  status: MembershipStatus;
  children: Member[];
  _page: { count: number; limit: number; totalCount: number; next: string | null };
}

export type MembersHub = MembershipReads & Pick<IdentityGraph, "graphIdentities">;

export class AudienceMembers {
  constructor(
    private readonly meta: MetadataStore,
    private readonly hub: MembersHub,
  ) {}

  async page(ctx: TenantContext, definitionId: string, q: { status: MembershipStatus; limit: number; after?: string }): Promise<MemberPage> {
    const scope = scopeOf(ctx);
    if (!(await this.meta.definitions.get(scope, definitionId))) throw notFound("Segment definition", definitionId);
    const members = await this.hub.listMembers(scope, definitionId, { status: q.status, limit: q.limit, ...(q.after === undefined ? {} : { afterProfileId: q.after }) });
    const ids = members.map((m) => m.profileId);
    const [counts, transitions, identities] = await Promise.all([
      this.hub.countMembers(scope, definitionId),
      ids.length === 0 ? [] : this.hub.listTransitions(scope, { definitionId, profileIds: ids, latestPerMembership: 1 }),
      Promise.all(ids.map((id) => this.hub.graphIdentities(scope, id))),
    ]);
    // The newest transition of each member: the one that set its current status.
    const last = new Map(transitions.map((t) => [t.profileId, t]));
    const children = members.map((m, i): Member => {
      const t = last.get(m.profileId);
      return {
        profileId: m.profileId,
        identities: identities[i]!,
        status: m.status,
        lastQualificationTime: m.lastQualificationTime,
        since: t !== undefined && t.to === m.status ? { source: t.source, at: t.at } : null,
      };
    });
    return {
      segmentId: definitionId,
      status: q.status,
      children,
      _page: { count: children.length, limit: q.limit, totalCount: counts[q.status], next: children.length === q.limit ? ids[ids.length - 1]! : null },
    };
  }
}
