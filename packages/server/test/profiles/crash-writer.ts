// Child process of crash.test.ts: streams events into the store like 8
// concurrent collection clients, and prints "ACK <first> <count>" for each
// request only after its append resolved (i.e. was durable). The parent kills
// it with SIGKILL mid-way. Not a test file itself.
import type { TenantScope } from "../../src/profiles/types.js";
import { runAckClients } from "../helpers/ack-clients.js";
import { openStoreAt } from "./test-store.js";

const [location, datasetId, totalArg, perRequestArg] = process.argv.slice(2);
const scope: TenantScope = { orgId: "crash-org", sandboxName: "prod" };
const store = openStoreAt(location!);

function crashEvent(k: number): Record<string, unknown> {
  return { _id: `crash-${k}`, timestamp: 1_700_000_000_000 + k, eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: `visitor-${k % 1000}` }] } };
}

await runAckClients({ store, scope, datasetId: datasetId!, total: Number(totalArg), perRequest: Number(perRequestArg), clients: 8, event: crashEvent });
process.stdout.write("DONE\n");
await store.close();
