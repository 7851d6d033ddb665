/**
 * An open-loop load of several request kinds at one offered rate (bench/soak.ts): request i
 * is due at start + i / rate whatever happened to the earlier ones, and its kind is picked
 * by weight in a fixed rotation (so every window of the run has the same mix). Up to
 * `connections` keep-alive connections; at most `maxInFlight` requests wait for an answer,
 * beyond that a due request is not sent and counted as `skipped` (a server that stops
 * answering must not make the client itself grow without bound).
 */
import http from "node:http";

export interface RequestKind {
  name: string;
  weight: number;
  method: "GET" | "POST";
  path: string;
  /** A fresh body per request (POST only). */
  body?: () => unknown;
}

export interface KindCounts {
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  /** Status codes of the non-2xx answers, with how many of each. */
  statuses: Record<string, number>;
}

export interface MixedLoad {
  /** Counts so far, per kind (copies). */
  counts(): Record<string, KindCounts>;
  /** Due requests not sent because `maxInFlight` requests were waiting. */
  skipped(): number;
  /** Resolves when the run's time is over and every request sent has its answer. */
  done: Promise<void>;
}

export function startMixedLoad(o: { url: string; headers: Record<string, string>; rate: number; seconds: number; connections: number; maxInFlight?: number; kinds: RequestKind[] }): MixedLoad {
  const u = new URL(o.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.connections });
  const maxInFlight = o.maxInFlight ?? 4 * o.connections;
  // The rotation: each kind `weight` times, interleaved (a, b, a, c, a, b, ...) by largest remainder.
  const rotation: RequestKind[] = [];
  const total = o.kinds.reduce((s, k) => s + k.weight, 0);
  const credit = o.kinds.map(() => 0);
  for (let n = 0; n < total; n++) {
    let best = 0;
    for (let i = 0; i < o.kinds.length; i++) {
      credit[i]! += o.kinds[i]!.weight;
      if (credit[i]! > credit[best]!) best = i;
    }
    credit[best]! -= total;
    rotation.push(o.kinds[best]!);
  }
  const counts: Record<string, KindCounts> = {};
  for (const k of o.kinds) counts[k.name] = { sent: 0, ok: 0, non2xx: 0, errors: 0, statuses: {} };
  let inFlight = 0;
  let skipped = 0;
  let idle: (() => void) | null = null;

  const send = (kind: RequestKind): void => {
    const c = counts[kind.name]!;
    if (inFlight >= maxInFlight) {
      skipped++;
      return;
    }
    c.sent++;
    inFlight++;
    const payload = kind.body ? JSON.stringify(kind.body()) : undefined;
    const headers: Record<string, string | number> = { ...o.headers };
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(payload);
    }
    const finish = () => {
      inFlight--;
      if (inFlight === 0 && idle) idle();
    };
    const req = http.request({ agent, host: u.hostname, port: u.port, path: kind.path, method: kind.method, headers }, (res) => {
      res.resume();
      res.on("end", () => {
        const s = res.statusCode ?? 0;
        if (s >= 200 && s < 300) c.ok++;
        else {
          c.non2xx++;
          c.statuses[String(s)] = (c.statuses[String(s)] ?? 0) + 1;
        }
        finish();
      });
    });
    req.on("error", () => {
      c.errors++;
      finish();
    });
    req.end(payload);
  };

  const run = async (): Promise<void> => {
    const start = performance.now();
    const end = start + o.seconds * 1000;
    const interval = 1000 / o.rate;
    let due = 0;
    for (;;) {
      const now = performance.now();
      if (now >= end) break;
      while (start + due * interval <= now) send(rotation[due++ % rotation.length]!);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, start + due * interval - performance.now())));
    }
    if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
    agent.destroy();
  };

  return {
    counts: () => Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, { ...v, statuses: { ...v.statuses } }])),
    skipped: () => skipped,
    done: run(),
  };
}
