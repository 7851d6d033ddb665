// Builds merged profiles from the rows a store read for one chunk of graphs (or
// one graph). Shared by both stores so that scans and lookups merge identically.
import { buildMergedProfile } from "./merge.js";
import { StoreError, type ScannedProfile } from "./store.js";
import type { Identity, JsonObject, Membership, MembershipStatus, MergedProfile, MergePolicySpec, ProfileFragment, StoredEvent } from "./types.js";
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

export function parseBody(text: string): JsonObject {
  return JSON.parse(text) as JsonObject;
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
