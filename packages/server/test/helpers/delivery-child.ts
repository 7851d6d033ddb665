/**
 * The delivery engine and a transition writer in one process, for the kill -9 suite:
 *   node --conditions=source --import tsx delivery-child.ts '<json options>'
 * Opens the profile store at `location`, delivers the given webhook flows and, for `rounds`
 * rounds, writes `perRound` membership changes (each round one transaction, sources in turn).
 * Prints `READY` once delivering, `WROTE <round>` after each round; SIGTERM stops it cleanly.
 */
import { startDeliverer } from "../../src/activation/delivery/deliverer.js";
import type { Dataflow, DataflowDirectory } from "../../src/activation/types.js";
import type { MembershipChange } from "../../src/profiles/store.js";
import { openStoreAt, type TestStoreKind } from "../profiles/test-store.js";

interface Options {
  kind: TestStoreKind;
  location: string;
  storage: { dataDir: string; databaseUrl?: string };
  flows: Dataflow[];
  rounds: number;
  perRound: number;
  profiles: number;
  audiences: string[];
  seed: number;
}

const o = JSON.parse(process.argv[2]!) as Options;
const store = openStoreAt(o.location, o.kind);
const directory: DataflowDirectory = {
  listEnabled: async () => o.flows,
  get: async (_s, id) => o.flows.find((f) => f.flowId === id) ?? null,
  onChange: () => () => {},
};
const deliverer = startDeliverer({ directory, profiles: store, storage: o.storage, allowPrivateNetworks: true,
  onError: (err, what) => process.stderr.write(`delivery error: ${what}: ${(err as Error).message}\n`) });
await deliverer.ready;
process.stdout.write("READY\n");

let stopping = false;
const stop = () => {
  stopping = true;
  deliverer.stop().then(() => store.close()).then(() => process.exit(0), () => process.exit(1));
};
process.on("SIGTERM", stop);

let seed = o.seed;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const scope = o.flows[0]!.scope;
for (let round = 0; round < o.rounds && !stopping; round++) {
  const changes: MembershipChange[] = [];
  const seen = new Set<string>();
  while (changes.length < o.perRound) {
    const pid = String(1 + Math.floor(rand() * o.profiles));
    const def = o.audiences[Math.floor(rand() * o.audiences.length)]!;
    if (seen.has(`${pid}/${def}`)) continue;
    seen.add(`${pid}/${def}`);
    changes.push({ profileId: pid, definitionId: def, status: rand() < 0.5 ? "realized" : "exited", source: (["streaming", "edge", "batch"] as const)[round % 3]!, at: Date.now() });
  }
  await store.applyMembershipChanges(scope, changes);
  process.stdout.write(`WROTE ${round}\n`);
  await new Promise((r) => setTimeout(r, 50));
}
process.stdout.write("WRITES DONE\n");
