/**
 * After records are deleted, profiles left with no data disappear, and their
 * audience memberships exit (decisions §2: every transition is recorded).
 *
 * The profile store keeps memberships of an emptied graph precisely so that
 * this step can record the exits. MembershipSource has no lifecycle value, so
 * the exits are recorded as `batch` (a data-lifecycle job is a batch process,
 * and these exits must not count as streaming/edge "new audience updated").
 */
import type { DatasetCatalog, IdentityGraph, LifecycleWrites, MembershipReads, MembershipWrites, ProfileReads } from "../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../profiles/types.js";

/**
 * What work orders and expirations call: datasets read and deleted, records deleted and
 * updated, and (here) a vanished profile's data checked and its memberships exited.
 */
export type LifecycleProfileStore = DatasetCatalog & LifecycleWrites & IdentityGraph & ProfileReads & MembershipReads & MembershipWrites;

/** Stitched view: a profile exists while any identity of its graph still has a fragment or an event. */
const STITCHED: MergePolicySpec = { identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } };

async function hasData(store: LifecycleProfileStore, scope: TenantScope, profileId: string): Promise<boolean> {
  const identities = await store.graphIdentities(scope, profileId);
  const first = identities[0];
  if (first === undefined) return false;
  const profile = await store.getProfile(scope, first, STITCHED);
  if (profile !== null && profile.sources.length > 0) return true;
  const events = await store.getEvents(scope, first, STITCHED, { limit: 1 });
  return events.events.length > 0;
}

export interface ExitOutcome {
  profilesRemoved: number;
  membershipsExited: number;
  /** Ids of the profiles that disappeared. */
  removedProfileIds: string[];
}

/**
 * What a lifecycle job changed, for the engines that keep their own copies
 * (edge projections, streaming state): profiles whose data changed, and those
 * that disappeared entirely.
 */
export interface LifecycleChange {
  scope: TenantScope;
  cause: { kind: "workorder" | "expiration"; id: string };
  changedProfileIds: string[];
  removedProfileIds: string[];
}

export type LifecycleListener = (change: LifecycleChange) => void | Promise<void>;

export async function exitVanishedProfiles(store: LifecycleProfileStore, scope: TenantScope, profileIds: readonly string[], at: number): Promise<ExitOutcome> {
  let membershipsExited = 0;
  const removedProfileIds: string[] = [];
  for (const profileId of profileIds) {
    if (await hasData(store, scope, profileId)) continue;
    removedProfileIds.push(profileId);
    const realized = (await store.getMemberships(scope, profileId)).filter((m) => m.status === "realized");
    if (realized.length === 0) continue;
    const transitions = await store.applyMembershipChanges(
      scope,
      realized.map((m) => ({ profileId, definitionId: m.definitionId, status: "exited" as const, source: "batch" as const, at })),
    );
    membershipsExited += transitions.length;
  }
  return { profilesRemoved: removedProfileIds.length, membershipsExited, removedProfileIds };
}
