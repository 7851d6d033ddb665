// Worker thread entry of WorkerProfileStore (worker-store.ts): opens one
// EmbeddedProfileStore with the options in workerData and serves the calls the
// main thread posts, `{id, method, args}` → `{id, ok, value | error, feed}`.
//
// Calls are started in arrival order as their messages come in; the messages
// posted in one turn of the main thread arrive here in one batch, so their
// writes land in the same setImmediate flush of the store: one group commit.
// After each call settles, the reply carries what the store's change feed
// recorded (every tenant) since the previous reply (feed delta, feed-mirror.ts).
import { parentPort, workerData } from "node:worker_threads";
import type { MembershipChange, ProfileStore, ScannedProfile } from "../store.js";
import { EmbeddedProfileStore, type EmbeddedStoreOptions } from "./sqlite-store.js";
import { wireTransitions } from "./wire-transitions.js";
import { wireSelections } from "./wire-selections.js";
import { wireScan } from "./wire-scan.js";
import { toWire, unwireChanges, unwireIdentities, unwireRecords, type FeedDelta, type WireChanges, type WireRecords, type WorkerCall, type WorkerReply } from "./worker-store.js";

const port = parentPort;
if (port === null) throw new Error("store-worker.ts runs as a worker thread only");

let store: EmbeddedProfileStore;
try {
  store = new EmbeddedProfileStore((workerData as { options: EmbeddedStoreOptions }).options);
} catch (err) {
  port.postMessage({ id: 0, ready: true, error: toWire(err) } satisfies WorkerReply);
  throw err;
}
// Every version the feed records from here on reaches the mirror with the next reply.
let pendingFeed: FeedDelta = [];
store.onFeedRecord((version, changes) => {
  for (const [tenant, pids] of changes) pendingFeed.push([version, tenant, [...pids]]);
});
port.postMessage({ id: 0, ready: true, history: store.feedHistory() } satisfies WorkerReply);
// Quarantine reports go to the main thread as they happen (its log counts and tells its observers).
store.observe({ quarantined: (r) => port.postMessage({ id: -1, quarantine: r } satisfies WorkerReply) });

const cursors = new Map<number, AsyncIterator<ScannedProfile[]>>();
let nextCursor = 1;

function feedDelta(): FeedDelta | undefined {
  if (pendingFeed.length === 0) return undefined;
  const out = pendingFeed;
  pendingFeed = [];
  return out;
}

async function run(method: string, args: unknown[]): Promise<unknown> {
  switch (method) {
    case "append":
    case "stageBatchRecords":
      args[2] = unwireRecords(args[2] as WireRecords);
      break;
    case "appendDecided": {
      // [scope, datasetId, records, opts, expect, changes as columns (wireChanges) or as they were]
      args[2] = unwireRecords(args[2] as WireRecords);
      const changes = args[5] as WireChanges | MembershipChange[];
      args.splice(4, 2, { expect: args[4] as Float64Array, changes: Array.isArray(changes) ? changes : unwireChanges(changes) });
      break;
    }
    case "findProfileIds":
      args[1] = unwireIdentities(args[1] as string[]);
      break;
    case "applyMembershipChanges":
    case "writeMembershipChanges":
      // [scope, count, columns] (wireChanges), or [scope, changes] as they were.
      if (args.length === 3) args.splice(1, 2, unwireChanges(args[2] as WireChanges));
      break;
    case "scanOpen": {
      const [scope, policy, opts] = args as Parameters<ProfileStore["scanProfiles"]>;
      const id = nextCursor++;
      // Events cross as their stored text (wire-scan.ts).
      cursors.set(id, store.scanProfiles(scope, policy, { ...opts, eventTexts: true })[Symbol.asyncIterator]());
      return id;
    }
    case "scanNext": {
      const id = args[0] as number;
      const it = cursors.get(id);
      if (it === undefined) throw new Error(`scan cursor ${id} is not open`);
      try {
        const r = await it.next();
        if (r.done === true) cursors.delete(id);
        return r.done === true ? { done: true } : { done: false, value: wireScan(r.value) };
      } catch (err) {
        cursors.delete(id);
        throw err;
      }
    }
    case "checkUnreadableEvents": {
      const [scope, events] = args as Parameters<EmbeddedProfileStore["checkUnreadableEvents"]>;
      store.checkUnreadableEvents(scope, events);
      return undefined;
    }
    case "scanClose": {
      const id = args[0] as number;
      const it = cursors.get(id);
      cursors.delete(id);
      await it?.return?.();
      return undefined;
    }
    case "readTransitionLog": {
      const [scope, q] = args as Parameters<ProfileStore["readTransitionLog"]>;
      return wireTransitions(await store.readTransitionLog(scope, q));
    }
    case "profileSelections": {
      const [scope, ids, policy, paths] = args as Parameters<ProfileStore["profileSelections"]>;
      return wireSelections(await store.profileSelections(scope, ids, policy, paths));
    }
    case "workerStats":
      return { openCursors: cursors.size };
    case "close":
      cursors.clear();
      await store.close();
      return undefined;
    case "changesSince":
    case "kind":
    case "observe":
    case "status":
      throw new Error(`${method} is not a worker call`);
  }
  const fn = (store as unknown as Record<string, unknown>)[method];
  if (typeof fn !== "function" || method.startsWith("_") || method === "constructor") throw new Error(`unknown profile store method ${method}`);
  return (fn as (...a: unknown[]) => unknown).apply(store, args);
}

function reply(m: WorkerReply): void {
  try {
    port!.postMessage(m);
  } catch (err) {
    // A result that cannot be cloned fails that call alone.
    port!.postMessage({ id: m.id, ok: false, error: toWire(err), ...("feed" in m && m.feed !== undefined ? { feed: m.feed } : {}) } satisfies WorkerReply);
  }
}

port.on("message", (m: WorkerCall) => {
  let p: Promise<unknown>;
  try {
    p = Promise.resolve(run(m.method, m.args));
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then(
    (value) => {
      const feed = feedDelta();
      reply(feed === undefined ? { id: m.id, ok: true, value } : { id: m.id, ok: true, value, feed });
    },
    (err: unknown) => {
      const feed = feedDelta();
      reply(feed === undefined ? { id: m.id, ok: false, error: toWire(err) } : { id: m.id, ok: false, error: toWire(err), feed });
    },
  );
});
