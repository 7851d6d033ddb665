/**
 * A profile's memberships across every audience, with history (issue #28): for each definition
 * it has a membership in, the status, last qualification time and the most recent transitions,
 * read from the membership store through the transition log's (definition, profile) index, the
 * definitions named from the profile's membership rows (one query however many audiences the
 * profile is in, never a definition's whole log).
 */
import type { IdentityGraph, MembershipReads } from "../profiles/store.js";
import type { MembershipStatus, MembershipTransition } from "../profiles/types.js";
import { normalizeNamespace } from "../profiles/validate.js";
import { notFound } from "../services/errors.js";
import { scopeOf, type TenantContext } from "../services/tenancy.js";
import type { MetadataStore } from "../stores/types.js";

/** Transitions shown per audience (the most recent), as explain shows. */
export const PROFILE_MEMBERSHIPS_MAX_HISTORY = 100;

export type ProfileMembershipsHub = Pick<IdentityGraph, "findProfileId"> & Pick<MembershipReads, "getMemberships" | "listTransitions">;

export interface ProfileMembership {
  segmentId: string;
  /** The definition's name; null when it no longer exists. */
  name: string | null;
  status: MembershipStatus;
  lastQualificationTime: string;
  /** Oldest first, the last PROFILE_MEMBERSHIPS_MAX_HISTORY. */
  transitions: Omit<MembershipTransition, "profileId" | "definitionId">[];
}

export interface ProfileMemberships {
  entityId: string;
  entityIdNS: string;
  profileId: string;
  /** By segment id. */
  memberships: ProfileMembership[];
}

export class ProfileMembershipsService {
  constructor(
    private readonly meta: MetadataStore,
    private readonly hub: ProfileMembershipsHub,
  ) {}

  async get(ctx: TenantContext, identity: { id: string; namespace: string }): Promise<ProfileMemberships> {
    const scope = scopeOf(ctx);
    const profileId = await this.hub.findProfileId(scope, { namespace: normalizeNamespace(identity.namespace), id: identity.id });
    if (profileId === null) throw notFound("Profile", `${identity.namespace}:${identity.id}`);
    const memberships = (await this.hub.getMemberships(scope, profileId)).sort((a, b) => (a.definitionId < b.definitionId ? -1 : a.definitionId > b.definitionId ? 1 : 0));
    const ids = memberships.map((m) => m.definitionId);
    // A profile's transitions are all of definitions it has a membership row in (an exit keeps its
    // row), so the limit cuts nothing.
    const [definitions, transitions] = await Promise.all([
      ids.length === 0 ? new Map() : this.meta.definitions.getMany(scope, ids),
      ids.length === 0 ? [] : this.hub.listTransitions(scope, {
        definitionIds: ids, profileIds: [profileId], latestPerMembership: PROFILE_MEMBERSHIPS_MAX_HISTORY, limit: ids.length * PROFILE_MEMBERSHIPS_MAX_HISTORY,
      }),
    ]);
    const byDefinition = new Map<string, ProfileMembership["transitions"]>();
    for (const t of transitions) {
      let list = byDefinition.get(t.definitionId);
      if (list === undefined) byDefinition.set(t.definitionId, (list = []));
      list.push({ from: t.from, to: t.to, source: t.source, at: t.at });
    }
    return {
      entityId: identity.id,
      entityIdNS: identity.namespace,
      profileId,
      memberships: memberships.map((m) => ({
        segmentId: m.definitionId,
        name: definitions.get(m.definitionId)?.definition.name ?? null,
        status: m.status,
        lastQualificationTime: m.lastQualificationTime,
        transitions: byDefinition.get(m.definitionId) ?? [],
      })),
    };
  }
}
