/**
 * Who owns which partition (#25's streaming workers): leases in a NATS KV bucket whose entries
 * expire after `ttlMs` unless renewed (a bucket-level TTL: nats-server 2.9 ignores per-key ones).
 * Each worker, every third of the TTL: renews its heartbeat (`w.<id>`) and its partitions
 * (`p.<n>`, an update at the revision it holds: a lease someone else took is lost, never stolen
 * back), counts the live workers, gives up what it holds beyond its fair share and claims free
 * partitions up to it (`create` fails on a key that exists). Stopping partitions (given up or
 * lost) waits for their batches in flight: the renewals go on meanwhile. A worker killed without
 * releasing stops renewing: its partitions are free to take once the TTL has passed.
 */
import type { JetStreamClient } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";

export interface PartitionLeasesOptions {
  kv: KV;
  workerId: string;
  partitions: number;
  ttlMs: number;
  /** The value written with a partition's lease at each renewal (default the worker id): what others read of it. */
  describe?: (partition: number) => string;
  /** Before partitions beyond the fair share are given up: stop using them (their next owner may start at once). */
  beforeRelease?: (partitions: readonly number[]) => Promise<void>;
  /** After each round that gained or lost partitions. */
  onChange?: (owned: ReadonlySet<number>, gained: readonly number[], lost: readonly number[]) => void | Promise<void>;
  onError: (err: unknown) => void;
}

export const LEASE_BUCKET = "segmentd_partition_leases";
/** The lease bucket's TTL: a worker that stops renewing loses its partitions after this. */
export const LEASE_TTL_MS = 6_000;

/** The lease bucket (created with its TTL by whoever comes first: a worker, the hub's /metrics, `segmentd workers`). */
export async function leaseBucket(js: JetStreamClient): Promise<KV> {
  return new Kvm(js).create(LEASE_BUCKET, { ttl: LEASE_TTL_MS, history: 1 });
}

/** The workers whose heartbeat (`w.<id>`) is in the bucket: those alive within the TTL. */
export async function liveWorkerIds(kv: KV): Promise<Set<string>> {
  const live = new Set<string>();
  for await (const k of await kv.keys("w.*")) live.add(k.slice(2));
  return live;
}

export class PartitionLeases {
  /** Partition → the revision of our lease entry. */
  private readonly held = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  private round: Promise<void> | null = null;
  /** Partitions lost or given up that no onChange has been told of yet. */
  private readonly unreported: number[] = [];
  private stopped = false;
  /** The workers whose heartbeat the last round saw. */
  private live: ReadonlySet<string> = new Set();

  constructor(private readonly o: PartitionLeasesOptions) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(o.workerId)) throw new RangeError(`worker id '${o.workerId}' must be 1-64 letters, digits, '-' or '_'`);
  }

  owned(): ReadonlySet<number> {
    return new Set(this.held.keys());
  }

  /** The workers alive at the last round (their heartbeats; at most a third of the TTL old). */
  liveWorkers(): ReadonlySet<string> {
    return this.live;
  }

  async start(): Promise<void> {
    await this.tick();
    this.timer = setInterval(() => void this.tick(), this.renewEveryMs());
    this.timer.unref();
  }

  /** Stops renewing; `release` gives the partitions up at once (a graceful stop) instead of letting them expire. */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.round;
    if (!release) return;
    for (const [p, rev] of this.held) await this.o.kv.delete(`p.${p}`, { previousSeq: rev }).catch(() => {});
    await this.o.kv.delete(`w.${this.o.workerId}`).catch(() => {});
    this.held.clear();
  }

  private valueOf(p: number): string {
    return this.o.describe ? this.o.describe(p) : this.o.workerId;
  }

  private renewEveryMs(): number {
    return Math.max(100, Math.floor(this.o.ttlMs / 3));
  }

  /**
   * Runs `f` (stopping partitions: it waits for their batches in flight, seconds on a busy host)
   * with the leases renewed meanwhile, one renewal at a time: else every partition of this live
   * worker would expire and move to another (#37).
   */
  private async whileRenewing(f: () => void | Promise<void>): Promise<void> {
    let renewal = Promise.resolve();
    const timer = setInterval(() => {
      renewal = renewal.then(() => this.renew()).catch((err: unknown) => this.o.onError(err));
    }, this.renewEveryMs());
    try {
      await f();
    } finally {
      clearInterval(timer);
      await renewal;
    }
  }

  /** The heartbeat and every lease held, renewed; a lease that cannot be is ours no more (reported by the round's onChange). */
  private async renew(): Promise<void> {
    const { kv, workerId } = this.o;
    await kv.put(`w.${workerId}`, workerId);
    for (const [p, rev] of [...this.held]) {
      try {
        this.held.set(p, await kv.update(`p.${p}`, this.valueOf(p), rev));
      } catch {
        // Expired and taken by another worker (or deleted): ours no more.
        this.held.delete(p);
        this.unreported.push(p);
      }
    }
  }

  /** One round (also what the timer runs); rounds never overlap. */
  tick(): Promise<void> {
    this.round ??= this.run()
      .catch((err: unknown) => this.o.onError(err))
      .finally(() => {
        this.round = null;
      });
    return this.round;
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    const { kv, partitions } = this.o;
    const gained: number[] = [];
    await this.renew();
    const live = await liveWorkerIds(kv);
    this.live = live;
    const share = Math.ceil(partitions / Math.max(1, live.size));
    const mine = [...this.held.keys()].sort((a, b) => b - a);
    const giveUp = mine.slice(0, Math.max(0, this.held.size - share));
    const beforeRelease = this.o.beforeRelease;
    if (giveUp.length > 0 && beforeRelease) await this.whileRenewing(() => beforeRelease(giveUp));
    for (const p of giveUp) {
      const rev = this.held.get(p);
      // Lost while it was being stopped: nothing to give up.
      if (rev === undefined) continue;
      await kv.delete(`p.${p}`, { previousSeq: rev }).catch(() => {});
      this.held.delete(p);
      this.unreported.push(p);
    }
    for (let p = 0; p < partitions && this.held.size < share; p++) {
      if (this.held.has(p)) continue;
      try {
        this.held.set(p, await kv.create(`p.${p}`, this.valueOf(p)));
        gained.push(p);
      } catch {
        // Held by another worker.
      }
    }
    const lost = this.unreported.splice(0);
    const onChange = this.o.onChange;
    // (Leases lost while it runs are reported by the next round.)
    if ((gained.length > 0 || lost.length > 0) && onChange) await this.whileRenewing(() => onChange(this.owned(), gained, lost));
  }
}
