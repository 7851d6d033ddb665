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

  /** Whether a task of this key is queued or running. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  /** Resolves when every queued task has finished. */
  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all([...this.tails.values()]);
  }
}
