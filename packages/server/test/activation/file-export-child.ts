/**
 * A deliverer exporting one file flow, for the kill -9 test of delivery-files.test.ts:
 *   node --conditions=source --import tsx file-export-child.ts '<json options>'
 * Opens the profile store at `location`, starts the engine with the flow, queues "export now"
 * and prints `RUN <runId>`. Pages of one member, each read 25 ms late (a slow store), keep the run
 * going for seconds however fast the host, so the test sees its partial file and kills it there.
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
const opened = openStoreAt(o.location, o.kind);
const listMembers = opened.listMembers.bind(opened);
const slowMembers = async (...args: Parameters<typeof listMembers>) => {
  await new Promise((r) => setTimeout(r, 25));
  return listMembers(...args);
};
const store = new Proxy(opened, {
  get: (target, key) => {
    if (key === "listMembers") return slowMembers;
    const v = Reflect.get(target, key, target) as unknown;
    return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
  },
});
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
