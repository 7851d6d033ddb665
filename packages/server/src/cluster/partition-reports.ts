/**
 * What is known of each partition (#25's observability): its owner and what the owner last
 * reported with its lease (partition-worker.ts PartitionReport), and the position stored in
 * PostgreSQL. Read by `segmentd workers` and by the hub's /metrics.
 */
import type { KV } from "@nats-io/kv";
import { Gauge, type Registry } from "prom-client";
import type { PartitionReport } from "./partition-worker.js";

export interface PartitionView {
  partition: number;
  /** The worker holding the lease; null when none does (its messages wait in the stream). */
  owner: string | null;
  report: PartitionReport | null;
}

/** The live workers and every partition's lease and report (one KV read per key). */
export async function readPartitionReports(kv: KV, partitions: number): Promise<{ workers: string[]; partitions: PartitionView[] }> {
  const workers: string[] = [];
  const leases = new Map<number, string>();
  for await (const k of await kv.keys()) {
    if (k.startsWith("w.")) workers.push(k.slice(2));
    else if (k.startsWith("p.")) leases.set(Number(k.slice(2)), k);
  }
  const out: PartitionView[] = [];
  for (let p = 0; p < partitions; p++) {
    const key = leases.get(p);
    const e = key === undefined ? null : await kv.get(key);
    if (e === null || e.operation !== "PUT") {
      out.push({ partition: p, owner: null, report: null });
      continue;
    }
    const text = e.string();
    let report: PartitionReport | null = null;
    try {
      const r = JSON.parse(text) as PartitionReport;
      if (typeof r.worker === "string") report = r;
    } catch {
      // A plain worker id (a lease without a report).
    }
    out.push({ partition: p, owner: report?.worker ?? text, report });
  }
  return { workers: workers.sort(), partitions: out };
}

/**
 * The hub's /metrics of the partitions, read from the lease bucket at each scrape: per partition
 * whether a worker owns it, and the owner's last report (applied sequence, pending messages, lag).
 */
export function registerPartitionMetrics(registry: Registry, kv: () => Promise<KV>, partitions: number, feed: { stats: { published: number; failed: number } }): void {
  if (registry.getSingleMetric("segmentd_stream_partition_owned") !== undefined) return;
  let last: Promise<Awaited<ReturnType<typeof readPartitionReports>>> | null = null;
  let lastAt = 0;
  // The gauges below are collected one after another in a scrape: one read serves them all.
  const read = () => {
    if (last === null || Date.now() - lastAt > 500) {
      lastAt = Date.now();
      last = kv().then((b) => readPartitionReports(b, partitions));
      last.catch(() => (last = null));
    }
    return last;
  };
  const labelNames = ["partition", "owner"] as const;
  const perPartition = (name: string, help: string, value: (v: PartitionView) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        for (const v of (await read()).partitions) {
          const x = value(v);
          if (x !== null) this.set({ partition: String(v.partition), owner: v.owner ?? "" }, x);
        }
      },
    });
  perPartition("segmentd_stream_partition_owned", "1 when a streaming worker holds the partition's lease, 0 when its messages wait for one", (v) => (v.owner === null ? 0 : 1));
  perPartition("segmentd_stream_partition_applied_seq", "The last stream sequence the owner applied (with its memberships, in one transaction)", (v) => v.report?.seq ?? null);
  perPartition("segmentd_stream_partition_lag_messages", "Messages of the partition after the last one applied, as the owner last reported", (v) => (v.report && v.report.pending >= 0 ? v.report.pending : null));
  perPartition("segmentd_stream_partition_lag_seconds", "Age of the last applied message when it was applied, while more were pending (0 when caught up)", (v) => (v.report ? v.report.lagMs / 1000 : null));
  new Gauge({ name: "segmentd_stream_workers", help: "Streaming workers alive (heartbeats in the lease bucket)", registers: [registry], async collect() { this.set((await read()).workers.length); } });
  new Gauge({ name: "segmentd_stream_feed_published", help: "Changes the hub published to the partitions since it started", registers: [registry], collect() { this.set(feed.stats.published); } });
  new Gauge({ name: "segmentd_stream_feed_publish_failures", help: "Publishes to the partitions that failed since the hub started (retried; a change not taken after the retries fails its request with 503)", registers: [registry], collect() { this.set(feed.stats.failed); } });
}
