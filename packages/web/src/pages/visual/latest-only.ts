/**
 * Runs an async job for the latest input only, debounced, with at most one
 * run in flight: inputs pushed while waiting or running replace each other,
 * and the newest one runs once the current run has ended and the delay has
 * passed. The live estimate uses it so that typing a value never queues a
 * request per keystroke on a shared server.
 */

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface LatestOnly<T> {
  push(input: T): void;
  /** Drop what is waiting (a running job still reports). */
  cancel(): void;
  /** Whether a job is waiting or running. */
  busy(): boolean;
}

export function latestOnly<T, R>(options: {
  delayMs: number;
  run: (input: T) => Promise<R>;
  done: (input: T, result: { ok: true; value: R } | { ok: false; error: unknown }) => void;
  timers?: Timers;
}): LatestOnly<T> {
  const timers = options.timers ?? realTimers;
  let waiting: { input: T } | undefined;
  let timer: unknown;
  let running = false;

  const start = () => {
    if (running || timer !== undefined || !waiting) return;
    const { input } = waiting;
    waiting = undefined;
    running = true;
    options.run(input).then(
      (value) => finish(input, { ok: true, value }),
      (error: unknown) => finish(input, { ok: false, error }),
    );
  };
  const finish = (input: T, result: { ok: true; value: R } | { ok: false; error: unknown }) => {
    running = false;
    options.done(input, result);
    start();
  };

  return {
    push(input) {
      waiting = { input };
      if (timer !== undefined) timers.clear(timer);
      timer = timers.set(() => {
        timer = undefined;
        start();
      }, options.delayMs);
    },
    cancel() {
      waiting = undefined;
      if (timer !== undefined) timers.clear(timer);
      timer = undefined;
    },
    busy: () => running || waiting !== undefined,
  };
}
