// In-memory change feed of a profile store (ProfileStore.changesSince): which
// profiles' data changed after a version. Both stores feed it from their write
// paths, after the commit of the write, so a reader that sees a version also
// sees the data written up to it.
//
// Versions are numbers unique across restarts of this process: the counter
// starts at (open time in ms) × 1024, so a version handed out before a restart
// (or by another store instance) is older than anything kept here and answers
// null ("cannot tell, re-read everything"). History is capped per tenant; a
// `since` older than the oldest change still kept also answers null.

export const DEFAULT_FEED_CAPACITY = 2_000_000;

interface TenantLog {
  /** (version, profile ids) entries, oldest first, from `head` on. */
  entries: Array<{ version: number; pids: string[] }>;
  head: number;
  size: number;
  /** A `since` below this cannot be answered (history evicted before it). */
  floor: number;
}

export class ChangeFeed {
  private version: number;
  private readonly base: number;
  private readonly tenants = new Map<string, TenantLog>();

  constructor(private readonly capacity = DEFAULT_FEED_CAPACITY, now = Date.now()) {
    this.base = now * 1024;
    this.version = this.base;
  }

  get current(): number {
    return this.version;
  }

  /** Records one committed write: advances the version once for all tenants touched by it. */
  record(changes: ReadonlyMap<string, ReadonlySet<string>>): void {
    let any = false;
    for (const pids of changes.values()) if (pids.size > 0) any = true;
    if (!any) return;
    const v = ++this.version;
    for (const [tenant, pids] of changes) {
      if (pids.size === 0) continue;
      let log = this.tenants.get(tenant);
      if (log === undefined) {
        log = { entries: [], head: 0, size: 0, floor: this.base };
        this.tenants.set(tenant, log);
      }
      log.entries.push({ version: v, pids: [...pids] });
      log.size += pids.size;
      while (log.size > this.capacity && log.head < log.entries.length) {
        const old = log.entries[log.head]!;
        log.head++;
        log.size -= old.pids.length;
        log.floor = old.version;
      }
      if (log.head > 1024 && log.head * 2 > log.entries.length) {
        log.entries = log.entries.slice(log.head);
        log.head = 0;
      }
    }
  }

  changesSince(tenant: string, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    const version = this.version;
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

/** Records committed changes (per tenant id) in the feed under each tenant's key. */
export function recordTouched(feed: ChangeFeed, touched: ReadonlyMap<number, ReadonlySet<number>>, keyOf: (tid: number) => string | undefined): void {
  if (touched.size === 0) return;
  const byTenant = new Map<string, Set<string>>();
  for (const [tid, pids] of touched) {
    const key = keyOf(tid);
    if (key === undefined) continue;
    byTenant.set(key, new Set([...pids].map(String)));
  }
  feed.record(byTenant);
}

/** Adds one job's touched profiles (per tenant id) to the group's, once the job's savepoint held. */
export function mergeTouched(into: Map<number, Set<number>>, from: ReadonlyMap<number, Set<number>>): void {
  for (const [tid, pids] of from) {
    const all = into.get(tid);
    if (all === undefined) into.set(tid, pids);
    else for (const p of pids) all.add(p);
  }
}
