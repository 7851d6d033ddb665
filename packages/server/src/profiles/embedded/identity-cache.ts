// The embedded store's memory of which profile (graph) each stored identity belongs to.
//
// Stitching a batch reads the graph of every identity the batch carries; on a store of a few
// million identities that lookup is a B-tree search of a few µs per identity, while most
// identities — the ECID of every event of a known visitor — were read or written moments
// before. The cache answers those from memory and only the misses go to SQLite
// (bench/ingest.ts, 500k profiles then 2M events: the writer thread's CPU 31.8 → 29.4 s).
//
// It is correct only while it mirrors the identities table, so the store keeps it in step at
// every write of that table (insert, graph merge, delete), forgets everything when a write
// rolls back (the rows it noted may not exist), and when another connection has committed to
// the database file (PRAGMA data_version: e.g. a second process opened the same data
// directory). It is bounded: past `maxEntries` it starts over rather than tracking recency,
// which would cost every hit a write.

/** Entries kept before the cache starts over (~100 bytes each). */
export const DEFAULT_IDENTITY_CACHE_ENTRIES = 2_000_000;

export class IdentityPidCache {
  // tenant -> namespace -> id -> profile id. Two string levels instead of one "ns\0id" key: the
  // joined key had to be built and flattened for every look-up (~8 % of the writer thread's time
  // in bench/ingest.ts at 3M events), while the id strings of a deserialized record are flat
  // already and hash once.
  private readonly byTenant = new Map<number, Map<string, Map<string, number>>>();
  private entries = 0;

  constructor(readonly maxEntries: number = DEFAULT_IDENTITY_CACHE_ENTRIES) {
    if (!Number.isInteger(maxEntries) || maxEntries < 0) throw new RangeError(`maxEntries must be a non-negative integer, got ${maxEntries}`);
  }

  get size(): number {
    return this.entries;
  }

  /** The profile id of identity (namespace, id) of tenant `tid`, if known. */
  get(tid: number, namespace: string, id: string): number | undefined {
    return this.byTenant.get(tid)?.get(namespace)?.get(id);
  }

  set(tid: number, namespace: string, id: string, pid: number): void {
    if (this.maxEntries === 0) return;
    let ids = this.ids(tid, namespace);
    if (!ids.has(id)) {
      if (this.entries >= this.maxEntries) {
        this.clear();
        ids = this.ids(tid, namespace);
      }
      this.entries++;
    }
    ids.set(id, pid);
  }

  delete(tid: number, namespace: string, id: string): void {
    const ids = this.byTenant.get(tid)?.get(namespace);
    if (ids !== undefined && ids.delete(id)) this.entries--;
  }

  clear(): void {
    this.byTenant.clear();
    this.entries = 0;
  }

  private ids(tid: number, namespace: string): Map<string, number> {
    let namespaces = this.byTenant.get(tid);
    if (namespaces === undefined) this.byTenant.set(tid, (namespaces = new Map()));
    let ids = namespaces.get(namespace);
    if (ids === undefined) namespaces.set(namespace, (ids = new Map()));
    return ids;
  }
}
