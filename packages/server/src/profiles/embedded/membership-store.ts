// Segment memberships and transitions of the embedded store: change and set writes, member lists and counts.
// Functions over the store's one connection and write queue (StoreCtx, store-context.ts).

import type Database from "better-sqlite3";
import { addStoredStatus, planMembershipChanges, type StoredStatuses } from "../scan-assembly.js";
import { type MembershipChange, type MembershipSet, type MembershipSetCounts, type MembershipSetOptions, type TransitionQuery } from "../store.js";
import type { Membership, MembershipStatus, MembershipTransition, TenantScope } from "../types.js";
import { jsonIntegers, KIND_EXITED, KIND_REENTERED, pidMajorCodes, planMembershipSets, planMembershipTargets, setGroups, setOfPlanned, STORED_EXITED, STORED_NONE, STORED_REALIZED, targetChanges, transitionCounts, lowerBound,
  type MembershipTargets, type PlannedSet } from "../membership-sets.js";
import { sourceCode, sourceName, STATUS_CODE, statusCode, statusName } from "./membership-codes.js";
import { MEMBERSHIP_READ_CHUNK, MEMBERSHIP_WRITE_CHUNK, MIN_RANGE_READ, SOLO_MEMBERSHIP_CHANGES, MEMBERSHIP_SET_ROWS, rowsSql, type StoredMembershipRow, SELECT_MEMBERSHIPS, membershipOf, definitionIdsOf, type StoreCtx } from "./store-context.js";

export function applyMembershipChanges(s: StoreCtx, scope: TenantScope, changes: readonly MembershipChange[]): Promise<MembershipTransition[]> {
  const tid = s.tenantForWrite(scope);
  const codes = s.defCodes.ensure(definitionIdsOf(changes));
  return s.write(() => membershipChanges(s, tid, changes, codes), changes.length >= SOLO_MEMBERSHIP_CHANGES);
}

export function writeMembershipChanges(s: StoreCtx, scope: TenantScope, changes: readonly MembershipChange[]): Promise<number> {
  const tid = s.tenantForWrite(scope);
  const codes = s.defCodes.ensure(definitionIdsOf(changes));
  return s.write(() => membershipChanges(s, tid, changes, codes).length, changes.length >= SOLO_MEMBERSHIP_CHANGES);
}

/**
 * The writes of applyMembershipChanges (in the caller's write job); the transitions recorded.
 * In chunks of MEMBERSHIP_WRITE_CHUNK rows: a chunk of profile ids close together (a batch
 * job's, in ascending order) is written with one multi-row statement, a chunk of ids spread
 * over the table (the edge's, the streaming engine's) with one single-row statement per row.
 * Measured with SQLite, CPU per row, 7,500 changes of 100k profiles spread out: the upserts
 * 6.0 → 3.8 µs and the transitions 3.2 → 1.9 µs single-row (in a savepoint, as in a group
 * commit, 6.9 → 4.3 and 9.9 → 1.9); bench/memberships.ts's dense million-change calls 3.1 →
 * 4.2 µs per change single-row, so those stay multi-row. (Likely why: a multi-row INSERT in a
 * transaction keeps a statement journal, as it could fail after some rows, and copies each
 * page there before modifying it: a few pages for a dense chunk, one or two per row for a
 * sparse one.)
 */
export function membershipChanges(s: StoreCtx, tid: number, changes: readonly MembershipChange[], codes: ReadonlyMap<string, number>): MembershipTransition[] {
  if (changes.length === 0) return [];
  const plan = planMembershipChanges(changes, readStoredStatuses(s, tid, changes, codes));
  const t = plan.transitions;
  // The tenant id is part of the statement text (an integer): one parameter less per row.
  writeRows(s, plan.upserts.length, 4, (i) => plan.pids[plan.upserts[i]!]!,
    (n) => `INSERT INTO memberships (tid, pid, def, status, lqt) VALUES ${rowsSql(n, 4, `${tid}, `)} ON CONFLICT (tid, pid, def) DO UPDATE SET status = excluded.status, lqt = excluded.lqt`,
    (i, args) => { const k = plan.upserts[i]!; const x = t[k]!; args.push(plan.pids[k]!, codes.get(x.definitionId)!, statusCode(x.to), plan.ats[k]!); });
  writeRows(s, t.length, 6, (i) => plan.pids[i]!,
    (n) => `INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at) VALUES ${rowsSql(n, 6, `${tid}, `)}`,
    (i, args) => { const x = t[i]!; args.push(plan.pids[i]!, codes.get(x.definitionId)!, x.from === null ? null : statusCode(x.from), statusCode(x.to), sourceCode(x.source), plan.ats[i]!); });
  return t;
}

/**
 * `count` rows of `width` parameters in chunks of MEMBERSHIP_WRITE_CHUNK: a full chunk whose
 * profile ids (`pidOf`) span at most twice its size goes as one multi-row statement, any other
 * row alone (membershipChanges says why).
 */
export function writeRows(s: StoreCtx, count: number, width: number, pidOf: (i: number) => number, sql: (rows: number) => string, bind: (i: number, args: unknown[]) => void): void {
  const args: unknown[] = [];
  let single: Database.Statement | undefined;
  for (let start = 0; start < count; start += MEMBERSHIP_WRITE_CHUNK) {
    const end = Math.min(count, start + MEMBERSHIP_WRITE_CHUNK);
    let lo = Infinity, hi = -Infinity;
    for (let i = start; i < end; i++) {
      const pid = pidOf(i);
      if (pid < lo) lo = pid;
      if (pid > hi) hi = pid;
    }
    args.length = 0;
    if (end - start === MEMBERSHIP_WRITE_CHUNK && hi - lo + 1 <= 2 * MEMBERSHIP_WRITE_CHUNK) {
      for (let i = start; i < end; i++) bind(i, args);
      s.stmt(sql(MEMBERSHIP_WRITE_CHUNK)).run(args);
      continue;
    }
    single ??= s.stmt(sql(1));
    for (let i = start; i < end; i++) {
      args.length = 0;
      bind(i, args);
      single.run(args);
    }
  }
}

/**
 * Set-based: SQLite does the row work in C over JSON arrays of integer codes (json_each), so a
 * row costs no JS objects nor bound parameters. Memberships are written profile-id-major (see
 * pidMajorCodes) with one upsert per MEMBERSHIP_SET_ROWS rows, each row's definition and status
 * looked up in a small temp table; transitions set by set, by ascending profile id. (A JS number binds
 * as a REAL: the modulus is cast so that the division stays an integer one. `WHERE true`: SQLite's
 * parser needs it before an upsert's ON CONFLICT after INSERT … SELECT … JOIN.)
 */
export async function applyMembershipSets(s: StoreCtx, scope: TenantScope, sets: readonly MembershipSet[], opts: MembershipSetOptions): Promise<MembershipSetCounts> {
  // async: an invalid set rejects (planMembershipSets throws) before anything is queued.
  const planned: PlannedSet[] = planMembershipSets(sets, opts);
  const counts = transitionCounts(planned);
  const total = counts.realized + counts.exited;
  if (total === 0) return counts;
  const tid = s.tenantForWrite(scope);
  const defs = s.defCodes.ensure(planned.map((p) => p.definitionId));
  const source = sourceCode(opts.source);
  return s.write(() => {
    writePlannedSets(s, tid, planned, defs, source, opts.at);
    return counts;
  }, total >= SOLO_MEMBERSHIP_CHANGES, true);
}

/**
 * A backfill's chunk (membership-sets.ts MembershipTargets): the stored statuses read and the net
 * change written in one write job, set-based as applyMembershipSets writes (no row objects, no
 * per-row statements); answers the transitions recorded as a set. The same result as
 * applyMembershipChanges with these changes without `from`.
 */
export async function applyMembershipTargets(s: StoreCtx, scope: TenantScope, targets: MembershipTargets, opts: MembershipSetOptions): Promise<MembershipSet> {
  // async: invalid targets reject (planMembershipTargets throws) before anything is queued.
  const planned = planMembershipTargets(targets, opts);
  if (planned.pids.length === 0) return setOfPlanned({ definitionId: targets.definitionId, codes: new Float64Array(0) });
  const tid = s.tenantForWrite(scope);
  const defs = s.defCodes.ensure([targets.definitionId]);
  const source = sourceCode(opts.source);
  return s.write(() => {
    const change = targetChanges(planned, readTargetStatuses(s, tid, defs.get(targets.definitionId)!, planned.pids));
    if (change.codes.length > 0) writePlannedSets(s, tid, [change], defs, source, opts.at);
    return setOfPlanned(change);
  }, planned.pids.length >= SOLO_MEMBERSHIP_CHANGES, true);
}

/**
 * STORED_* of each of the ascending profile ids for one definition: dense windows (as
 * readStoredStatuses defines them) with one range scan of memberships_def, the others with one
 * primary-key search each (cheaper per id than a join of the list to memberships: see there).
 */
function readTargetStatuses(s: StoreCtx, tid: number, def: number, pids: Float64Array): Uint8Array {
  const out = new Uint8Array(pids.length);
  const code = (status: number) => (status === STATUS_CODE.realized ? STORED_REALIZED : status === STATUS_CODE.exited ? STORED_EXITED : STORED_NONE);
  // The statements readStoredStatuses prepares (s.stmt caches them by text: their row mode is left as it is there).
  const range = s.stmt(`SELECT pid, status FROM memberships WHERE tid = ? AND def = ? AND status IN (${STATUS_CODE.realized}, ${STATUS_CODE.exited}) AND pid BETWEEN ? AND ?`);
  const point = s.stmt(`SELECT status FROM memberships WHERE tid = ${tid} AND pid = ? AND def = ?`).pluck();
  for (let i = 0; i < pids.length;) {
    let j = i + 1;
    while (j < pids.length && j - i < MEMBERSHIP_READ_CHUNK && pids[j]! - pids[i]! + 1 <= 2 * (j - i + 1)) j++;
    if (j - i >= MIN_RANGE_READ) {
      for (const { pid, status } of range.all(tid, def, pids[i]!, pids[j - 1]!) as Array<{ pid: number; status: number }>) {
        const k = lowerBound(pids, i, j, pid);
        if (k < j && pids[k] === pid) out[k] = code(status);
      }
    } else {
      for (let k = i; k < j; k++) {
        const status = point.get(pids[k]!, def) as number | undefined;
        if (status !== undefined) out[k] = code(status);
      }
    }
    i = j;
  }
  return out;
}

/** The writes of applyMembershipSets (in the caller's write job). */
function writePlannedSets(s: StoreCtx, tid: number, planned: readonly PlannedSet[], defs: ReadonlyMap<string, number>, source: number, at: number): void {
  const lqt = at;
  s.db.exec("CREATE TEMP TABLE IF NOT EXISTS membership_set_codes (idx INTEGER PRIMARY KEY, def INTEGER NOT NULL, status INTEGER NOT NULL)");
  const upsert = s.stmt(`INSERT INTO memberships (tid, pid, def, status, lqt) SELECT ${tid}, v.value / CAST(@modulus AS INTEGER), r.def, r.status, @lqt
    FROM json_each(CAST(@ids AS TEXT)) AS v CROSS JOIN temp.membership_set_codes AS r ON r.idx = v.value % CAST(@modulus AS INTEGER)
    WHERE true ON CONFLICT (tid, pid, def) DO UPDATE SET status = excluded.status, lqt = excluded.lqt`);
  const addRow = s.stmt("INSERT INTO temp.membership_set_codes (idx, def, status) VALUES (?, ?, ?)");
  for (const g of setGroups(planned)) {
    s.stmt("DELETE FROM temp.membership_set_codes").run();
    for (let k = 0; k < g.count; k++) {
      addRow.run(2 * k, defs.get(planned[g.first + k]!.definitionId)!, STATUS_CODE.realized);
      addRow.run(2 * k + 1, defs.get(planned[g.first + k]!.definitionId)!, STATUS_CODE.exited);
    }
    const { codes, modulus } = pidMajorCodes(planned, g.first, g.count);
    for (let i = 0; i < codes.length; i += MEMBERSHIP_SET_ROWS) upsert.run({ modulus, lqt, ids: jsonIntegers(codes, i, Math.min(codes.length, i + MEMBERSHIP_SET_ROWS)) });
  }
  const record = s.stmt(`INSERT INTO transitions (tid, pid, def, from_status, to_status, source, at)
    SELECT ${tid}, value >> 2, @def, CASE value & 3 WHEN ${KIND_REENTERED} THEN ${STATUS_CODE.exited} WHEN ${KIND_EXITED} THEN ${STATUS_CODE.realized} END,
      CASE value & 3 WHEN ${KIND_EXITED} THEN ${STATUS_CODE.exited} ELSE ${STATUS_CODE.realized} END, @source, @at FROM json_each(CAST(@ids AS TEXT))`);
  for (const p of planned) {
    const def = defs.get(p.definitionId)!;
    for (let i = 0; i < p.codes.length; i += MEMBERSHIP_SET_ROWS) record.run({ def, source, at, ids: jsonIntegers(p.codes, i, Math.min(p.codes.length, i + MEMBERSHIP_SET_ROWS)) });
  }
}

/**
 * The stored status of each (profile, definition) of the changes without `from` (read only for
 * those). Per definition, in windows of up to MEMBERSHIP_READ_CHUNK profile ids in ascending
 * order: a dense window of at least MIN_RANGE_READ ids (they span at most twice their number, as
 * a batch job's changes do) is read with one covering range scan of memberships_def per status
 * (several times cheaper per change than point lookups); other ids with one primary-key search
 * each. May return more statuses than asked for (members of the range that did not change); the
 * planner only reads the ones it needs.
 */
export function readStoredStatuses(s: StoreCtx, tid: number, changes: readonly MembershipChange[], codes: ReadonlyMap<string, number>): StoredStatuses {
  const stored: StoredStatuses = new Map();
  const byDef = new Map<string, number[]>();
  const sparse: Array<[number, string]> = [];
  for (const c of changes) {
    if (c.from !== undefined) continue;
    const pid = Number(c.profileId);
    // Not an id the store could hold (NaN would end a range): looked up alone, found nowhere.
    if (!Number.isSafeInteger(pid)) {
      sparse.push([pid, c.definitionId]);
      continue;
    }
    let pids = byDef.get(c.definitionId);
    if (pids === undefined) {
      pids = [];
      byDef.set(c.definitionId, pids);
    }
    pids.push(pid);
  }
  const range = s.stmt(`SELECT pid, status FROM memberships WHERE tid = ? AND def = ? AND status IN (${STATUS_CODE.realized}, ${STATUS_CODE.exited}) AND pid BETWEEN ? AND ?`);
  for (const [def, list] of byDef) {
    const pids = Float64Array.from(list).sort();
    for (let i = 0; i < pids.length;) {
      // The window grows while it stays dense, up to MEMBERSHIP_READ_CHUNK distinct ids.
      let j = i, distinct = 0, prev = Number.NaN;
      while (j < pids.length && distinct < MEMBERSHIP_READ_CHUNK) {
        if (pids[j] !== prev) {
          if (distinct > 0 && pids[j]! - pids[i]! + 1 > 2 * (distinct + 1)) break;
          distinct++;
          prev = pids[j]!;
        }
        j++;
      }
      const lo = pids[i]!, hi = pids[j - 1]!;
      if (distinct >= MIN_RANGE_READ) {
        for (const r of range.all(tid, codes.get(def)!, lo, hi) as Array<{ pid: number; status: number }>) addStoredStatus(stored, r.pid, def, statusName(r.status));
      } else {
        for (let k = i; k < j; k++) sparse.push([pids[k]!, def]);
      }
      i = j;
    }
  }
  // One primary-key search per id, each its own statement: a VALUES list of 500 joined to
  // memberships measured ~3 times the CPU per id of these point reads (2.1 vs 0.7 µs).
  const point = s.stmt(`SELECT status FROM memberships WHERE tid = ${tid} AND pid = ? AND def = ?`).pluck();
  for (const [pid, def] of sparse) {
    const status = point.get(pid, codes.get(def)!) as number | undefined;
    if (status !== undefined) addStoredStatus(stored, pid, def, statusName(status));
  }
  return stored;
}

/**
 * Runs a statement over `count` rows in chunks of `chunk` rows of `width` parameters. The
 * rows after the last full chunk go in chunks of decreasing powers of two (99 → 64 + 32 + 2 + 1),
 * so every statement comes from the cache: preparing a fresh one for each call's odd remainder
 * (hundreds of parameters) cost the hub's writer ~1.5 µs per forwarded edge event, and the cache
 * holds at most log2(chunk) + 2 statements per shape.
 */
export function bulk(s: StoreCtx, count: number, chunk: number, width: number, sql: (rows: number) => string, bind: (i: number, args: unknown[]) => void,
  exec: (st: Database.Statement, args: unknown[]) => void): void {
  const args: unknown[] = [];
  let full: Database.Statement | undefined;
  for (let start = 0; start < count;) {
    const rest = count - start;
    const n = rest >= chunk ? chunk : 2 ** Math.floor(Math.log2(rest));
    const st = n === chunk ? (full ??= s.stmt(sql(n))) : s.stmt(sql(n));
    args.length = 0;
    for (let i = start; i < start + n; i++) bind(i, args);
    if (args.length !== n * width) throw new Error(`bulk statement expects ${n * width} parameters, got ${args.length}`);
    exec(st, args);
    start += n;
  }
}

export async function getMemberships(s: StoreCtx, scope: TenantScope, profileId: string): Promise<Membership[]> {
  const rows = s.stmt(`${SELECT_MEMBERSHIPS} WHERE m.tid = ? AND m.pid = ? ORDER BY c.id`).all(s.tid(scope, false), Number(profileId)) as StoredMembershipRow[];
  return rows.map(membershipOf);
}

export async function listMembers(s: StoreCtx, scope: TenantScope, definitionId: string, opts: { status?: MembershipStatus; limit?: number; afterProfileId?: string } = {}): Promise<Membership[]> {
  const def = s.defCodes.find(definitionId);
  if (def === undefined) return [];
  const rows = s.stmt(`SELECT pid, status, lqt FROM memberships WHERE tid = ? AND def = ? AND status = ? AND pid > ? ORDER BY pid LIMIT ?`)
    .all(s.tid(scope, false), def, statusCode(opts.status ?? "realized"), Number(opts.afterProfileId ?? 0), opts.limit ?? 1000) as Array<Omit<StoredMembershipRow, "def">>;
  return rows.map((r) => membershipOf({ ...r, def: definitionId }));
}

export async function listMemberIds(s: StoreCtx, scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<string[]> {
  const def = s.defCodes.find(definitionId);
  if (def === undefined) return [];
  const rows = s.stmt("SELECT pid FROM memberships WHERE tid = ? AND def = ? AND status = ? ORDER BY pid").raw(true).all(s.tid(scope, false), def, statusCode(status)) as Array<[number]>;
  return rows.map((r) => String(r[0]));
}

export async function listMemberPids(s: StoreCtx, scope: TenantScope, definitionId: string, status: MembershipStatus): Promise<Float64Array> {
  const def = s.defCodes.find(definitionId);
  if (def === undefined) return new Float64Array(0);
  return Float64Array.from(s.stmt("SELECT pid FROM memberships WHERE tid = ? AND def = ? AND status = ? ORDER BY pid").pluck().all(s.tid(scope, false), def, statusCode(status)) as number[]);
}

export async function countMembers(s: StoreCtx, scope: TenantScope, definitionId: string): Promise<{ realized: number; exited: number }> {
  const def = s.defCodes.find(definitionId);
  if (def === undefined) return { realized: 0, exited: 0 };
  const rows = s.stmt("SELECT status, count(*) AS n FROM memberships WHERE tid = ? AND def = ? GROUP BY status").all(s.tid(scope, false), def) as Array<{ status: number; n: number }>;
  return { realized: rows.find((r) => r.status === STATUS_CODE.realized)?.n ?? 0, exited: rows.find((r) => r.status === STATUS_CODE.exited)?.n ?? 0 };
}

export async function listTransitions(s: StoreCtx, scope: TenantScope, q: TransitionQuery = {}): Promise<MembershipTransition[]> {
  const where = ["tid = ?", "at >= ?", "at < ?"];
  const params: Array<string | number> = [s.tid(scope, false), q.since ?? Number.MIN_SAFE_INTEGER, q.until ?? Number.MAX_SAFE_INTEGER];
  const named = [...(q.definitionId === undefined ? [] : [q.definitionId]), ...(q.definitionIds ?? [])];
  if (q.definitionId !== undefined || q.definitionIds !== undefined) {
    const defs = named.map((id) => s.defCodes.find(id)).filter((d): d is number => d !== undefined);
    if (defs.length === 0) return [];
    where.push(`def IN (${defs.map(() => "?").join(", ")})`);
    params.push(...defs);
  }
  if (q.sources !== undefined && q.sources.length > 0) { where.push(`source IN (${q.sources.map(() => "?").join(", ")})`); params.push(...q.sources.map(sourceCode)); }
  if (q.profileIds !== undefined) { where.push("pid IN (SELECT value FROM json_each(?))"); params.push(JSON.stringify(q.profileIds.map(Number))); }
  const cols = "pid, def, from_status, to_status, source, at";
  // Without statistics SQLite takes the (definition, time) index (it gives the order too) even for
  // a few profiles, and reads the definitions' whole logs: the (definition, profile) one, named.
  const table = q.profileIds === undefined || named.length === 0 ? "transitions" : "transitions INDEXED BY transitions_def_pid";
  // The newest of each (profile, definition), numbered newest first.
  const from = q.latestPerMembership === undefined
    ? `${table} WHERE ${where.join(" AND ")}`
    : `(SELECT seq, ${cols}, row_number() OVER (PARTITION BY pid, def ORDER BY at DESC, seq DESC) AS n FROM ${table} WHERE ${where.join(" AND ")}) WHERE n <= ?`;
  if (q.latestPerMembership !== undefined) params.push(q.latestPerMembership);
  const rows = s.db.prepare(`SELECT ${cols} FROM ${from} ORDER BY at, seq LIMIT ?`)
    .all(...params, q.limit ?? 10_000) as Array<{ pid: number; def: number; from_status: number | null; to_status: number; source: number; at: number }>;
  return rows.map((r) => ({ profileId: String(r.pid), definitionId: s.defCodes.idOf(r.def), from: r.from_status === null ? null : statusName(r.from_status),
    to: statusName(r.to_status), source: sourceName(r.source), at: new Date(r.at).toISOString() }));
}

// ---- data lifecycle -------------------------------------------------------

