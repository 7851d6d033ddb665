/**
 * `segmentd edge --location NAME --nats URL`: an edge node (cluster/edge-node.ts). It serves
 * interact for its location only, from its own data, and shuts down gracefully on SIGTERM/SIGINT.
 */
import type { Command } from "commander";
import { startEdgeNode } from "../cluster/edge-node.js";
import { ConfigError } from "../platform/config.js";
import { exitOnSignals } from "./shutdown.js";
import { addServerOptions, configFromCli, type ServerCliOptions } from "./serve-command.js";

interface EdgeCliOptions extends ServerCliOptions {
  location: string;
  hubDomain?: string;
  outbox?: boolean;
}

export function registerEdgeCommand(program: Command): void {
  addServerOptions(program.command("edge").description("run an edge node: interact for one location, beside its site's NATS leaf server"), { databaseUrl: false })
    .requiredOption("--location <name>", "the location this node serves (also its site's JetStream domain)")
    .option("--nats <url>", "the site's NATS server (a leaf node of the hub's, with JetStream; env SEGMENTD_NATS_URL)")
    .option("--hub-domain <domain>", "the hub's JetStream domain (default hub)")
    .option("--outbox", "no JetStream at this site: --nats is the hub's server, and events are kept in a durable outbox in the data directory until the hub has them")
    .action(async (o: EdgeCliOptions) => {
      const config = configFromCli(o);
      if (config.natsUrl === undefined) throw new ConfigError("segmentd edge needs --nats <url> (or SEGMENTD_NATS_URL): the site's NATS server");
      // The 24-hourly pass's period can be shortened to watch it work (tests, trials).
      const every = process.env["SEGMENTD_EDGE_DISQUALIFY_MS"];
      if (every !== undefined && !(Number.isSafeInteger(Number(every)) && Number(every) >= 1000)) throw new ConfigError(`SEGMENTD_EDGE_DISQUALIFY_MS must be an integer of at least 1000 (ms), got "${every}"`);
      const node = await startEdgeNode({ config, location: o.location, natsUrl: config.natsUrl, outbox: o.outbox === true, ...(every !== undefined ? { disqualifyIntervalMs: Number(every) } : {}), ...(o.hubDomain !== undefined ? { hubDomain: o.hubDomain } : {}) });
      exitOnSignals({
        timeoutMs: config.shutdownTimeoutMs,
        close: () => node.close(),
        log: { info: (signal) => node.app.log.info({ signal }, "edge node shutting down"), error: (what, err) => node.app.log.error({ err }, what) },
      });
      process.stdout.write(`segmentd edge node '${node.location}' listening on ${node.url} (data dir ${config.dataDir}, NATS ${config.natsUrl})\n`);
      process.stdout.write(`interact: ${node.url}/ee/v2/interact  ${node.url}/ee/${node.location}/v2/interact  ready: ${node.url}/readyz\n`);
    });
}
