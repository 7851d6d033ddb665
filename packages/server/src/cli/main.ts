#!/usr/bin/env node
/** The `segmentd` command line. */
import { Command } from "commander";
import { SERVICE_VERSION } from "../app.js";
import { ConfigError } from "../platform/config.js";
import { registerServeCommand } from "./serve-command.js";
import { registerTokenCommand } from "./token-command.js";
import { registerPqlCommands } from "./pql-command.js";
import { registerDemoCommand } from "./demo-command.js";
import { registerJobsCommands } from "./jobs-command.js";
import { registerEdgeCommand } from "./edge-command.js";
import { registerClusterCommand } from "./cluster-command.js";
import { registerWorkerCommands } from "./worker-command.js";
import { CliError } from "./cli-error.js";

// A reader that stops early (`segmentd token | head -5`) closes the pipe: that ends the output, not
// in a crash. Any other write error is still fatal.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw err;
  });
}

const program = new Command();
program.name("segmentd").description("Self-hosted audience segmentation, compatible with AEP's Segmentation Service").version(SERVICE_VERSION);
registerServeCommand(program);
registerEdgeCommand(program);
registerClusterCommand(program);
registerWorkerCommands(program);
registerTokenCommand(program);
registerPqlCommands(program);
registerDemoCommand(program);
registerJobsCommands(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CliError) {
    process.stderr.write(`segmentd: ${err.message}\n`);
  } else if (err instanceof ConfigError) {
    process.stderr.write(`segmentd: configuration error: ${err.message}\n`);
  } else {
    process.stderr.write(`segmentd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  }
  process.exit(1);
});
