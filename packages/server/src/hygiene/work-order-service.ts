/**
 * Record delete and record update work orders: validate (shape, then datasets,
 * then quota — hygiene-api.md §4.8), charge the quotas and persist the order
 * in one atomic store call, then hand it to the runner. A rejected order
 * changes nothing.
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../platform/clock.js";
import type { HygieneContext } from "./context.js";
import type { EntitlementService } from "./entitlement-service.js";
import { invalid, notFound, quotaExceeded } from "./errors.js";
import type { LifecycleProfileStore } from "./lifecycle-exits.js";
import { periodKey } from "./periods.js";
import { QUOTA_PERIOD_WORDS, type PeriodicQuota } from "./quotas.js";
import type { Page, QuotaCharge, WorkOrderListQuery, WorkOrderRecord } from "./records.js";
import type { HygieneStore } from "./store/types.js";
import { ALL_DATASETS, parseWorkOrderRequest } from "./work-order-request.js";

export interface WorkOrderQueue {
  enqueue(orgId: string, workorderId: string): void;
}

/** Which quotas an action draws on: deletes both the day and the month, updates the month. */
export function quotasFor(action: WorkOrderRecord["action"]): PeriodicQuota[] {
  return action === "identity-delete"
    ? ["dailyConsumerDeleteIdentitiesQuota", "monthlyConsumerDeleteIdentitiesQuota"]
    : ["monthlyUpdatedFieldIdentitiesQuota"];
}

export class WorkOrderService {
  constructor(
    private readonly store: HygieneStore,
    private readonly profiles: LifecycleProfileStore,
    private readonly entitlements: EntitlementService,
    private readonly clock: Clock,
    private readonly queue: WorkOrderQueue,
    private readonly maxIdentities: number,
  ) {}

  async create(ctx: HygieneContext, body: unknown): Promise<WorkOrderRecord> {
    const req = parseWorkOrderRequest(body, this.maxIdentities);
    const scope = { orgId: ctx.orgId, sandboxName: ctx.sandboxName };

    let datasetName = "";
    if (req.datasets !== ALL_DATASETS) {
      const names: string[] = [];
      for (const id of req.datasets) {
        const ds = await this.profiles.getDataset(scope, id);
        if (ds === null) throw invalid(`Dataset '${id}' was not found in sandbox '${ctx.sandboxName}'.`);
        const ttl = await this.store.expirationForDataset(ctx.orgId, ctx.sandboxName, id);
        if (ttl && (ttl.status === "pending" || ttl.status === "executing")) {
          throw invalid(`Dataset '${id}' has an active dataset expiration (${ttl.ttlId}); work orders are not accepted for it.`);
        }
        names.push(ds.name);
      }
      datasetName = names.join(",");
    }

    // One clock reading decides the periods of every charge of this order.
    const now = this.clock.now();
    const allowances = await this.entitlements.effective(ctx.orgId);
    const units = req.identities.length;
    const charges: QuotaCharge[] = quotasFor(req.action).map((quota) => ({ quota, period: periodKey(quota, now), units, allowance: allowances[quota] }));
    const order: WorkOrderRecord = {
      workorderId: `DI-${randomUUID()}`,
      orgId: ctx.orgId,
      sandboxName: ctx.sandboxName,
      bundleId: `BN-${randomUUID()}`,
      action: req.action,
      createdAt: now,
      updatedAt: now,
      operationCount: units,
      targetServices: req.targetServices,
      status: "received",
      createdBy: ctx.actor,
      updatedBy: ctx.actor,
      datasetId: req.datasetId,
      datasetName,
      displayName: req.displayName,
      description: req.description,
      identities: req.identities,
      fieldChanges: req.fieldChanges,
      productStatusDetails: [],
      failure: null,
      outcome: null,
      revision: 0,
    };
    const outcome = await this.store.insertWorkOrder(order, charges);
    if (!outcome.ok) throw quotaExceeded(outcome.quota, outcome.allowance, outcome.consumed, units, QUOTA_PERIOD_WORDS[outcome.quota]);
    this.queue.enqueue(order.orgId, order.workorderId);
    return order;
  }

  async get(ctx: HygieneContext, workorderId: string): Promise<WorkOrderRecord> {
    const order = await this.store.getWorkOrder(ctx.orgId, workorderId);
    if (!order) throw notFound(`Work order ${workorderId} not found.`);
    return order;
  }

  list(ctx: HygieneContext, query: WorkOrderListQuery): Promise<Page<WorkOrderRecord>> {
    return this.store.listWorkOrders(ctx.orgId, query);
  }

  /** Only the labels change (hygiene-api.md §4.4); `name` is the newer spelling of `displayName`. */
  async rename(ctx: HygieneContext, workorderId: string, body: unknown): Promise<WorkOrderRecord> {
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("The request body must be a JSON object.");
    const b = body as Record<string, unknown>;
    const name = b.name ?? b.displayName;
    const description = b.description;
    if (name !== undefined && typeof name !== "string") throw invalid("'name' must be a string.");
    if (description !== undefined && typeof description !== "string") throw invalid("'description' must be a string.");
    if (name === undefined && description === undefined) throw invalid("Give 'name' (or 'displayName') and/or 'description'.");
    if (typeof name === "string" && name.length > 255) throw invalid("'name' must be at most 255 characters long.");
    if (typeof description === "string" && description.length > 1000) throw invalid("'description' must be at most 1000 characters long.");
    // The runner may change the order meanwhile; retry the compare-and-set on the fresh record.
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.get(ctx, workorderId);
      const next: WorkOrderRecord = {
        ...current,
        displayName: typeof name === "string" ? name : current.displayName,
        description: typeof description === "string" ? description : current.description,
        updatedAt: this.clock.now(),
        updatedBy: ctx.actor,
      };
      if (await this.store.replaceWorkOrder(next, [current.status])) return { ...next, revision: next.revision + 1 };
    }
    throw new Error(`work order ${workorderId} kept changing during rename`);
  }
}
