// Log units are cut ahead and stored several per commit (flow-runner.ts step): a commit that fails
// leaves nothing of its batch cut — the units are cut again from the same log position and sent
// once each, every transition arrives, per-profile order holds. Without the rollback the failed
// batch's rows stayed "taken" past the cut and were never sent.
// Acknowledgements arriving while others are written stay queued for the next write.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startDeliverer, type Deliverer } from "../../src/activation/delivery/deliverer.js";
import { DeliveryStateStore } from "../../src/activation/delivery/state-store.js";
import { killAll } from "../helpers/spawn.js";
import { openTestStore, STORE_KIND, DATABASE_URL, type TestStore } from "../profiles/test-store.js";
import { dropDeliverySchema, newSecret, received, seqsOf, startReceiver, TestDirectory, until, webhookFlow, type Receiver } from "./delivery-harness.js";

const scope = { orgId: "org-batch-commit", sandboxName: "prod" };
const PROFILES = 300;

describe("units stored several per commit", { timeout: 120_000 }, () => {
  let ts: TestStore;
  let dir: string;
  let receiver: Receiver;
  let d: Deliverer | null = null;
  const addUnits = DeliveryStateStore.prototype.addUnits;

  before(async () => {
    ts = openTestStore();
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-batch-commit-"));
    receiver = await startReceiver(path.join(dir, "ok.ndjson"));
  });

  after(async () => {
    DeliveryStateStore.prototype.addUnits = addUnits;
    await d?.stop();
    killAll();
    await dropDeliverySchema(ts);
    await ts.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a failed commit is cut again: every transition once, in per-profile order", async () => {
    const storage: { dataDir: string; databaseUrl?: string } = { dataDir: path.join(dir, "state") };
    if (STORE_KIND === "postgres") {
      const u = new URL(DATABASE_URL);
      u.searchParams.set("options", `-c search_path=${ts.location}`);
      storage.databaseUrl = u.toString();
    }
    // Commits of log units: the 2nd and the 5th fail (before anything is written).
    const batches: number[] = [];
    let logCommits = 0;
    DeliveryStateStore.prototype.addUnits = function (this: DeliveryStateStore, ...args: Parameters<DeliveryStateStore["addUnits"]>) {
      const units = args[2];
      if (units.some((u) => u.kind === "log")) {
        logCommits++;
        if (logCommits === 2 || logCommits === 5) return Promise.reject(new Error(`commit ${logCommits} failed on purpose`));
        batches.push(units.length);
      }
      return addUnits.apply(this, args);
    };
    const errors: string[] = [];
    const directory = new TestDirectory();
    const secret = newSecret();
    directory.set(webhookFlow(scope, "batch", receiver.url, ["b-a"], secret, { maxBatchSize: 20, maxWaitMs: 20, concurrency: 4 }));
    d = startDeliverer({ directory, profiles: ts.store, storage, allowPrivateNetworks: true, onError: (err) => errors.push((err as Error).message) });
    await d.ready;
    await until(() => d!.idle(scope, "batch"), "the empty snapshot", 10_000);
    const pids = Array.from({ length: PROFILES }, (_, i) => String(i + 1));
    const log: number[] = [];
    for (const status of ["realized", "exited"] as const) {
      await ts.store.applyMembershipChanges(scope, pids.map((p) => ({ profileId: p, definitionId: "b-a", status, source: "streaming" as const, at: Date.now() })));
    }
    for (const r of await ts.store.readTransitionLog(scope, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: ["b-a"], limit: 10_000 })) log.push(r.seq);
    assert.equal(log.length, 2 * PROFILES);
    // The receiver may be writing a line as it is read: such a read counts as not yet.
    const all = () => {
      try {
        return seqsOf(received(receiver.log, secret)).all.size;
      } catch {
        return -1;
      }
    };
    await until(() => all() === log.length && d!.idle(scope, "batch"), "every transition", 60_000);

    assert.ok(logCommits >= 5, `the failing commits were reached (${logCommits} commits)`);
    assert.deepEqual(errors.filter((e) => e.includes("failed on purpose")).length, 2);
    assert.ok(batches.some((n) => n > 1), `some commit stored several units (${batches.join(", ")})`);
    const got = received(receiver.log, secret);
    assert.ok(got.every((r) => r.signed && r.outcome === 200));
    // Once each: a healthy receiver, no restart.
    const sent = got.flatMap((r) => r.profiles.flatMap((p) => p.seqs));
    assert.equal(sent.length, log.length);
    assert.deepEqual([...new Set(sent)].sort((a, b) => a - b), log);
    assert.equal(new Set(got.map((r) => r.webhookId)).size, got.length);
    // Per profile: realized (the first write) before exited.
    const { firstOrder } = seqsOf(got);
    const outOfOrder = [...firstOrder].filter(([, seqs]) => seqs.length !== 2 || seqs[0]! > seqs[1]!);
    assert.deepEqual(outOfOrder.slice(0, 5), []);
  });

  test("acknowledgements that arrive while others are being written are written too: the flow counts every transition", async () => {
    await d?.stop();
    d = null;
    const storage: { dataDir: string; databaseUrl?: string } = { dataDir: path.join(dir, "state-acks") };
    if (STORE_KIND === "postgres") {
      const u = new URL(DATABASE_URL);
      u.searchParams.set("options", `-c search_path=${ts.location}`);
      storage.databaseUrl = u.toString();
    }
    const acks = await startReceiver(path.join(dir, "acks.ndjson"), { delayMs: 40 });
    // Each write of acknowledgements ends a while after its statements, and the receiver answers
    // after 40 ms: more acknowledgements arrive meanwhile (they were once counted as written, not stored).
    const delivered = DeliveryStateStore.prototype.delivered;
    let writes = 0;
    DeliveryStateStore.prototype.delivered = async function (this: DeliveryStateStore, ...args: Parameters<DeliveryStateStore["delivered"]>) {
      await delivered.apply(this, args);
      writes++;
      await new Promise((r) => setTimeout(r, 30));
    };
    try {
      const directory = new TestDirectory();
      const secret = newSecret();
      directory.set(webhookFlow(scope, "acks", acks.url, ["b-b"], secret, { maxBatchSize: 5, maxWaitMs: 5, concurrency: 8 }));
      d = startDeliverer({ directory, profiles: ts.store, storage, allowPrivateNetworks: true });
      await d.ready;
      await until(() => d!.idle(scope, "acks"), "the empty snapshot", 10_000);
      const pids = Array.from({ length: PROFILES }, (_, i) => String(i + 1));
      await ts.store.applyMembershipChanges(scope, pids.map((p) => ({ profileId: p, definitionId: "b-b", status: "realized" as const, source: "streaming" as const, at: Date.now() })));
      const count = () => {
        try {
          return seqsOf(received(acks.log, secret)).all.size;
        } catch {
          return -1;
        }
      };
      await until(() => count() === PROFILES && d!.idle(scope, "acks"), "every transition", 60_000);
      assert.ok(writes > 0, "acknowledgements were written on their own");
      const stats = await d.reports.stats(scope, "acks");
      assert.equal(stats.sent, PROFILES, `the flow's count (${writes} writes of acknowledgements)`);
      assert.equal(stats.retrying, 0);
    } finally {
      DeliveryStateStore.prototype.delivered = delivered;
    }
  });
});
