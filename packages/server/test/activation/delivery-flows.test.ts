// Dataflow semantics of the delivery engine on the store under test: an added audience's members
// arrive first as `existing`, then its transitions (a leaving profile as `exited`); a receiver
// that refuses everything leaves dead letters that are listed and replayed under the same
// webhook-id; a destination on a private address is refused at send time with the exact error.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { Registry } from "prom-client";
import { startDeliverer, type Deliverer } from "../../src/activation/delivery/deliverer.js";
import { FlowRunner } from "../../src/activation/delivery/flow-runner.js";
import { deliveryMetrics } from "../../src/activation/delivery/metrics.js";
import { DeliveryStateStore } from "../../src/activation/delivery/state-store.js";
import { assertPublicTarget } from "../../src/activation/url-safety.js";
import { killAll } from "../helpers/spawn.js";
import { openTestStore, STORE_KIND, DATABASE_URL, type TestStore } from "../profiles/test-store.js";
import { dropDeliverySchema, newSecret, received, startReceiver, TestDirectory, until, webhookFlow, type Receiver } from "./delivery-harness.js";

const scope = { orgId: "org-flows", sandboxName: "prod" };

describe("dataflow delivery semantics", { timeout: 120_000 }, () => {
  let ts: TestStore;
  let dir: string;
  let ok: Receiver;
  let refusing: Receiver;
  const deliverers: Deliverer[] = [];

  // Embedded: a state directory per deliverer; PostgreSQL: one delivery schema next to the profile store's (distinct flow ids).
  const storage = (name: string): { dataDir: string; databaseUrl?: string } => {
    if (STORE_KIND !== "postgres") return { dataDir: path.join(dir, name) };
    const u = new URL(DATABASE_URL);
    u.searchParams.set("options", `-c search_path=${ts.location}`);
    return { dataDir: path.join(dir, name), databaseUrl: u.toString() };
  };

  before(async () => {
    ts = openTestStore();
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-delivery-flows-"));
    ok = await startReceiver(path.join(dir, "ok.ndjson"));
    refusing = await startReceiver(path.join(dir, "refusing.ndjson"), { status: 400 });
  });

  after(async () => {
    for (const d of deliverers) await d.stop();
    killAll();
    await dropDeliverySchema(ts);
    await ts.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  test("an added audience's members arrive as existing, exactly; then its transitions, a leaving profile as exited", async () => {
    const t0 = Date.now() - 60_000;
    const members = Array.from({ length: 30 }, (_, i) => String(i + 1));
    await ts.store.applyMembershipChanges(scope, members.map((p) => ({ profileId: p, definitionId: "m-a", status: "realized" as const, source: "batch" as const, at: t0 })));
    await ts.store.applyMembershipChanges(scope, [{ profileId: "31", definitionId: "m-a", status: "realized", source: "batch", at: t0 },
      { profileId: "40", definitionId: "m-b", status: "realized", source: "streaming", at: t0 }, { profileId: "41", definitionId: "m-b", status: "realized", source: "edge", at: t0 }]);
    await ts.store.applyMembershipChanges(scope, [{ profileId: "31", definitionId: "m-a", status: "exited", source: "batch", at: t0 + 1 }]);

    const directory = new TestDirectory();
    const secret = newSecret();
    const flow = webhookFlow(scope, "snap", ok.url, ["m-a"], secret, { maxBatchSize: 7 });
    directory.set(flow);
    const d = startDeliverer({ directory, profiles: ts.store, storage: storage("a"), allowPrivateNetworks: true });
    deliverers.push(d);
    await d.ready;
    await until(() => d.idle(scope, "snap"), "the snapshot", 20_000);
    const first = received(ok.log, secret);
    const existing = first.flatMap((r) => r.profiles.map((p) => [p.profileId, p.ups]));
    assert.deepEqual(existing.map(([p]) => p).sort((a, b) => Number(a) - Number(b)), members, "exactly the members, each once");
    for (const [, ups] of existing) assert.deepEqual(ups, { "m-a": { status: "existing", lastQualificationTime: new Date(t0).toISOString() } });
    assert.ok(first.every((r) => r.profiles.length <= 7 && r.signed));

    // A member leaves (a record delete's exit); another joins.
    await ts.store.applyMembershipChanges(scope, [{ profileId: "5", definitionId: "m-a", status: "exited", source: "batch", at: t0 + 10 },
      { profileId: "50", definitionId: "m-a", status: "realized", source: "streaming", at: t0 + 11 }]);
    await until(() => received(ok.log, secret).length > first.length && d.idle(scope, "snap"), "the transitions", 20_000);
    const next = received(ok.log, secret).slice(first.length).flatMap((r) => r.profiles.map((p) => [p.profileId, p.ups, p.seqs.length]));
    assert.deepEqual(next.map(([p, ups]) => [p, ups]), [["5", { "m-a": { status: "exited", lastQualificationTime: new Date(t0 + 10).toISOString() } }],
      ["50", { "m-a": { status: "realized", lastQualificationTime: new Date(t0 + 11).toISOString() } }]]);

    // Adding m-b to the flow: its members (40, 41) as existing.
    const before = received(ok.log, secret).length;
    directory.set({ ...flow, segmentSelectors: [...flow.segmentSelectors, { audienceId: "m-b", startTime: 0, addedAt: Date.now() }] });
    await until(() => received(ok.log, secret).length > before && d.idle(scope, "snap"), "m-b's snapshot", 20_000);
    const added = received(ok.log, secret).slice(before).flatMap((r) => r.profiles.map((p) => [p.profileId, p.ups]));
    assert.deepEqual(added, [["40", { "m-b": { status: "existing", lastQualificationTime: new Date(t0).toISOString() } }], ["41", { "m-b": { status: "existing", lastQualificationTime: new Date(t0).toISOString() } }]]);
    const stats = await d.reports.stats(scope, "snap");
    assert.equal(stats.sent, 30 + 2 + 2);
    assert.equal(stats.dead, 0);
  });

  test("a refusing receiver: dead letters after the retry period, listed, counted and replayed under the same webhook-id", async () => {
    const directory = new TestDirectory();
    const secret = newSecret();
    directory.set(webhookFlow(scope, "dead", refusing.url, ["m-d"], secret, { retryPeriodMs: 1500, maxWaitMs: 10 }));
    const d = startDeliverer({ directory, profiles: ts.store, storage: storage("b"), allowPrivateNetworks: true });
    deliverers.push(d);
    await d.ready;
    await until(() => d.idle(scope, "dead"), "the empty snapshot", 10_000);
    await ts.store.applyMembershipChanges(scope, [{ profileId: "7", definitionId: "m-d", status: "realized", source: "streaming", at: Date.now() }]);
    await until(async () => (await d.reports.stats(scope, "dead")).dead === 1, "the dead letter", 20_000);
    const dead = await d.reports.deadLetters(scope, "dead");
    assert.equal(dead.length, 1);
    const requests = received(refusing.log, secret);
    assert.ok(requests.length >= 3, `retried (${requests.length} requests)`);
    assert.ok(requests.every((r) => r.webhookId === dead[0]!.webhookId), "every attempt under the dead letter's webhook-id");
    assert.deepEqual({ ...(dead[0]!.lastError as object), at: "-" }, { at: "-", message: "Receiver answered HTTP 400: failing on purpose (400)", status: 400 });
    const stats = await d.reports.stats(scope, "dead");
    assert.equal(stats.sent, 0);
    assert.equal(stats.failed, requests.length);
    assert.equal(stats.lastError?.message, "Receiver answered HTTP 400: failing on purpose (400)");
    const runs = await d.reports.runs(scope, "dead", { offset: 0, limit: 10 });
    const run = runs.items.find((r) => ((r as { metrics: { recordSummary: { failedRecordCount: number } } }).metrics.recordSummary.failedRecordCount) === 1) as { statusSummary: { status: string; errors: Array<{ code: string; message: string }> } } | undefined;
    assert.equal(run?.statusSummary.status, "partialSuccess");
    assert.deepEqual(run.statusSummary.errors[0] && { code: run.statusSummary.errors[0].code, message: run.statusSummary.errors[0].message }, { code: "SEGMENTD-DELIVERY-HTTP-400", message: "Receiver answered HTTP 400: failing on purpose (400)" });

    assert.equal(await d.reports.replayDead(scope, "dead"), 1);
    assert.equal((await d.reports.stats(scope, "dead")).dead, 0);
    await until(() => received(refusing.log, secret).length > requests.length, "the replayed attempt", 10_000);
    assert.equal(received(refusing.log, secret).at(-1)!.webhookId, dead[0]!.webhookId);
  });

  test("a destination on a private address is refused at send time with the exact error; nothing reaches it", async () => {
    const directory = new TestDirectory();
    const secret = newSecret();
    const url = `http://127.0.0.1:${ok.port}/private`;
    directory.set(webhookFlow(scope, "private", url, ["m-p"], secret, { retryPeriodMs: 60_000, maxWaitMs: 10 }));
    const d = startDeliverer({ directory, profiles: ts.store, storage: storage("c"), allowPrivateNetworks: false });
    deliverers.push(d);
    await d.ready;
    await until(() => d.idle(scope, "private"), "the empty snapshot", 10_000);
    const before = received(ok.log, secret).length;
    await ts.store.applyMembershipChanges(scope, [{ profileId: "8", definitionId: "m-p", status: "realized", source: "edge", at: Date.now() }]);
    await until(async () => (await d.reports.stats(scope, "private")).failed >= 1, "the refused attempt", 10_000);
    const refusal = await assertPublicTarget(url, { allowPrivateNetworks: false }).then(() => "allowed", (err: Error) => err.message);
    const stats = await d.reports.stats(scope, "private");
    assert.equal(stats.lastError?.message, `Destination address refused at send time: ${refusal}`);
    assert.equal(stats.lastError?.status, undefined);
    assert.equal(stats.retrying, 1);
    assert.equal(received(ok.log, secret).length, before);
  });

  test("an audience whose start time is ahead sends nothing until then; then its members as existing and its transitions", async () => {
    const t0 = Date.now() - 60_000;
    await ts.store.applyMembershipChanges(scope, ["70", "71"].map((p) => ({ profileId: p, definitionId: "m-s", status: "realized" as const, source: "batch" as const, at: t0 })));
    const directory = new TestDirectory();
    const secret = newSecret();
    const startTime = Date.now() + 2500;
    const flow = webhookFlow(scope, "later", ok.url, [], secret, { maxWaitMs: 10 });
    directory.set({ ...flow, segmentSelectors: [{ audienceId: "m-s", startTime, addedAt: Date.now() }] });
    const mine = () => received(ok.log, secret).filter((r) => r.flow === "later");
    const d = startDeliverer({ directory, profiles: ts.store, storage: storage("s"), allowPrivateNetworks: true });
    deliverers.push(d);
    await d.ready;
    // A change before the start is not sent by itself: the member list at the start carries it.
    await ts.store.applyMembershipChanges(scope, [{ profileId: "71", definitionId: "m-s", status: "exited", source: "streaming", at: Date.now() }]);
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(mine(), [], "nothing before the start time");
    await until(() => mine().length > 0 && d.idle(scope, "later"), "the members at the start time", 15_000);
    const first = mine();
    assert.ok(first.every((r) => r.t >= startTime), "sent at or after the start time");
    assert.deepEqual(first.flatMap((r) => r.profiles.map((p) => [p.profileId, p.ups])), [["70", { "m-s": { status: "existing", lastQualificationTime: new Date(t0).toISOString() } }]]);
    await ts.store.applyMembershipChanges(scope, [{ profileId: "70", definitionId: "m-s", status: "exited", source: "edge", at: Date.now() }]);
    await until(() => mine().length > first.length, "the exit after the start", 10_000);
    assert.deepEqual(mine().slice(first.length).flatMap((r) => r.profiles.map((p) => [p.profileId, (p.ups["m-s"] as { status: string }).status])), [["70", "exited"]]);
  });

  test("a change to a flow while its runner loads its stored state sends nothing again", async () => {
    // The flow's state as a restart finds it: its audience known, its members already sent.
    const state = await DeliveryStateStore.open(storage("u"));
    try {
      await ts.store.applyMembershipChanges(scope, ["90", "91"].map((p) => ({ profileId: p, definitionId: "m-u", status: "realized" as const, source: "batch" as const, at: Date.now() - 60_000 })));
      const through = (await ts.store.transitionLogSeqs(0, 1_000_000)).max;
      await state.createFlow(scope, "reload", through, ["m-u"], randomUUID(), Date.now());
      for (const j of await state.snapshotJobs(scope, "reload")) await state.endSnapshot(scope, "reload", j);
      const secret = newSecret();
      const flow = webhookFlow(scope, "reload", ok.url, ["m-u"], secret, { maxWaitMs: 10 });
      const runner = new FlowRunner(flow, {
        profiles: ts.store, state, metrics: deliveryMetrics(new Registry()), horizon: () => through,
        mergePolicy: async () => ({ identityGraph: { type: "pdg" }, attributeMerge: { type: "timestampOrdered" } }),
        allowPrivateNetworks: true, now: Date.now, onError: (err) => assert.fail(String(err)),
      });
      // An update (the directory's change notice) while start() awaits the stored state.
      const starting = runner.start();
      runner.update({ ...flow, version: 2 });
      await starting;
      await until(() => runner.idle(), "the runner idle", 10_000);
      await new Promise((r) => setTimeout(r, 300));
      await runner.stop();
      assert.deepEqual(await state.snapshotJobs(scope, "reload"), [], "no snapshot job");
      assert.deepEqual(received(ok.log, secret).filter((r) => r.flow === "reload"), [], "nothing sent again");
    } finally {
      await state.close();
    }
  });
});
