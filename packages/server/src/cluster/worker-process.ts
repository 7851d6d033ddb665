/**
 * A streaming worker as a process (`segmentd worker`): the hub's PostgreSQL (definitions,
 * profiles, memberships) and NATS, the partition count the hub's stream was created with, the
 * lease bucket, and a PartitionWorker over them.
 */
import os from "node:os";
import path from "node:path";
import { WorkerShard } from "../batch/shards/worker-shard.js";
import type { Config } from "../platform/config.js";
import { moduleSchema } from "../platform/pg-url.js";
import { PostgresProfileStore } from "../profiles/postgres/pg-store.js";
import { TenantDirectory } from "../services/tenancy.js";
import { openMetadataStore } from "../stores/open-store.js";
import type { MetadataStore } from "../stores/types.js";
import { connectNats, isNotFound, type NatsLink } from "./nats.js";
import { partitionCountOf } from "./partition-feed.js";
import { LEASE_TTL_MS, leaseBucket } from "./partition-leases.js";
import { PartitionWorker } from "./partition-worker.js";
import { HUB_DOMAIN } from "./subjects.js";
import { batchJobBucket } from "./batch-fanout.js";
import { BatchParticipant } from "./batch-participant.js";
import { serveShardReads } from "./fleet-reads.js";
import { partitionFunction } from "./partitions.js";


export interface RunningWorker {
  id: string;
  partitions: number;
  worker: PartitionWorker;
  /** Its part in segment jobs on the fleet (#44). */
  batch: BatchParticipant;
  /** Graceful: the batches in flight are written, the partitions given up at once. */
  close(): Promise<void>;
}

/** A worker id from the host name and process id (letters, digits, '-' and '_' only). */
export function defaultWorkerId(): string {
  return `${os.hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 64);
}

/** The partition count of the hub's stream, waiting for the hub to create it (a worker may start first). */
export async function waitForPartitionCount(link: NatsLink, log: (line: string) => void, timeoutMs = 10 * 60_000): Promise<number> {
  const until = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    try {
      return await partitionCountOf(link.local.jsm);
    } catch (err) {
      if (!isNotFound(err) || Date.now() > until) throw err;
      if (!told) log("waiting for the hub to create the partitioned stream (segmentd serve --nats … --workers)");
      told = true;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

export async function startWorker(o: { config: Config; id?: string; batch?: number; log: (line: string) => void; onError: (err: unknown) => void }): Promise<RunningWorker> {
  const { config } = o;
  if (config.databaseUrl === undefined || config.natsUrl === undefined) throw new Error("a streaming worker needs the hub's PostgreSQL (--database-url) and NATS (--nats)");
  const id = o.id ?? defaultWorkerId();
  const domain = config.natsHubDomain ?? HUB_DOMAIN;
  let meta: MetadataStore | undefined;
  let store: PostgresProfileStore | undefined;
  let link: NatsLink | undefined;
  try {
    meta = await openMetadataStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
    store = new PostgresProfileStore({ connectionString: config.databaseUrl, schema: moduleSchema(config.databaseUrl, "profiles") });
    link = await connectNats({ url: config.natsUrl, name: `segmentd-worker-${id}`, localDomain: domain, hubDomain: domain });
    const partitions = await waitForPartitionCount(link, o.log);
    const kv = await leaseBucket(link.local.js);
    const tenants = new TenantDirectory(config);
    // Segment jobs on the fleet (#44): a shard of the partitions this worker holds, kept under the
    // data directory per worker id (a restart with the same --id and partitions loads it).
    const shard = new WorkerShard({
      store, partitions, held: [], dir: path.join(config.dataDir, "shards", id), storeIdentity: config.databaseUrl,
      partitionOf: (t) => partitionFunction(t.sandbox.sandboxId, partitions),
      onWarning: (m) => o.log(m),
    });
    const batch = new BatchParticipant({ kv: await batchJobBucket(link.local.js), shard, store, tenants, workerId: id, partitions, onError: o.onError });
    const worker = new PartitionWorker({
      js: link.local.js,
      kv,
      workerId: id,
      partitions,
      store,
      meta,
      tenants,
      leaseTtlMs: LEASE_TTL_MS,
      onError: o.onError,
      // Not awaited: the shard follows once a job in progress ends, and the lease round goes on.
      onOwned: (owned) => void batch.held(owned).catch(o.onError),
      ...(o.batch === undefined ? {} : { batch: o.batch }),
    });
    await worker.start();
    batch.start();
    const unserve = await serveShardReads({ nc: link.nc, shard, tenants, workerId: id, partitions, onError: o.onError });
    const [m, s, l] = [meta, store, link];
    let closing: Promise<void> | undefined;
    return {
      id,
      partitions,
      worker,
      batch,
      close() {
        closing ??= (async () => {
          unserve();
          await batch.stop();
          await worker.stop(true);
          await shard.close();
          await l.close();
          await s.close();
          await m.close();
        })();
        return closing;
      },
    };
  } catch (err) {
    await link?.close().catch(() => {});
    await store?.close().catch(() => {});
    await meta?.close().catch(() => {});
    throw err;
  }
}
