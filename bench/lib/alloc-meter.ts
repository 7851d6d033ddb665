/**
 * Bytes allocated on the V8 heap by this process: the heap's growth between two readings plus
 * what every garbage collection in between freed (V8's GC profiler gives the used size before
 * and after each one). Node 20 has no allocation counter of its own; this one is exact for the
 * JavaScript heap (array buffers' backing stores are outside it).
 */
import v8 from "node:v8";

export class AllocationMeter {
  private profiler = new v8.GCProfiler();
  private lastUsed = v8.getHeapStatistics().used_heap_size;
  private total = 0;

  constructor() {
    this.profiler.start();
  }

  /** Bytes allocated since the meter was made. */
  allocated(): number {
    const r = this.profiler.stop();
    let used = this.lastUsed;
    for (const gc of r?.statistics ?? []) {
      this.total += gc.beforeGC.heapStatistics.usedHeapSize - used;
      used = gc.afterGC.heapStatistics.usedHeapSize;
    }
    const now = v8.getHeapStatistics().used_heap_size;
    this.total += now - used;
    this.lastUsed = now;
    this.profiler = new v8.GCProfiler();
    this.profiler.start();
    return this.total;
  }
}
