// profileSelections (store.ts) as the embedded store's worker thread replies them (store-worker.ts
// wires, worker-store.ts unwires).
import type { ProfileSelection } from "../store.js";
import type { Identity, JsonValue } from "../types.js";

/**
 * profileSelections as the worker replies them: the identities as strings (namespace, id…) with a
 * count per profile, the values in one array (paths.length per profile). A delivery unit's 100
 * profiles are then a few arrays to clone, not some 400 small objects.
 */
export interface WireSelections {
  identities: string[];
  counts: Int32Array;
  values: Array<JsonValue | undefined>;
}

export function wireSelections(selections: readonly ProfileSelection[]): WireSelections {
  const identities: string[] = [];
  const counts = new Int32Array(selections.length);
  const values: Array<JsonValue | undefined> = [];
  for (let i = 0; i < selections.length; i++) {
    const s = selections[i]!;
    counts[i] = s.identities.length;
    for (const x of s.identities) identities.push(x.namespace, x.id);
    for (const v of s.values) values.push(v);
  }
  return { identities, counts, values };
}

export function unwireSelections(w: WireSelections, paths: number): ProfileSelection[] {
  const out = new Array<ProfileSelection>(w.counts.length);
  let k = 0;
  for (let i = 0; i < out.length; i++) {
    const identities = new Array<Identity>(w.counts[i]!);
    for (let j = 0; j < identities.length; j++, k += 2) identities[j] = { namespace: w.identities[k]!, id: w.identities[k + 1]! };
    out[i] = { identities, values: w.values.slice(i * paths, (i + 1) * paths) };
  }
  return out;
}
