// Reads of the PostgreSQL profile store: identities, profiles, events, scans and
// lake records (pure reads; unservable bodies are skipped via ctx.servable).
import { fragmentRecordId } from "../quarantine.js";
import { assembleGraph, decodeCursor, encodeCursor, listedPids, lookupProfile, lookupProfileWithFragments, toMembership, type GraphRows, type MembershipRow } from "../scan-assembly.js";
import type { EventPage, EventQuery, LakeQuery, LakeRecord, ProfileDataTimes, ProfileWithFragments, ScanOptions, ScannedProfile } from "../store.js";
import type { Identity, JsonObject, MergedProfile, MergePolicySpec, StoredEvent, TenantScope } from "../types.js";
import { identityKey } from "../validate.js";
import { IDENTITY_CHUNK, NO_TENANT, queryRows, type EventRow, type PgStoreContext, type Q } from "./pg-context.js";

/** Events of rows, those that cannot be served skipped (servable). */
export function eventsFrom(ctx: PgStoreContext, scope: TenantScope, rows: readonly EventRow[]): Array<{ pid: number; event: StoredEvent }> {
  const out: Array<{ pid: number; event: StoredEvent }> = [];
  for (const r of rows) {
    const primary = { namespace: r.ns, id: r.idv };
    const body = ctx.servable(scope, "event", r.ds, r.eid, primary, r.pid, r.body);
    if (body !== null) out.push({ pid: r.pid, event: { datasetId: r.ds, eventId: r.eid, primary, timestamp: r.ts, body } });
  }
  return out;
}

export async function pidOf(c: Q, tid: number, identity: Identity): Promise<number | null> {
  const rows = await queryRows<{ pid: number }>(c, "SELECT pid FROM identities WHERE tid = $1 AND ns = $2 AND idv = $3", [tid, identity.namespace, identity.id]);
  return rows[0]?.pid ?? null;
}

export async function findProfileId(ctx: PgStoreContext, scope: TenantScope, identity: Identity): Promise<string | null> {
  const pid = await pidOf(ctx.pool, await ctx.tid(ctx.pool, scope, false), identity);
  return pid === null ? null : String(pid);
}

/** One statement per IDENTITY_CHUNK identities (unnest arrays, joined on the identities' primary key). */
export async function findProfileIds(ctx: PgStoreContext, scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const out = new Array<string | null>(identities.length).fill(null);
  if (tid === NO_TENANT) return out;
  for (let start = 0; start < identities.length; start += IDENTITY_CHUNK) {
    const part = identities.slice(start, start + IDENTITY_CHUNK);
    const rows = await queryRows<{ k: number; pid: number }>(ctx.pool, `SELECT u.k, i.pid FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(ns, idv, k)
      JOIN identities i ON i.tid = $1 AND i.ns = u.ns AND i.idv = u.idv`, [tid, part.map((i) => i.namespace), part.map((i) => i.id)]);
    for (const r of rows) out[start + r.k - 1] = String(r.pid);
  }
  return out;
}

export async function graphIdentities(ctx: PgStoreContext, scope: TenantScope, profileId: string): Promise<Identity[]> {
  const rows = await queryRows<{ ns: string; idv: string }>(ctx.pool, "SELECT ns, idv FROM identities WHERE tid = $1 AND pid = $2 ORDER BY ns COLLATE \"C\", idv COLLATE \"C\"",
    [await ctx.tid(ctx.pool, scope, false), Number(profileId)]);
  return rows.map((r) => ({ namespace: r.ns, id: r.idv }));
}

/** The graphs of the profiles with pid in [lo, hi], or of the listed pids. */
export async function readGraphs(ctx: PgStoreContext, scope: TenantScope, tid: number, which: { lo: number; hi: number } | { pids: readonly number[] }, withEvents: boolean, eventsSince: number | undefined): Promise<Map<number, GraphRows>> {
  const listed = "pids" in which;
  const pidIn = (col: string) => listed ? `${col} = ANY($2::int8[])` : `${col} BETWEEN $2 AND $3`;
  const args = (...rest: unknown[]): unknown[] => listed ? [tid, which.pids, ...rest] : [tid, which.lo, which.hi, ...rest];
  const graphs = new Map<number, GraphRows>();
  const g = (pid: number): GraphRows => {
    let rows = graphs.get(pid);
    if (rows === undefined) {
      rows = { identities: [], fragments: [], events: [], memberships: [] };
      graphs.set(pid, rows);
    }
    return rows;
  };
  const [ids, frags, evs, mems] = await Promise.all([
    queryRows<{ pid: number; ns: string; idv: string }>(ctx.pool, `SELECT pid, ns, idv FROM identities WHERE tid = $1 AND ${pidIn("pid")} ORDER BY pid, ns COLLATE "C", idv COLLATE "C"`, args()),
    queryRows<{ pid: number; ds: string; ns: string; idv: string; ts: number; body: JsonObject }>(ctx.pool, `SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = $1 AND ${pidIn("pid")}`, args()),
    withEvents
      ? queryRows<EventRow>(ctx.pool, `SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = $1 AND ${pidIn("pid")} AND ts >= $${listed ? 3 : 4} ORDER BY pid, ts, seq`,
        args(eventsSince ?? Number.MIN_SAFE_INTEGER))
      : Promise.resolve([] as EventRow[]),
    queryRows<MembershipRow>(ctx.pool, `SELECT pid, def, status, lqt FROM memberships WHERE tid = $1 AND ${pidIn("pid")} ORDER BY pid, def COLLATE "C"`, args()),
  ]);
  for (const r of ids) g(r.pid).identities.push({ namespace: r.ns, id: r.idv });
  for (const r of frags) {
    const primary = { namespace: r.ns, id: r.idv };
    const body = ctx.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, r.pid, r.body);
    if (body !== null) g(r.pid).fragments.push({ datasetId: r.ds, primary, timestamp: r.ts, body });
  }
  for (const e of eventsFrom(ctx, scope, evs)) g(e.pid).events.push(e.event);
  for (const r of mems) g(r.pid).memberships.push(toMembership(r));
  return graphs;
}

/** The rows of the graph `identity` belongs to, as a look-up merges them; null for an unknown identity. */
async function lookupRows(ctx: PgStoreContext, scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<{ pid: number; rows: GraphRows } | null> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const pid = await pidOf(ctx.pool, tid, identity);
  if (pid === null) return null;
  const rows = (await readGraphs(ctx, scope, tid, { lo: pid, hi: pid }, false, undefined)).get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] };
  if (policy.identityGraph.type === "none" && !rows.fragments.some((f) => identityKey(f.primary) === identityKey(identity))) {
    const ev = await queryRows<EventRow>(ctx.pool, "SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE tid = $1 AND pid = $2 AND ns = $3 AND idv = $4 LIMIT 1",
      [tid, pid, identity.namespace, identity.id]);
    rows.events = eventsFrom(ctx, scope, ev).map((e) => e.event);
  }
  return { pid, rows };
}

export async function getProfile(ctx: PgStoreContext, scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
  const g = await lookupRows(ctx, scope, identity, policy);
  return g === null ? null : lookupProfile(g.pid, g.rows, policy, identity);
}

export async function getProfileWithFragments(ctx: PgStoreContext, scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null> {
  const g = await lookupRows(ctx, scope, identity, policy);
  return g === null ? null : lookupProfileWithFragments(g.pid, g.rows, policy, identity);
}

export async function getEvents(ctx: PgStoreContext, scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const pid = await pidOf(ctx.pool, tid, identity);
  if (pid === null) return { events: [], next: null };
  const limit = query.limit ?? 1000;
  const desc = query.order === "desc";
  const params: unknown[] = [tid, pid, query.startTime ?? Number.MIN_SAFE_INTEGER, query.endTime ?? Number.MAX_SAFE_INTEGER];
  const where = ["tid = $1", "pid = $2", "ts >= $3", "ts < $4"];
  if (policy.identityGraph.type === "none") {
    params.push(identity.namespace, identity.id);
    where.push(`ns = $${params.length - 1}`, `idv = $${params.length}`);
  }
  if (query.storedThrough !== undefined) {
    params.push(query.storedThrough);
    where.push(`seq <= $${params.length}`);
  }
  if (query.cursor !== undefined) {
    const cur = decodeCursor(query.cursor);
    params.push(cur.ts, cur.seq);
    const a = params.length - 1, b = params.length;
    where.push(desc ? `(ts < $${a} OR (ts = $${a} AND seq < $${b}))` : `(ts > $${a} OR (ts = $${a} AND seq > $${b}))`);
  }
  params.push(limit + 1);
  const dir = desc ? "DESC" : "ASC";
  const rows = await queryRows<EventRow>(ctx.pool, `SELECT seq, pid, ds, eid, ns, idv, ts, body FROM events WHERE ${where.join(" AND ")} ORDER BY ts ${dir}, seq ${dir} LIMIT $${params.length}`, params);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { events: eventsFrom(ctx, scope, page).map((e) => e.event), next: rows.length > limit && last !== undefined ? encodeCursor(last.ts, last.seq) : null };
}

export async function* scanProfiles(ctx: PgStoreContext, scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const chunk = opts.chunkSize ?? 1000;
  if (opts.profileIds !== undefined) {
    const listed = listedPids(opts.profileIds);
    for (let k = 0; k < listed.length; k += chunk) {
      const pids = (await queryRows<{ pid: number }>(ctx.pool, "SELECT pid FROM profiles WHERE tid = $1 AND pid = ANY($2::int8[]) ORDER BY pid", [tid, listed.slice(k, k + chunk)])).map((r) => r.pid);
      if (pids.length === 0) continue;
      const graphs = await readGraphs(ctx, scope, tid, { pids }, opts.events !== false, opts.eventsSince);
      yield pids.flatMap((pid) => assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
    }
    return;
  }
  let after = 0;
  for (;;) {
    const pids = (await queryRows<{ pid: number }>(ctx.pool, "SELECT pid FROM profiles WHERE tid = $1 AND pid > $2 ORDER BY pid LIMIT $3", [tid, after, chunk])).map((r) => r.pid);
    if (pids.length === 0) return;
    const lo = pids[0]!, hi = pids[pids.length - 1]!;
    const graphs = await readGraphs(ctx, scope, tid, { lo, hi }, opts.events !== false, opts.eventsSince);
    const out: ScannedProfile[] = [];
    for (const pid of pids) out.push(...assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
    after = hi;
    yield out;
  }
}

export async function eventsStoredThrough(ctx: PgStoreContext): Promise<number> {
  const rows = await queryRows<{ n: string | null }>(ctx.pool, "SELECT max(seq) AS n FROM events");
  return Number(rows[0]!.n ?? 0);
}

export async function countProfiles(ctx: PgStoreContext, scope: TenantScope): Promise<number> {
  const rows = await queryRows<{ n: number }>(ctx.pool, "SELECT count(*)::int8 AS n FROM profiles WHERE tid = $1", [await ctx.tid(ctx.pool, scope, false)]);
  return rows[0]!.n;
}

export async function listProfileIds(ctx: PgStoreContext, scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(ctx.pool, "SELECT pid::text AS id FROM profiles WHERE tid = $1 AND pid > $2 ORDER BY profiles.pid LIMIT $3",
    [await ctx.tid(ctx.pool, scope, false), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000]);
  return rows.map((r) => r.id);
}

/** One statement per IDENTITY_CHUNK ids: per id, the max of fragments (tid, pid) and of events (tid, pid, ts). */
export async function profileDataTimes(ctx: PgStoreContext, scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
  const tid = await ctx.tid(ctx.pool, scope, false);
  const out: ProfileDataTimes[] = profileIds.map(() => ({ lastFragmentIngestedAt: null, lastEventAt: null }));
  for (let start = 0; start < profileIds.length; start += IDENTITY_CHUNK) {
    const part = profileIds.slice(start, start + IDENTITY_CHUNK).map(Number);
    const rows = await queryRows<{ k: number; f: number | null; e: number | null }>(ctx.pool, `SELECT u.k,
        (SELECT max(f.ingested) FROM fragments f WHERE f.tid = $1 AND f.pid = u.pid) AS f,
        (SELECT max(e.ts) FROM events e WHERE e.tid = $1 AND e.pid = u.pid) AS e
      FROM unnest($2::int8[]) WITH ORDINALITY AS u(pid, k)`, [tid, part]);
    for (const r of rows) out[start + r.k - 1] = { lastFragmentIngestedAt: r.f, lastEventAt: r.e };
  }
  return out;
}

export async function listLakeRecords(ctx: PgStoreContext, scope: TenantScope, datasetId: string, opts: LakeQuery = {}): Promise<LakeRecord[]> {
  const args: unknown[] = [await ctx.tid(ctx.pool, scope, false), datasetId, opts.afterSeq ?? 0, opts.limit ?? 1000];
  // By record id: one lookup per id in the (tid, ds, eid) index.
  const byId = opts.eids === undefined ? "" : " AND eid = ANY($5::text[])";
  if (opts.eids !== undefined) args.push([...opts.eids]);
  const rows = await queryRows<{ seq: number; eid: string | null; ns: string; idv: string; body: unknown }>(ctx.pool, `SELECT seq, eid, ns, idv, body FROM lake_records WHERE tid = $1 AND ds = $2 AND seq > $3${byId} ORDER BY seq LIMIT $4`, args);
  const out: LakeRecord[] = [];
  for (const r of rows) {
    const body = ctx.servable(scope, "lake", datasetId, r.eid ?? `seq:${r.seq}`, { namespace: r.ns, id: r.idv }, null, r.body);
    if (body !== null) out.push({ seq: r.seq, body });
  }
  return out;
}
