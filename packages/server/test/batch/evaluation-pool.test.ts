/**
 * Issue #37: the evaluation pool (batch/pool/) gives exactly the flags of in-process evaluation
 * (differential over generated profiles, events and PQL, with an overlay part, inSegment status
 * columns and a part read back from a snapshot file), reads parts in place on shared memory, and
 * keeps the budgets: the per-profile units' 422 with the same message, the deadline's 503 for a
 * request running or queued at its deadline.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { parse, type Column } from "@segmentd/pql";
import { isShared } from "../../src/batch/columnar/shared-arrays.js";
import { openSnapshotFile, readSnapshotPart, writeSnapshotFile } from "../../src/batch/columnar/snapshot-file.js";
import { PartBuilder, Snapshot, SnapshotPart, statusOverrides } from "../../src/batch/columnar/snapshot.js";
import { EvaluationPool } from "../../src/batch/pool/evaluation-pool.js";
import { partFlags } from "../../src/batch/pool/part-flags.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../../src/platform/config.js";
import { NO_MERGE_POLICY, type JsonObject } from "../../src/profiles/types.js";
import { ApiError } from "../../src/services/errors.js";
import { EvaluationBudget } from "../../src/services/evaluation-budget.js";
import { NOW, coveredQuery, profileWithEvents } from "./pql-gen.js";
import { scannedEntry } from "./fixtures.js";

const entry = scannedEntry;

function part(rows: ReadonlyArray<{ profile: JsonObject; events: JsonObject[] }>, first: number): SnapshotPart {
  const b = new PartBuilder();
  rows.forEach((r, i) => b.add(entry(String(first + i), r.profile, r.events)));
  return b.finish();
}

const budget = (limits: Partial<SandboxLimits> = {}, deadline = false) => new EvaluationBudget({ ...DEFAULT_LIMITS, ...limits }, { deadline });

async function caught(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiError, String(e));
    return e;
  }
  assert.fail("expected an ApiError");
}

describe("evaluation pool", () => {
  let pool: EvaluationPool;
  let snap: Snapshot;
  let dir: string;
  before(async () => {
    pool = new EvaluationPool(2);
    const people = fc.sample(profileWithEvents, { numRuns: 400, seed: 37 }) as Array<{ profile: JsonObject; events: JsonObject[] }>;
    const base = part(people.slice(0, 350), 1);
    const overlay = part(people.slice(350), 351);
    const masked = new Uint8Array(base.ordinals);
    for (let o = 0; o < base.ordinals; o += 7) masked[o] = 1;
    snap = new Snapshot(NO_MERGE_POLICY, base, overlay, masked, new Map(), null, true);
    dir = await mkdtemp(path.join(os.tmpdir(), "segmentd-pool-"));
  });
  after(async () => {
    await pool.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps a built part's arrays on shared memory", () => {
    const p = snap.base;
    for (const a of [p.eventStart, p.eventTime, p.rowOrdinal, p.ordinalStart, p.optedOut, p.nsStart, p.nsCodes]) assert.ok(isShared(a));
    for (const [path, c] of p.profiles.contents().cols) {
      const arrays = c.kind === "sparse" ? [c.rows, c.values] : c.kind === "number" || c.kind === "boolean" ? [c.values] : "codes" in c ? [c.codes] : [];
      for (const a of arrays) if (a.length > 0) assert.ok(isShared(a), `column ${path}`);
    }
  });

  it("gives the flags of in-process evaluation for generated expressions (both parts, masked profiles)", async () => {
    const texts = fc.sample(coveredQuery, { numRuns: 60, seed: 3737 });
    texts.push('person.name.matches("^a")', "xEvent.count() > 2 and person.age > 18", 'exists X from xEvent, Y from xEvent : X.timestamp < Y.timestamp and Y.eventType = "view"');
    const none = snap.parts().map(() => new Map<string, Column>());
    let differ = 0;
    for (const text of texts) {
      const q = parse(text);
      const local = await partFlags(null, snap, q, NOW, none, budget());
      const pooled = await partFlags(pool, snap, q, NOW, none, budget());
      assert.deepEqual(pooled.map((f) => (f === null ? null : [...f])), local.map((f) => (f === null ? null : [...f])), text);
      if (local[0]!.some((x) => x === 1) && local[0]!.some((x) => x === 0)) differ++;
    }
    // The comparison means something: most expressions split the profiles.
    assert.ok(differ >= texts.length / 3, `${differ} of ${texts.length} expressions split the profiles`);
    assert.ok(pool.stats.descriptorsSent <= 4, `each part is described once per worker (${pool.stats.descriptorsSent})`);
  });

  it("reads inSegment from shared status columns", async () => {
    const members = new Uint8Array(snap.ordinals);
    for (let g = 0; g < members.length; g += 3) members[g] = 1;
    const overrides = statusOverrides(snap, new Map([["seg-1", members]]));
    const q = parse('inSegment("seg-1") and not (person.age > 20)');
    const local = await partFlags(null, snap, q, NOW, overrides, budget());
    const pooled = await partFlags(pool, snap, q, NOW, overrides, budget());
    assert.deepEqual(pooled.map((f) => [...f!]), local.map((f) => [...f!]));
    assert.ok(local[0]!.some((x) => x === 1));
  });

  it("evaluates a part read back from a snapshot file in place", async () => {
    const file = path.join(dir, "base.snapshot");
    await writeSnapshotFile(file, { key: "k", store: null, version: 1, withEvents: true, policy: NO_MERGE_POLICY }, snap.base);
    const loaded = await readSnapshotPart(await openSnapshotFile(file));
    assert.ok(isShared(loaded.eventTime) && isShared(loaded.rowOrdinal));
    const one = new Snapshot(NO_MERGE_POLICY, loaded, SnapshotPart.empty(), new Uint8Array(loaded.ordinals), new Map(), 1, true);
    const q = parse('xEvent[eventType = "view"].count() >= 1 or person.vip = true');
    const none = one.parts().map(() => new Map<string, Column>());
    const copied = pool.stats.copiedBytes;
    const local = await partFlags(null, one, q, NOW, none, budget());
    const pooled = await partFlags(pool, one, q, NOW, none, budget());
    assert.deepEqual([...pooled[0]!], [...local[0]!]);
    // Only the small row lists kept as numbers are copied to shared memory, not the columns.
    assert.ok(pool.stats.copiedBytes - copied < 4096, `${pool.stats.copiedBytes - copied} bytes copied`);
  });

  it("stops a profile at its units with the in-process 422 and message", async () => {
    const heavy = part([{ profile: { person: { age: 1 } }, events: Array.from({ length: 200 }, (_, k) => ({ eventType: "view", timestamp: new Date(NOW - k * 60_000).toISOString() })) }], 1);
    const s = new Snapshot(NO_MERGE_POLICY, heavy, SnapshotPart.empty(), new Uint8Array(1), new Map(), null, true);
    const q = parse('exists X from xEvent, Y from xEvent : X.timestamp < Y.timestamp and Y.eventType = "zz"');
    const none = s.parts().map(() => new Map<string, Column>());
    const local = await caught(partFlags(null, s, q, NOW, none, budget({ evaluationCost: 1000 })));
    const pooled = await caught(partFlags(pool, s, q, NOW, none, budget({ evaluationCost: 1000 })));
    assert.deepEqual([pooled.status, pooled.code, pooled.message], [local.status, local.code, local.message]);
    assert.deepEqual([pooled.status, pooled.code], [422, "SEGMENTD-EVALUATION-BUDGET-422"]);
    assert.match(pooled.message, /^Evaluation stopped: one profile needed more than 1,000 units of work \(limits\.evaluationCost\)/);
  });

  it("answers the deadline's 503 for a request running or queued at its deadline, and the pool goes on", async () => {
    const one = new EvaluationPool(1);
    try {
      // 3,000 events per profile, E² per profile, no per-profile limit: long enough to outlive a 150-ms deadline.
      const events = Array.from({ length: 3000 }, (_, k) => ({ eventType: "view", timestamp: new Date(NOW - k * 60_000).toISOString() }));
      const heavy = part(Array.from({ length: 40 }, () => ({ profile: {}, events })), 1);
      const s = new Snapshot(NO_MERGE_POLICY, heavy, SnapshotPart.empty(), new Uint8Array(heavy.ordinals), new Map(), null, true);
      const q = parse('exists X from xEvent, Y from xEvent : X.timestamp < Y.timestamp and Y.eventType = "zz"');
      const none = s.parts().map(() => new Map<string, Column>());
      const limits = { evaluationDeadlineMs: 150, evaluationMsPerProfile: 60_000 };
      const t0 = performance.now();
      const [running, queued] = await Promise.all([caught(partFlags(one, s, q, NOW, none, budget(limits, true))), caught(partFlags(one, s, q, NOW, none, budget(limits, true)))]);
      const ms = performance.now() - t0;
      for (const e of [running, queued]) {
        assert.deepEqual([e.status, e.code], [503, "SEGMENTD-EVALUATION-BUDGET-503"]);
        assert.match(e.message, /^Evaluation stopped at its deadline of 150 ms \(limits\.evaluationDeadlineMs\)/);
      }
      assert.ok(ms < 150 + 1000, `answered after ${ms.toFixed(0)} ms`);
      // The pool still answers (a replaced worker, if one was terminated).
      const ok = await partFlags(one, s, parse("xEvent.count() > 1"), NOW, none, budget());
      assert.equal(ok[0]!.length, heavy.rows);
      assert.ok(ok[0]!.every((x) => x === 1));
    } finally {
      await one.close();
    }
  });
});
