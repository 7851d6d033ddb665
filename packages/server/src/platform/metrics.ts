/**
 * Prometheus metrics. Each app owns its registry (not prom-client's global
 * one) so that several apps in one test process do not collide.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** What a profile store's status() reports; the shape of profiles/quarantine.ts's ProfileStoreStatus, declared here because platform/ imports nothing above it. */
interface ProfileStoreStatus {
  up: boolean;
  error: string | null;
  restarts: number;
  quarantined: number;
  changeLog?: { commits: number; lockWaitMs: number };
}

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

/**
 * The profile store's health in Prometheus, read from its status() at scrape time (one read per
 * scrape, shared by the three):
 *   segmentd_profile_store_up                        1 when it can serve, 0 while it cannot (a worker restarting)
 *   segmentd_profile_store_worker_restarts_total     worker thread restarts (embedded worker store)
 *   segmentd_quarantined_records_total               stored records skipped at read as unservable, once per record per process
 */
export function registerProfileStoreMetrics(registry: Registry, source: { status(): Promise<ProfileStoreStatus> }): void {
  // One app per registry registers them (a registry shared by a second app keeps the first's).
  if (registry.getSingleMetric("segmentd_profile_store_up") !== undefined) return;
  // The three collect() of one scrape run together (prom-client awaits them at once): one status() read.
  let inFlight: Promise<ProfileStoreStatus> | null = null;
  const status = (): Promise<ProfileStoreStatus> => {
    if (inFlight === null) {
      const p = source.status().catch((err: unknown) => ({ up: false, error: String(err), restarts: 0, quarantined: 0 }));
      inFlight = p;
      void p.finally(() => { if (inFlight === p) inFlight = null; });
    }
    return inFlight;
  };
  new Gauge({
    name: "segmentd_profile_store_up",
    help: "Whether the profile store can serve (1) or not (0, e.g. its worker thread is restarting)",
    registers: [registry],
    async collect() {
      this.set((await status()).up ? 1 : 0);
    },
  });
  new Counter({
    name: "segmentd_profile_store_worker_restarts_total",
    help: "Restarts of the embedded profile store's worker thread after it died",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await status()).restarts);
    },
  });
  // PostgreSQL's change log orders every writing process's commits under one lock: its wait, per process.
  new Counter({
    name: "segmentd_profile_change_log_commits_total",
    help: "Write groups this process committed with a change-log version (PostgreSQL profile store)",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await status()).changeLog?.commits ?? 0);
    },
  });
  new Counter({
    name: "segmentd_profile_change_log_lock_wait_seconds_total",
    help: "Time those commits waited for the change log's lock, which serializes the commits of every process writing the database",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc(((await status()).changeLog?.lockWaitMs ?? 0) / 1000);
    },
  });
  new Counter({
    name: "segmentd_quarantined_records_total",
    help: "Stored records skipped at read because they cannot be served safely (GET /admin/quarantine lists them); each counted once per process",
    registers: [registry],
    async collect() {
      this.reset();
      this.inc((await status()).quarantined);
    },
  });
}
