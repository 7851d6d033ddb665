/**
 * Cost per request (#26): CPU of all the serving process's threads and bytes it allocated on the
 * V8 heap, read before and after an open-loop phase at a fixed rate below capacity, divided by
 * the requests (or events) served. Figures a shared 2-core machine measures faithfully, unlike
 * throughput at saturation. A process the bench spawned is read through bench/lib/cost-probe.ts;
 * the bench's own process directly.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { AllocationMeter } from "./alloc-meter.js";
import { startListeningChild } from "./listening-child.js";
import type { ClientResult } from "./load-client.js";

export interface Cost {
  /** CPU microseconds (user + system, every thread). */
  cpuUs: number;
  /** Bytes allocated on the V8 heap. */
  allocated: number;
}

export interface CostMeter {
  read(): Promise<Cost>;
}

let self: AllocationMeter | null = null;

/** This process's cost (the bench's own in-process server). */
export function selfMeter(): CostMeter {
  const meter = (self ??= new AllocationMeter());
  return {
    async read() {
      const cpu = process.cpuUsage();
      return { cpuUs: cpu.user + cpu.system, allocated: meter.allocated() };
    },
  };
}

const HERE = path.dirname(new URL(import.meta.url).pathname);
let probes = 0;

/** Node arguments and environment that load the probe into a child; `meter(child)` reads it. */
export function costProbe(): { nodeArgs: string[]; env: Record<string, string>; meter(child: ChildProcess): CostMeter } {
  const file = path.join(os.tmpdir(), `segmentd-cost-${process.pid}-${++probes}.json`);
  rmSync(file, { force: true });
  // The last reading taken, whichever meter took it: a reading is new only when its number is higher.
  let seq = 0;
  return {
    nodeArgs: ["--import", path.join(HERE, "cost-probe.ts")],
    env: { SEGMENTD_COST_PROBE_FILE: file },
    meter(child) {
      return {
        async read() {
          child.kill("SIGUSR2");
          const t0 = Date.now();
          for (;;) {
            if (existsSync(file)) {
              try {
                const r = JSON.parse(readFileSync(file, "utf8")) as Cost & { seq: number };
                if (r.seq > seq) {
                  seq = r.seq;
                  return { cpuUs: r.cpuUs, allocated: r.allocated };
                }
              } catch {
                // Read while being written: read again.
              }
            }
            if (Date.now() - t0 > 10_000) throw new Error(`no cost reading from process ${child.pid} (${file})`);
            await new Promise((r) => setTimeout(r, 5));
          }
        },
      };
    },
  };
}

/** A bare Fastify JSON endpoint in a process of its own (the reference), with the probe. */
export async function startBareServer(): Promise<{ url: string; meter: CostMeter; close(): Promise<void> }> {
  const probe = costProbe();
  const server = await startListeningChild(["--import", "tsx", ...probe.nodeArgs, path.join(HERE, "bare-server.ts")], probe.env, "bare server");
  return { url: server.url, meter: probe.meter(server.child), close: () => server.close() };
}

export interface PhaseCost {
  label: string;
  client: ClientResult;
  /** What a request or event is, and how many were served. */
  unit: string;
  units: number;
  cpuUs: number;
  bytes: number;
}

/** Runs `load` between two readings of `meter`; costs per unit (`unitsPerRequest` events a request, say). */
export async function measurePhase(label: string, meter: CostMeter, load: () => Promise<ClientResult>, unit = "request", unitsPerRequest = 1): Promise<PhaseCost> {
  const before = await meter.read();
  const client = await load();
  const after = await meter.read();
  const units = Math.max(1, client.requests * unitsPerRequest);
  return { label, client, unit, units, cpuUs: (after.cpuUs - before.cpuUs) / units, bytes: (after.allocated - before.allocated) / units };
}

export function costRow(c: PhaseCost): string {
  return `| ${c.label} | ${c.client.rps.toFixed(0)} req/s | ${c.client.p50} / ${c.client.p99} ms | ${c.cpuUs.toFixed(1)} µs | ${formatBytes(c.bytes)} | ${c.client.non2xx} / ${c.client.errors} |`;
}

export const COST_HEADER = "| process (open loop) | served | p50 / p99 | CPU per unit | allocated per unit | non-2xx / errors |\n|---|---|---|---|---|---|";

export function formatBytes(b: number): string {
  return b >= 1024 ? `${(b / 1024).toFixed(1)} KB` : `${b.toFixed(0)} B`;
}

/** `target <what>: <measured> (<reference>) met|MISSED`: one line per target, as #26 asks. */
export function target(what: string, measured: string, met: boolean, reference = ""): string {
  return `target ${what}: ${measured}${reference ? ` (${reference})` : ""} ${met ? "met" : "MISSED"}`;
}
