/**
 * Wires the hygiene services together: one store, the entitlements, quota
 * reporting, work orders with their runner, expirations, and a scheduler that
 * periodically executes due expirations and resumes unfinished work orders.
 */
import type { Clock } from "../platform/clock.js";
import type { HygieneConfig } from "./entitlements.js";
import { EntitlementService } from "./entitlement-service.js";
import { ExpirationService } from "./expiration-service.js";
import type { LifecycleListener, LifecycleProfileStore } from "./lifecycle-exits.js";
import { QuotaService } from "./quota-service.js";
import type { HygieneStore } from "./store/types.js";
import { WorkOrderRunner } from "./work-order-runner.js";
import { WorkOrderService } from "./work-order-service.js";

export interface HygieneDeps {
  store: HygieneStore;
  profiles: LifecycleProfileStore;
  clock: Clock;
  config: HygieneConfig;
  /** Reports failures of background work (the runner and the scheduler never throw). */
  onError?: (err: unknown, what: string) => void;
  /**
   * Hears which profiles a completed work order or expiration changed or
   * removed, so that engines with their own copies (edge projections,
   * streaming state) can follow. Its failures go to `onError`.
   */
  onChange?: LifecycleListener;
}

export class Hygiene {
  readonly entitlements: EntitlementService;
  readonly quotas: QuotaService;
  readonly runner: WorkOrderRunner;
  readonly workOrders: WorkOrderService;
  readonly expirations: ExpirationService;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;

  constructor(readonly deps: HygieneDeps) {
    const onError = deps.onError ?? (() => {});
    this.entitlements = new EntitlementService(deps.store, deps.config);
    this.quotas = new QuotaService(deps.store, this.entitlements, deps.clock);
    this.runner = new WorkOrderRunner(deps.store, deps.profiles, deps.clock, (err, org, id) => onError(err, `work order ${id} of ${org}`), deps.onChange);
    this.workOrders = new WorkOrderService(deps.store, deps.profiles, this.entitlements, deps.clock, this.runner, deps.config.maxIdentitiesPerWorkOrder);
    this.expirations = new ExpirationService(deps.store, deps.profiles, this.entitlements, deps.clock, deps.onChange, onError);
  }

  /** One scheduler pass: due expirations, then wait for queued work orders. Tests call this after moving a ManualClock. */
  async tick(): Promise<void> {
    await this.expirations.runDue();
    // Several hubs: the orders of a hub that died while running them (a live hub's are left to it).
    if (this.runner.cluster.liveRunners !== undefined) await this.runner.resume();
    await this.runner.idle();
  }

  /** Several hubs: whether this one runs the lifecycle work now (it holds the lease); default always. */
  gate: () => boolean = () => true;

  /** Re-queues the orders a stopped process left unfinished (at start, and on the hub that gains the lifecycle lease). */
  async resumeUnfinished(): Promise<void> {
    if (this.gate()) await this.runner.resume();
  }

  /** Resumes unfinished work orders, then polls every `pollIntervalMs` (the timer does not keep the process alive). */
  async start(): Promise<void> {
    await this.resumeUnfinished();
    if (this.deps.config.pollIntervalMs <= 0) return;
    this.timer = setInterval(() => {
      if (this.ticking || !this.gate()) return;
      this.ticking = this.tick()
        .catch((err: unknown) => (this.deps.onError ?? (() => {}))(err, "hygiene scheduler"))
        .finally(() => {
          this.ticking = undefined;
        });
    }, this.deps.config.pollIntervalMs);
    this.timer.unref();
  }

  /** Stops polling and waits for running work (call before closing the stores). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.ticking;
    await this.runner.idle();
  }
}
