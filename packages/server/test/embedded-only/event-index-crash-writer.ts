// Child process of event-index-crash.test.ts: appends events from 4 concurrent clients to an
// embedded store whose event index merges every few thousand events (so that merge steps run
// between nearly all commits), printing "ACK <first> <count>" once each append resolved
// (durable). The parent kills it with SIGKILL mid-way. Not a test file itself.
import { EmbeddedProfileStore } from "../../src/profiles/embedded/sqlite-store.js";
import type { TenantScope } from "../../src/profiles/types.js";
import { runAckClients } from "../helpers/ack-clients.js";
import { crashEvent } from "./event-index-crash-events.js";

const [file, datasetId, totalArg] = process.argv.slice(2);
const scope: TenantScope = { orgId: "EVIDX-CRASH@AdobeOrg", sandboxName: "prod" };
const store = new EmbeddedProfileStore({ path: file!, eventIndexMergeAt: 3000, eventIndexMergeStep: 1000 });

process.stdout.write("READY\n");
await runAckClients({ store, scope, datasetId: datasetId!, total: Number(totalArg), perRequest: 400, clients: 4, event: crashEvent });
process.stdout.write("DONE\n");
await store.close();
