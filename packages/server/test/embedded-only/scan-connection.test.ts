// Full scans of the embedded store read through a second, read-only connection with a
// small page cache (so a batch snapshot build does not fill the 1 GiB lookup cache with
// pages read once). These tests pin what that must not change: a scan sees every write
// committed before each of its chunks, including writes made between two chunks by the
// main connection, and a ":memory:" store (one connection only) still scans.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";

const SCOPE: TenantScope = { orgId: "SCAN@AdobeOrg", sandboxName: "prod" };
const POLICY = { id: "p", identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };
const NOW = Date.UTC(2026, 10, 21);

function profile(crm: string, tier: string, at: number): { identityMap: unknown; loyalty: { tier: string }; _repo: { modifyDate: string } } {
  return { identityMap: { CRMID: [{ id: crm, primary: true }] }, loyalty: { tier }, _repo: { modifyDate: new Date(at).toISOString() } };
}

async function seed(store: EmbeddedProfileStore): Promise<string> {
  const ds = (await store.createDataset(SCOPE, { name: "crm", schemaClass: "profile", profileEnabled: true }, NOW)).id;
  const r = await ingestRecords(store, SCOPE, ds, ["a", "b", "c"].map((id, index) => ({ index, value: profile(id, "bronze", NOW) })), { now: NOW });
  assert.equal(r.accepted, 3);
  return ds;
}

function tiers(chunk: ReadonlyArray<{ entity: unknown }>): string[] {
  return chunk.map((p) => ((p.entity as { loyalty?: { tier?: string } }).loyalty?.tier ?? "?"));
}

await describe("embedded store scans on their own connection", async () => {
  await it("a scan sees a write committed between two of its chunks", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-scan-"));
    const store = new EmbeddedProfileStore({ path: path.join(dir, "profiles.sqlite") });
    try {
      const ds = await seed(store);
      const seen: string[] = [];
      let updated = false;
      for await (const chunk of store.scanProfiles(SCOPE, POLICY, { chunkSize: 1 })) {
        seen.push(...tiers(chunk));
        if (!updated) {
          // Written through the main connection while the scan is between chunks.
          const r = await ingestRecords(store, SCOPE, ds, [{ index: 0, value: profile("c", "gold", NOW + 1000) }], { now: NOW + 1000 });
          assert.equal(r.accepted, 1);
          updated = true;
        }
      }
      assert.deepEqual(seen, ["bronze", "bronze", "gold"]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  await it("a scan of a :memory: store reads its one connection", async () => {
    const store = new EmbeddedProfileStore({ path: ":memory:" });
    try {
      await seed(store);
      const seen: string[] = [];
      for await (const chunk of store.scanProfiles(SCOPE, POLICY, { chunkSize: 2 })) seen.push(...tiers(chunk));
      assert.deepEqual(seen, ["bronze", "bronze", "bronze"]);
    } finally {
      await store.close();
    }
  });
});
