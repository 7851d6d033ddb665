// The transitions table read as the delivery outbox (store.ts TransitionLog). A bigserial is
// taken before its transaction commits: the sequences are read with the snapshot's in-progress
// transactions so the reader (activation/delivery/log-horizon.ts) waits out a gap until every
// transaction that could still fill it has ended.
import type { LoggedTransition } from "../store.js";
import type { Identity, MembershipStatus, TenantScope } from "../types.js";
import { queryRows, type PgStoreContext } from "./pg-context.js";

export async function transitionLogSeqs(ctx: PgStoreContext, afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: { xmax: string; xip: string[] } }> {
  // One statement: the sequences and the snapshot's transactions come from the same snapshot.
  const rows = await queryRows<{ seqs: string[] | null; max: string | null; xmax: string; xip: string[] | null }>(ctx.pool,
    `SELECT (SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq FROM transitions WHERE seq > $1 ORDER BY seq LIMIT $2) t)::text[] AS seqs,
       (SELECT max(seq) FROM transitions)::text AS max, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
       (SELECT array_agg(x::text) FROM pg_snapshot_xip(pg_current_snapshot()) x) AS xip`, [afterSeq, limit]);
  const r = rows[0]!;
  return { seqs: (r.seqs ?? []).map(Number), max: Number(r.max ?? 0), snapshot: { xmax: r.xmax, xip: r.xip ?? [] } };
}

export async function transactionsInProgress(ctx: PgStoreContext, xids: readonly string[]): Promise<string[]> {
  if (xids.length === 0) return [];
  const rows = await queryRows<{ x: string }>(ctx.pool, "SELECT x::text AS x FROM unnest($1::xid8[]) AS x WHERE pg_xact_status(x) = 'in progress'", [xids]);
  return rows.map((r) => r.x);
}

export async function graphIdentitiesOf(ctx: PgStoreContext, scope: TenantScope, profileIds: readonly string[]): Promise<Identity[][]> {
  if (profileIds.length === 0) return [];
  const tid = await ctx.tid(ctx.pool, scope, false);
  const rows = await queryRows<{ pid: string; ns: string; idv: string }>(ctx.pool,
    "SELECT pid, ns, idv FROM identities WHERE tid = $1 AND pid = ANY($2::int8[]) ORDER BY pid, ns COLLATE \"C\", idv COLLATE \"C\"", [tid, profileIds.map(Number)]);
  const out = new Map<number, Identity[]>(profileIds.map((p) => [Number(p), []]));
  for (const r of rows) out.get(Number(r.pid))?.push({ namespace: r.ns, id: r.idv });
  return profileIds.map((p) => out.get(Number(p)) ?? []);
}

export async function readTransitionLog(ctx: PgStoreContext, scope: TenantScope,
  q: { afterSeq: number; throughSeq: number; definitionIds: readonly string[]; limit: number }): Promise<LoggedTransition[]> {
  if (q.definitionIds.length === 0 || q.throughSeq <= q.afterSeq) return [];
  const tid = await ctx.tid(ctx.pool, scope, false);
  const rows = await queryRows<{ seq: string; pid: string; def: string; from_status: MembershipStatus | null; to_status: MembershipStatus; at: string }>(ctx.pool,
    `SELECT seq, pid, def, from_status, to_status, at FROM transitions
      WHERE seq > $1 AND seq <= $2 AND tid = $3 AND def = ANY($4::text[]) ORDER BY seq LIMIT $5`,
    [q.afterSeq, q.throughSeq, tid, q.definitionIds, q.limit]);
  return rows.map((r) => ({ seq: Number(r.seq), profileId: String(r.pid), definitionId: r.def, from: r.from_status, to: r.to_status, at: Number(r.at) }));
}
