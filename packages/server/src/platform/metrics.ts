/**
 * Prometheus metrics. Each app owns its registry (not prom-client's global
 * one) so that several apps in one test process do not collide.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface HttpMetrics {
  registry: Registry;
  requests: Counter<"method" | "route" | "status_code">;
  duration: Histogram<"method" | "route" | "status_code">;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): HttpMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: "segmentd_" });
  const requests = new Counter({
    name: "segmentd_http_requests_total",
    help: "HTTP requests by method, route template and status code",
    labelNames: ["method", "route", "status_code"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "segmentd_http_request_duration_seconds",
    help: "HTTP request latency by method, route template and status code",
    labelNames: ["method", "route", "status_code"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  return { registry, requests, duration };
}
