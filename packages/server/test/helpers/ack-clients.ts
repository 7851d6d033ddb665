/**
 * The writer side of the kill -9 tests: `clients` concurrent clients append `total` events,
 * `perRequest` at a time, and print "ACK <first> <count>" once an append resolved (durable).
 * stdout to a pipe is synchronous on Linux: the line is out before the next await, so the parent
 * that kills the process knows every acknowledged event.
 */
import { ingestRecords } from "../../src/profiles/ingest.js";
import type { ProfileStore } from "../../src/profiles/store.js";
import type { TenantScope } from "../../src/profiles/types.js";

export async function runAckClients(opts: {
  store: ProfileStore; scope: TenantScope; datasetId: string; total: number; perRequest: number; clients: number;
  event: (k: number) => Record<string, unknown>;
}): Promise<void> {
  let next = 0;
  const client = async (): Promise<void> => {
    while (next < opts.total) {
      const first = next;
      const n = Math.min(opts.perRequest, opts.total - first);
      next += n;
      const records = Array.from({ length: n }, (_, j) => ({ index: j, value: opts.event(first + j) }));
      const r = await ingestRecords(opts.store, opts.scope, opts.datasetId, records, { now: Date.now() });
      if (r.failed.length > 0) throw new Error(JSON.stringify(r.failed));
      process.stdout.write(`ACK ${first} ${n}\n`);
    }
  };
  await Promise.all(Array.from({ length: opts.clients }, () => client()));
}
