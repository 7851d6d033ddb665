/**
 * Runs tasks one at a time per key (a profile), in arrival order, while tasks of
 * different keys run concurrently. Two events of one profile must not both load
 * the old state and race to write contradictory memberships.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(task, task);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }

  /**
   * Holds every idle key of `keys` until `released` settles: their later tasks wait for it. One
   * promise for them all, not one per key (a backfill holds thousands at a time). Returns the
   * held keys; the busy ones are left alone.
   */
  holdIdle(keys: Iterable<string>, released: Promise<void>): string[] {
    const held: string[] = [];
    for (const key of keys) {
      if (this.tails.has(key)) continue;
      this.tails.set(key, released);
      held.push(key);
    }
    if (held.length > 0) {
      void released.then(() => {
        for (const key of held) if (this.tails.get(key) === released) this.tails.delete(key);
      });
    }
    return held;
  }

  /** Whether a task of this key is queued or running. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves when every queued task has finished. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()]);
  }
}
