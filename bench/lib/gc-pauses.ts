/**
 * The main thread's garbage-collection pauses during a measured phase, from V8's
 * `gc` performance entries: how many of each kind, their total and longest. A
 * latency tail of a few milliseconds on a saturated event loop is either work
 * the loop did in one turn or a pause of this kind; the benches print both.
 */
import { constants, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";

const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weak callbacks",
};

export interface GcPauses {
  /** Stops observing; the summary, one "kind: n, total ms, max ms" part per kind seen. */
  stop(): string;
}

export function watchGcPauses(): GcPauses {
  const byKind = new Map<string, { n: number; total: number; max: number; over10: number }>();
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries() as Array<PerformanceEntry & { detail?: { kind?: number } }>) {
      const kind = KINDS[e.detail?.kind ?? -1] ?? "other";
      const s = byKind.get(kind) ?? { n: 0, total: 0, max: 0, over10: 0 };
      s.n++;
      s.total += e.duration;
      s.max = Math.max(s.max, e.duration);
      if (e.duration > 10) s.over10++;
      byKind.set(kind, s);
    }
  });
  observer.observe({ entryTypes: ["gc"] });
  return {
    stop() {
      observer.disconnect();
      if (byKind.size === 0) return "none";
      return [...byKind].map(([kind, s]) => `${kind} ${s.n} (total ${s.total.toFixed(0)} ms, max ${s.max.toFixed(1)} ms, ${s.over10} over 10 ms)`).join("; ");
    },
  };
}
