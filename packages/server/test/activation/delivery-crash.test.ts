// kill -9 during delivery, five times, on the store under test: the delivery engine and a writer
// run in a child process that is killed while it writes and delivers, then restarted on the same
// data. Afterwards every transition of the log has reached both receivers (a healthy one and one
// failing 30 %), per profile in log order, each log position always under one webhook-id.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { killAll, spawnTs, waitFor } from "../helpers/spawn.js";
import { openTestStore, STORE_KIND, TEST_STORE, DATABASE_URL, type TestStore } from "../profiles/test-store.js";
import { dropDeliverySchema, newSecret, received, seqsOf, startReceiver, until, webhookFlow, type Receiver } from "./delivery-harness.js";

const CHILD = "packages/server/test/helpers/delivery-child.ts";
const scope = { orgId: "org-crash", sandboxName: "prod" };
const AUDIENCES = ["c-0", "c-1", "c-2", "c-3", "c-4"];

describe("kill -9 during delivery", { timeout: 300_000 }, () => {
  let ts: TestStore;
  let dir: string;
  const receivers: Record<string, Receiver> = {};
  const secrets: Record<string, string> = { healthy: newSecret(), flaky: newSecret() };

  before(async () => {
    ts = openTestStore();
    // Tables exist before the first child opens the store.
    await ts.store.applyMembershipChanges(scope, []);
    await ts.store.close();
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-crash-"));
    receivers.healthy = await startReceiver(path.join(dir, "healthy.ndjson"));
    receivers.flaky = await startReceiver(path.join(dir, "flaky.ndjson"), { failRate: 0.3 });
  });

  after(async () => {
    killAll();
    await dropDeliverySchema(ts);
    await ts.cleanup().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  test("five kills while writing and delivering: the receivers' transitions include the whole log", async () => {
    const storage: { dataDir: string; databaseUrl?: string } = { dataDir: path.join(dir, "state") };
    if (STORE_KIND === "postgres") {
      const u = new URL(DATABASE_URL);
      u.searchParams.set("options", `-c search_path=${ts.location}`);
      storage.databaseUrl = u.toString();
    }
    const flows = ["healthy", "flaky"].map((n) => webhookFlow(scope, n, receivers[n]!.url, AUDIENCES, secrets[n]!, { maxBatchSize: 20, maxWaitMs: 50, retryPeriodMs: 40_000, timeoutMs: 1000 }));
    const options = (rounds: number, seed: number) => JSON.stringify({ kind: TEST_STORE, location: ts.location, storage, flows, rounds, perRound: 20, profiles: 200, audiences: AUDIENCES, seed });
    for (let k = 0; k < 5; k++) {
      const child = spawnTs(CHILD, [options(1000, 11 + k)]);
      await waitFor(child, /READY/);
      await waitFor(child, /WROTE 10\b/);
      await new Promise((r) => setTimeout(r, 300 + 200 * k));
      child.child.kill("SIGKILL");
      await child.exited;
    }
    // A last run writes nothing and delivers what is left.
    const last = spawnTs(CHILD, [options(0, 99)]);
    await waitFor(last, /WRITES DONE/);
    const s = ts.reopen();
    let log;
    try {
      log = await s.readTransitionLog(scope, { afterSeq: 0, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: AUDIENCES, limit: 1_000_000 });
    } finally {
      if (STORE_KIND === "postgres") await s.close();
    }
    if (STORE_KIND !== "postgres") await s.close();
    assert.ok(log.length > 500, `a real log (${log.length} transitions)`);
    const missing = (n: string) => {
      const all = seqsOf(received(receivers[n]!.log, secrets[n]!)).all;
      return log.filter((t) => !all.has(t.seq)).length;
    };
    await until(() => missing("healthy") === 0 && missing("flaky") === 0, "every logged transition at both receivers", 120_000).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}: missing healthy ${missing("healthy")}, flaky ${missing("flaky")} of ${log.length}\n${last.stderr().slice(0, 2000)}`);
    });
    last.child.kill("SIGTERM");
    await last.exited;
    const bySeq = new Map(log.map((t) => [t.seq, t]));
    for (const n of ["healthy", "flaky"]) {
      const rs = received(receivers[n]!.log, secrets[n]!);
      assert.ok(rs.every((r) => r.signed), `${n}: signatures verify`);
      for (const [pid, seqs] of seqsOf(rs).firstOrder) assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), `${n}: profile ${pid} in log order`);
      const ids = new Map<number, Set<string>>();
      for (const r of rs) for (const p of r.profiles) for (const q of p.seqs) {
        (ids.get(q) ?? ids.set(q, new Set()).get(q)!).add(r.webhookId);
        assert.equal(p.ups[bySeq.get(q)!.definitionId]?.status, bySeq.get(q)!.to);
      }
      for (const [q, set] of ids) assert.equal(set.size, 1, `${n}: seq ${q} always under one webhook-id (${[...set].join(", ")})`);
    }
  });
});
