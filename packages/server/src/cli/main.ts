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
  if (err instanceof ConfigError) {
    process.stderr.write(`segmentd: configuration error: ${err.message}\n`);
  } else {
    process.stderr.write(`segmentd: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  }
  process.exit(1);
});
