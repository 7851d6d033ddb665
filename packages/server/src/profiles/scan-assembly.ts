// Builds merged profiles from the rows a store read for one chunk of graphs (or
// one graph). Shared by both stores so that scans and lookups merge identically.
import { buildMergedProfile, fragmentsOfProfile } from "./merge.js";
import { StoreError, type MembershipChange, type ProfileWithFragments, type ScannedProfile } from "./store.js";
import type { Identity, Membership, MembershipStatus, MembershipTransition, MergedProfile, MergePolicySpec, ProfileFragment, StoredEvent } from "./types.js";
import { identityKey } from "./validate.js";

export interface GraphRows {
  identities: Identity[];
  fragments: ProfileFragment[];
  events: StoredEvent[];
  memberships: Membership[];
}

export interface MembershipRow { pid: number; def: string; status: string; lqt: string }

export function toMembership(r: MembershipRow): Membership {
  return { profileId: String(r.pid), definitionId: r.def, status: r.status as MembershipStatus, lastQualificationTime: r.lqt };
}

export function emptyGraphRows(): GraphRows {
  return { identities: [], fragments: [], events: [], memberships: [] };
}

/**
 * One scanned entry per graph (pdg), or one per identity that keys fragments or
 * events (none: each such identity is its own profile).
 */
export function assembleGraph(pid: number, rows: GraphRows, policy: MergePolicySpec): ScannedProfile[] {
  const profileId = String(pid);
  if (policy.identityGraph.type === "pdg") {
    const merged = buildMergedProfile({ profileId, graphIdentities: rows.identities, fragments: rows.fragments, memberships: rows.memberships, policy, lookedUp: null });
    return [{ ...merged, events: rows.events, identity: null }];
  }
  const keys = new Map<string, Identity>();
  for (const f of rows.fragments) keys.set(identityKey(f.primary), f.primary);
  for (const e of rows.events) keys.set(identityKey(e.primary), e.primary);
  const out: ScannedProfile[] = [];
  for (const [k, identity] of [...keys.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const merged = buildMergedProfile({ profileId, graphIdentities: rows.identities, fragments: rows.fragments, memberships: rows.memberships, policy, lookedUp: identity });
    out.push({ ...merged, events: rows.events.filter((e) => identityKey(e.primary) === k), identity });
  }
  return out;
}

/** A lookup result: null when, under the policy, the identity has no data of its own. */
export function lookupProfile(pid: number, rows: GraphRows, policy: MergePolicySpec, identity: Identity): MergedProfile | null {
  const profileId = String(pid);
  if (policy.identityGraph.type === "none") {
    const k = identityKey(identity);
    const own = rows.fragments.some((f) => identityKey(f.primary) === k) || rows.events.some((e) => identityKey(e.primary) === k);
    if (!own) return null;
  }
  return buildMergedProfile({ profileId, graphIdentities: rows.identities, fragments: rows.fragments, memberships: rows.memberships, policy, lookedUp: identity });
}

/** lookupProfile with the fragments the merge used (ProfileSources.getProfileWithFragments). */
export function lookupProfileWithFragments(pid: number, rows: GraphRows, policy: MergePolicySpec, identity: Identity): ProfileWithFragments | null {
  const profile = lookupProfile(pid, rows, policy, identity);
  return profile === null ? null : { profile, fragments: fragmentsOfProfile(rows.fragments, policy, identity) };
}

export function encodeCursor(ts: number, seq: number): string {
  return Buffer.from(JSON.stringify([ts, seq])).toString("base64url");
}

export function decodeCursor(cursor: string): { ts: number; seq: number } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new StoreError("INVALID_CURSOR", `invalid events cursor ${JSON.stringify(cursor)}`);
  }
  if (!Array.isArray(parsed) || parsed.length !== 2 || !parsed.every((n) => Number.isSafeInteger(n))) {
    throw new StoreError("INVALID_CURSOR", `invalid events cursor ${JSON.stringify(cursor)}`);
  }
  return { ts: parsed[0] as number, seq: parsed[1] as number };
}

export interface MembershipPlan {
  /** The transitions to record and return, in the order of the changes. */
  transitions: MembershipTransition[];
  /** Numeric profile id of each transition (parallel to transitions). */
  pids: number[];
  /** Epoch ms of each transition (parallel to transitions). */
  ats: number[];
  /** Indexes into transitions of the last transition of each (profile, definition): the membership rows to upsert. */
  upserts: number[];
}

/** Stored statuses a store read for changes without `from`: definition id → numeric profile id → status. */
export type StoredStatuses = Map<string, Map<number, MembershipStatus>>;

export function addStoredStatus(stored: StoredStatuses, pid: number, definitionId: string, status: MembershipStatus): void {
  let m = stored.get(definitionId);
  if (m === undefined) {
    m = new Map();
    stored.set(definitionId, m);
  }
  m.set(pid, status);
}

/** Planner state of one definition. */
interface DefinitionPlan {
  /** Highest profile id seen so far while ids only increased. */
  prev: number;
  /** While ids only increase (no profile twice, as a batch job writes): the definition's transitions. */
  idx: number[];
  /** Once an id repeats or decreases: profile id → index of its last transition. */
  last: Map<number, number> | null;
  stored: Map<number, MembershipStatus> | undefined;
}

/**
 * Turns membership changes into transitions (shared by both stores). The previous status of a
 * change is, in order: the status an earlier change of this call set for the same profile and
 * definition, the change's own `from`, or `stored` (read by the store for changes without `from`;
 * missing = no membership). Only real status changes become transitions (an exit without a
 * membership is none). Keyed per definition, then by numeric profile id; while a definition's
 * profile ids only increase no profile can repeat, so the per-profile map (about half the cost of
 * a million changes, with its garbage) is only built for a definition once an id does not increase.
 */
export function planMembershipChanges(changes: readonly MembershipChange[], stored: StoredStatuses): MembershipPlan {
  const transitions: MembershipTransition[] = [];
  const pids: number[] = [];
  const ats: number[] = [];
  const defs = new Map<string, DefinitionPlan>();
  let curDef: string | undefined;
  let cur: DefinitionPlan | undefined;
  let lastAt = Number.NaN, lastIso = "";
  for (const c of changes) {
    const pid = Number(c.profileId);
    if (c.definitionId !== curDef || cur === undefined) {
      curDef = c.definitionId;
      cur = defs.get(curDef);
      if (cur === undefined) {
        cur = { prev: Number.NEGATIVE_INFINITY, idx: [], last: null, stored: stored.get(curDef) };
        defs.set(curDef, cur);
      }
    }
    let li: number | undefined;
    if (cur.last === null) {
      if (pid > cur.prev) {
        cur.prev = pid;
      } else {
        cur.last = new Map();
        for (const k of cur.idx) cur.last.set(pids[k]!, k);
        li = cur.last.get(pid);
      }
    } else {
      li = cur.last.get(pid);
    }
    const from = li !== undefined ? transitions[li]!.to : c.from !== undefined ? c.from : cur.stored?.get(pid) ?? null;
    if (from === c.status || (from === null && c.status === "exited")) continue;
    if (c.at !== lastAt) { lastAt = c.at; lastIso = new Date(c.at).toISOString(); }
    if (cur.last === null) cur.idx.push(transitions.length);
    else cur.last.set(pid, transitions.length);
    transitions.push({ profileId: c.profileId, definitionId: c.definitionId, from, to: c.status, source: c.source, at: lastIso });
    pids.push(pid);
    ats.push(c.at);
  }
  const upserts: number[] = [];
  for (const d of defs.values()) {
    if (d.last === null) for (const k of d.idx) upserts.push(k);
    else for (const k of d.last.values()) upserts.push(k);
  }
  return { transitions, pids, ats, upserts };
}

/** Profile ids a store keys by integer, deduplicated and in scan (pid) order; others cannot be held. */
export function listedPids(ids: readonly string[]): number[] {
  const pids = new Set<number>();
  for (const id of ids) {
    const n = Number(id);
    if (Number.isSafeInteger(n) && n > 0 && String(n) === id) pids.add(n);
  }
  return [...pids].sort((a, b) => a - b);
}
