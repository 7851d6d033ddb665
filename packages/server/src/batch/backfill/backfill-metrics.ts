/**
 * The backfills' figures on the app's Prometheus registry (read when scraped; registered once
 * per registry):
 *   segmentd_backfills_queued / _running          backfills waiting / running, over every sandbox
 *   segmentd_backfill_profiles_total / _processed  the running backfills' changes to decide and decided
 *   segmentd_backfill_transitions_total{to}        transitions written with source `backfill`
 *   segmentd_backfills_finished_total{state}       backfills that ended, succeeded or failed
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { BackfillView } from "./backfill-types.js";

export interface BackfillFigures {
  counts(): { queued: number; running: number };
  readonly active: ReadonlyMap<string, BackfillView>;
}

export interface BackfillCounters {
  written(entered: number, exited: number): void;
  finished(view: BackfillView): void;
}

export function registerBackfillMetrics(registry: Registry | undefined, figures: () => BackfillFigures): BackfillCounters {
  const none: BackfillCounters = { written: () => {}, finished: () => {} };
  if (registry === undefined || registry.getSingleMetric("segmentd_backfills_queued") !== undefined) return none;
  const gauge = (name: string, help: string, read: (f: BackfillFigures) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read(figures()));
      },
    });
  const sum = (f: BackfillFigures, pick: (v: BackfillView) => number) => [...f.active.values()].reduce((n, v) => n + pick(v), 0);
  gauge("segmentd_backfills_queued", "Backfills of continuous/edge definitions waiting for their sandbox's running one", (f) => f.counts().queued);
  gauge("segmentd_backfills_running", "Backfills running (one per sandbox at most)", (f) => f.counts().running);
  gauge("segmentd_backfill_profiles_total", "Membership changes the running backfills have to decide (net change plus profiles changed after the fence)", (f) => sum(f, (v) => v.total));
  gauge("segmentd_backfill_profiles_processed", "Membership changes the running backfills have decided", (f) => sum(f, (v) => v.processed));
  const transitions = new Counter({ name: "segmentd_backfill_transitions_total", help: "Membership transitions written with source backfill", labelNames: ["to"] as const, registers: [registry] });
  const finished = new Counter({ name: "segmentd_backfills_finished_total", help: "Backfills that ended, by outcome", labelNames: ["state"] as const, registers: [registry] });
  return {
    written(entered, exited) {
      if (entered > 0) transitions.inc({ to: "realized" }, entered);
      if (exited > 0) transitions.inc({ to: "exited" }, exited);
    },
    finished(view) {
      finished.inc({ state: view.state });
    },
  };
}
