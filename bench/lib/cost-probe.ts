/**
 * Preloaded (`--import`) into a process a bench measures but does not run itself (an edge node,
 * the bare endpoint): on SIGUSR2 it writes what the process has cost so far — bytes allocated on
 * the V8 heap and CPU of all its threads — to the file named by SEGMENTD_COST_PROBE_FILE. With
 * SEGMENTD_COST_PROBE_PROFILE set, a CPU profile runs from one reading to the next and is written
 * there (`<path>.<n>.cpuprofile`): the measured phase alone, not the process's set-up. With
 * SEGMENTD_COST_PROBE_KIND=heap, a sampled profile of every allocation instead (collected or not:
 * where the bytes per request come from), `<path>.<n>.heapprofile`.
 */
import { writeFileSync } from "node:fs";
import inspector from "node:inspector";
import { AllocationMeter } from "./alloc-meter.js";

const file = process.env["SEGMENTD_COST_PROBE_FILE"];
const profileTo = process.env["SEGMENTD_COST_PROBE_PROFILE"];
const heap = process.env["SEGMENTD_COST_PROBE_KIND"] === "heap";
if (file) {
  const meter = new AllocationMeter();
  let seq = 0;
  let session: inspector.Session | null = null;
  const post = (method: string, params?: object) => new Promise<unknown>((resolve, reject) => session!.post(method, params ?? {}, (err, r) => (err ? reject(err) : resolve(r))));
  process.on("SIGUSR2", () => {
    const cpu = process.cpuUsage();
    const reading = { seq: ++seq, allocated: meter.allocated(), cpuUs: cpu.user + cpu.system };
    const write = () => writeFileSync(file, JSON.stringify(reading));
    if (!profileTo) return write();
    if (session === null) {
      session = new inspector.Session();
      session.connect();
      const started = heap
        ? post("HeapProfiler.enable").then(() => post("HeapProfiler.startSampling", { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }))
        : post("Profiler.enable").then(() => post("Profiler.start"));
      void started.then(write);
    } else {
      const s = session;
      session = null;
      void new Promise<unknown>((resolve, reject) => s.post(heap ? "HeapProfiler.stopSampling" : "Profiler.stop", (err, r) => (err ? reject(err) : resolve(r)))).then((r) => {
        writeFileSync(`${profileTo}.${seq}.${heap ? "heapprofile" : "cpuprofile"}`, JSON.stringify((r as { profile: unknown }).profile));
        s.disconnect();
        write();
      });
    }
  });
}
