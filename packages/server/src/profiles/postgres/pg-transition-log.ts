// The transitions table read as the delivery outbox (store.ts TransitionLog). A bigserial is
// taken before its transaction commits: the sequences are read with the writing transactions in
// progress so the reader (activation/delivery/log-horizon.ts) waits out a gap until every
// transaction that could still fill it has ended.
import { fragmentRecordId } from "../quarantine.js";
import { selectionOf, splitPaths } from "../profile-selection.js";
import type { LoggedTransition, ProfileSelection } from "../store.js";
import type { Identity, JsonObject, MembershipStatus, MergePolicySpec, ProfileFragment, TenantScope } from "../types.js";
import { queryRows, type PgStoreContext } from "./pg-context.js";

/**
 * The writing transactions in progress, as `pid@start` (µs since the epoch) tokens: every backend
 * holding a transaction id. Not the snapshot's xip list: an in-progress xid at or above the
 * snapshot's xmax (no later xid completed yet: the newest writer on a quiet database) is not in
 * it, and its gap would be passed. Read-only transactions (no xid) are never waited for.
 */
const WRITERS = `SELECT array_agg(pid::text || '@' || (extract(epoch FROM xact_start) * 1000000)::int8::text) FROM pg_stat_activity
  WHERE backend_xid IS NOT NULL AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`;

export async function transitionLogSeqs(ctx: PgStoreContext, afterSeq: number, limit: number): Promise<{ seqs: number[]; max: number; snapshot: { xmax: string; xip: string[] } }> {
  // One statement: the sequences and the writers in progress are read together.
  const rows = await queryRows<{ seqs: string[] | null; max: string | null; xmax: string; xip: string[] | null }>(ctx.pool,
    `SELECT (SELECT array_agg(seq ORDER BY seq) FROM (SELECT seq FROM transitions WHERE seq > $1 ORDER BY seq LIMIT $2) t)::text[] AS seqs,
       (SELECT max(seq) FROM transitions)::text AS max, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
       (${WRITERS}) AS xip`, [afterSeq, limit]);
  const r = rows[0]!;
  return { seqs: (r.seqs ?? []).map(Number), max: Number(r.max ?? 0), snapshot: { xmax: r.xmax, xip: r.xip ?? [] } };
}

/** Which of these writers (transitionLogSeqs' tokens) are still in the same transaction. */
export async function transactionsInProgress(ctx: PgStoreContext, writers: readonly string[]): Promise<string[]> {
  if (writers.length === 0) return [];
  const rows = await queryRows<{ w: string[] | null }>(ctx.pool, `SELECT (${WRITERS}) AS w`);
  const now = new Set(rows[0]?.w ?? []);
  return writers.filter((w) => now.has(w));
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

/**
 * ProfileSelection of each profile id, in order: two statements for the whole list (identities,
 * fragments through their (tid, pid) indexes), run at once, each profile's fragments merged (selectionOf).
 */
export async function profileSelections(ctx: PgStoreContext, scope: TenantScope, profileIds: readonly string[], policy: MergePolicySpec, paths: readonly string[]): Promise<ProfileSelection[]> {
  if (profileIds.length === 0) return [];
  const tid = await ctx.tid(ctx.pool, scope, false);
  const pids = profileIds.map(Number);
  const [ids, frags] = await Promise.all([
    queryRows<{ pid: string; ns: string; idv: string }>(ctx.pool,
      "SELECT pid, ns, idv FROM identities WHERE tid = $1 AND pid = ANY($2::int8[]) ORDER BY pid, ns COLLATE \"C\", idv COLLATE \"C\"", [tid, pids]),
    paths.length === 0 ? Promise.resolve([])
      : queryRows<{ pid: string; ds: string; ns: string; idv: string; ts: string; body: JsonObject }>(ctx.pool,
        "SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = $1 AND pid = ANY($2::int8[])", [tid, pids]),
  ]);
  const graphs = new Map<number, { identities: Identity[]; fragments: ProfileFragment[] }>(pids.map((p) => [p, { identities: [], fragments: [] }]));
  for (const r of ids) graphs.get(Number(r.pid))?.identities.push({ namespace: r.ns, id: r.idv });
  for (const r of frags) {
    const pid = Number(r.pid);
    const g = graphs.get(pid);
    if (g === undefined) continue;
    const primary = { namespace: r.ns, id: r.idv };
    // Quarantined bodies are skipped as every profile read skips them (readGraphs).
    const body = ctx.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, pid, r.body);
    if (body !== null) g.fragments.push({ datasetId: r.ds, primary, timestamp: Number(r.ts), body });
  }
  const parts = splitPaths(paths);
  return pids.map((p) => {
    const g = graphs.get(p)!;
    return selectionOf(g.identities, g.fragments, policy, parts);
  });
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
