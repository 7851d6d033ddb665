// The embedded store's writer connection keeps a small page cache while its file is under 1 GiB
// (cache-sizing.ts says why: SQLite walks the whole cache at the end of most write transactions
// until the file reaches the pending-byte page), and the configured one from then on.
import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { pastPendingBytePage, pendingBytePage, SMALL_STORE_CACHE_MIB, writerCacheMiB } from "../../src/profiles/embedded/cache-sizing.js";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { readOnlyDb } from "../helpers/read-only-db.js";

const SCOPE: TenantScope = { orgId: "CACHESIZE@AdobeOrg", sandboxName: "prod" };
const POLICY = { id: "p", identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const NOW = Date.UTC(2026, 10, 26);
const GIB = 1024 * 1024 * 1024;

function event(n: number): Record<string, unknown> {
  return { _id: `e-${n}`, timestamp: new Date(NOW + n).toISOString(), eventType: "t", identityMap: { ECID: [{ id: `p${n % 7}`, primary: true }] } };
}

async function append(store: EmbeddedProfileStore, ds: string, from: number, n: number): Promise<void> {
  const records = Array.from({ length: n }, (_, i) => ({ index: i, value: event(from + i) }));
  const r = await ingestRecords(store, SCOPE, ds, records, { now: NOW });
  assert.equal(r.accepted, n);
}

function pageCount(file: string): number {
  return readOnlyDb(file, (db) => db.pragma("page_count", { simple: true }) as number);
}

/**
 * Makes a closed store file span more than 1 GiB without writing 1 GiB: the file is extended
 * sparsely, and the header's "version-valid-for" number no longer matches its change counter, so
 * SQLite takes the database size from the file's size (sqlite.org/fileformat2.html, "In-header
 * database size"). The pages added are zeros that no B-tree uses; new pages go after them.
 */
function extendPastOneGiB(file: string): void {
  truncateSync(file, GIB + 64 * 1024 * 1024);
  const fd = openSync(file, "r+");
  try {
    writeSync(fd, Buffer.from([0xff, 0xff, 0xff, 0xfe]), 0, 4, 92);
  } finally {
    closeSync(fd);
  }
}

describe("embedded profile store page cache by store size", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-cache-size-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("the threshold is SQLite's pending-byte page: 1 GiB whatever the page size", () => {
    assert.equal(pendingBytePage(4096), 262_145);
    assert.equal(pendingBytePage(65_536), 16_385);
    assert.equal(pastPendingBytePage(262_144, 4096), false);
    assert.equal(pastPendingBytePage(262_145, 4096), true);
    assert.equal(writerCacheMiB(1024, 262_144, 4096), SMALL_STORE_CACHE_MIB);
    assert.equal(writerCacheMiB(1024, 262_145, 4096), 1024);
    // A configured cache below the cap is kept as it is.
    assert.equal(writerCacheMiB(8, 10, 4096), 8);
  });

  it("a store under 1 GiB gets the capped cache, a store past it the configured one, and both keep their data", async () => {
    const file = path.join(dir, "profiles.db");
    const small = new EmbeddedProfileStore({ path: file, cacheMiB: 1024 });
    let ds: string;
    try {
      assert.equal(small.cacheKiB(), SMALL_STORE_CACHE_MIB * 1024);
      ds = (await small.createDataset(SCOPE, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, NOW)).id;
      await append(small, ds, 0, 50);
      // Still under 1 GiB after its commits: still capped.
      assert.equal(small.cacheKiB(), SMALL_STORE_CACHE_MIB * 1024);
    } finally {
      await small.close();
    }

    extendPastOneGiB(file);
    assert.ok(statSync(file).blocks * 512 < 256 * 1024 * 1024, "the extension is sparse");
    assert.ok(pageCount(file) >= pendingBytePage(4096));

    const large = new EmbeddedProfileStore({ path: file, cacheMiB: 64 });
    try {
      assert.equal(large.cacheKiB(), 64 * 1024);
      await append(large, ds, 50, 50);
      assert.equal(large.cacheKiB(), 64 * 1024);
      const page = await large.getEvents(SCOPE, { namespace: "ecid", id: "p3" }, POLICY, { order: "asc", limit: 100 });
      assert.deepEqual(
        page.events.map((e) => e.eventId),
        Array.from({ length: 100 }, (_, i) => i).filter((i) => i % 7 === 3).map((i) => `e-${i}`),
      );
    } finally {
      await large.close();
    }
  });

  it("a configured cache smaller than the cap is used as it is", async () => {
    const store = new EmbeddedProfileStore({ path: path.join(dir, "tiny.db"), cacheMiB: 4 });
    try {
      assert.equal(store.cacheKiB(), 4 * 1024);
    } finally {
      await store.close();
    }
  });
});
