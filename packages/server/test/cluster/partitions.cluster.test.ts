/**
 * The building blocks of #25's streaming workers, against a real nats-server: segmentd computes
 * the same partition for a key as the server's subject mapping does, and partition leases in a
 * KV bucket with a TTL are shared fairly, taken over when a worker dies without releasing, and
 * rebalanced when a worker joins.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { startNatsServer, type RunningNatsServer } from "../../src/cluster/nats-server.js";
import { partitionOfToken, profileToken } from "../../src/cluster/partitions.js";
import { LEASE_BUCKET, PartitionLeases } from "../../src/cluster/partition-leases.js";
import { until } from "../helpers/cluster.js";

const N = 16;

describe("partitions and their leases", { timeout: 120_000 }, () => {
  let dir: string;
  let server: RunningNatsServer;
  const conns: NatsConnection[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "segmentd-partitions-"));
    // The server's own deterministic partitioning of the second token, as an operator would map it.
    server = await startNatsServer({ dir, domain: "hub", extraConfig: [`mappings { "segmentd.sev.*": "segmentd.pev.{{partition(${N},1)}}.{{wildcard(1)}}" }`] });
  });
  after(async () => {
    for (const c of conns) await c.close().catch(() => {});
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const client = async () => {
    const nc = await connect({ servers: server.url });
    conns.push(nc);
    return nc;
  };

  it("segmentd computes the partition the server's mapping picks, for every key", async () => {
    const nc = await client();
    const seen = new Map<string, number>();
    const sub = nc.subscribe("segmentd.pev.>");
    const keys = Array.from({ length: 2000 }, (_, i) => profileToken(`sandbox-${i % 3}`, String(i * 7919)));
    const done = (async () => {
      for await (const m of sub) {
        const [, , p, key] = m.subject.split(".");
        seen.set(key!, Number(p));
        if (seen.size === keys.length) break;
      }
    })();
    for (const k of keys) nc.publish(`segmentd.sev.${k}`);
    await nc.flush();
    await done;
    const mismatches = keys.filter((k) => seen.get(k) !== partitionOfToken(k, N));
    assert.deepEqual(mismatches, []);
    const sizes = Array.from({ length: N }, (_, p) => keys.filter((k) => seen.get(k) === p).length);
    assert.ok(Math.min(...sizes) > 2000 / N / 2, `every partition gets a share: ${sizes.join(", ")}`);
  });

  it("leases: shared fairly, taken over after a worker dies, rebalanced when one joins", async () => {
    const kvOf = async () => new Kvm(await client()).create(LEASE_BUCKET, { ttl: 2000, history: 1 });
    const errors: unknown[] = [];
    const worker = async (id: string) => {
      const l = new PartitionLeases({ kv: await kvOf(), workerId: id, partitions: N, ttlMs: 2000, onError: (e) => errors.push(e) });
      await l.start();
      return l;
    };
    const a = await worker("a");
    const b = await worker("b");
    const owners = (ls: PartitionLeases[]) => ls.map((l) => [...l.owned()]);
    const fair = (ls: PartitionLeases[], share: number) => {
      const sets = owners(ls);
      const all = sets.flat();
      return new Set(all).size === N && all.length === N && sets.every((s) => s.length <= share) ? true : undefined;
    };
    await until("a and b share the partitions", async () => fair([a, b], N / 2), 15_000);
    // b dies without releasing (kill -9): its leases expire and a takes them.
    await b.stop(false);
    const t0 = Date.now();
    await until("a owns every partition", async () => (a.owned().size === N ? true : undefined), 15_000);
    const takeover = Date.now() - t0;
    assert.ok(takeover < 10_000, `taken over within 10 s: ${takeover} ms`);
    const c = await worker("c");
    await until("c takes its share", async () => fair([a, c], N / 2), 15_000);
    await a.stop();
    await c.stop();
    assert.deepEqual(errors, []);
    console.log(`partition leases: a dead worker's partitions taken over in ${takeover} ms (TTL 2 s)`);
  });
});
