// The worker store's change feed (worker-store.ts): a ChangeFeed in the main thread that
// mirrors the worker's, under the worker's own version numbers, so that a version handed out
// before a restart (and written to a batch snapshot file) is answered after it.
//
// - On open, the worker sends its feed as its store read it back from the change log (reset).
// - Every reply carries what the worker's feed recorded since the previous reply (apply), for
//   every tenant, so the mirror's current version covers every change up to it.
// - A restarted worker reopens the same file: its log holds every change the mirror had, and
//   those the dead worker committed but never reported, under higher versions. Until it has
//   opened, the mirror answers from what it had; those answers stay right (the missing changes
//   come later, above the versions handed out).
import { ChangeFeed, type FeedHistory } from "../change-feed.js";

/** What the worker's feed recorded: (version, tenant key, profile ids), in version order. */
export type FeedDelta = Array<[version: number, tenant: string, pids: string[]]>;

export class FeedMirror {
  private feed: ChangeFeed;

  constructor(private readonly capacity?: number) {
    this.feed = new ChangeFeed(capacity);
  }

  get current(): number {
    return this.feed.current;
  }

  /** The worker's feed as its store opened it: replaces what the mirror held. */
  reset(history: FeedHistory): void {
    this.feed = new ChangeFeed(this.capacity, 0, history);
  }

  apply(delta: FeedDelta): void {
    let i = 0;
    while (i < delta.length) {
      const version = delta[i]![0];
      const changes = new Map<string, Set<string>>();
      for (; i < delta.length && delta[i]![0] === version; i++) changes.set(delta[i]![1], new Set(delta[i]![2]));
      // Never below what it holds (a reset already brought it).
      if (version > this.feed.current) this.feed.record(changes, version);
    }
  }

  changesSince(tenant: string, since: number | null): { version: number; profileIds: ReadonlySet<string> | null } {
    return this.feed.changesSince(tenant, since);
  }
}
