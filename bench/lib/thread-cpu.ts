/**
 * CPU time per thread of this process, from /proc (Linux; empty elsewhere). On a
 * small machine the benches' latency depends on how the cores are shared between
 * the event loop, the embedded store's worker thread and V8's GC helpers, so the
 * benches print each one's share of a run.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";

/** USER_HZ: the unit of utime/stime in /proc/…/stat. */
const TICKS_PER_SECOND = 100;

/**
 * CPU seconds (user + system) per thread: "main" for the event loop's thread, else
 * the thread's name and id (worker threads show as "node", V8's helpers by name).
 */
export function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  const dir = "/proc/self/task";
  if (!existsSync(dir)) return out;
  for (const tid of readdirSync(dir)) {
    try {
      const stat = readFileSync(`${dir}/${tid}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const name = Number(tid) === process.pid ? "main" : `${stat.slice(stat.indexOf("(") + 1, close)}#${tid}`;
      // Fields after "(comm) ": state is the 1st, utime the 12th, stime the 13th.
      const fields = stat.slice(close + 2).split(" ");
      out.set(name, (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** "main 4.5 s, node#123 3.1 s, …": what each thread used between two readings (≥ 0.05 s). */
export function cpuDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after]
    .map(([name, s]) => [name, s - (before.get(name) ?? 0)] as const)
    .filter(([, s]) => s >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([name, s]) => `${name} ${s.toFixed(1)} s`)
    .join(", ");
}
