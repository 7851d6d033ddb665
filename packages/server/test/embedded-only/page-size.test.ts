// The embedded profile store's page size applies to a new file only: SQLite cannot change the
// page size of a database in WAL mode, so a file created with one size keeps it, and data written
// under either size reads back the same.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DEFAULT_PAGE_SIZE, EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import { readOnlyDb } from "../helpers/read-only-db.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "PAGES@AdobeOrg", sandboxName: "prod" };
const NOW = Date.UTC(2026, 10, 22);
const POLICY = { identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };

function pageSizeOf(file: string): number {
  return readOnlyDb(file, (db) => db.pragma("page_size", { simple: true }) as number);
}

describe("embedded profile store page size", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-page-size-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("a new file gets the size asked for; the default otherwise", async () => {
    const big = path.join(dir, "big.db");
    const store = new EmbeddedProfileStore({ path: big, pageSize: 16384, checkpoints: "inline" });
    await store.close();
    assert.equal(pageSizeOf(big), 16384);
    const plain = path.join(dir, "plain.db");
    await new EmbeddedProfileStore({ path: plain, checkpoints: "inline" }).close();
    assert.equal(pageSizeOf(plain), DEFAULT_PAGE_SIZE);
  });

  it("an existing file keeps its size, and its data, when reopened with another", async () => {
    const file = path.join(dir, "kept.db");
    const first = new EmbeddedProfileStore({ path: file, pageSize: 16384, checkpoints: "inline" });
    const ds = (await first.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
    const r = await ingestRecords(first, SCOPE, ds, [{ index: 0, value: { identityMap: { CRMID: [{ id: "k1", primary: true }] }, loyalty: { tier: "gold" } } }], { now: NOW });
    assert.equal(r.accepted, 1);
    await first.close();
    const again = new EmbeddedProfileStore({ path: file, pageSize: 4096, checkpoints: "inline" });
    try {
      const p = await again.getProfile(SCOPE, { namespace: "crmid", id: "k1" }, POLICY);
      assert.deepEqual(p?.entity["loyalty"], { tier: "gold" });
    } finally {
      await again.close();
    }
    assert.equal(pageSizeOf(file), 16384);
  });
});
