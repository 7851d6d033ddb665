/**
 * How late the main thread's event loop ran during a measured phase, beyond the 1 ms sampling
 * period (p50 / p99 / max): GC pauses, work the loop did in one turn, and also what V8's GC
 * entries do not show, such as a major GC's incremental marking steps (V8 paces them to finish
 * marking within ~0.5 s, so a large heap's marking takes most of the main thread for that long
 * when its helper threads get little CPU).
 */
import { monitorEventLoopDelay } from "node:perf_hooks";

const RESOLUTION_MS = 1;

export interface LoopDelay {
  /** Stops sampling; "p50 x ms, p99 y ms, max z ms". */
  stop(): string;
}

export function watchLoopDelay(): LoopDelay {
  const h = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  h.enable();
  return {
    stop() {
      h.disable();
      // The histogram records the whole interval between the timer's runs, its period included.
      const late = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS).toFixed(1);
      return `p50 ${late(h.percentile(50))} ms, p99 ${late(h.percentile(99))} ms, max ${late(h.max)} ms`;
    },
  };
}
