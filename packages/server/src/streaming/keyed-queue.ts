/**
 * Runs tasks one at a time per key (a profile), in arrival order, while tasks of
 * different keys run concurrently. Two events of one profile must not both load
 * the old state and race to write contradictory memberships.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Idle keys held by another writer (hold): their next task waits for the release. */
  private holds: Array<{ keys: ReadonlySet<string>; released: Promise<void> }> = [];

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? (this.holds.length === 0 ? undefined : this.heldBy(key)) ?? Promise.resolve();
    const next = prev.then(task, task);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /**
   * Holds those of `keys` with no task queued or running (nor held already): a task of one of
   * them queued before `release()` runs after it. One set and one promise for all of them (a
   * backfill holds 2,000 profiles at a time; a task each made its GC cost as much as its write).
   * `busy`: the positions in `keys` of those not held.
   */
  hold(keys: readonly string[]): { busy: number[]; release: () => void } {
    const held = new Set<string>();
    const busy: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      if (this.tails.has(k) || held.has(k) || (this.holds.length > 0 && this.heldBy(k) !== undefined)) busy.push(i);
      else held.add(k);
    }
    let resolve!: () => void;
    const entry = { keys: held, released: new Promise<void>((r) => (resolve = r)) };
    this.holds.push(entry);
    let done = false;
    return {
      busy,
      release: () => {
        if (done) return;
        done = true;
        this.holds = this.holds.filter((h) => h !== entry);
        resolve();
      },
    };
  }

  private heldBy(key: string): Promise<void> | undefined {
    for (const h of this.holds) if (h.keys.has(key)) return h.released;
    return undefined;
  }

  /** Whether a task of this key is queued or running. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves when the tasks of the keys starting with `prefix` queued now have finished (not those queued later). */
  async settled(prefix: string): Promise<void> {
    const now: Promise<unknown>[] = [];
    for (const [k, tail] of this.tails) if (k.startsWith(prefix)) now.push(tail);
    await Promise.all(now);
  }

  /** Resolves when every queued task has finished. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()]);
  }
}
