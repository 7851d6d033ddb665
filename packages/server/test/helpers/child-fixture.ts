/**
 * The whole server as a child process on the store SEGMENTD_TEST_STORE selects, restartable on
 * the same data: for the tests that kill it with kill -9 (durability, edge acknowledgements).
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { testConfig } from "./server-harness.js";
import { createTestStore, type TestStoreHandle } from "./test-store.js";
import { killAll, spawnTs, waitFor, type Spawned } from "./spawn.js";

const CHILD = "packages/server/test/helpers/child-server.ts";

export interface ChildFixture {
  store: TestStoreHandle;
  /** Starts the server on the fixture's data; resolves with its URL once it serves. */
  start(): Promise<{ s: Spawned; url: string }>;
  /** Kills every child still running and drops the store. */
  dispose(): Promise<void>;
}

/** `extra`: more top-level keys of the config file (e.g. `activation`). */
export async function childFixture(label: string, extra: Record<string, unknown> = {}): Promise<ChildFixture> {
  const store = await createTestStore(label);
  const c = testConfig(store);
  const configFile = path.join(store.dataDir, "segmentd.config.json");
  writeFileSync(configFile, JSON.stringify({
    host: c.host, port: 0, dataDir: c.dataDir, ...(c.databaseUrl ? { databaseUrl: c.databaseUrl } : {}), logLevel: "warn",
    auth: c.auth, organizations: c.organizations, ...extra,
  }));
  return {
    store,
    async start() {
      const s = spawnTs(CHILD, [configFile]);
      const m = await waitFor(s, /READY (\S+)/);
      return { s, url: m[1]! };
    },
    async dispose() {
      killAll();
      await store.dispose();
    },
  };
}
