// readTransitionLog (store.ts) as the embedded store's worker thread replies it (store-worker.ts
// wires, worker-store.ts unwires): columns, not one object per row. A delivery read is hundreds
// of rows; typed arrays and two short string lists clone as a few copies, where the row objects
// cost the worker and the main thread a structured clone each (bench:activation).
import type { LoggedTransition } from "../store.js";
import type { MembershipStatus } from "../types.js";

export interface WireTransitions {
  seqs: Float64Array;
  pids: Float64Array;
  at: Float64Array;
  /** Index into `definitionIds`. */
  defs: Int32Array;
  /** Index into `statuses`; from -1: null. */
  from: Int8Array;
  to: Int8Array;
  definitionIds: string[];
  statuses: MembershipStatus[];
}

export function wireTransitions(rows: readonly LoggedTransition[]): WireTransitions {
  const n = rows.length;
  const w: WireTransitions = { seqs: new Float64Array(n), pids: new Float64Array(n), at: new Float64Array(n), defs: new Int32Array(n), from: new Int8Array(n), to: new Int8Array(n), definitionIds: [], statuses: [] };
  const defIndex = new Map<string, number>();
  const statusIndex = new Map<MembershipStatus, number>();
  const statusOf = (s: MembershipStatus): number => {
    let i = statusIndex.get(s);
    if (i === undefined) statusIndex.set(s, i = w.statuses.push(s) - 1);
    return i;
  };
  for (let k = 0; k < n; k++) {
    const r = rows[k]!;
    w.seqs[k] = r.seq;
    // Profile ids of the embedded store are integers (sent as numbers, made strings again).
    w.pids[k] = Number(r.profileId);
    w.at[k] = r.at;
    let d = defIndex.get(r.definitionId);
    if (d === undefined) defIndex.set(r.definitionId, d = w.definitionIds.push(r.definitionId) - 1);
    w.defs[k] = d;
    w.from[k] = r.from === null ? -1 : statusOf(r.from);
    w.to[k] = statusOf(r.to);
  }
  return w;
}

export function unwireTransitions(w: WireTransitions): LoggedTransition[] {
  const out = new Array<LoggedTransition>(w.seqs.length);
  for (let k = 0; k < out.length; k++) {
    const f = w.from[k]!;
    out[k] = { seq: w.seqs[k]!, profileId: String(w.pids[k]!), definitionId: w.definitionIds[w.defs[k]!]!, from: f < 0 ? null : w.statuses[f]!, to: w.statuses[w.to[k]!]!, at: w.at[k]! };
  }
  return out;
}
