// TEMPORARY LOCAL SWAP — reverted after the local run.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
// @ts-expect-error scratch
import { startFull } from "/tmp/segweb/full-app.mts";
export interface E2eServer { url: string; creds: { token: string; apiKey: string; orgId: string; sandboxName: string }; close(): Promise<void> }
export async function startE2eServer(): Promise<E2eServer> {
  return startFull(mkdtempSync(path.join(tmpdir(), "segweb-e2e-")));
}
