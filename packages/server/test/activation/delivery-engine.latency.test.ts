// The delivery engine end to end on the store under test: real webhook receivers in their own
// processes (healthy, failing 30 % and hanging 5 %, down then up, slow), transitions written by
// the store's membership paths while they fail; every transition arrives at least once, signed,
// in per-profile log order, a retried unit under one webhook-id, the healthy one on time.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Registry } from "prom-client";
import { startDeliverer, type Deliverer } from "../../src/activation/delivery/deliverer.js";
import type { LoggedTransition, MembershipChange } from "../../src/profiles/store.js";
import type { MembershipStatus } from "../../src/profiles/types.js";
import { killAll } from "../helpers/spawn.js";
import { openTestStore, STORE_KIND, DATABASE_URL, type TestStore } from "../profiles/test-store.js";
import { dropDeliverySchema, freePort, newSecret, received, seqsOf, startReceiver, TestDirectory, until, webhookFlow, type Receiver } from "./delivery-harness.js";

const scope = { orgId: "org-delivery", sandboxName: "prod" };
const AUDIENCES = Array.from({ length: 10 }, (_, i) => `aud-${i}`);
const PROFILES = 300;
const ROUNDS = Number(process.env["DELIVERY_TEST_ROUNDS"] ?? 40);

/** The delivery state's storage for this store: its own data directory, or a schema dropped afterwards. */
function deliveryStorage(ts: TestStore, dir: string): { dataDir: string; databaseUrl?: string } {
  if (STORE_KIND !== "postgres") return { dataDir: dir };
  const u = new URL(DATABASE_URL);
  u.searchParams.set("options", `-c search_path=${ts.location}`);
  return { dataDir: dir, databaseUrl: u.toString() };
}

async function wholeLog(ts: TestStore, afterSeq = 0): Promise<LoggedTransition[]> {
  return ts.store.readTransitionLog(scope, { afterSeq, throughSeq: Number.MAX_SAFE_INTEGER, definitionIds: AUDIENCES, limit: 1_000_000 });
}

describe("webhook delivery: four receivers, one healthy", { timeout: 240_000 }, () => {
  let ts: TestStore;
  let dir: string;
  let deliverer: Deliverer;
  const receivers: Record<string, Receiver> = {};
  const secrets: Record<string, string> = {};
  const registry = new Registry();
  let downPort = 0;

  before(async () => {
    ts = openTestStore();
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-"));
    receivers.healthy = await startReceiver(path.join(dir, "healthy.ndjson"));
    receivers.flaky = await startReceiver(path.join(dir, "flaky.ndjson"), { failRate: 0.3, hangRate: 0.05, hangMs: 3000 });
    receivers.slow = await startReceiver(path.join(dir, "slow.ndjson"), { delayMs: 1000 });
    downPort = await freePort();
  });

  after(async () => {
    await deliverer?.stop();
    killAll();
    await dropDeliverySchema(ts);
    await ts.cleanup();
    if (process.env["DELIVERY_TEST_KEEP"] === undefined) rmSync(dir, { recursive: true, force: true });
    else console.log(`kept ${dir}`);
  });

  test("every transition arrives at least once, signed, in per-profile order; the healthy receiver's lag stays under 1 s", async () => {
    const directory = new TestDirectory();
    const urls = { healthy: receivers.healthy!.url, flaky: receivers.flaky!.url, slow: receivers.slow!.url, down: `http://127.0.0.1:${downPort}/hook` };
    for (const [name, url] of Object.entries(urls)) {
      secrets[name] = newSecret();
      directory.set(webhookFlow(scope, name, url, AUDIENCES, secrets[name]!, name === "flaky" ? { timeoutMs: 800 } : name === "slow" ? { timeoutMs: 3000 } : {}));
    }
    const errors: string[] = [];
    deliverer = startDeliverer({ directory, profiles: ts.store, storage: deliveryStorage(ts, dir), allowPrivateNetworks: true, metrics: registry,
      onError: (err, what) => errors.push(`${what}: ${(err as Error).message}`) });
    await deliverer.ready;
    await until(() => Object.keys(urls).every((n) => deliverer.idle(scope, n)), "the flows' (empty) snapshots", 10_000);
    const startSeq = (await ts.store.transitionLogSeqs(Number.MAX_SAFE_INTEGER, 1)).max;

    // Transitions from the streaming, edge and batch paths, 40 rounds of 50 changes, while the
    // "down" receiver is not listening (it starts 4 s in).
    const status = new Map<string, MembershipStatus>();
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const downStart = setTimeout(() => void startReceiver(path.join(dir, "down.ndjson"), { port: downPort }).then((r) => (receivers.down = r)), 4000);
    for (let round = 0; round < ROUNDS; round++) {
      const changes: MembershipChange[] = [];
      const seen = new Set<string>();
      while (changes.length < 50) {
        const pid = String(1 + Math.floor(rand() * PROFILES));
        const def = AUDIENCES[Math.floor(rand() * AUDIENCES.length)]!;
        if (seen.has(`${pid}/${def}`)) continue;
        seen.add(`${pid}/${def}`);
        const next: MembershipStatus = status.get(`${pid}/${def}`) === "realized" ? "exited" : "realized";
        status.set(`${pid}/${def}`, next);
        changes.push({ profileId: pid, definitionId: def, status: next, source: (["streaming", "edge", "batch"] as const)[round % 3]!, at: Date.now() });
      }
      await ts.store.applyMembershipChanges(scope, changes);
      await new Promise((r) => setTimeout(r, 100));
    }
    const log = await wholeLog(ts, startSeq);
    assert.equal(log.length, ROUNDS * 50, "every change was a transition");
    const expected = new Set(log.map((t) => t.seq));
    const got = (name: string) => seqsOf(received(receivers[name]?.log ?? path.join(dir, `${name}.ndjson`), secrets[name]!).filter((r) => r.outcome === 200 || r.outcome === "hang" || r.outcome === 500));
    await until(() => Object.keys(urls).every((n) => {
      const all = got(n).all;
      return [...expected].every((s) => all.has(s));
    }), "every receiver to have every transition", Number(process.env["DELIVERY_TEST_WAIT_MS"] ?? 150_000)).catch(async (err: unknown) => {
      const counts = await Promise.all(Object.keys(urls).map(async (n) => `${n}: ${((all) => [...expected].filter((s) => all.has(s)).length)(got(n).all)}/${expected.size} ${JSON.stringify(await deliverer.reports.stats(scope, n))}`));
      throw new Error(`${(err as Error).message}\n${counts.join("\n")}\nerrors: ${errors.slice(0, 5).join("\n")}`);
    });
    clearTimeout(downStart);

    const bySeq = new Map(log.map((t) => [t.seq, t]));
    for (const name of Object.keys(urls)) {
      const rs = received(receivers[name]!.log, secrets[name]!);
      assert.ok(rs.every((r) => r.signed), `${name}: every signature verifies`);
      const { firstOrder } = seqsOf(rs);
      for (const [pid, seqs] of firstOrder) assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), `${name}: profile ${pid} in log order`);
      // One webhook-id per log position, on every attempt.
      const ids = new Map<number, Set<string>>();
      for (const r of rs) for (const p of r.profiles) for (const s of p.seqs) (ids.get(s) ?? ids.set(s, new Set()).get(s)!).add(r.webhookId);
      for (const [s, set] of ids) assert.equal(set.size, 1, `${name}: seq ${s} always under one webhook-id`);
      // What arrived is what the log says.
      for (const r of rs) for (const p of r.profiles) for (const s of p.seqs) {
        const t = bySeq.get(s)!;
        assert.equal(p.profileId, t.profileId);
        assert.deepEqual(p.ups[t.definitionId], { status: t.to, lastQualificationTime: new Date(t.at).toISOString() });
      }
    }
    const flaky = received(receivers.flaky!.log, secrets.flaky!);
    assert.ok(flaky.some((r) => r.outcome === 500) && flaky.some((r) => r.outcome === "hang"), "the flaky receiver failed and hung some requests");
    const dupIds = new Map<string, number>();
    for (const r of flaky) dupIds.set(r.webhookId, (dupIds.get(r.webhookId) ?? 0) + 1);
    assert.ok([...dupIds.values()].some((n) => n > 1), "retries reached the flaky receiver again under the same webhook-id");

    // The healthy receiver: each transition's first arrival within 1 s of its write.
    const healthy = received(receivers.healthy!.log, secrets.healthy!);
    const firstAt = new Map<number, number>();
    for (const r of healthy) for (const p of r.profiles) for (const s of p.seqs) if (!firstAt.has(s)) firstAt.set(s, r.t);
    const lags = log.map((t) => firstAt.get(t.seq)! - t.at).sort((a, b) => a - b);
    const p50 = lags[Math.floor(lags.length / 2)]!;
    const max = lags[lags.length - 1]!;
    console.log(`healthy receiver lag: p50 ${p50} ms, p99 ${lags[Math.floor(lags.length * 0.99)]} ms, max ${max} ms; flaky requests ${flaky.length}`);
    assert.ok(max <= 1000, `healthy lag ${max} ms ≤ 1000 ms`);
    assert.ok(healthy.every((r) => r.outcome === 200));

    // Exported stats and metrics agree with what was acknowledged.
    const stats = await deliverer.reports.stats(scope, "healthy");
    assert.equal(stats.sent, ROUNDS * 50);
    assert.equal(stats.failed, 0);
    const flakyStats = await deliverer.reports.stats(scope, "flaky");
    assert.ok(flakyStats.failed > 0 && flakyStats.lastError !== null);
    const text = await registry.metrics();
    assert.match(text, new RegExp(`segmentd_delivery_sent_total\\{flow="healthy"\\} ${ROUNDS * 50}\\b`));
    assert.match(text, /segmentd_delivery_failed_total\{flow="flaky"\} [1-9]/);
    const runs = await deliverer.reports.runs(scope, "healthy", { offset: 0, limit: 10 });
    assert.ok(runs.total >= 1);
    assert.deepEqual(errors, []);
  });
});
