/**
 * Executes accepted work orders, one at a time per process, in acceptance
 * order: received → submitted (claimed by compare-and-set, so two processes
 * never both run it) → completed | failed. Deletes go through the profile
 * store; profiles left without data disappear and their memberships exit;
 * the optional listener hears which profiles changed or disappeared (edge
 * projections and streaming state keep copies that must follow).
 * `idle()` lets tests and shutdown wait for the queue to drain.
 */
import type { Clock } from "../platform/clock.js";
import { claimedElsewhere } from "../platform/roles.js";
import { exitVanishedProfiles, type LifecycleChange, type LifecycleListener, type LifecycleProfileStore } from "./lifecycle-exits.js";
import type { ProductStatus, WorkOrderRecord } from "./records.js";
import type { HygieneStore } from "./store/types.js";
import type { WorkOrderQueue } from "./work-order-service.js";

const PRODUCTS: Readonly<Record<string, string>> = {
  datalake: "Data Management",
  identity: "Identity Service",
  profile: "Profile Service",
  ajo: "Journey Orchestrator",
};

export class WorkOrderRunner implements WorkOrderQueue {
  private tail: Promise<void> = Promise.resolve();
  private pending = 0;
  /** Several hubs (set by the app once the hub leases run): this runner's id and the live runners. */
  cluster: { runnerId?: string; liveRunners?: () => ReadonlySet<string> | undefined } = {};

  constructor(
    private readonly store: HygieneStore,
    private readonly profiles: LifecycleProfileStore,
    private readonly clock: Clock,
    private readonly onError: (err: unknown, orgId: string, workorderId: string) => void = () => {},
    private readonly onChange?: LifecycleListener,
  ) {}

  /**
   * Queues an order for execution. It runs only if this runner claims it: `received` → `submitted`
   * by compare-and-set. An order another runner has claimed already is left to that runner, unless
   * `takeOver` (resume: the process that claimed it stopped before finishing it).
   */
  enqueue(orgId: string, workorderId: string, takeOver = false): void {
    this.pending++;
    this.tail = this.tail
      .then(() => this.run(orgId, workorderId, takeOver))
      .catch((err: unknown) => this.onError(err, orgId, workorderId))
      .finally(() => {
        this.pending--;
      });
  }

  /** Resolves once every order enqueued so far has finished. */
  async idle(): Promise<void> {
    while (this.pending > 0) await this.tail;
  }

  /**
   * Re-queues orders a previous process accepted but did not finish, taking over those it had
   * claimed (re-claimed by compare-and-set at the revision read). With several hubs a claim
   * records its hub, and an order claimed by a live hub (or claimed in the last 10 s) is left to
   * it. Alone, a claim names no one: the process that claimed it is the one that stopped.
   */
  async resume(limit = 1000): Promise<number> {
    const refs = await this.store.unfinishedWorkOrders(limit);
    for (const r of refs) this.enqueue(r.orgId, r.id, true);
    return refs.length;
  }

  /** Several hubs: a live hub other than this one claimed the order (or the claim is too recent to tell). */
  private anotherHubs(order: WorkOrderRecord): boolean {
    const live = this.cluster.liveRunners?.();
    return live !== undefined && claimedElsewhere({ by: order.claimedBy, self: this.cluster.runnerId, live, at: order.updatedAt, now: this.clock.now() });
  }

  private products(order: WorkOrderRecord, status: ProductStatus["productStatus"], at: number): ProductStatus[] {
    return order.targetServices.map((s) => ({ productName: PRODUCTS[s] ?? s, productStatus: status, createdAt: at }));
  }

  private async run(orgId: string, workorderId: string, takeOver: boolean): Promise<void> {
    const order = await this.store.getWorkOrder(orgId, workorderId);
    if (!order || order.status === "completed" || order.status === "failed") return;
    // Claimed by another runner (in this process or another one) since it was queued: that one runs it.
    if (order.status !== "received" && !takeOver) return;
    if (order.status !== "received" && this.anotherHubs(order)) return;
    const at = this.clock.now();
    // The claim: received → submitted, or a takeover's submitted → submitted; either way the
    // revision the order was read at must still be the stored one, so only one runner wins.
    let claimed: WorkOrderRecord = { ...order, status: "submitted", updatedAt: at, productStatusDetails: this.products(order, "waiting", at), ...(this.cluster.runnerId === undefined ? {} : { claimedBy: this.cluster.runnerId }) };
    if (!(await this.store.replaceWorkOrder(claimed, [order.status]))) return;
    claimed = { ...claimed, revision: claimed.revision + 1 };
    const scope = { orgId: claimed.orgId, sandboxName: claimed.sandboxName };
    let done: WorkOrderRecord;
    let change: LifecycleChange | undefined;
    try {
      const at = this.clock.now();
      if (claimed.action === "identity-delete") {
        const datasets = claimed.datasetId === "ALL" ? "ALL" : claimed.datasetId.split(",").map((s) => s.trim());
        const counts = await this.profiles.deleteByIdentities(scope, claimed.identities, datasets);
        const { removedProfileIds, ...exits } = await exitVanishedProfiles(this.profiles, scope, counts.profileIds, at);
        done = {
          ...claimed,
          status: "completed",
          outcome: { records: counts.fragments + counts.events + counts.lakeRecords, ...exits },
        };
        change = { scope, cause: { kind: "workorder", id: claimed.workorderId }, changedProfileIds: counts.profileIds, removedProfileIds };
      } else {
        const changes = claimed.fieldChanges ?? { set: {}, remove: [] };
        const r = await this.profiles.updateFields(scope, { datasetId: claimed.datasetId, identities: claimed.identities, set: changes.set, remove: changes.remove });
        done = { ...claimed, status: "completed", outcome: { records: r.updated, profilesRemoved: 0, membershipsExited: 0 } };
        change = { scope, cause: { kind: "workorder", id: claimed.workorderId }, changedProfileIds: r.profileIds, removedProfileIds: [] };
      }
      const finished = this.clock.now();
      done = { ...done, updatedAt: finished, productStatusDetails: this.products(claimed, "success", finished) };
    } catch (err) {
      const finished = this.clock.now();
      done = {
        ...claimed,
        status: "failed",
        failure: err instanceof Error ? err.message : String(err),
        updatedAt: finished,
        productStatusDetails: this.products(claimed, "failed", finished),
      };
    }
    // A rename may have landed meanwhile: keep its labels, and retry if another one lands before our write.
    for (;;) {
      const latest = await this.store.getWorkOrder(orgId, workorderId);
      if (!latest || latest.status !== "submitted") return;
      const merged = { ...done, displayName: latest.displayName, description: latest.description, updatedBy: latest.updatedBy, revision: latest.revision };
      if (await this.store.replaceWorkOrder(merged, ["submitted"])) break;
    }
    // After the order is recorded as done: a failing listener must not fail a delete that happened.
    if (change && this.onChange && (change.changedProfileIds.length > 0 || change.removedProfileIds.length > 0)) {
      try {
        await this.onChange(change);
      } catch (err) {
        this.onError(err, orgId, workorderId);
      }
    }
  }
}
