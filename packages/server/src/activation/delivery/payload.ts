// The request body of a webhook delivery: a JSON array with one object per profile in AEP's HTTP
// API destination shape — the selected attributes (read from the profile store at send time),
// `identityMap` (selected namespaces), `segmentMembership.ups.<audienceId>` `{status,
// lastQualificationTime}` — plus `_segmentd` (a segmentd addition): the profile id and the log
// positions delivered, so that a receiver can order and deduplicate transitions.
import type { ProfileSelection, ProfileStore } from "../../profiles/store.js";
import type { MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { ProfileSelectors } from "../types.js";
import type { UnitItem } from "./state-store.js";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export interface ProfilePayload {
  identityMap: Record<string, Array<{ id: string }>>;
  segmentMembership: { ups: Record<string, { status: UnitItem["status"]; lastQualificationTime: string }> };
  _segmentd: { profileId: string; seqs: number[] };
  [attribute: string]: unknown;
}

/** Sets a dotted path's value in `dst`, making the objects above it. */
export function setPath(dst: Record<string, unknown>, parts: readonly string[], value: Json): void {
  let to = dst;
  for (const p of parts.slice(0, -1)) {
    if (!Object.hasOwn(to, p) || typeof to[p] !== "object" || to[p] === null) to[p] = {};
    to = to[p] as Record<string, unknown>;
  }
  to[parts[parts.length - 1]!] = value;
}

/**
 * The deliverer's reads of one store, one at a time (each flow sends several units at once): on
 * the embedded store's single thread a job's write then waits behind one delivery read, not
 * behind one per unit in flight. The reads are served one after the other there anyway.
 */
const gates = new WeakMap<object, Promise<unknown>>();
export function serially<T>(store: object, fn: () => Promise<T>): Promise<T> {
  const p = (gates.get(store) ?? Promise.resolve()).then(fn, fn);
  gates.set(store, p.catch(() => undefined));
  return p;
}

/** Attribute paths as selected, without `xdm:`, the delivery's own fields left out. */
export function attributePaths(selectors: ProfileSelectors): string[] {
  // The membership, identities and segmentd's own fields are the delivery's, never an attribute's.
  return selectors.attributes.map((a) => a.replace(/^xdm:/, "")).filter((p) => !/^(identityMap|segmentMembership|_segmentd)(\.|$)/.test(p));
}

export async function buildPayload(store: ProfileStore, scope: TenantScope, items: readonly UnitItem[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<ProfilePayload[]> {
  // Profiles in the order of their first item; a profile's items in unit order.
  const out: ProfilePayload[] = [];
  const byProfile = new Map<string, ProfilePayload>();
  // A unit's transitions mostly share a few timestamps: each formatted once.
  const iso = new Map<number, string>();
  for (const it of items) {
    let p = byProfile.get(it.profileId);
    if (p === undefined) {
      p = { identityMap: {}, segmentMembership: { ups: {} }, _segmentd: { profileId: it.profileId, seqs: [] } };
      byProfile.set(it.profileId, p);
      out.push(p);
    }
    if (it.seq > 0) p._segmentd.seqs.push(it.seq);
    let t = iso.get(it.at);
    if (t === undefined) iso.set(it.at, t = new Date(it.at).toISOString());
    p.segmentMembership.ups[it.audienceId] = { status: it.status, lastQualificationTime: t };
  }
  const namespaces = new Set(selectors.identityNamespaces.map((n) => n.toLowerCase()));
  // One store read for the unit's identities — with attributes, the same read answers the selected
  // paths of each merged profile too (ProfileStore.profileSelections), never a whole profile. A
  // deleted profile has no identity left and still arrives (exited), with its id.
  const ids = [...byProfile.keys()];
  const paths = attributePaths(selectors);
  const read: ProfileSelection[] = paths.length > 0
    ? await serially(store, () => store.profileSelections(scope, ids, policy, paths))
    : (await serially(store, () => store.graphIdentitiesOf(scope, ids))).map((identities) => ({ identities, values: [] }));
  const parts = paths.map((p) => p.split("."));
  for (let k = 0; k < out.length; k++) {
    const p = out[k]!;
    const sel = read[k];
    for (const id of sel?.identities ?? []) {
      if (namespaces.size > 0 && !namespaces.has(id.namespace.toLowerCase())) continue;
      (p.identityMap[id.namespace] ??= []).push({ id: id.id });
    }
    for (let j = 0; j < parts.length; j++) {
      const v = sel?.values[j];
      if (v !== undefined) setPath(p, parts[j]!, v);
    }
  }
  return out;
}
