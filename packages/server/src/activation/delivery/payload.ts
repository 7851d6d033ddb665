// The request body of a webhook delivery: a JSON array with one object per profile in AEP's HTTP
// API destination shape — the selected attributes (read from the profile store at send time),
// `identityMap` (selected namespaces), `segmentMembership.ups.<audienceId>` `{status,
// lastQualificationTime}` — plus `_segmentd` (a segmentd addition): the profile id and the log
// positions delivered, so that a receiver can order and deduplicate transitions.
import type { ProfileStore } from "../../profiles/store.js";
import type { Identity, MergePolicySpec, TenantScope } from "../../profiles/types.js";
import type { ProfileSelectors } from "../types.js";
import type { UnitItem } from "./state-store.js";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export interface ProfilePayload {
  identityMap: Record<string, Array<{ id: string }>>;
  segmentMembership: { ups: Record<string, { status: UnitItem["status"]; lastQualificationTime: string }> };
  _segmentd: { profileId: string; seqs: number[] };
  [attribute: string]: unknown;
}

/** Copies a dotted path's value from `src` into `dst` (nothing when absent). */
function copyPath(src: Record<string, unknown>, dst: Record<string, unknown>, dotted: string): void {
  const parts = dotted.split(".");
  let from: unknown = src;
  for (const p of parts) {
    if (from === null || typeof from !== "object" || Array.isArray(from) || !Object.hasOwn(from, p)) return;
    from = (from as Record<string, unknown>)[p];
  }
  let to = dst;
  for (const p of parts.slice(0, -1)) {
    if (!Object.hasOwn(to, p) || typeof to[p] !== "object" || to[p] === null) to[p] = {};
    to = to[p] as Record<string, unknown>;
  }
  to[parts[parts.length - 1]!] = from as Json;
}

export async function buildPayload(store: ProfileStore, scope: TenantScope, items: readonly UnitItem[], selectors: ProfileSelectors, policy: MergePolicySpec): Promise<ProfilePayload[]> {
  const byProfile = new Map<string, UnitItem[]>();
  for (const it of items) {
    const list = byProfile.get(it.profileId);
    if (list === undefined) byProfile.set(it.profileId, [it]);
    else list.push(it);
  }
  const namespaces = new Set(selectors.identityNamespaces.map((n) => n.toLowerCase()));
  // One read for the unit's identities; a deleted profile has none left and still arrives (exited), with its id.
  const ids = [...byProfile.keys()];
  const graphs = await store.graphIdentitiesOf(scope, ids);
  return Promise.all([...byProfile].map(async ([profileId, its], k) => {
    const identities: Identity[] = graphs[k] ?? [];
    const out: ProfilePayload = { identityMap: {}, segmentMembership: { ups: {} }, _segmentd: { profileId, seqs: its.filter((i) => i.seq > 0).map((i) => i.seq) } };
    for (const id of identities) {
      if (namespaces.size > 0 && !namespaces.has(id.namespace.toLowerCase())) continue;
      (out.identityMap[id.namespace] ??= []).push({ id: id.id });
    }
    if (selectors.attributes.length > 0 && identities.length > 0) {
      const profile = await store.getProfile(scope, identities[0]!, policy);
      if (profile !== null) {
        for (const a of selectors.attributes) {
          const path = a.replace(/^xdm:/, "");
          // The membership, identities and segmentd's own fields are the delivery's, never an attribute's.
          if (!/^(identityMap|segmentMembership|_segmentd)(\.|$)/.test(path)) copyPath(profile.entity as Record<string, unknown>, out, path);
        }
      }
    }
    for (const it of its) out.segmentMembership.ups[it.audienceId] = { status: it.status, lastQualificationTime: new Date(it.at).toISOString() };
    return out;
  }));
}
