/**
 * This thread's CPU time in milliseconds: what the evaluation budget confirms a
 * slow profile with, so that a pause of the process (the host busy with other
 * work, another thread's turn) is not blamed on the expression. Linux gives a
 * thread's own time in /proc/thread-self/schedstat (nanoseconds, about 1 µs a
 * read); elsewhere the process's CPU time stands in for it.
 */
import { openSync, readSync } from "node:fs";

// Module state is per thread: a worker thread opens its own file.
let fd: number | null | undefined;
const buf = Buffer.alloc(64);

export function threadCpuMs(): number {
  if (fd === undefined) {
    try {
      fd = openSync("/proc/thread-self/schedstat", "r");
    } catch {
      fd = null;
    }
  }
  if (fd !== null) {
    try {
      const n = readSync(fd, buf, 0, buf.length, 0);
      const text = buf.toString("latin1", 0, n);
      const ns = Number(text.slice(0, text.indexOf(" ")));
      if (Number.isFinite(ns) && ns > 0) return ns / 1e6;
    } catch {
      // Read failed: the process's time below.
    }
    fd = null;
  }
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
