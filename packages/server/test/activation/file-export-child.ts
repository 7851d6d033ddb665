/**
 * A deliverer exporting one file flow, for the kill -9 test of delivery-files.test.ts:
 *   node --conditions=source --import tsx file-export-child.ts '<json options>'
 * Opens the profile store at `location`, starts the engine with the flow, queues "export now"
 * and prints `RUN <runId>`; pages of one member make the run long enough to be killed in it.
 */
import { startDeliverer } from "../../src/activation/delivery/deliverer.js";
import type { FileExportReports } from "../../src/activation/delivery/file-export.js";
import type { Dataflow, DataflowDirectory } from "../../src/activation/types.js";
import { openStoreAt, type TestStoreKind } from "../profiles/test-store.js";

interface Options {
  kind: TestStoreKind;
  location: string;
  storage: { dataDir: string; databaseUrl?: string };
  flow: Dataflow;
}

const o = JSON.parse(process.argv[2]!) as Options;
const store = openStoreAt(o.location, o.kind);
const directory: DataflowDirectory = {
  listEnabled: async () => [o.flow],
  get: async (_s, id) => (id === o.flow.flowId ? o.flow : null),
  onChange: () => () => {},
};
const deliverer = startDeliverer({ directory, profiles: store, storage: o.storage, allowPrivateNetworks: true, fileExports: { pageSize: 1, tickMs: 50 },
  onError: (err, what) => process.stderr.write(`export error: ${what}: ${(err as Error).message}\n`) });
await deliverer.ready;
const files = (deliverer.reports as unknown as { files: FileExportReports }).files;
const { runId } = await files.exportNow(o.flow.scope, o.flow.flowId);
process.stdout.write(`RUN ${runId}\n`);
