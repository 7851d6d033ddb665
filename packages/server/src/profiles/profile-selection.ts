// What a delivery payload reads of a profile (TransitionLog.profileSelections): its identities and
// the values at a few attribute paths of its merged profile. Shared by both stores; the merge is
// merge.ts's, the one getProfile uses, so a selection equals the same paths of getProfile's entity.
import { fragmentsOfProfile, mergeAttributes } from "./merge.js";
import type { ProfileSelection } from "./store.js";
import type { Identity, JsonObject, JsonValue, MergePolicySpec, ProfileFragment } from "./types.js";

/** The value at a dotted path (own keys of plain objects only, as the payload copies it); undefined when absent. */
export function valueAtPath(obj: JsonObject, parts: readonly string[]): JsonValue | undefined {
  let cur: JsonValue = obj;
  for (const p of parts) {
    if (cur === null || typeof cur !== "object" || Array.isArray(cur) || !Object.hasOwn(cur, p)) return undefined;
    cur = cur[p]!;
  }
  return cur;
}

/**
 * One profile's selection from its graph's identities (namespace, id order) and fragments (the
 * servable ones). Under identityGraph none the profile is its first identity's: getProfile of that
 * identity merges that identity's fragments alone. No identity (a deleted profile): no value.
 */
export function selectionOf(identities: Identity[], fragments: readonly ProfileFragment[], policy: MergePolicySpec, paths: ReadonlyArray<readonly string[]>): ProfileSelection {
  if (paths.length === 0 || identities.length === 0) return { identities, values: paths.map(() => undefined) };
  const lookedUp = policy.identityGraph.type === "none" ? identities[0]! : null;
  const attrs = mergeAttributes(fragmentsOfProfile(fragments, policy, lookedUp), policy);
  return { identities, values: paths.map((p) => valueAtPath(attrs, p)) };
}

/** Dotted paths split once per call. */
export function splitPaths(paths: readonly string[]): string[][] {
  return paths.map((p) => p.split("."));
}
