// The transitions table read as the delivery outbox (store.ts TransitionLog). SQLite has one
// writer, so rowid order is commit order: no snapshot is needed to read behind the writer.
import { fragmentRecordId } from "../quarantine.js";
import { selectionOf, splitPaths } from "../profile-selection.js";
import type { LoggedTransition, ProfileSelection } from "../store.js";
import type { Identity, MergePolicySpec, ProfileFragment, TenantScope } from "../types.js";
import { statusName } from "./membership-codes.js";
import type { FragmentRow, StoreCtx } from "./store-context.js";

export async function transitionLogSeqs(s: StoreCtx, afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: null }> {
  const max = (s.stmt("SELECT coalesce(max(seq), 0) FROM transitions").pluck().get() as number);
  const seqs = s.stmt("SELECT seq FROM transitions WHERE seq > ? ORDER BY seq LIMIT ?").pluck().all(afterSeq, limit) as number[];
  return { seqs, max, snapshot: null };
}

export async function graphIdentitiesOf(s: StoreCtx, tid: number, profileIds: readonly string[]): Promise<Identity[][]> {
  const out = new Map<number, Identity[]>(profileIds.map((p) => [Number(p), []]));
  if (profileIds.length === 0) return [];
  const rows = s.stmt("SELECT pid, ns, idv FROM identities WHERE tid = ? AND pid IN (SELECT value FROM json_each(?)) ORDER BY pid, ns, idv")
    .all(tid, JSON.stringify(profileIds.map(Number))) as Array<{ pid: number; ns: string; idv: string }>;
  for (const r of rows) out.get(r.pid)?.push({ namespace: r.ns, id: r.idv });
  return profileIds.map((p) => out.get(Number(p)) ?? []);
}

/**
 * ProfileSelection of each profile id, in order: two statements for the whole list (identities,
 * fragments through their (tid, pid) indexes), each profile's fragments merged (selectionOf).
 */
export async function profileSelections(s: StoreCtx, scope: TenantScope, tid: number, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]> {
  if (profileIds.length === 0) return [];
  const keys = JSON.stringify(profileIds.map(Number));
  const graphs = new Map<number, { identities: Identity[]; fragments: ProfileFragment[] }>(profileIds.map((p) => [Number(p), { identities: [], fragments: [] }]));
  const rows = s.stmt("SELECT pid, ns, idv FROM identities WHERE tid = ? AND pid IN (SELECT value FROM json_each(?)) ORDER BY pid, ns, idv")
    .all(tid, keys) as Array<{ pid: number; ns: string; idv: string }>;
  for (const r of rows) graphs.get(r.pid)?.identities.push({ namespace: r.ns, id: r.idv });
  if (paths.length > 0) {
    const frags = s.stmt("SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = ? AND pid IN (SELECT value FROM json_each(?))").all(tid, keys) as FragmentRow[];
    for (const r of frags) {
      const g = graphs.get(r.pid);
      if (g === undefined) continue;
      const primary = { namespace: r.ns, id: r.idv };
      // Quarantined bodies are skipped as every profile read skips them (readGraphs).
      const body = s.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, r.pid, r.body);
      if (body !== null) g.fragments.push({ datasetId: r.ds, primary, timestamp: r.ts, body });
    }
  }
  const parts = splitPaths(paths);
  return profileIds.map((p) => {
    const g = graphs.get(Number(p))!;
    return selectionOf(g.identities, g.fragments, policy, parts);
  });
}

export async function readTransitionLog(s: StoreCtx, tid: number, _scope: TenantScope,
  q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
  const defs = q.definitionIds.map((id) => s.defCodes.find(id)).filter((d): d is number => d !== undefined);
  if (defs.length === 0 || q.throughSeq <= q.afterSeq) return [];
  // NOT INDEXED: the rowid range, read in order and stopped at the limit. With the definition
  // indexes (no ANALYZE) SQLite read and sorted every row of those audiences in the whole log.
  // Rows as arrays (raw): one object per row, the LoggedTransition, not two.
  const rows = s.stmt(`SELECT seq, pid, def, from_status, to_status, at FROM transitions NOT INDEXED
    WHERE seq > ? AND seq <= ? AND tid = ? AND def IN (${defs.map(() => "?").join(", ")}) ORDER BY seq LIMIT ?`).raw(true)
    .all(q.afterSeq, q.throughSeq, tid, ...defs, q.limit) as Array<[seq: number, pid: number, def: number, from: number | null, to: number, at: number]>;
  const out = new Array<LoggedTransition>(rows.length);
  for (let k = 0; k < rows.length; k++) {
    const [seq, pid, def, from, to, at] = rows[k]!;
    out[k] = { seq, profileId: String(pid), definitionId: s.defCodes.idOf(def), from: from === null ? null : statusName(from), to: statusName(to), at };
  }
  return out;
}
