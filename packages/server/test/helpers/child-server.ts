/**
 * A server in its own process, for crash and restart tests:
 *   node --conditions=source --import tsx child-server.ts <config.json>
 * Prints `READY <url>` once listening; exits 0 after a graceful SIGTERM.
 */
import { loadConfig, startServer } from "../../src/index.js";

const server = await startServer(loadConfig({ configFile: process.argv[2] }));
process.stdout.write(`READY ${server.url}\n`);
const stop = () => {
  server.close().then(() => process.exit(0), () => process.exit(1));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
