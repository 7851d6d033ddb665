/**
 * The page cache the writer's connection gets, by database size.
 *
 * Why a small database gets a small cache: when SQLite rebalances a B-tree and its new sibling
 * pages are out of order, it swaps them through a temporary page number, the "pending byte" page
 * (1 GiB / page size + 1: page 262,145 at 4 KiB). The page cache remembers the largest page number
 * it has seen, so while the database is smaller than 1 GiB, every write transaction that did
 * such a swap ends (pager_end_transaction → pcache1Truncate) with a walk over every page the
 * cache holds, to drop the pages past the end of the file. The walk touches each cached page's
 * header: its cost grows with the cache, not with the transaction. Measured with uprobes on
 * `pcache1TruncateUnsafe` in bench:streaming (70 MB store, ~17,000 pages cached, ~100 such
 * commits a second): 0.55–0.68 ms per commit, 7.7 % of a core; with a 16 MiB cache 0.18 ms, 2 %.
 * A store near 1 GiB with its whole file cached would pay ~10 ms per commit. Once the file
 * reaches the pending-byte page, the swap's page number is inside the file and nothing is
 * walked, so the configured cache applies from then on.
 *
 * A database under 1 GiB is served by the OS page cache anyway: the writer's reads of pages its
 * small cache does not hold cost a pread each, which bench:streaming showed to be cheaper than
 * the walk (the hub writer's CPU per event 52–54 µs against 60–61 µs, three runs each).
 */

/** Page cache while the store is under the pending-byte page (MiB). */
export const SMALL_STORE_CACHE_MIB = 16;

/** SQLite's PENDING_BYTE (0x40000000): its page is the temporary page number of balance_nonroot's swaps. */
const PENDING_BYTE = 0x4000_0000;

/** The page number SQLite swaps B-tree pages through, for a page size. */
export function pendingBytePage(pageSize: number): number {
  return Math.floor(PENDING_BYTE / pageSize) + 1;
}

/**
 * True once a store of `pageCount` pages of `pageSize` bytes no longer pays the walk (the
 * pending-byte page is inside the file): the configured cache can apply.
 */
export function pastPendingBytePage(pageCount: number, pageSize: number): boolean {
  return pageCount >= pendingBytePage(pageSize);
}

/** The cache (MiB) the writer's connection should have: the configured one, capped while the store is small. */
export function writerCacheMiB(configuredMiB: number, pageCount: number, pageSize: number): number {
  return pastPendingBytePage(pageCount, pageSize) ? configuredMiB : Math.min(configuredMiB, SMALL_STORE_CACHE_MIB);
}
