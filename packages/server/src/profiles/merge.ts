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
import { deepMerge, isPlainObject } from "./xdm-object.js";

export function sameIdentity(a: Identity, b: Identity): boolean {
  return a.namespace === b.namespace && a.id === b.id;
}

/** Fragments that belong to the profile under the policy's identity graph type. */
export function selectFragments(fragments: readonly ProfileFragment[], policy: MergePolicySpec, lookedUp: Identity): ProfileFragment[] {
  if (policy.identityGraph.type === "pdg") return [...fragments];
  return fragments.filter((f) => sameIdentity(f.primary, lookedUp));
}

/** The fragments a merged profile is made of: the graph's, or for a look-up under identityGraph none the identity's own. */
export function fragmentsOfProfile(fragments: readonly ProfileFragment[], policy: MergePolicySpec, lookedUp: Identity | null): ProfileFragment[] {
  return lookedUp === null ? [...fragments] : selectFragments(fragments, policy, lookedUp);
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

/** A dataSetPrecedence order's datasets by place (0 = first); a dataset listed twice keeps its first place. */
function precedenceRanks(order: readonly string[]): Map<string, number> {
  const rank = new Map<string, number>();
  order.forEach((ds, i) => { if (!rank.has(ds)) rank.set(ds, i); });
  return rank;
}

/** Under dataSetPrecedence, a dataset's place in the policy's order (1 = first); null when unlisted or under another rule. */
export function datasetRank(policy: MergePolicySpec, datasetId: string): number | null {
  if (policy.attributeMerge.type !== "dataSetPrecedence") return null;
  const r = precedenceRanks(policy.attributeMerge.order ?? []).get(datasetId);
  return r === undefined ? null : r + 1;
}

/** Fragments from lowest to highest precedence: the last one applied wins. */
export function precedenceOrder(fragments: readonly ProfileFragment[], policy: MergePolicySpec): ProfileFragment[] {
  const sorted = [...fragments].sort(compareByTime);
  if (policy.attributeMerge.type === "timestampOrdered") return sorted;
  const rank = precedenceRanks(policy.attributeMerge.order ?? []);
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

/**
 * The fragment that supplied the merged attributes' value at `path` (explain's provenance): the
 * mergeAttributes fold replayed, the last fragment in precedence order whose body, overlaid by
 * deepMerge, gives the path a value, or takes it away by replacing an object above it with a
 * scalar or an array (which merge whole). An object at the path merged key by key from several
 * fragments is credited to the last of them. Null when no fragment gives the path a value.
 */
export function attributeSource(fragments: readonly ProfileFragment[], policy: MergePolicySpec, path: readonly string[]): ProfileFragment | null {
  return attributeSources(fragments, policy, [path])[0] ?? null;
}

/** attributeSource of each path, in one replay of the fold. */
export function attributeSources(fragments: readonly ProfileFragment[], policy: MergePolicySpec, paths: readonly (readonly string[])[]): Array<ProfileFragment | null> {
  let merged: JsonObject = {};
  const sources = paths.map((): ProfileFragment | null => null);
  for (const f of precedenceOrder(fragments, policy)) {
    paths.forEach((path, i) => { if (overlaySets(merged, f.body, path)) sources[i] = f; });
    merged = deepMerge(merged, f.body);
  }
  return sources;
}

/** Whether deepMerge(base, top) decides the value at `path` (attributeSource). */
function overlaySets(base: JsonObject, top: JsonObject, path: readonly string[]): boolean {
  let b: JsonObject | undefined = base;
  let t = top;
  for (let i = 0; i < path.length; i++) {
    const key = path[i]!;
    if (!Object.hasOwn(t, key)) return false;
    const v = t[key] as JsonValue;
    if (i === path.length - 1) return true;
    const prev: JsonValue | undefined = b !== undefined && Object.hasOwn(b, key) ? b[key] : undefined;
    // A scalar or array replaces what was here: it decides the path only if the path had a value.
    if (!isPlainObject(v)) return valueAtKeys(prev, path.slice(i + 1)) !== undefined;
    // An object merges into an object, or replaces anything else (nothing below it then).
    b = isPlainObject(prev) ? prev : undefined;
    t = v;
  }
  return true;
}

function valueAtKeys(v: JsonValue | undefined, keys: readonly string[]): JsonValue | undefined {
  let cur = v;
  for (const k of keys) {
    if (!isPlainObject(cur) || !Object.hasOwn(cur, k)) return undefined;
    cur = cur[k];
  }
  return cur;
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
  const fragments = fragmentsOfProfile(input.fragments, policy, lookedUp);
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
