// Acceptance 3: kill -9 during a 100,000-record streaming ingestion; after the
// restart every acknowledged record is there, and none is there twice.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { openTestStore, STORE_KIND, type TestStore } from "./test-store.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const TOTAL = 100_000;
const PER_REQUEST = 50;
const scope: TenantScope = { orgId: "crash-org", sandboxName: "prod" };
const pdg = { identityGraph: { type: "pdg" as const }, attributeMerge: { type: "timestampOrdered" as const } };

function crashEvent(k: number): Record<string, unknown> {
  return { _id: `crash-${k}`, timestamp: 1_700_000_000_000 + k, eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: `visitor-${k % 1000}` }] } };
}

async function storedEventIds(ts: TestStore): Promise<string[]> {
  const store = ts.reopen();
  try {
    const ids: string[] = [];
    for await (const chunk of store.scanProfiles(scope, pdg, { chunkSize: 200 })) for (const p of chunk) for (const e of p.events) ids.push(e.eventId);
    return ids;
  } finally {
    await store.close();
  }
}

/** The change log, committed with the data, names exactly the profiles the killed writer's committed writes made. */
async function logAgreesWithData(ts: TestStore, since: number): Promise<void> {
  const store = ts.reopen();
  try {
    await store.changesReady?.();
    const changed = store.changesSince(scope, since).profileIds;
    assert.ok(changed !== null, "the reopened store answers for a version from before the kill");
    const ids = await store.listProfileIds(scope, { limit: 100_000 });
    assert.ok(ids.length > 0);
    assert.deepEqual([...changed].sort(), [...ids].sort());
  } finally {
    await store.close();
  }
}

describe(`kill -9 during streaming ingestion (${STORE_KIND})`, () => {
  let ts: TestStore;
  let datasetId: string;
  before(async () => {
    ts = openTestStore();
    datasetId = (await ts.store.createDataset(scope, { name: "crash", schemaClass: "experienceevent", profileEnabled: true }, Date.now())).id;
  });
  after(async () => { await ts.cleanup(); });

  it("keeps every acknowledged record exactly once", { timeout: 120_000 }, async () => {
    const feedBefore = ts.store.changesSince(scope, null).version;
    const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", path.join(here, "crash-writer.ts"), ts.location, datasetId, String(TOTAL), String(PER_REQUEST)],
      { stdio: ["ignore", "pipe", "inherit"], env: process.env });
    const acked = new Set<number>();
    let buffer = "";
    let killedAt = -1;
    let done = false;
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line === "DONE") done = true;
        const m = /^ACK (\d+) (\d+)$/.exec(line);
        if (m === null) continue;
        for (let k = Number(m[1]); k < Number(m[1]) + Number(m[2]); k++) acked.add(k);
        // Kill somewhere in the middle, while 8 writers have requests in flight.
        if (killedAt < 0 && acked.size >= 10_000) {
          killedAt = acked.size;
          child.kill("SIGKILL");
        }
      }
    });
    const signal = await exited;
    assert.equal(signal, "SIGKILL", "the writer was killed, not finished");
    assert.equal(done, false);
    assert.ok(acked.size >= 10_000 && acked.size < TOTAL, `acknowledged ${acked.size}`);

    const afterCrash = await storedEventIds(ts);
    const stored = new Set(afterCrash);
    assert.equal(stored.size, afterCrash.length, "no event stored twice");
    const missing = [...acked].filter((k) => !stored.has(`crash-${k}`));
    assert.deepEqual(missing.slice(0, 5), [], `${missing.length} acknowledged events lost`);
    await logAgreesWithData(ts, feedBefore);

    // The clients retry everything after the restart: nothing may be doubled.
    const store = ts.reopen();
    try {
      for (let first = 0; first < TOTAL; first += 5000) {
        const records = Array.from({ length: 5000 }, (_, j) => ({ index: j, value: crashEvent(first + j) }));
        const r = await ingestRecords(store, scope, datasetId, records, { now: Date.now() });
        assert.equal(r.accepted, 5000);
      }
    } finally {
      await store.close();
    }
    const final = await storedEventIds(ts);
    assert.equal(final.length, TOTAL);
    assert.equal(new Set(final).size, TOTAL);
  });
});
