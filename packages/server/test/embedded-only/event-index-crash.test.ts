// kill -9 while the two-generation event index (src/profiles/embedded/event-index.ts) moves
// entries between its tables after nearly every commit: after the restart every acknowledged
// event is stored once, every stored event has exactly one index entry (in one of the two
// tables, with the row's own tid, pid, ts), and the store goes on appending and merging.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, it } from "node:test";
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { killAll, spawnTs, waitFor } from "../helpers/spawn.js";
import { eventIndexCounts, storedEventIds } from "./event-index-audit.js";
import { crashEvent } from "./event-index-crash-events.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const scope: TenantScope = { orgId: "EVIDX-CRASH@AdobeOrg", sandboxName: "prod" };
const TOTAL = 60_000;

describe("kill -9 during event index merges", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-evidx-crash-"));
  after(() => {
    killAll();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps every acknowledged event once, each with exactly one index entry", { timeout: 180_000 }, async () => {
    const file = path.join(dir, "profiles.db");
    const setup = new EmbeddedProfileStore({ path: file });
    const ds = (await setup.createDataset(scope, { name: "web", schemaClass: "experienceevent", profileEnabled: true }, Date.now())).id;
    await setup.close();

    const child = spawnTs(path.join(here, "event-index-crash-writer.ts"), [file, ds, String(TOTAL)]);
    await waitFor(child, /READY/);
    const acked = new Set<number>();
    // Kill once a third is acknowledged (merge rounds have run by then: one every ~3,000 events).
    for (;;) {
      acked.clear();
      for (const m of child.stdout().matchAll(/^ACK (\d+) (\d+)$/gm)) for (let k = Number(m[1]); k < Number(m[1]) + Number(m[2]); k++) acked.add(k);
      if (acked.size >= TOTAL / 3) break;
      if (child.child.exitCode !== null) throw new Error(`writer exited early:\n${child.stderr()}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    child.child.kill("SIGKILL");
    const exit = await child.exited;
    assert.equal(exit.signal, "SIGKILL");
    for (const m of child.stdout().matchAll(/^ACK (\d+) (\d+)$/gm)) for (let k = Number(m[1]); k < Number(m[1]) + Number(m[2]); k++) acked.add(k);
    assert.ok(!child.stdout().includes("DONE"), "killed before the end");

    const a = eventIndexCounts(file);
    assert.equal(a.distinctIds, a.events, "no event stored twice");
    const ids = storedEventIds(file);
    const missing = [...acked].filter((k) => !ids.has(`ix-${k}`));
    assert.deepEqual(missing.slice(0, 5), [], `${missing.length} acknowledged events lost`);
    assert.deepEqual({ entries: a.large + a.small, orphans: a.orphans, unindexed: a.unindexed }, { entries: a.events, orphans: 0, unindexed: 0 });

    // Restarted: the rest is appended (the acknowledged ones again too: duplicates), merges go on.
    const store = new EmbeddedProfileStore({ path: file, eventIndexMergeAt: 3000, eventIndexMergeStep: 1000 });
    try {
      for (let first = 0; first < TOTAL; first += 5000) {
        const r = await ingestRecords(store, scope, ds, Array.from({ length: 5000 }, (_, j) => ({ index: j, value: crashEvent(first + j) })), { now: Date.now() });
        assert.equal(r.accepted, 5000);
      }
      await store.mergeEventIndex();
    } finally {
      await store.close();
    }
    const b = eventIndexCounts(file);
    assert.deepEqual({ events: b.events, distinct: b.distinctIds, large: b.large, small: b.small, orphans: b.orphans, unindexed: b.unindexed },
      { events: TOTAL, distinct: TOTAL, large: TOTAL, small: 0, orphans: 0, unindexed: 0 });
  });
});
