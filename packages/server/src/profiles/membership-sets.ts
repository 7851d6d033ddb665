// Bulk membership writes of a batch job (ProfileStore.applyMembershipSets).
//
// A job changes millions of memberships at once. As MembershipChange objects
// (string ids, one object per change, transitions cloned back from the store's
// worker) that cost ~1.5 GB and most of the persist time at 1M profiles; here
// each definition's changes are three typed arrays of numeric profile ids, one
// per kind of transition, and the stores do the row work in set-based SQL.
//
// The stored result is the one applyMembershipChanges leaves for the same
// changes with the caller's `from` (entered: from null; reentered: from
// exited; exited: from realized): every listed profile's membership row is
// upserted with the new status and lastQualificationTime = at, and one
// transition per listed profile is recorded, sets in the order given and, within
// a set, by ascending profile id. Profiles that stay realized are not listed
// (applyMembershipChanges writes nothing for them either).
import type { MembershipSource } from "./types.js";

export interface MembershipSet {
  definitionId: string;
  /** No stored membership → realized. */
  entered: Float64Array;
  /** Stored exited → realized. */
  reentered: Float64Array;
  /** Stored realized → exited. */
  exited: Float64Array;
}

export interface MembershipSetOptions {
  source: MembershipSource;
  /** Epoch ms: the transitions' time and the memberships' lastQualificationTime. */
  at: number;
}

/** Transitions recorded, by new status. */
export interface MembershipSetCounts {
  realized: number;
  exited: number;
}

/**
 * Largest profile id a set may hold. The stores allocate ids from 1 upwards; the bound keeps
 * `pid * 4 + kind` exact in a double (setGroups keeps the row codes of pidMajorCodes exact).
 */
export const MAX_SET_PROFILE_ID = 2 ** 48;

export const KIND_ENTERED = 0;
export const KIND_REENTERED = 1;
export const KIND_EXITED = 2;

const SOURCES: ReadonlySet<string> = new Set<MembershipSource>(["batch", "streaming", "edge", "backfill"]);
const KINDS = ["entered", "reentered", "exited"] as const;

/** One set after validation: `pid * 4 + kind` per listed profile, by ascending profile id. */
export interface PlannedSet {
  definitionId: string;
  codes: Float64Array;
}

/** Validates the sets (RangeError / TypeError naming the first problem) and orders each one by profile id. */
export function planMembershipSets(sets: readonly MembershipSet[], opts: MembershipSetOptions): PlannedSet[] {
  if (!SOURCES.has(opts.source)) throw new RangeError(`membership sets: unknown source ${JSON.stringify(opts.source)}`);
  if (!Number.isSafeInteger(opts.at)) throw new RangeError(`membership sets: at ${opts.at} is not an integer (epoch ms)`);
  const seen = new Set<string>();
  return sets.map((s) => {
    if (typeof s.definitionId !== "string" || s.definitionId === "") throw new TypeError("membership sets: a set has no definitionId");
    if (seen.has(s.definitionId)) throw new RangeError(`membership sets: definition ${s.definitionId} has two sets`);
    seen.add(s.definitionId);
    const lists = [s.entered, s.reentered, s.exited];
    let ascending = true;
    lists.forEach((list, kind) => {
      if (!(list instanceof Float64Array)) throw new TypeError(`membership set ${s.definitionId}: ${KINDS[kind]} is not a Float64Array`);
      for (let i = 0; i < list.length; i++) {
        const v = list[i]!;
        if (!(Number.isInteger(v) && v >= 1 && v <= MAX_SET_PROFILE_ID)) {
          throw new RangeError(`membership set ${s.definitionId}: ${KINDS[kind]} profile id ${v} is not an integer from 1 to 2^48`);
        }
        if (i > 0 && v < list[i - 1]!) ascending = false;
      }
    });
    const codes = ascending ? mergeKinds(lists) : sortKinds(lists);
    for (let i = 1; i < codes.length; i++) {
      const pid = Math.floor(codes[i]! / 4);
      if (pid === Math.floor(codes[i - 1]! / 4)) throw new RangeError(`membership set ${s.definitionId}: profile ${pid} is listed twice`);
    }
    return { definitionId: s.definitionId, codes };
  });
}

/** The three ascending lists merged into codes (the engine's usual case: no sort). */
function mergeKinds(lists: readonly Float64Array[]): Float64Array {
  const [a, b, c] = lists as [Float64Array, Float64Array, Float64Array];
  const out = new Float64Array(a.length + b.length + c.length);
  let i = 0, j = 0, k = 0;
  for (let o = 0; o < out.length; o++) {
    const x = i < a.length ? a[i]! : Infinity, y = j < b.length ? b[j]! : Infinity, z = k < c.length ? c[k]! : Infinity;
    if (x <= y && x <= z) out[o] = a[i++]! * 4 + KIND_ENTERED;
    else if (y <= z) out[o] = b[j++]! * 4 + KIND_REENTERED;
    else out[o] = c[k++]! * 4 + KIND_EXITED;
  }
  return out;
}

function sortKinds(lists: readonly Float64Array[]): Float64Array {
  const out = new Float64Array(lists.reduce((n, l) => n + l.length, 0));
  let o = 0;
  lists.forEach((list, kind) => {
    for (let i = 0; i < list.length; i++) out[o++] = list[i]! * 4 + kind;
  });
  return out.sort();
}

export function transitionCounts(planned: readonly PlannedSet[]): MembershipSetCounts {
  const counts = { realized: 0, exited: 0 };
  for (const p of planned) {
    for (let i = 0; i < p.codes.length; i++) {
      if (p.codes[i]! % 4 === KIND_EXITED) counts.exited++;
      else counts.realized++;
    }
  }
  return counts;
}

/**
 * Groups of consecutive sets whose row codes fit in a double: a group of g sets codes a row as
 * `pid * 2g + 2 * (set index in the group) + (1 when the new status is exited)`.
 */
export function setGroups(planned: readonly PlannedSet[]): Array<{ first: number; count: number }> {
  let maxPid = 0;
  for (const p of planned) if (p.codes.length > 0) maxPid = Math.max(maxPid, Math.floor(p.codes[p.codes.length - 1]! / 4));
  const size = Math.max(1, Math.floor(2 ** 53 / (maxPid + 1) / 2));
  const groups: Array<{ first: number; count: number }> = [];
  for (let first = 0; first < planned.length; first += size) groups.push({ first, count: Math.min(size, planned.length - first) });
  return groups;
}

/**
 * The rows of a group of sets in profile-id-major order (`pid * modulus + 2 * set + exited`):
 * the memberships primary key is (tid, pid, def), so rows in that order append to it (or sweep
 * it once) instead of visiting the whole tree once per definition, which halves the write at
 * 5M rows. A counting sort when ids are dense (the stores' sequential ids), a sort otherwise.
 */
export function pidMajorCodes(planned: readonly PlannedSet[], first: number, count: number): { codes: Float64Array; modulus: number } {
  const modulus = 2 * count;
  let total = 0, minPid = Infinity, maxPid = 0;
  for (let s = first; s < first + count; s++) {
    const c = planned[s]!.codes;
    total += c.length;
    if (c.length === 0) continue;
    minPid = Math.min(minPid, Math.floor(c[0]! / 4));
    maxPid = Math.max(maxPid, Math.floor(c[c.length - 1]! / 4));
  }
  const out = new Float64Array(total);
  if (total === 0) return { codes: out, modulus };
  const range = maxPid - minPid + 1;
  if (range > 4 * total + 65_536) {
    let o = 0;
    for (let s = first; s < first + count; s++) for (const code of planned[s]!.codes) out[o++] = rowCode(code, s - first, modulus);
    return { codes: out.sort(), modulus };
  }
  const start = new Uint32Array(range + 1);
  for (let s = first; s < first + count; s++) for (const code of planned[s]!.codes) start[Math.floor(code / 4) - minPid + 1]!++;
  for (let i = 1; i <= range; i++) start[i]! += start[i - 1]!;
  // Sets in order: rows of one profile stay ordered by set.
  for (let s = first; s < first + count; s++) {
    for (const code of planned[s]!.codes) out[start[Math.floor(code / 4) - minPid]!++] = rowCode(code, s - first, modulus);
  }
  return { codes: out, modulus };
}

function rowCode(code: number, set: number, modulus: number): number {
  const pid = Math.floor(code / 4);
  return pid * modulus + 2 * set + (code - pid * 4 === KIND_EXITED ? 1 : 0);
}

/**
 * `[c0,c1,…]` of codes[start, end) as UTF-8 bytes, for SQLite's json_each (bound as a blob and
 * CAST to text). Number.prototype.toString / Array.join take ~160 ns per id; this ~25 ns.
 */
export function jsonIntegers(codes: Float64Array, start: number, end: number): Buffer {
  const buf = Buffer.allocUnsafe(Math.max(0, end - start) * 17 + 2);
  const digits = new Uint8Array(20);
  let p = 0;
  buf[p++] = 0x5b;
  for (let i = start; i < end; i++) {
    if (i > start) buf[p++] = 0x2c;
    let v = codes[i]!;
    let n = 0;
    while (v > 0x7fffffff) {
      const q = Math.floor(v / 10);
      digits[n++] = 0x30 + (v - q * 10);
      v = q;
    }
    let w = v | 0;
    do {
      const q = (w / 10) | 0;
      digits[n++] = 0x30 + (w - q * 10);
      w = q;
    } while (w > 0);
    while (n > 0) buf[p++] = digits[--n]!;
  }
  buf[p++] = 0x5d;
  return buf.subarray(0, p);
}

/**
 * A backfill's chunk (MembershipWrites.applyMembershipTargets): the status each listed profile of
 * one definition must end with. The store reads their stored statuses and writes only the net
 * change, in one transaction: the result and transitions of applyMembershipChanges with the same
 * changes without `from` (null → realized enters, exited → realized re-enters, realized → exited
 * exits; a profile already there, or null → exited, is not written).
 */
export interface MembershipTargets {
  definitionId: string;
  realized: Float64Array;
  exited: Float64Array;
}

/** Targets after validation: profile ids ascending, and 1 where the profile must end realized. */
export interface PlannedTargets {
  definitionId: string;
  pids: Float64Array;
  realized: Uint8Array;
}

/** A stored status as the target planner reads it. */
export const STORED_NONE = 0;
export const STORED_REALIZED = 1;
export const STORED_EXITED = 2;

/** Validates the targets (RangeError / TypeError naming the first problem) and orders them by profile id. */
export function planMembershipTargets(t: MembershipTargets, opts: MembershipSetOptions): PlannedTargets {
  if (!SOURCES.has(opts.source)) throw new RangeError(`membership targets: unknown source ${JSON.stringify(opts.source)}`);
  if (!Number.isSafeInteger(opts.at)) throw new RangeError(`membership targets: at ${opts.at} is not an integer (epoch ms)`);
  if (typeof t.definitionId !== "string" || t.definitionId === "") throw new TypeError("membership targets: no definitionId");
  const lists = [t.realized, t.exited];
  const codes = new Float64Array(t.realized.length + t.exited.length);
  let o = 0;
  lists.forEach((list, k) => {
    const name = k === 0 ? "realized" : "exited";
    if (!(list instanceof Float64Array)) throw new TypeError(`membership targets ${t.definitionId}: ${name} is not a Float64Array`);
    for (let i = 0; i < list.length; i++) {
      const v = list[i]!;
      if (!(Number.isInteger(v) && v >= 1 && v <= MAX_SET_PROFILE_ID)) throw new RangeError(`membership targets ${t.definitionId}: ${name} profile id ${v} is not an integer from 1 to 2^48`);
      codes[o++] = v * 2 + k;
    }
  });
  codes.sort();
  const pids = new Float64Array(codes.length);
  const realized = new Uint8Array(codes.length);
  for (let i = 0; i < codes.length; i++) {
    const pid = Math.floor(codes[i]! / 2);
    if (i > 0 && pid === pids[i - 1]) throw new RangeError(`membership targets ${t.definitionId}: profile ${pid} is listed twice`);
    pids[i] = pid;
    realized[i] = codes[i]! - pid * 2 === 0 ? 1 : 0;
  }
  return { definitionId: t.definitionId, pids, realized };
}

/** The net change of planned targets against `stored` (STORED_* of each pid): the set to write, ascending. */
export function targetChanges(p: PlannedTargets, stored: Uint8Array): PlannedSet {
  const out = new Float64Array(p.pids.length);
  let n = 0;
  for (let i = 0; i < p.pids.length; i++) {
    const s = stored[i]!;
    if (p.realized[i] === 1) {
      if (s === STORED_NONE) out[n++] = p.pids[i]! * 4 + KIND_ENTERED;
      else if (s === STORED_EXITED) out[n++] = p.pids[i]! * 4 + KIND_REENTERED;
    } else if (s === STORED_REALIZED) out[n++] = p.pids[i]! * 4 + KIND_EXITED;
  }
  return { definitionId: p.definitionId, codes: out.subarray(0, n) };
}

/** A planned set as the three id lists of a MembershipSet. */
export function setOfPlanned(p: PlannedSet): MembershipSet {
  const lists: number[][] = [[], [], []];
  for (let i = 0; i < p.codes.length; i++) {
    const pid = Math.floor(p.codes[i]! / 4);
    lists[p.codes[i]! - pid * 4]!.push(pid);
  }
  return { definitionId: p.definitionId, entered: Float64Array.from(lists[KIND_ENTERED]!), reentered: Float64Array.from(lists[KIND_REENTERED]!), exited: Float64Array.from(lists[KIND_EXITED]!) };
}

/** The first index in [lo, hi) of the ascending `a` whose value is at least `v`. */
export function lowerBound(a: Float64Array, lo: number, hi: number, v: number): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
