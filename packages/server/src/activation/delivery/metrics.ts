// Per-dataflow delivery metrics in the app's registry (`/metrics`).
import { Counter, Gauge, type Registry } from "prom-client";

export interface DeliveryMetrics {
  sent: Counter<"flow">;
  failed: Counter<"flow">;
  dead: Counter<"flow">;
  retrying: Gauge<"flow">;
  lag: Gauge<"flow">;
}

function once<T>(registry: Registry | undefined, name: string, make: (registers: Registry[]) => T): T {
  const existing = registry?.getSingleMetric(name);
  return (existing as T | undefined) ?? make(registry === undefined ? [] : [registry]);
}

export function deliveryMetrics(registry?: Registry): DeliveryMetrics {
  return {
    sent: once(registry, "segmentd_delivery_sent_total", (r) => new Counter({ name: "segmentd_delivery_sent_total", help: "Transitions (and snapshot members) a dataflow's destination acknowledged", labelNames: ["flow"], registers: r })),
    failed: once(registry, "segmentd_delivery_failed_total", (r) => new Counter({ name: "segmentd_delivery_failed_total", help: "Delivery requests that failed (each attempt)", labelNames: ["flow"], registers: r })),
    dead: once(registry, "segmentd_delivery_dead_total", (r) => new Counter({ name: "segmentd_delivery_dead_total", help: "Transitions that became dead letters after the retry period", labelNames: ["flow"], registers: r })),
    retrying: once(registry, "segmentd_delivery_retrying", (r) => new Gauge({ name: "segmentd_delivery_retrying", help: "Transitions waiting for a retry", labelNames: ["flow"], registers: r })),
    lag: once(registry, "segmentd_delivery_lag_seconds", (r) => new Gauge({ name: "segmentd_delivery_lag_seconds", help: "Age of the oldest transition a dataflow has read but not delivered", labelNames: ["flow"], registers: r })),
  };
}
