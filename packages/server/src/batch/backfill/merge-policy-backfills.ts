/**
 * A change of a merge policy's content (its identity graph or attribute merge: what evaluation
 * reads) queues a backfill of every live definition that uses the policy, as an expression change
 * does (issue #40): their memberships were computed over profiles merged the old way. A rename, a
 * new default or a move on or off the edge changes no member and queues nothing.
 *
 * It follows the bus (`mergePolicy.changed` carries an update's previous content) and asks the
 * runner through its public API (`request`, reason `mergePolicy`); the runner's queue, fence and
 * restart rules apply unchanged. The streaming catalog subscribed first, so the live engine already
 * reads the new policy when a backfill takes its fence.
 */
import type { EventBus, BusEvents } from "../../platform/bus.js";
import type { Logger } from "../../platform/logger.js";
import { type TenantContext } from "../../services/tenancy.js";
import type { MetadataStore } from "../../stores/types.js";
import { evaluatedPolicy } from "../jobs/job-runner.js";
import { isLiveDefinition, type BackfillRunner } from "./backfill-runner.js";

export interface MergePolicyBackfillsOptions {
  bus: EventBus;
  metadata: MetadataStore;
  runner: Pick<BackfillRunner, "request">;
  /** The sandbox's request context by its id (undefined: not configured). */
  tenantOf: (orgId: string, sandboxId: string) => TenantContext | undefined;
  logger?: Pick<Logger, "error">;
}

const PAGE = 1000;

type PolicyContent = NonNullable<BusEvents["mergePolicy.changed"]["previous"]>;

/** Whether evaluation reads the two contents differently (the order counts only for dataSetPrecedence, as jobs read it). */
export function evaluationDiffers(a: PolicyContent, b: PolicyContent): boolean {
  const norm = (p: PolicyContent) => JSON.stringify(evaluatedPolicy({
    identityGraph: { type: p.identityGraph.type as "none" | "pdg" },
    attributeMerge: p.attributeMerge.order === undefined ? { type: p.attributeMerge.type as "timestampOrdered" } : { type: p.attributeMerge.type as "dataSetPrecedence", order: p.attributeMerge.order },
  }));
  return norm(a) !== norm(b);
}

/** Subscribes; returns the unsubscribe. `settled()` (tests) waits for the changes being handled. */
export function followMergePolicies(o: MergePolicyBackfillsOptions): { stop: () => void; settled: () => Promise<void> } {
  const inFlight = new Set<Promise<void>>();
  const handle = async (e: BusEvents["mergePolicy.changed"]): Promise<void> => {
    if (e.change !== "updated" || e.previous === undefined) return;
    const tenant = o.tenantOf(e.tenant.orgId, e.tenant.sandboxId);
    if (tenant === undefined) return;
    const current = (await o.metadata.mergePolicies.get(e.tenant, e.mergePolicyId))?.policy;
    if (current === undefined || !evaluationDiffers(e.previous, current)) return;
    for (let offset = 0; ; offset += PAGE) {
      const page = await o.metadata.definitions.list(e.tenant, { filters: {}, sort: [{ field: "id", direction: "asc" }], offset, limit: PAGE });
      for (const rec of page.items) {
        if (rec.definition.mergePolicyId === e.mergePolicyId && isLiveDefinition(rec.definition)) await o.runner.request(tenant, rec, "mergePolicy");
      }
      if (page.items.length < PAGE) return;
    }
  };
  const stop = o.bus.subscribe("mergePolicy.changed", (e) => {
    const p = handle(e)
      .catch((err: unknown) => o.logger?.error({ err, mergePolicyId: e.mergePolicyId }, "merge policy change: backfills not queued"))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  });
  return {
    stop,
    settled: async () => {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}
