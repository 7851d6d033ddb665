/**
 * The server the end-to-end test drives: segmentd exactly as `npm start`
 * runs it (startServer, no organization configured → the local development
 * tenant), on 127.0.0.1, a random port and a fresh temporary data directory.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createLogger, defaultConfig, startServer, type Config } from "../../../server/src/index.js";

export interface E2eServer {
  url: string;
  creds: { token: string; apiKey: string; orgId: string; sandboxName: string };
  close(): Promise<void>;
}

/** `configure` changes the config before the start (e.g. activation.allowPrivateNetworks for a local receiver). */
export async function startE2eServer(configure?: (config: Config) => void): Promise<E2eServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "segmentd-web-e2e-"));
  const config = defaultConfig();
  config.host = "127.0.0.1";
  config.port = 0;
  config.dataDir = dataDir;
  config.logLevel = "silent";
  configure?.(config);
  const server = await startServer(config, { logger: createLogger("silent") });
  const dev = server.devCredentials;
  if (!dev) throw new Error("startServer did not run the development tenant");
  return {
    url: server.url,
    creds: { token: dev.token, apiKey: dev.apiKey, orgId: dev.orgId, sandboxName: dev.sandboxName },
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
