// Child process of crash.test.ts: streams events into the store like 8
// concurrent collection clients, and prints "ACK <first> <count>" for each
// request only after its append resolved (i.e. was durable). The parent kills
// it with SIGKILL mid-way. Not a test file itself.
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { openStoreAt } from "./test-store.js";

const [location, datasetId, totalArg, perRequestArg] = process.argv.slice(2);
const total = Number(totalArg);
const perRequest = Number(perRequestArg);
const scope: TenantScope = { orgId: "crash-org", sandboxName: "prod" };
const store = openStoreAt(location!);

function crashEvent(k: number): Record<string, unknown> {
  return { _id: `crash-${k}`, timestamp: 1_700_000_000_000 + k, eventType: "web.webpagedetails.pageViews", identityMap: { ECID: [{ id: `visitor-${k % 1000}` }] } };
}

let next = 0;
async function client(): Promise<void> {
  while (next < total) {
    const first = next;
    const n = Math.min(perRequest, total - first);
    next += n;
    const records = Array.from({ length: n }, (_, j) => ({ index: j, value: crashEvent(first + j) }));
    const r = await ingestRecords(store, scope, datasetId!, records, { now: Date.now() });
    if (r.failed.length > 0) throw new Error(JSON.stringify(r.failed));
    // stdout to a pipe is synchronous on Linux: the line is out before the next await.
    process.stdout.write(`ACK ${first} ${n}\n`);
  }
}

await Promise.all(Array.from({ length: 8 }, () => client()));
process.stdout.write("DONE\n");
await store.close();
