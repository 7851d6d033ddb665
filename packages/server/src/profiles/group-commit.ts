// Group commit, shared by both profile stores: writes that arrive together run
// in one transaction (one fsync), each in its own savepoint so that a failing
// write rolls back alone. A write's promise settles only after the shared
// COMMIT has returned, so an acknowledgement always means "durable".

/** One queued write's callbacks. */
export interface QueuedCallbacks {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

export type WriteOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Settle every write of a committed group with its own outcome, or all of them
 * with the commit's error when the group as a whole failed (`commitError`).
 */
export function settleGroup(jobs: readonly QueuedCallbacks[], outcomes: readonly WriteOutcome[], commitError?: { error: unknown }): void {
  if (commitError) {
    for (const job of jobs) job.reject(commitError.error);
    return;
  }
  jobs.forEach((job, i) => {
    const o = outcomes[i]!;
    if (o.ok) job.resolve(o.value);
    else job.reject(o.error);
  });
}
