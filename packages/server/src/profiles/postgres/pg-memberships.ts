// Memberships of the PostgreSQL profile store: change and set writes (with their
// transitions) and membership/transition reads.
import type pg from "pg";
import { jsonIntegers, KIND_EXITED, KIND_REENTERED, planMembershipSets, planMembershipTargets, setOfPlanned, STORED_EXITED, STORED_NONE, STORED_REALIZED, targetChanges, transitionCounts, lowerBound,
  type MembershipTargets, type PlannedSet } from "../membership-sets.js";
import { addStoredStatus, planMembershipChanges, toMembership, type MembershipRow, type StoredStatuses } from "../scan-assembly.js";
import type { MembershipChange, MembershipSet, MembershipSetCounts, MembershipSetOptions, TransitionQuery } from "../store.js";
import type { Membership, MembershipStatus, MembershipTransition, TenantScope } from "../types.js";
import { MEMBERSHIP_CHUNK, queryRows, type PgStoreContext } from "./pg-context.js";

export function applyMembershipChanges(ctx: PgStoreContext, scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
  return ctx.write(scope, (c, tid) => membershipChanges(ctx, c, tid, changes));
}

export async function writeMembershipChanges(ctx: PgStoreContext, scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
  return (await ctx.write(scope, (c, tid) => membershipChanges(ctx, c, tid, changes))).length;
}

/** The writes of applyMembershipChanges (in the caller's write job); the transitions recorded. */
export async function membershipChanges(ctx: PgStoreContext, c: pg.PoolClient, tid: number, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
  if (changes.length === 0) return [];
  // Previous statuses are read only for changes without the caller's `from`, in chunks.
  const stored: StoredStatuses = new Map();
  const unknown = changes.filter((ch) => ch.from === undefined);
  for (let i = 0; i < unknown.length; i += MEMBERSHIP_CHUNK) {
    const part = unknown.slice(i, i + MEMBERSHIP_CHUNK);
    const rows = await queryRows<{ pid: number; def: string; status: MembershipStatus }>(c, `SELECT m.pid, m.def, m.status FROM memberships m
      JOIN unnest($2::int8[], $3::text[]) AS u(pid, def) ON m.pid = u.pid AND m.def = u.def WHERE m.tid = $1`,
    [tid, part.map((ch) => Number(ch.profileId)), part.map((ch) => ch.definitionId)]);
    for (const r of rows) addStoredStatus(stored, r.pid, r.def, r.status);
  }
  const plan = planMembershipChanges(changes, stored);
  const t = plan.transitions;
  for (let i = 0; i < plan.upserts.length; i += MEMBERSHIP_CHUNK) {
    const part = plan.upserts.slice(i, i + MEMBERSHIP_CHUNK);
    await c.query(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT $1, u.pid, u.def, u.status, u.lqt FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[]) AS u(pid, def, status, lqt)
      ON CONFLICT (tid, pid, def) DO UPDATE SET status = EXCLUDED.status, lqt = EXCLUDED.lqt`,
    [tid, part.map((k) => plan.pids[k]!), part.map((k) => t[k]!.definitionId), part.map((k) => t[k]!.to), part.map((k) => t[k]!.at)]);
  }
  for (let i = 0; i < t.length; i += MEMBERSHIP_CHUNK) {
    const end = Math.min(t.length, i + MEMBERSHIP_CHUNK);
    const part = t.slice(i, end);
    await c.query(`INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
      SELECT $1, u.pid, u.def, u.f, u.t, u.s, u.at FROM unnest($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[]) WITH ORDINALITY AS u(pid, def, f, t, s, at, ord) ORDER BY u.ord`,
    [tid, plan.pids.slice(i, end), part.map((x) => x.definitionId), part.map((x) => x.from), part.map((x) => x.to), part.map((x) => x.source), plan.ats.slice(i, end)]);
  }
  return t;
}

/**
 * Set by set, in chunks of MEMBERSHIP_CHUNK profiles: one statement upserts the memberships and
 * records the transitions (in the set's order) from one int8 array of `pid * 4 + kind` codes,
 * sent as array text (no per-row parameters).
 */
export async function applyMembershipSets(ctx: PgStoreContext, scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
  // async: an invalid set rejects (planMembershipSets throws) before anything is queued.
  const planned: PlannedSet[] = planMembershipSets(sets, opts);
  const counts = transitionCounts(planned);
  if (counts.realized + counts.exited === 0) return counts;
  const lqt = new Date(opts.at).toISOString();
  return ctx.write(scope, async (c, tid) => {
    for (const p of planned) await writePlannedSet(c, tid, p, lqt, opts);
    return counts;
  });
}

/** One planned set's upserts and transitions (in the caller's write job), MEMBERSHIP_CHUNK profiles a statement. */
export async function writePlannedSet(c: pg.PoolClient, tid: number, p: PlannedSet, lqt: string, opts: MembershipSetOptions): Promise<void> {
  for (let i = 0; i < p.codes.length; i += MEMBERSHIP_CHUNK) {
    const json = jsonIntegers(p.codes, i, Math.min(p.codes.length, i + MEMBERSHIP_CHUNK)).toString("latin1");
    await c.query(`WITH u AS (SELECT code / 4 AS pid, code % 4 AS kind, ord FROM unnest($2::int8[]) WITH ORDINALITY AS x(code, ord)),
      m AS (INSERT INTO memberships (tid, pid, def, status, lqt) SELECT $1, u.pid, $3, CASE u.kind WHEN ${KIND_EXITED} THEN 'exited' ELSE 'realized' END, $4 FROM u
        ON CONFLICT (tid, pid, def) DO UPDATE SET status = EXCLUDED.status, lqt = EXCLUDED.lqt)
      INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
        SELECT $1, u.pid, $3, CASE u.kind WHEN ${KIND_REENTERED} THEN 'exited' WHEN ${KIND_EXITED} THEN 'realized' END,
          CASE u.kind WHEN ${KIND_EXITED} THEN 'exited' ELSE 'realized' END, $5, $6 FROM u ORDER BY u.ord`,
    [tid, `{${json.slice(1, -1)}}`, p.definitionId, lqt, opts.source, opts.at]);
  }
}

/**
 * A backfill's chunk (membership-sets.ts MembershipTargets), in one write job: the stored statuses
 * of the listed profiles read with one statement per MEMBERSHIP_CHUNK ids (the primary key, `pid =
 * ANY`), then the net change written as applyMembershipSets writes it. The result of
 * applyMembershipChanges with the same changes without `from`; the transitions as a set.
 */
export async function applyMembershipTargets(ctx: PgStoreContext, scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet> {
  // async: invalid targets reject (planMembershipTargets throws) before anything is queued.
  const planned = planMembershipTargets(targets, opts);
  if (planned.pids.length === 0) return setOfPlanned({ definitionId: targets.definitionId, codes: new Float64Array(0) });
  const lqt = new Date(opts.at).toISOString();
  return ctx.write(scope, async (c, tid) => {
    const { pids } = planned;
    const stored = new Uint8Array(pids.length);
    for (let i = 0; i < pids.length; i += MEMBERSHIP_CHUNK) {
      const end = Math.min(pids.length, i + MEMBERSHIP_CHUNK);
      const rows = (await c.query<[string, MembershipStatus]>({ text: "SELECT pid, status FROM memberships WHERE tid = $1 AND def = $2 AND pid = ANY($3::int8[])", values: [tid, targets.definitionId, `{${pids.subarray(i, end).join(",")}}`], rowMode: "array" })).rows;
      for (const [pidText, status] of rows) {
        const k = lowerBound(pids, i, end, Number(pidText));
        if (k < end && pids[k] === Number(pidText)) stored[k] = status === "realized" ? STORED_REALIZED : status === "exited" ? STORED_EXITED : STORED_NONE;
      }
    }
    const change = targetChanges(planned, stored);
    if (change.codes.length > 0) await writePlannedSet(c, tid, change, lqt, opts);
    return setOfPlanned(change);
  });
}

export async function getMemberships(ctx: PgStoreContext, scope: TenantScope, profileId: string): Promise<Membership[]> {
  const rows = await queryRows<MembershipRow>(ctx.pool, "SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND pid = $2 ORDER BY def COLLATE \"C\"",
    [await ctx.tid(ctx.pool, scope, false), Number(profileId)]);
  return rows.map(toMembership);
}

export async function listMembers(ctx: PgStoreContext, scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
  const rows = await queryRows<MembershipRow>(ctx.pool, "SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND def = $2 AND status = $3 AND pid > $4 ORDER BY pid LIMIT $5",
    [await ctx.tid(ctx.pool, scope, false), definitionId, opts.status ?? "realized", Number(opts.afterProfileId ?? 0), opts.limit ?? 1000]);
  return rows.map(toMembership);
}

export async function listMemberIds(ctx: PgStoreContext, scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
  const rows = await queryRows<{ pid: string }>(ctx.pool, // ORDER BY m.pid (the int8 column), not the text output column of the same name.
    "SELECT m.pid::text AS pid FROM memberships m WHERE m.tid = $1 AND m.def = $2 AND m.status = $3 ORDER BY m.pid",
    [await ctx.tid(ctx.pool, scope, false), definitionId, status]);
  return rows.map((r) => r.pid);
}

export async function listMemberPids(ctx: PgStoreContext, scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
  const rows = await queryRows<{ pid: string }>(ctx.pool,
    "SELECT m.pid FROM memberships m WHERE m.tid = $1 AND m.def = $2 AND m.status = $3 ORDER BY m.pid",
    [await ctx.tid(ctx.pool, scope, false), definitionId, status]);
  // int8 arrives as text; profile ids stay far below 2^53.
  return Float64Array.from(rows, (r) => Number(r.pid));
}

export async function countMembers(ctx: PgStoreContext, scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
  const rows = await queryRows<{ status: string; n: number }>(ctx.pool, "SELECT status, count(*)::int8 AS n FROM memberships WHERE tid = $1 AND def = $2 GROUP BY status",
    [await ctx.tid(ctx.pool, scope, false), definitionId]);
  return { realized: rows.find((r) => r.status === "realized")?.n ?? 0, exited: rows.find((r) => r.status === "exited")?.n ?? 0 };
}

export async function listTransitions(ctx: PgStoreContext, scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
  const cols = "pid, def, from_status, to_status, source, at";
  const where = `tid = $1 AND at >= $2 AND at < $3
      AND ($4::text[] IS NULL OR def = ANY($4)) AND ($5::text[] IS NULL OR source = ANY($5)) AND ($7::int8[] IS NULL OR pid = ANY($7))`;
  // The newest of each (profile, definition), numbered newest first.
  const from = q.latestPerMembership === undefined
    ? `transitions WHERE ${where}`
    : `(SELECT seq, ${cols}, row_number() OVER (PARTITION BY pid, def ORDER BY at DESC, seq DESC) AS n FROM transitions WHERE ${where}) t WHERE n <= $8`;
  const rows = await queryRows<{ pid: number; def: string; from_status: MembershipStatus | null; to_status: MembershipStatus; source: MembershipChange["source"]; at: number }>(ctx.pool,
    `SELECT ${cols} FROM ${from} ORDER BY at, seq LIMIT $6`,
    [await ctx.tid(ctx.pool, scope, false), q.since ?? Number.MIN_SAFE_INTEGER, q.until ?? Number.MAX_SAFE_INTEGER,
      q.definitionId === undefined && q.definitionIds === undefined ? null : [...(q.definitionId === undefined ? [] : [q.definitionId]), ...(q.definitionIds ?? [])],
      q.sources !== undefined && q.sources.length > 0 ? q.sources : null, q.limit ?? 10_000, q.profileIds === undefined ? null : q.profileIds.map(Number),
      ...(q.latestPerMembership === undefined ? [] : [q.latestPerMembership])]);
  return rows.map((r) => ({ profileId: String(r.pid), definitionId: r.def, from: r.from_status, to: r.to_status, source: r.source, at: new Date(r.at).toISOString() }));
}
