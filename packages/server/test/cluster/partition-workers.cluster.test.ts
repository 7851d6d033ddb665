/**
 * #25's exactly-once machinery end to end, without the streaming engine yet: messages published
 * to profile-keyed partitions, workers that lease partitions, read them from the stored position
 * and write each batch with the partition's fence on PostgreSQL. One worker fails after commits it
 * never noted, then crashes; the other takes its partitions over; every message is applied once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { ensureStream } from "../../src/cluster/nats.js";
import { partitionOfToken, partitionSubject, profileToken } from "../../src/cluster/partitions.js";
import { LEASE_BUCKET, PartitionLeases } from "../../src/cluster/partition-leases.js";
import { PartitionConsumers } from "../../src/cluster/partition-consumers.js";
import { PostgresProfileStore } from "../../src/profiles/postgres/pg-store.js";
import { dropTestSchema, testDatabaseUrl } from "../helpers/test-store.js";
import { until } from "../helpers/cluster.js";

const N = 8;
const MESSAGES = 600;
const STREAM = "SEGMENTD_PEV_TEST";
const A = { orgId: "PARTW@AdobeOrg", sandboxName: "prod" };
const schema = `t_pworkers_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;

describe("partitioned workers, fenced writes (NATS + PostgreSQL)", { timeout: 180_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  let store: PostgresProfileStore;
  const conns: NatsConnection[] = [];
  const errors: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-pworkers-"));
    server = await startNatsServer({ dir, domain: "hub" });
    store = new PostgresProfileStore({ connectionString: testDatabaseUrl(), schema });
  });
  after(async () => {
    for (const c of conns) await c.close().catch(() => {});
    await store.close();
    await dropTestSchema(schema);
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const nats = async () => {
    const nc = await connect({ servers: server.url });
    conns.push(nc);
    return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
  };

  /** A worker: leases, a consumer per owned partition, each batch written with its fence. `crash` stops it between a commit and its acks. */
  const worker = async (id: string) => {
    const { nc, js } = await nats();
    let dead = false;
    const consumers = new PartitionConsumers({
      js,
      stream: STREAM,
      batch: 20,
      filterOf: (p) => `segmentd.pev.${p}.>`,
      position: (p) => store.partitionPosition(`pev.${p}`),
      apply: async (p, msgs, fence) => {
        const changes = msgs.map((m) => ({ profileId: String((m.json() as { i: number }).i), definitionId: "d", status: "realized" as const, source: "streaming" as const, at: 1 }));
        const r = await store.applyPartitionBatch({ partition: `pev.${p}`, ...fence }, [{ scope: A, changes }]);
        // A crash after the commit: whoever reads the partition next starts after what was committed.
        if (dead) throw new Error(`${id} crashed`);
        return r.position;
      },
      onError: (e) => errors.push(`${id}: ${String(e)}`),
    });
    const leases = new PartitionLeases({
      kv: await new Kvm(nc).create(LEASE_BUCKET, { ttl: 2000, history: 1 }),
      workerId: id,
      partitions: N,
      ttlMs: 2000,
      onChange: (owned) => consumers.own(owned),
      onError: () => {},
    });
    await leases.start();
    return {
      leases,
      consumers,
      /** From now on each batch commits, then the worker fails before it notes the new position. */
      failAfterCommit() {
        dead = true;
      },
      /** The process is gone: no renewal, no release, no more fetching. */
      async crash() {
        dead = true;
        await leases.stop(false);
        await consumers.close();
      },
      async stop() {
        await consumers.close();
        await leases.stop();
      },
    };
  };

  it("every message is applied exactly once across a crash and a takeover", async () => {
    const { js, jsm } = await nats();
    await ensureStream(jsm, { name: STREAM, subjects: ["segmentd.pev.>"] });
    const w1 = await worker("w1");
    const w2 = await worker("w2");
    await until("the workers share the partitions", async () => (w1.leases.owned().size === N / 2 && w2.leases.owned().size === N / 2 ? true : undefined), 15_000);
    const publish = async (from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const key = profileToken("sb", String(i));
        await js.publish(partitionSubject(partitionOfToken(key, N), key), JSON.stringify({ i }));
      }
    };
    await publish(0, MESSAGES / 2);
    await until("w2 applied some", async () => (w2.consumers.stats.applied > 0 ? true : undefined), 15_000);
    // w2's next batches commit, then it fails before noting it (it reads the position again); then it is gone.
    w2.failAfterCommit();
    await publish(MESSAGES / 2, MESSAGES);
    await new Promise((r) => setTimeout(r, 500));
    await w2.crash();
    const members = async () => (await store.listMemberIds(A, "d", "realized")).length;
    await until("every message applied", async () => ((await members()) === MESSAGES ? true : undefined), 60_000).catch(async (err: unknown) => {
      const pos = [];
      for (let p = 0; p < N; p++) pos.push(await store.partitionPosition(`pev.${p}`));
      const have = new Set(await store.listMemberIds(A, "d", "realized"));
      const missing = Array.from({ length: MESSAGES }, (_, i) => String(i)).filter((i) => !have.has(i));
      const byPart = missing.map((i) => partitionOfToken(profileToken("sb", i), N));
      throw new Error(`${String(err)}: missing ${missing.slice(0, 30).join(",")} in partitions ${[...new Set(byPart)].join(",")}; ${await members()} applied; w1 ${JSON.stringify(w1.consumers.stats)} owns ${[...w1.leases.owned()]}; w2 ${JSON.stringify(w2.consumers.stats)}; positions ${pos.join(",")}; errors ${errors.slice(0, 3).join(" | ")}`);
    });
    const transitions = await store.listTransitions(A, { definitionId: "d", limit: 100_000 });
    assert.equal(transitions.length, MESSAGES, "one transition per message: none applied twice");
    assert.equal(w1.leases.owned().size, N, "the surviving worker took every partition over");
    let positions = 0;
    for (let p = 0; p < N; p++) positions += (await store.partitionPosition(`pev.${p}`)) > 0 ? 1 : 0;
    assert.equal(positions, N);
    console.log(`partition workers: ${MESSAGES} messages applied once; the crashed worker's batches noted ${w2.consumers.stats.applied} (more committed before it failed), the survivor ${w1.consumers.stats.applied}`);
    await w1.stop();
  });

  it("a worker giving partitions up keeps the others: their leases are renewed while the given-up ones' batches finish", async () => {
    // Stopping a partition waits for its batches in flight: here three lease TTLs, as on a busy
    // host. The leases it keeps must not expire meanwhile (#37: they did, and every partition of
    // the live worker moved while its batches were still being written).
    const TTL = 1_500;
    const parts = 4;
    const { nc } = await nats();
    const kv = await new Kvm(nc).create("segmentd_slow_release_leases", { ttl: TTL, history: 1 });
    const changes: Array<{ id: string; gained: number[]; lost: number[] }> = [];
    let releasing: number[] = [];
    let released = false;
    const leases = (id: string, beforeRelease?: (ps: readonly number[]) => Promise<void>) =>
      new PartitionLeases({
        kv,
        workerId: id,
        partitions: parts,
        ttlMs: TTL,
        ...(beforeRelease ? { beforeRelease } : {}),
        onChange: (_owned, gained, lost) => {
          changes.push({ id, gained: [...gained], lost: [...lost] });
        },
        onError: (e) => errors.push(`${id}: ${String(e)}`),
      });
    const a = leases("slow-a", async (ps) => {
      releasing = [...ps];
      await new Promise((r) => setTimeout(r, 3 * TTL));
      released = true;
    });
    await a.start();
    await until("a holds every partition", async () => (a.owned().size === parts ? true : undefined), 10_000);
    const b = leases("slow-b");
    await b.start();
    await until("b has its share", async () => (b.owned().size === parts / 2 ? true : undefined), 20_000);
    assert.ok(released, "b's share is what a gave up, once its batches were done");
    assert.deepEqual([...b.owned()].sort(), [...releasing].sort());
    // Two more rounds of each: nothing moves.
    await new Promise((r) => setTimeout(r, 2 * TTL));
    const kept = [0, 1, 2, 3].filter((p) => !releasing.includes(p));
    assert.deepEqual([...a.owned()].sort(), kept);
    assert.deepEqual(changes.filter((c) => c.id === "slow-a").flatMap((c) => c.lost).sort(), [...releasing].sort(), `a lost only what it gave up: ${JSON.stringify(changes)}`);
    assert.deepEqual(changes.filter((c) => c.id === "slow-b").flatMap((c) => c.gained).sort(), [...releasing].sort(), JSON.stringify(changes));
    await b.stop();
    await a.stop();
  });
});
