// Reads and scans of the embedded store: identity lookups, merged profiles, events, full profile scans, lake records.
// Functions over the store's one connection and write queue (StoreCtx, store-context.ts).

import type Database from "better-sqlite3";
import { assembleGraph, decodeCursor, encodeCursor, listedPids, lookupProfile, lookupProfileWithFragments, type GraphRows } from "../scan-assembly.js";
import { fragmentRecordId } from "../quarantine.js";
import { type EventPage, type EventQuery, type LakeQuery, type LakeRecord, type ProfileDataTimes, type ProfileWithFragments, type ScanOptions, type ScannedProfile } from "../store.js";
import type { Identity, MergedProfile, MergePolicySpec, TenantScope } from "../types.js";
import { identityKey } from "../validate.js";
import { type FragmentRow, type EventRow, type StoredMembershipRow, SELECT_EVENTS_BY_PID, SELECT_MEMBERSHIPS, membershipOf, type StoreCtx } from "./store-context.js";

export async function findProfileId(s: StoreCtx, scope: TenantScope, identity: Identity): Promise<string | null> {
  s.identitiesCurrent();
  const pid = s.pidOf(s.tid(scope, false), identity);
  return pid === null ? null : String(pid);
}

/**
 * One look-up per identity (as findProfileId): a VALUES list of 500 identities joined to the
 * identities table measured the same CPU per identity as one statement each, and a call's
 * last, partial list needs a statement prepared for it.
 */
export async function findProfileIds(s: StoreCtx, scope: TenantScope, identities: readonly Identity[]): Promise<Array<string | null>> {
  s.identitiesCurrent();
  const tid = s.tid(scope, false);
  const out = new Array<string | null>(identities.length);
  for (let i = 0; i < identities.length; i++) {
    const pid = s.pidOf(tid, identities[i]!);
    out[i] = pid === null ? null : String(pid);
  }
  return out;
}

export async function graphIdentities(s: StoreCtx, scope: TenantScope, profileId: string): Promise<Identity[]> {
  const rows = s.stmt("SELECT ns, idv FROM identities WHERE tid = ? AND pid = ? ORDER BY ns, idv").all(s.tid(scope, false), Number(profileId)) as Array<{ ns: string; idv: string }>;
  return rows.map((r) => ({ namespace: r.ns, id: r.idv }));
}

export function readGraphs(s: StoreCtx, scope: TenantScope, tid: number, lo: number, hi: number, withEvents: boolean, eventsSince: number | undefined,
  stmt: (sql: string) => Database.Statement = (sql) => s.stmt(sql), texts = false): Map<number, GraphRows> {
  const graphs = new Map<number, GraphRows>();
  const g = (pid: number): GraphRows => {
    let rows = graphs.get(pid);
    if (rows === undefined) {
      rows = { identities: [], fragments: [], events: [], memberships: [] };
      graphs.set(pid, rows);
    }
    return rows;
  };
  for (const r of stmt("SELECT pid, ns, idv FROM identities WHERE tid = ? AND pid BETWEEN ? AND ? ORDER BY pid, ns, idv").all(tid, lo, hi) as Array<{ pid: number; ns: string; idv: string }>) {
    g(r.pid).identities.push({ namespace: r.ns, id: r.idv });
  }
  for (const r of stmt("SELECT pid, ds, ns, idv, ts, body FROM fragments WHERE tid = ? AND pid BETWEEN ? AND ?").all(tid, lo, hi) as FragmentRow[]) {
    const primary = { namespace: r.ns, id: r.idv };
    const body = s.servable(scope, "profile", r.ds, fragmentRecordId(primary), primary, r.pid, r.body);
    if (body !== null) g(r.pid).fragments.push({ datasetId: r.ds, primary, timestamp: r.ts, body });
  }
  if (withEvents) {
    const rows = stmt(`${SELECT_EVENTS_BY_PID} WHERE i.tid = ? AND i.pid BETWEEN ? AND ? AND i.ts >= ? ORDER BY i.pid, i.ts, i.seq`)
      .all(tid, lo, hi, eventsSince ?? Number.MIN_SAFE_INTEGER) as EventRow[];
    for (const e of s.eventsFrom(scope, rows, texts)) g(Number(e.pid)).events.push(e.event);
  }
  for (const r of stmt(`${SELECT_MEMBERSHIPS} WHERE m.tid = ? AND m.pid BETWEEN ? AND ? ORDER BY m.pid, c.id`).all(tid, lo, hi) as StoredMembershipRow[]) {
    g(r.pid).memberships.push(membershipOf(r));
  }
  return graphs;
}

/** The rows of the graph `identity` belongs to, as a look-up merges them; null for an unknown identity. */
function lookupRows(s: StoreCtx, scope: TenantScope, identity: Identity, policy: MergePolicySpec): { pid: number; rows: GraphRows } | null {
  s.identitiesCurrent();
  const tid = s.tid(scope, false);
  const pid = s.pidOf(tid, identity);
  if (pid === null) return null;
  // Events are only needed to tell whether an identity has data of its own (policy none).
  const rows = readGraphs(s, scope, tid, pid, pid, false, undefined).get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] };
  if (policy.identityGraph.type === "none" && !rows.fragments.some((f) => identityKey(f.primary) === identityKey(identity))) {
    const ev = s.stmt(`${SELECT_EVENTS_BY_PID} WHERE i.tid = ? AND i.pid = ? AND e.ns = ? AND e.idv = ? LIMIT 1`)
      .all(tid, pid, identity.namespace, identity.id) as EventRow[];
    rows.events = s.eventsFrom(scope, ev).map((e) => e.event);
  }
  return { pid, rows };
}

export async function getProfile(s: StoreCtx, scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<MergedProfile | null> {
  const g = lookupRows(s, scope, identity, policy);
  return g === null ? null : lookupProfile(g.pid, g.rows, policy, identity);
}

export async function getProfileWithFragments(s: StoreCtx, scope: TenantScope, identity: Identity, policy: MergePolicySpec): Promise<ProfileWithFragments | null> {
  const g = lookupRows(s, scope, identity, policy);
  return g === null ? null : lookupProfileWithFragments(g.pid, g.rows, policy, identity);
}

export async function getEvents(s: StoreCtx, scope: TenantScope, identity: Identity, policy: MergePolicySpec, query: EventQuery = {}): Promise<EventPage> {
  s.identitiesCurrent();
  const tid = s.tid(scope, false);
  const pid = s.pidOf(tid, identity);
  if (pid === null) return { events: [], next: null };
  const limit = query.limit ?? 1000;
  const desc = query.order === "desc";
  const where = ["i.tid = ?", "i.pid = ?", "i.ts >= ?", "i.ts < ?"];
  const params: Array<number | string> = [tid, pid, query.startTime ?? Number.MIN_SAFE_INTEGER, query.endTime ?? Number.MAX_SAFE_INTEGER];
  if (policy.identityGraph.type === "none") {
    where.push("e.ns = ?", "e.idv = ?");
    params.push(identity.namespace, identity.id);
  }
  if (query.storedThrough !== undefined) {
    where.push("i.seq <= ?");
    params.push(query.storedThrough);
  }
  if (query.cursor !== undefined) {
    const c = decodeCursor(query.cursor);
    where.push(desc ? "(i.ts < ? OR (i.ts = ? AND i.seq < ?))" : "(i.ts > ? OR (i.ts = ? AND i.seq > ?))");
    params.push(c.ts, c.ts, c.seq);
  }
  const dir = desc ? "DESC" : "ASC";
  const rows = s.stmt(`${SELECT_EVENTS_BY_PID} WHERE ${where.join(" AND ")} ORDER BY i.ts ${dir}, i.seq ${dir} LIMIT ?`)
    .all(...params, limit + 1) as EventRow[];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { events: s.eventsFrom(scope, page).map((e) => e.event), next: rows.length > limit && last !== undefined ? encodeCursor(last.ts, last.seq) : null };
}

export async function eventsStoredThrough(s: StoreCtx): Promise<number> {
  const row = s.stmt("SELECT max(seq) AS n FROM events").get() as { n: number | null };
  return row.n ?? 0;
}

export async function* scanProfiles(s: StoreCtx, scope: TenantScope, policy: MergePolicySpec, opts: ScanOptions = {}): AsyncIterable<ScannedProfile[]> {
  const tid = s.tid(scope, false);
  const chunk = opts.chunkSize ?? 1000;
  if (opts.profileIds !== undefined) {
    yield* scanListed(s, scope, tid, policy, opts, opts.profileIds, chunk);
    return;
  }
  let after = 0;
  for (;;) {
    const pids = (s.scanStmt("SELECT pid FROM profiles WHERE tid = ? AND pid > ? ORDER BY pid LIMIT ?").all(tid, after, chunk) as Array<{ pid: number }>).map((r) => r.pid);
    if (pids.length === 0) return;
    const lo = pids[0]!, hi = pids[pids.length - 1]!;
    const graphs = readGraphs(s, scope, tid, lo, hi, opts.events !== false, opts.eventsSince, (sql) => s.scanStmt(sql), opts.eventTexts === true);
    const out: ScannedProfile[] = [];
    for (const pid of pids) out.push(...assembleGraph(pid, graphs.get(pid) ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
    after = hi;
    yield out;
  }
}

async function* scanListed(s: StoreCtx, scope: TenantScope, tid: number, policy: MergePolicySpec, opts: ScanOptions, ids: readonly string[], chunk: number): AsyncIterable<ScannedProfile[]> {
  const pids = listedPids(ids);
  const held = s.scanStmt("SELECT 1 AS held FROM profiles WHERE tid = ? AND pid = ?");
  for (let k = 0; k < pids.length; k += chunk) {
    const out: ScannedProfile[] = [];
    for (const pid of pids.slice(k, k + chunk)) {
      if (held.get(tid, pid) === undefined) continue;
      const graph = readGraphs(s, scope, tid, pid, pid, opts.events !== false, opts.eventsSince, (sql) => s.scanStmt(sql), opts.eventTexts === true).get(pid);
      out.push(...assembleGraph(pid, graph ?? { identities: [], fragments: [], events: [], memberships: [] }, policy));
    }
    if (out.length > 0) yield out;
  }
}

export async function countProfiles(s: StoreCtx, scope: TenantScope): Promise<number> {
  return (s.stmt("SELECT count(*) AS n FROM profiles WHERE tid = ?").get(s.tid(scope, false)) as { n: number }).n;
}

export async function listProfileIds(s: StoreCtx, scope: TenantScope, opts: { afterProfileId?: string; limit?: number } = {}): Promise<string[]> {
  const rows = s.stmt("SELECT pid FROM profiles WHERE tid = ? AND pid > ? ORDER BY pid LIMIT ?").pluck().all(s.tid(scope, false), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000) as number[];
  return rows.map(String);
}

/** Two index lookups per id ((tid, pid) of fragments; (tid, pid, ts) of events): max of each. */
export async function profileDataTimes(s: StoreCtx, scope: TenantScope, profileIds: readonly string[]): Promise<ProfileDataTimes[]> {
  const tid = s.tid(scope, false);
  const frag = s.stmt("SELECT max(ingested) AS t FROM fragments WHERE tid = ? AND pid = ?");
  const ev = s.stmt("SELECT max(ts) AS t FROM event_index_all WHERE tid = ? AND pid = ?");
  return profileIds.map((id) => {
    const pid = Number(id);
    return {
      lastFragmentIngestedAt: (frag.get(tid, pid) as { t: number | null }).t,
      lastEventAt: (ev.get(tid, pid) as { t: number | null }).t,
    };
  });
}

export async function listLakeRecords(s: StoreCtx, scope: TenantScope, datasetId: string, opts: LakeQuery = {}): Promise<LakeRecord[]> {
  const args = [s.tid(scope, false), datasetId, opts.afterSeq ?? 0, opts.limit ?? 1000];
  // By record id: one lookup per id in the (tid, ds, eid) index.
  const rows = (opts.eids === undefined
    ? s.stmt("SELECT seq, eid, ns, idv, body FROM lake_records WHERE tid = ? AND ds = ? AND seq > ? ORDER BY seq LIMIT ?").all(...args)
    : s.stmt("SELECT seq, eid, ns, idv, body FROM lake_records WHERE tid = ? AND ds = ? AND eid IN (SELECT value FROM json_each(?)) AND seq > ? ORDER BY seq LIMIT ?")
      .all(args[0], args[1], JSON.stringify(opts.eids), args[2], args[3])) as Array<{ seq: number; eid: string | null; ns: string; idv: string; body: string }>;
  const out: LakeRecord[] = [];
  for (const r of rows) {
    const body = s.servable(scope, "lake", datasetId, r.eid ?? `seq:${r.seq}`, { namespace: r.ns, id: r.idv }, null, r.body);
    if (body !== null) out.push({ seq: r.seq, body });
  }
  return out;
}

// ---- memberships ----------------------------------------------------------

