/**
 * The latency suite's probes (#37): /healthz and another tenant's request, each called in a loop
 * (5 ms apart) until stopped, every answer's time recorded.
 */
import assert from "node:assert/strict";

export interface Probe {
  stop(): Promise<{ health: number[]; other: number[] }>;
}

/** Probes `${url}/healthz` and `other` (e.g. another organization's definition list) until stopped. */
export function probeLatency(url: string, other: () => Promise<{ status: number }>): Probe {
  const health: number[] = [];
  const others: number[] = [];
  let running = true;
  const loop = async (samples: number[], call: () => Promise<{ status: number }>) => {
    while (running) {
      // Timed from the start of the 5-ms pause: a stall while the probe waits for its timer counts.
      const t = performance.now();
      await new Promise((res) => setTimeout(res, 5));
      const r = await call();
      samples.push(performance.now() - t - 5);
      assert.equal(r.status, 200);
    }
  };
  const done = Promise.all([loop(health, () => fetch(`${url}/healthz`).then(async (r) => ({ status: r.status, body: await r.text() }))), loop(others, other)]);
  return {
    async stop() {
      running = false;
      await done;
      return { health, other: others };
    },
  };
}

export function p99(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)]!;
}
