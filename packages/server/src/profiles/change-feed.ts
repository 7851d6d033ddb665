// Change feed of a profile store (ProfileStore.changesSince): which profiles'
// data changed after a version. Both stores feed it from their write paths,
// after the commit of the write, so a reader that sees a version also sees the
// data written up to it.
//
// Both stores also persist it: every write that changes profiles adds a row to
// a change log table in its own transaction, under the version it is recorded
// with here (embedded/change-log.ts, postgres/pg-change-log.ts), and a reopened
// store primes its feed from that log (FeedHistory), so versions handed out
// before a restart are still answered. Without a history (a new feed) the
// counter starts at (open time in ms) × 1024, above any unpersisted version of
// an earlier process. History is capped per tenant; a `since` older than the
// oldest change still kept answers null ("cannot tell, re-read everything").

export const DEFAULT_FEED_CAPACITY = 2_000_000;

interface TenantLog {
  /** (version, profile ids) entries, oldest first, from `head` on. */
  entries: Array<{ version: number; pids: string[] }>;
  head: number;
  size: number;
  /** A `since` below this cannot be answered (history evicted before it). */
  floor: number;
}

/** A feed's whole state: what a store reads back from its change log, and what the worker store's mirror starts from. */
export interface FeedHistory {
  /** A `since` from this version on is answered for a tenant without floor of its own. */
  base: number;
  /** The newest version (no change is recorded at or below it again). */
  current: number;
  /** Per tenant: a `since` below it cannot be answered (history trimmed before it). */
  floors: Array<[tenant: string, floor: number]>;
  /** The kept changes, in version order. */
  entries: Array<[version: number, tenant: string, pids: string[]]>;
}

export class ChangeFeed {
  private version: number;
  private readonly base: number;
  private readonly tenants = new Map<string, TenantLog>();
  /** Tenants whose floor moved (history evicted) since takeEvicted: their log rows can go. */
  private evicted = new Map<string, number>();
  /**
   * Several processes writing one log (PostgreSQL, several hubs): the version through which every
   * committed change is in this feed — how far the shared log has been read (learn). Infinity
   * when this feed's owner is the log's only writer.
   */
  private complete = Infinity;
  /** Versions above `complete` already in the feed (this process's own, recorded before the log's read reached them). */
  private readonly recent = new Set<number>();

  constructor(private readonly capacity = DEFAULT_FEED_CAPACITY, now = Date.now(), history?: FeedHistory) {
    this.base = history?.base ?? now * 1024;
    this.version = this.base;
    if (history === undefined) return;
    for (const [tenant, floor] of history.floors) this.logOf(tenant).floor = Math.max(floor, this.base);
    for (const [version, tenant, pids] of history.entries) {
      this.add(tenant, version, pids);
      this.version = Math.max(this.version, version);
    }
    this.version = Math.max(this.version, history.current);
  }

  get current(): number {
    return this.version;
  }

  /**
   * Records one committed write: advances the version once for all tenants touched by it, to
   * `version` when given (the number its change log row was written with; above `current`).
   */
  record(changes: ReadonlyMap<string, ReadonlySet<string>>, version?: number): void {
    let any = false;
    for (const pids of changes.values()) if (pids.size > 0) any = true;
    if (!any) return;
    if (Number.isFinite(this.complete) && version !== undefined) {
      // Several writers: recorded at its own version, in order; once the log's read passed it, it is in already.
      if (version <= this.complete || this.recent.has(version)) return;
      this.recent.add(version);
      this.version = Math.max(this.version, version);
      for (const [tenant, pids] of changes) if (pids.size > 0) this.insert(tenant, version, [...pids]);
      return;
    }
    // A version not above the current one (never expected) is recorded as the next: later than it was, so re-read, never missed.
    const v = version !== undefined && version > this.version ? version : this.version + 1;
    this.version = v;
    for (const [tenant, pids] of changes) if (pids.size > 0) this.add(tenant, v, [...pids]);
  }

  /** From now on other processes write the log too: the feed is complete through `through` (what the store read of the log). */
  shareLog(through: number): void {
    this.complete = Math.max(Number.isFinite(this.complete) ? this.complete : -Infinity, through, this.base);
  }

  /**
   * Changes read from the shared log after `complete` (every process's, in version order; this
   * process's own already recorded are skipped), then complete through `through`.
   */
  learn(entries: ReadonlyArray<readonly [version: number, tenant: string, pids: readonly string[]]>, through: number): void {
    for (const [v, tenant, pids] of entries) {
      if (v <= this.complete || this.recent.has(v) || pids.length === 0) continue;
      this.insert(tenant, v, [...pids]);
      this.version = Math.max(this.version, v);
    }
    this.complete = Math.max(this.complete, through);
    for (const v of this.recent) if (v <= this.complete) this.recent.delete(v);
  }

  /** Adds an entry at its version's place (entries stay in version order); one older than the kept history is not needed. */
  private insert(tenant: string, v: number, pids: string[]): void {
    const log = this.logOf(tenant);
    if (v <= log.floor) return;
    let i = log.entries.length;
    while (i > log.head && log.entries[i - 1]!.version > v) i--;
    if (i === log.entries.length) {
      this.add(tenant, v, pids);
      return;
    }
    log.entries.splice(i, 0, { version: v, pids });
    log.size += pids.length;
    this.evict(tenant, log);
  }

  private logOf(tenant: string): TenantLog {
    let log = this.tenants.get(tenant);
    if (log === undefined) {
      log = { entries: [], head: 0, size: 0, floor: this.base };
      this.tenants.set(tenant, log);
    }
    return log;
  }

  private add(tenant: string, v: number, pids: string[]): void {
    const log = this.logOf(tenant);
    log.entries.push({ version: v, pids });
    log.size += pids.length;
    this.evict(tenant, log);
  }

  private evict(tenant: string, log: TenantLog): void {
    let moved = false;
    while (log.size > this.capacity && log.head < log.entries.length) {
      const old = log.entries[log.head]!;
      log.head++;
      log.size -= old.pids.length;
      log.floor = old.version;
      moved = true;
    }
    if (moved) this.evicted.set(tenant, log.floor);
    if (log.head > 1024 && log.head * 2 > log.entries.length) {
      log.entries = log.entries.slice(log.head);
      log.head = 0;
    }
  }

  /** Tenants whose floor moved since the last call, with their floor: their log rows up to it can be deleted. */
  takeEvicted(): Map<string, number> {
    const out = this.evicted;
    this.evicted = new Map();
    return out;
  }

  /** Everything kept, for a mirror of this feed (worker-store.ts). */
  history(): FeedHistory {
    const floors: FeedHistory["floors"] = [];
    const entries: FeedHistory["entries"] = [];
    for (const [tenant, log] of this.tenants) {
      if (log.floor !== this.base) floors.push([tenant, log.floor]);
      for (let i = log.head; i < log.entries.length; i++) entries.push([log.entries[i]!.version, tenant, log.entries[i]!.pids]);
    }
    entries.sort((a, b) => a[0] - b[0]);
    return { base: this.base, current: this.version, floors, entries };
  }

  changesSince(tenant: string, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    // With several writers only what the shared log was read through is final: a caller asking
    // again from the version answered sees what other processes committed meanwhile.
    const version = Math.min(this.version, this.complete);
    if (since === null || !Number.isFinite(since) || since > version) return { version, profileIds: null };
    const log = this.tenants.get(tenant);
    if (log === undefined) return { version, profileIds: since < this.base ? null : new Set() };
    if (since < log.floor) return { version, profileIds: null };
    const out = new Set<string>();
    // Entries are in version order: walk back from the newest to the first one after `since`.
    for (let i = log.entries.length - 1; i >= log.head; i--) {
      const e = log.entries[i]!;
      if (e.version <= since) break;
      for (const p of e.pids) out.add(p);
    }
    return { version, profileIds: out };
  }
}

/**
 * Adds profiles a running write job touches to `touching` (per tenant id); null when no job is
 * collecting. Stores keep them only if the job's savepoint and the group commit hold.
 */
export function touchProfiles(touching: Map<number, Set<number>> | null, tid: number, pids: Iterable<number>): void {
  if (touching === null) return;
  let set = touching.get(tid);
  if (set === undefined) {
    set = new Set();
    touching.set(tid, set);
  }
  for (const p of pids) set.add(p);
}

/** Records committed changes (per tenant id) in the feed under each tenant's key (at `version`, their change log rows'); returns them by key. */
export function recordTouched(feed: ChangeFeed, touched: ReadonlyMap<number, ReadonlySet<number>>, keyOf: (tid: number) => string | undefined, version?: number): Map<string, Set<string>> {
  const byTenant = new Map<string, Set<string>>();
  if (touched.size === 0) return byTenant;
  for (const [tid, pids] of touched) {
    const key = keyOf(tid);
    if (key === undefined) continue;
    byTenant.set(key, new Set([...pids].map(String)));
  }
  feed.record(byTenant, version);
  return byTenant;
}

/** Adds one job's touched profiles (per tenant id) to the group's, once the job's savepoint held. */
export function mergeTouched(into: Map<number, Set<number>>, from: ReadonlyMap<number, Set<number>>): void {
  for (const [tid, pids] of from) {
    const all = into.get(tid);
    if (all === undefined) into.set(tid, pids);
    else for (const p of pids) all.add(p);
  }
}
