// Merge policy semantics: which fragments make up a profile (identityGraph) and
// how their attributes combine (attributeMerge). Pure functions; the stores feed
// them the fragments of a graph and return the result.
//
//   identityGraph none  → only the fragments keyed by the looked-up identity itself
//                         (the fragment's primary identity), no stitching.
//   identityGraph pdg   → every fragment of the stitched private identity graph.
//   timestampOrdered    → newest fragment wins per attribute; objects merge deeply.
//                         Fragment time = _repo.modifyDate if the record had one,
//                         else its ingestion time.
//   dataSetPrecedence   → a dataset earlier in `order` wins per attribute. Fragments
//                         of datasets missing from `order` rank below every listed
//                         dataset, newest first among themselves (documented choice:
//                         AEP requires listing every dataset; we degrade gracefully).
import { isOptedOut } from "./consent.js";
import type {
  Identity,
  JsonObject,
  JsonValue,
  Membership,
  MergedProfile,
  MergePolicySpec,
  ProfileFragment,
  StoredEvent,
} from "./types.js";
import { identityKey } from "./validate.js";
import { deepMerge } from "./xdm-object.js";

export function sameIdentity(a: Identity, b: Identity): boolean {
  return a.namespace === b.namespace && a.id === b.id;
}

/** Fragments that belong to the profile under the policy's identity graph type. */
export function selectFragments(fragments: readonly ProfileFragment[], policy: MergePolicySpec, lookedUp: Identity): ProfileFragment[] {
  if (policy.identityGraph.type === "pdg") return [...fragments];
  return fragments.filter((f) => sameIdentity(f.primary, lookedUp));
}

/** Events that belong to the profile under the policy's identity graph type. */
export function selectEvents(events: readonly StoredEvent[], policy: MergePolicySpec, lookedUp: Identity): StoredEvent[] {
  if (policy.identityGraph.type === "pdg") return [...events];
  return events.filter((e) => sameIdentity(e.primary, lookedUp));
}

function compareByTime(a: ProfileFragment, b: ProfileFragment): number {
  // Ties broken by dataset and identity so that both stores merge identically.
  return a.timestamp - b.timestamp || a.datasetId.localeCompare(b.datasetId) ||
    identityKey(a.primary).localeCompare(identityKey(b.primary));
}

/** Fragments from lowest to highest precedence: the last one applied wins. */
export function precedenceOrder(fragments: readonly ProfileFragment[], policy: MergePolicySpec): ProfileFragment[] {
  const sorted = [...fragments].sort(compareByTime);
  if (policy.attributeMerge.type === "timestampOrdered") return sorted;
  const order = policy.attributeMerge.order ?? [];
  const rank = new Map<string, number>();
  order.forEach((ds, i) => { if (!rank.has(ds)) rank.set(ds, i); });
  // Unlisted datasets rank lowest (Infinity); within one rank, time order stays (stable sort).
  const r = (f: ProfileFragment) => rank.get(f.datasetId) ?? Number.POSITIVE_INFINITY;
  return sorted.sort((a, b) => {
    const ra = r(a), rb = r(b);
    return ra === rb ? 0 : ra > rb ? -1 : 1;
  });
}

export function mergeAttributes(fragments: readonly ProfileFragment[], policy: MergePolicySpec): JsonObject {
  let out: JsonObject = {};
  for (const f of precedenceOrder(fragments, policy)) out = deepMerge(out, f.body);
  return out;
}

export function identityMapOf(identities: readonly Identity[]): JsonObject {
  const map: { [ns: string]: JsonValue[] } = {};
  for (const i of identities) (map[i.namespace] ??= []).push({ id: i.id });
  return map;
}

export function segmentMembershipOf(memberships: readonly Membership[]): JsonObject {
  const ups: JsonObject = {};
  for (const m of memberships) ups[m.definitionId] = { status: m.status, lastQualificationTime: m.lastQualificationTime };
  return { ups };
}

export interface MergeInput {
  profileId: string;
  /** Every identity of the stitched graph. */
  graphIdentities: readonly Identity[];
  /** Every fragment of the stitched graph. */
  fragments: readonly ProfileFragment[];
  memberships: readonly Membership[];
  policy: MergePolicySpec;
  /** The identity the caller looked the profile up by; null for scans (whole graph). */
  lookedUp: Identity | null;
}

export function buildMergedProfile(input: MergeInput): MergedProfile {
  const { policy, lookedUp } = input;
  const none = policy.identityGraph.type === "none" && lookedUp !== null;
  const fragments = none ? selectFragments(input.fragments, policy, lookedUp) : [...input.fragments];
  const identities = none ? [lookedUp] : [...input.graphIdentities];
  const attrs = mergeAttributes(fragments, policy);
  // identityMap arrays would be replaced fragment by fragment; the graph is the truth.
  // Ingested namespaces (external audiences' members) stay; `ups` is the service's own.
  const ingested = attrs["segmentMembership"];
  const own = segmentMembershipOf(input.memberships);
  // Most profiles have no ingested namespace: no second object for them (batch scans merge millions).
  const segmentMembership = ingested !== null && typeof ingested === "object" && !Array.isArray(ingested) ? { ...ingested, ...own } : own;
  const entity: JsonObject = { ...attrs, identityMap: identityMapOf(identities), segmentMembership };
  const sources = [...new Set(fragments.map((f) => f.datasetId))].sort();
  const lastModifiedAt = fragments.length === 0 ? null : Math.max(...fragments.map((f) => f.timestamp));
  return { profileId: input.profileId, identities, entity, sources, lastModifiedAt, optedOut: isOptedOut(attrs) };
}
