// The transitions table read as the delivery outbox (store.ts TransitionLog). SQLite has one
// writer, so rowid order is commit order: no snapshot is needed to read behind the writer.
import type { LoggedTransition } from "../store.js";
import type { Identity, TenantScope } from "../types.js";
import { statusName } from "./membership-codes.js";
import type { StoreCtx } from "./store-context.js";

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

export async function readTransitionLog(s: StoreCtx, tid: number, _scope: TenantScope,
  q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
  const defs = q.definitionIds.map((id) => s.defCodes.find(id)).filter((d): d is number => d !== undefined);
  if (defs.length === 0 || q.throughSeq <= q.afterSeq) return [];
  const rows = s.db.prepare(`SELECT seq, pid, def, from_status, to_status, at FROM transitions
    WHERE seq > ? AND seq <= ? AND tid = ? AND def IN (${defs.map(() => "?").join(", ")}) ORDER BY seq LIMIT ?`)
    .all(q.afterSeq, q.throughSeq, tid, ...defs, q.limit) as Array<{ seq: number; pid: number; def: number; from_status: number | null; to_status: number; at: number }>;
  return rows.map((r) => ({ seq: r.seq, profileId: String(r.pid), definitionId: s.defCodes.idOf(r.def),
    from: r.from_status === null ? null : statusName(r.from_status), to: statusName(r.to_status), at: r.at }));
}
