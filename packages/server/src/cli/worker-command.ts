/**
 * `segmentd worker`: a streaming worker (cluster/worker-process.ts) of a hub started with
 * `--workers`; `segmentd workers`: who owns which partition, how far each is applied, its lag.
 */
import type { Command } from "commander";
import { connectNats } from "../cluster/nats.js";
import { readPartitionReports, type PartitionView } from "../cluster/partition-reports.js";
import { partitionName } from "../cluster/partition-wire.js";
import { HUB_DOMAIN } from "../cluster/subjects.js";
import { leaseBucket } from "../cluster/partition-leases.js";
import { startWorker, waitForPartitionCount } from "../cluster/worker-process.js";
import { ConfigError, loadConfig, type Config } from "../platform/config.js";
import { moduleSchema } from "../platform/pg-url.js";
import { exitOnSignals } from "./shutdown.js";
import { PostgresProfileStore } from "../profiles/postgres/pg-store.js";

interface WorkerCliOptions {
  config?: string;
  nats?: string;
  databaseUrl?: string;
  hubDomain?: string;
  id?: string;
  batch?: string;
  dataDir?: string;
  json?: boolean;
}

function workerConfig(o: WorkerCliOptions, what: string): Config & { natsUrl: string; databaseUrl: string } {
  const config = loadConfig({ configFile: o.config, overrides: { ...(o.nats !== undefined ? { natsUrl: o.nats } : {}), ...(o.databaseUrl !== undefined ? { databaseUrl: o.databaseUrl } : {}), ...(o.dataDir !== undefined ? { dataDir: o.dataDir } : {}) } });
  if (o.hubDomain !== undefined) config.natsHubDomain = o.hubDomain;
  const { natsUrl, databaseUrl } = config;
  if (natsUrl === undefined || databaseUrl === undefined) throw new ConfigError(`${what} needs the hub's NATS (--nats or SEGMENTD_NATS_URL) and PostgreSQL (--database-url or SEGMENTD_DATABASE_URL)`);
  return { ...config, natsUrl, databaseUrl };
}

const common = (cmd: Command): Command =>
  cmd
    .option("-c, --config <file>", "the hub's config file (its organizations and sandboxes; env SEGMENTD_CONFIG)")
    .option("--nats <url>", "the hub's NATS server (env SEGMENTD_NATS_URL)")
    .option("--database-url <url>", "the hub's PostgreSQL (env SEGMENTD_DATABASE_URL)")
    .option("--hub-domain <domain>", "the hub's JetStream domain (default hub)");

export function registerWorkerCommands(program: Command): void {
  common(program.command("worker").description("run a streaming worker: evaluate the continuous audiences of the partitions it leases (docs/deployment.md)"))
    .option("--id <id>", "worker id (default <host>-<pid>): letters, digits, '-', '_'")
    .option("--batch <n>", "messages read per partition at once (default 500)")
    .option("-d, --data-dir <dir>", "where the worker keeps its batch shards, under shards/<id> (default the config's dataDir)")
    .action(async (o: WorkerCliOptions) => {
      const config = workerConfig(o, "segmentd worker");
      const batch = o.batch === undefined ? undefined : Number(o.batch);
      if (batch !== undefined && !(Number.isSafeInteger(batch) && batch >= 1 && batch <= 10_000)) throw new ConfigError(`--batch must be an integer from 1 to 10000, got "${o.batch}"`);
      const log = (line: string) => process.stdout.write(line + "\n");
      const running = await startWorker({ config, ...(o.id === undefined ? {} : { id: o.id }), ...(batch === undefined ? {} : { batch }), log, onError: (err) => process.stderr.write(`worker: ${String((err as Error)?.stack ?? err)}\n`) });
      exitOnSignals({
        timeoutMs: config.shutdownTimeoutMs,
        async close() {
          await running.close();
          const st = running.worker.stats;
          log(`segmentd worker ${running.id} stopped: ${st.messages} messages applied in ${st.batches} batches, ${st.crossPartition} of another partition, ${st.stale} stale batches`);
        },
        log: { info: (signal) => log(`segmentd worker ${running.id}: ${signal}, stopping`), error: (what, err) => process.stderr.write(`worker: ${what} ${String(err ?? "")}
`) },
      });
      log(`segmentd worker ${running.id} started: ${running.partitions} partitions, owns ${running.worker.owned().size} (NATS ${config.natsUrl})`);
    });

  common(program.command("workers").description("the streaming workers: each partition's owner, last applied sequence and lag"))
    .option("--json", "print JSON")
    .action(async (o: WorkerCliOptions) => {
      const config = workerConfig(o, "segmentd workers");
      const domain = config.natsHubDomain ?? HUB_DOMAIN;
      const link = await connectNats({ url: config.natsUrl, name: "segmentd-workers-view", localDomain: domain, hubDomain: domain });
      const store = new PostgresProfileStore({ connectionString: config.databaseUrl, schema: moduleSchema(config.databaseUrl, "profiles") });
      try {
        const partitions = await waitForPartitionCount(link, () => {}, 0);
        const view = await readPartitionReports(await leaseBucket(link.local.js), partitions);
        const positions = await store.partitionPositions();
        const rows = view.partitions.map((v) => ({ ...v, stored: positions.get(partitionName(v.partition)) ?? 0 }));
        if (o.json === true) {
          process.stdout.write(JSON.stringify({ workers: view.workers, partitions: rows }, null, 2) + "\n");
          return;
        }
        process.stdout.write(formatView(view.workers, rows));
      } finally {
        await link.close();
        await store.close();
      }
    });
}

function formatView(workers: readonly string[], rows: ReadonlyArray<PartitionView & { stored: number }>): string {
  const lines = [`${workers.length} worker(s): ${workers.join(", ") || "none"}`, "", "partition  owner                             applied seq  pending  lag s   reported"];
  const now = Date.now();
  for (const r of rows) {
    const rep = r.report;
    lines.push([
      String(r.partition).padEnd(9),
      (r.owner ?? "— (waiting for a worker)").padEnd(33),
      String(r.stored).padStart(11),
      (rep && rep.pending >= 0 ? String(rep.pending) : "-").padStart(8),
      (rep ? (rep.lagMs / 1000).toFixed(1) : "-").padStart(6),
      rep && rep.seq >= 0 ? `  ${((now - rep.at) / 1000).toFixed(1)} s ago` : "  -",
    ].join("  "));
  }
  return lines.join("\n") + "\n";
}
